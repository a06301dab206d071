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

// exp(x): Cody-Waite range reduction to r in [-ln2/2, ln2/2], degree-6 polynomial, then 2^n as two
// factors 2^(n>>1) and 2^(n-(n>>1)), each a normal float for every n in [-150, 128]: results below
// FLT_MIN underflow gradually and results beyond FLT_MAX overflow to inf, as IEEE exp does, with no
// special cases (the clamp keeps n in range). Within 1 ulp of exp over the float range.
NPUEMU_INLINE float vm_exp(float x) {
  float c = x < 89.0f ? x : 89.0f;  // (NaN compares false: handled at the end)
  c = c > -104.0f ? c : -104.0f;
  const float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  const float r = (c - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t k = static_cast<int32_t>(n);
  const int32_t half = k >> 1;
  const float result = p * vm_bits_to_float(static_cast<uint32_t>(half + 127) << 23) *
                       vm_bits_to_float(static_cast<uint32_t>(k - half + 127) << 23);
  return x != x ? x : result;  // NaN propagates
}

}  // namespace npuemu
