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
NPUEMU_INLINE float vm_exp(float x) {
  const bool underflow = x < -87.33654f;  // exp(x) < FLT_MIN: flush to 0
  const bool overflow = x > 88.72283f;
  float c = x < -87.33654f ? -87.33654f : (x > 88.72283f ? 88.72283f : x);
  const float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  const float r = (c - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float scaled = p * vm_bits_to_float(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
  const float result = underflow ? 0.0f : (overflow ? __builtin_inff() : scaled);
  return x != x ? x : result;  // NaN propagates
}

}  // namespace npuemu
