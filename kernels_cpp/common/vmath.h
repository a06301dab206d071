// Branch-free float math that the compiler vectorises (inside target_clones functions it becomes
// AVX-512 / AVX2 / SSE2 code chosen at run time). Accuracy: exp within 2 ulp over its range.
#pragma once
#include <cstdint>
#include <cstring>

namespace npuemu {

#define NPUEMU_INLINE inline __attribute__((always_inline))
// The instruction-set variants every hot float loop is compiled for; the loader picks one at run time.
#define NPUEMU_VECTORIZED __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

NPUEMU_INLINE float vm_bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// exp(x): Cody-Waite range reduction to r in [-ln2/2, ln2/2], degree-6 polynomial, scale by 2^n.
// Results below FLT_MIN underflow gradually (scaled by 2^64 first, then by 2^-64), as IEEE exp does.
NPUEMU_INLINE float vm_exp(float x) {
  const bool tiny = x < -87.33654f;        // the result is subnormal (or zero)
  const bool zero = x < -103.97208f;       // below half the smallest subnormal
  const bool overflow = x > 88.72283f;
  const float c = tiny ? (zero ? -103.97208f : x) : (overflow ? 88.72283f : x);
  const float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  const float r = (c - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^n in two factors where one would leave the normal range: n < -126 near underflow, n = 128
  // just below overflow.
  const bool huge = n > 127.0f;
  const int32_t bias = tiny ? 127 + 64 : (huge ? 126 : 127);
  const float rescale = tiny ? 5.42101086242752217e-20f : (huge ? 2.0f : 1.0f);  // 2^-64, 2, 1
  const float scaled = p * vm_bits_to_float(static_cast<uint32_t>(static_cast<int32_t>(n) + bias) << 23) * rescale;
  const float result = zero ? 0.0f : (overflow ? __builtin_inff() : scaled);
  return x != x ? x : result;  // NaN propagates
}

}  // namespace npuemu
