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
inline float to_float(_Float16 v) { return static_cast<float>(v); }
inline float to_float(bfloat16 v) { return bits_to_float(static_cast<uint32_t>(v.bits) << 16); }

template <class T> inline T from_float(float v);
template <> inline float from_float<float>(float v) { return v; }
template <> inline double from_float<double>(float v) { return v; }
template <> inline _Float16 from_float<_Float16>(float v) { return static_cast<_Float16>(v); }
template <> inline bfloat16 from_float<bfloat16>(float v) {
  uint32_t u = float_to_bits(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bfloat16{static_cast<uint16_t>((u >> 16) | 0x0040u)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return bfloat16{static_cast<uint16_t>(u >> 16)};
}

}  // namespace npuemu
