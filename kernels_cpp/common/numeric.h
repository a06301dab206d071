// Element types and their conversions to and from the fp32 compute type. fp16 and bf16 are
// rounded to nearest-even on the way back, as the hardware's cast does.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace npuemu {

struct bfloat16 {
  uint16_t bits;
};

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float to_float(float v) { return v; }
inline float to_float(double v) { return static_cast<float>(v); }
// fp16 <-> fp32 by bit manipulation (F. Giesen's conversions): exact, round-to-nearest-even, and
// fast without F16C, where the compiler's own conversion calls a slow libgcc routine. NaNs convert
// as F16C converts them (quieted, payload kept): the same bits as the vector paths for every one of
// the 2^16 and 2^32 inputs.
inline float half_bits_to_float(uint16_t h) {
  const uint32_t shifted_exp = 0x7c00u << 13;
  uint32_t u = (static_cast<uint32_t>(h) & 0x7fffu) << 13;
  const uint32_t exp = shifted_exp & u;
  u += (127u - 15u) << 23;
  if (exp == shifted_exp) {
    u += (128u - 16u) << 23;  // inf / NaN
    if (u & 0x7fffffu) u |= 0x400000u;  // a NaN comes out quiet, as from F16C's conversion
  } else if (exp == 0) {      // zero / subnormal: renormalise through the FPU
    u += 1u << 23;
    u = float_to_bits(bits_to_float(u) - bits_to_float(113u << 23));
  }
  return bits_to_float(u | (static_cast<uint32_t>(h) & 0x8000u) << 16);
}

inline uint16_t float_to_half_bits(float f) {
  uint32_t u = float_to_bits(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t h;
  if (u > 0x7f800000u) {                    // NaN: quiet, with the top of its payload, as F16C does
    h = 0x7e00u | ((u >> 13) & 0x3ffu);
  } else if (u >= (127u + 16u) << 23) {     // overflow, inf
    h = 0x7c00u;
  } else if (u < (113u << 23)) {            // subnormal or zero: the FPU add rounds to nearest-even
    const uint32_t magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    h = float_to_bits(bits_to_float(u) + bits_to_float(magic)) - magic;
  } else {
    const uint32_t odd = (u >> 13) & 1u;
    u += ((15u - 127u) << 23) + 0xfffu + odd;  // rebias, round to nearest-even
    h = u >> 13;
  }
  return static_cast<uint16_t>(h | sign >> 16);
}

inline float to_float(_Float16 v) {
  uint16_t h;
  std::memcpy(&h, &v, 2);
  return half_bits_to_float(h);
}
inline float to_float(bfloat16 v) { return bits_to_float(static_cast<uint32_t>(v.bits) << 16); }

template <class T> inline T from_float(float v);
template <> inline float from_float<float>(float v) { return v; }
template <> inline double from_float<double>(float v) { return v; }
template <> inline _Float16 from_float<_Float16>(float v) {
  const uint16_t h = float_to_half_bits(v);
  _Float16 result;
  std::memcpy(&result, &h, 2);
  return result;
}
template <> inline bfloat16 from_float<bfloat16>(float v) {
  uint32_t u = float_to_bits(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bfloat16{static_cast<uint16_t>((u >> 16) | 0x0040u)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return bfloat16{static_cast<uint16_t>(u >> 16)};
}

}  // namespace npuemu
