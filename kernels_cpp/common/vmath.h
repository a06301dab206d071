// Float math for the kernels, written once over the lanes of simd.h (any width gives the same bits).
// exp: range reduction x = n·ln2 + r with |r| <= ln2/2 (Cody-Waite, in fused multiply-adds), a
// degree-6 polynomial for e^r, then 2^n put in the exponent field: within 1 ulp of exp (0.98 at
// most over 2.3 million inputs spread over the float range). Results below FLT_MIN underflow
// gradually and results beyond FLT_MAX overflow to inf, as IEEE exp does; NaN propagates.
// log: x = 2^k·m with m in [√½, √2) (fdlibm's reduction, as musl's logf), f = m − 1 exactly,
// log(1 + f) by a polynomial (no division), then k·ln2 in two parts: within 0.95 ulp of log
// (measured over every 7th positive float against double precision; fdlibm's s = f/(2 + f) form,
// which it replaced, gave 0.84 with a division).
// log1p_unit: log(1 + z) for z in [0, 1] only, the range of log σ's log1p(e^-|x|), by a polynomial.
// Every step is a plain IEEE operation or a fused multiply-add on every width (the scalar one
// included), so every width gives the same bits.
#pragma once
#include <cstdint>

#include "common/simd.h"

namespace npuemu {

// The instruction-set variants of plain loops that the compiler vectorises itself; the loader picks
// one at run time.
#define NPUEMU_VECTORIZED __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace simd {

// c[0]·x^(N−1) + c[1]·x^(N−2) + ... + c[N−1] by Horner's rule in fused multiply-adds (the loop is
// unrolled: N is a constant).
template <class V, int N>
NPUEMU_INLINE typename V::F horner(typename V::F x, const float (&c)[N]) {
  typename V::F p = V::fma(V::splat(c[0]), x, V::splat(c[1]));
  for (int i = 2; i < N; ++i) p = V::fma(p, x, V::splat(c[i]));
  return p;
}

namespace exp_detail {
constexpr float kShift = 0x1.8p23f;  // adding it rounds to an integer kept in the low mantissa bits
constexpr float kInvLn2 = 0x1.715476p+0f;
constexpr float kLn2Hi = 0x1.62e4p-1f;
constexpr float kLn2Lo = 0x1.7f7d1cp-20f;
constexpr uint32_t kShiftBits = 0x4b400000u;

// e^r - 1 for |r| <= ln2/2: r + r^2·q(r), q of degree 4 fitted to (e^r - 1 - r)/r^2 for least
// maximum relative error of e^r (3.8e-9 with these fp32 coefficients; the rounding of the steps
// dominates).
template <class V>
NPUEMU_INLINE typename V::F expm1_reduced(typename V::F r) {
  using F = typename V::F;
  F q = V::fma(V::splat(0x1.6a244cp-10f), r, V::splat(0x1.1239d4p-7f));
  q = V::fma(q, r, V::splat(0x1.5558f2p-5f));
  q = V::fma(q, r, V::splat(0x1.555492p-3f));
  q = V::fma(q, r, V::splat(0x1.fffffcp-2f));
  return V::fma(q, r * r, r);
}

// z = shift + n and r = c - n·ln2 (n an integer, also returned as a float), for c already clamped
// to the range the caller handles.
template <class V>
NPUEMU_INLINE typename V::F reduce(typename V::F c, typename V::F& z, typename V::F& r) {
  z = V::fma(c, V::splat(kInvLn2), V::splat(kShift));
  const typename V::F n = z - kShift;
  r = V::fma(n, V::splat(-kLn2Hi), c);
  r = V::fma(n, V::splat(-kLn2Lo), r);
  return n;
}

// (e^r − 1 + 1)·2^n in one instruction where there is one (AVX-512's scalef): the sum rounds once,
// the scaling is exact or, below FLT_MIN, rounds once more, exactly as the portable forms below,
// which give the same bits.
template <class V>
NPUEMU_INLINE typename V::F scaled(typename V::F expm1, typename V::F n) {
  return V::scalef(expm1 + 1.0f, n);
}
}  // namespace exp_detail

// e^x for every float x. The clamps keep NaN (it is max's and min's second operand), and a NaN
// carries through the arithmetic.
template <class V>
NPUEMU_INLINE typename V::F exp(typename V::F x) {
  using namespace exp_detail;
  using F = typename V::F;
  using I = typename V::I;
  // e^89 > FLT_MAX: inf from there; e^-104 < half the least subnormal: +0 from there.
  const F c = V::max(V::splat(-104.0f), V::min(V::splat(89.0f), x));
  F z, r;
  const F n_float = reduce<V>(c, z, r);
  if constexpr (V::kScalef) return scaled<V>(expm1_reduced<V>(r), n_float);
  // 2^n as two normal factors 2^(n/2) for every n in [-150, 129].
  const I n = (I)(V::bits(z) - kShiftBits);
  const I half = n >> 1;
  const F scale_lo = V::from_bits((typename V::U)((half + 127) << 23));
  const F scale_hi = V::from_bits((typename V::U)((n - half + 127) << 23));
  return V::fma(expm1_reduced<V>(r), scale_lo, scale_lo) * scale_hi;
}

// e^x for x <= 0 (and NaN): one scale factor, 2^(n+32), then an exact 2^-32 that rounds the
// subnormal results once.
template <class V>
NPUEMU_INLINE typename V::F exp_nonpositive(typename V::F x) {
  using namespace exp_detail;
  using F = typename V::F;
  const F c = V::max(V::splat(-104.0f), x);
  F z, r;
  const F n = reduce<V>(c, z, r);
  if constexpr (V::kScalef) return scaled<V>(expm1_reduced<V>(r), n);
  const F scale = V::from_bits((V::bits(z) << 23) + ((127u + 32u) << 23));
  return V::fma(expm1_reduced<V>(r), scale, scale) * 0x1p-32f;
}

// exp_nonpositive, with +0 taken directly below -104: there its clamp gives +0 by arithmetic that
// underflows, and each such lane costs a microcode assist (ScaledMaskedSoftmax rows with 15%
// masked, whose z - max is about -10000, ran 4x slower). The same bits as exp_nonpositive. With
// scalef those lanes are masked off the last instruction (6% faster than selecting +0 for them
// before and after, in the softmax's pass 2 on the AMD EPYC); elsewhere they compute e^0.
template <class V>
NPUEMU_INLINE typename V::F exp_nonpositive_or_zero(typename V::F x) {
  using namespace exp_detail;
  using F = typename V::F;
  if constexpr (V::kScalef) {
    F z, r;
    const F n = reduce<V>(V::max(V::splat(-104.0f), x), z, r);
    return V::scalef_unless_below(expm1_reduced<V>(r) + 1.0f, n, x, -104.0f);
  } else {
    const typename V::I vanishes = x < -104.0f;
    const F zero = V::splat(0.0f);
    return vanishes ? zero : exp_nonpositive<V>(vanishes ? zero : x);
  }
}

namespace log_detail {
constexpr float kLn2Hi = 0x1.62e3p-1f;  // the high bits of ln 2: k·kLn2Hi is exact for |k| < 2^9
constexpr float kLn2Lo = 0x1.2fefa2p-17f;
constexpr uint32_t kSqrtHalfBits = 0x3f3504f3u;  // √½: the reduced m starts there

// log(1 + f) for f = m − 1 in [√½ − 1, √2 − 1], as f + f²·R(f): R of degree 8 fitted to
// (log1p(f) − f)/f² there (a Chebyshev fit, 3.1e-8 relative), in fused multiply-adds. The last
// step adds the small correction f²·R to f, rounding once: within 0.82 ulp, and no division.
constexpr float kLog1pR[] = {-0x1.3a4ff6p-4f, 0x1.048f72p-3f,  -0x1.0cda32p-3f, 0x1.22ea5ap-3f, -0x1.548382p-3f,
                             0x1.99a012p-3f,  -0x1.00020cp-2f, 0x1.555554p-2f,  -0x1.fffffep-2f};

template <class V>
NPUEMU_INLINE typename V::F log1p_reduced(typename V::F f) {
  return V::fma(horner<V>(f, kLog1pR), f * f, f);
}
}  // namespace log_detail

// The natural logarithm of every float: −inf at ±0, NaN below 0 and for NaN, +inf at +inf.
// Subnormals are scaled by 2^25 first, so they are as accurate as normal numbers.
template <class V>
NPUEMU_INLINE typename V::F log(typename V::F x) {
  using namespace log_detail;
  using F = typename V::F;
  using I = typename V::I;
  using U = typename V::U;
  const I subnormal = x < V::splat(0x1p-126f);  // also 0 and negatives, replaced below
  const F normal = subnormal ? x * 0x1p25f : x;
  U bits = V::bits(normal) + (0x3f800000u - kSqrtHalfBits);
  const I k = (I)(bits >> 23) - 0x7f - (subnormal & 25);
  bits = (bits & 0x007fffffu) + kSqrtHalfBits;
  const F f = V::from_bits(bits) - 1.0f;
  const F dk = __builtin_convertvector(k, F);
  const F result = (dk * kLn2Lo + log1p_reduced<V>(f)) + dk * kLn2Hi;
  // The special values by ordered comparisons (<, <=) and selects only: GCC 12 compiled ==, != and
  // || of AVX-512 vectors lane by lane (up to 80 scalar compares a vector).
  const F inf = V::splat(__builtin_inff());
  const F below_or_zero = x < 0.0f ? V::splat(__builtin_nanf("")) : -inf;
  return x <= 0.0f ? below_or_zero : (x < inf ? result : x);  // +inf and NaN as they are
}

// log(1 + z) for z in [0, 1] (and NaN), as z·Q(z): Q of degree 9 fitted to log1p(z)/z on [0, 1]
// (a Chebyshev fit, 5.2e-9 relative), in fused multiply-adds: no division and no select.
// (log(u)·z/(u − 1) with u = 1 + z, the device's form, costs two divisions: aclnnLogSigmoid's
// kernel ran at a third of this speed with it.) Within 1.4 ulp of log1p over [0, 1] (200001
// points against double precision); for tiny z, Q(z) is 1 and the result z exactly, so log σ(x)
// keeps its tiny values for large x. A NaN z gives NaN.
constexpr float kLog1pUnitQ[] = {-0x1.a04acap-9f, 0x1.402f4cp-6f, -0x1.cdd008p-5f, 0x1.afdde8p-4f, -0x1.38b908p-3f,
                                 0x1.92b43p-3f,   -0x1.ff0254p-3f, 0x1.554bd6p-2f, -0x1.ffffb8p-2f, 1.0f};

template <class V>
NPUEMU_INLINE typename V::F log1p_unit(typename V::F z) {
  return horner<V>(z, kLog1pUnitQ) * z;
}

}  // namespace simd

}  // namespace npuemu
