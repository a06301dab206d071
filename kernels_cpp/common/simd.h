// Vectors of fp32 lanes for the kernels' arithmetic, one struct per instruction set: Scalar (one
// lane: any x86-64, the softmax rows' single lanes, KlDivBackward's sums), Avx2 (8 lanes, with FMA
// and F16C), Avx512 (16) and Avx512Bf16 (the same, rounding to bf16 in one instruction).
//
// Math is written once, as templates over such a struct V (see vmath.h), with GCC's vector
// extensions: + - * / and comparisons work lane by lane on V::F whatever the width, `m ? a : b`
// selects by lane. The few operations the extensions lack (fused multiply-add, fp16 conversions,
// streaming stores) are V's static functions, written with the compiler's raw builtins rather than
// the <immintrin.h> wrappers: the wrappers are functions that only inline into code compiled for
// their instruction set, whereas these generic templates only get an instruction set once they are
// inlined into a kernel entry point that has one (`NPUEMU_TARGET_AVX2`/`NPUEMU_TARGET_AVX512`).
// Every function here is always inlined, so nothing is ever compiled for the wrong machine.
//
// max(a, b) and min(a, b) are the x86 instructions' a > b ? a : b and a < b ? a : b: when either is
// NaN the result is b.
//
// Each operation rounds exactly as IEEE fp32 does on every width (fused multiply-add included), so
// a kernel gives the same bits on every machine and for every split of its elements into vectors.
#pragma once
#include <immintrin.h>  // also declares the builtins below

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/numeric.h"

namespace npuemu {

#define NPUEMU_INLINE inline __attribute__((always_inline))
#define NPUEMU_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define NPUEMU_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define NPUEMU_TARGET_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")))

namespace simd {

// Instruction sets, narrowest first. The kernels use isa(): the widest the machine runs (detected
// once, at load time), unless limited to a narrower one (NPUEMU_VECTOR_ISA).
enum class Isa { kScalar, kAvx2, kAvx512, kAvx512Bf16 };
Isa machine_isa();
Isa isa();
void limit_isa(Isa widest);     // isa() becomes the narrower of `widest` and machine_isa()
const char* isa_name(Isa isa);  // "avx512_bf16", "avx512", "avx2" or "baseline"

template <int W>
struct Lanes {
  static constexpr int kWidth = W;
  typedef float F __attribute__((vector_size(4 * W)));     // fp32 values
  typedef int32_t I __attribute__((vector_size(4 * W)));   // lane masks (-1 true, 0 false) and integers
  typedef uint32_t U __attribute__((vector_size(4 * W)));  // fp32 bit patterns
  typedef uint16_t H __attribute__((vector_size(2 * W)));  // fp16 / bf16 bit patterns

  static constexpr bool kScalef = false;  // has scalef(p, n) = p·2^floor(n), one rounding
  NPUEMU_INLINE static F splat(float x) { return F{} + x; }
  NPUEMU_INLINE static U bits(F v) { return (U)v; }
  NPUEMU_INLINE static F from_bits(U u) { return (F)u; }
};

// fp32 -> bf16 bits, round to nearest even, on any V (defined below).
template <class V>
NPUEMU_INLINE typename V::H round_to_bfloat16(typename V::F v);

struct Scalar : Lanes<1> {
  NPUEMU_INLINE static F fma(F a, F b, F c) { return F{__builtin_fmaf(a[0], b[0], c[0])}; }
  NPUEMU_INLINE static F max(F a, F b) { return a > b ? a : b; }
  NPUEMU_INLINE static F min(F a, F b) { return a < b ? a : b; }
  NPUEMU_INLINE static F widen_bfloat16(H h) { return from_bits(U{h[0]} << 16); }
  NPUEMU_INLINE static H narrow_u32(U u) { return H{static_cast<uint16_t>(u[0])}; }
  NPUEMU_INLINE static F widen_half(H h) { return F{half_bits_to_float(h[0])}; }
  NPUEMU_INLINE static H narrow_half(F v) { return H{float_to_half_bits(v[0])}; }
  NPUEMU_INLINE static H narrow_bfloat16(F v) { return round_to_bfloat16<Scalar>(v); }
  static constexpr bool kStreams = false;  // the one-lane path never streams
  NPUEMU_INLINE static void stream(float* p, F v) { std::memcpy(p, &v, sizeof v); }
  NPUEMU_INLINE static void stream(uint16_t* p, H v) { std::memcpy(p, &v, sizeof v); }
};

typedef int Int4 __attribute__((vector_size(16)));
typedef int Int8 __attribute__((vector_size(32)));
typedef short Short8 __attribute__((vector_size(16)));
typedef short Short16 __attribute__((vector_size(32)));
typedef short Short32 __attribute__((vector_size(64)));
typedef long long Long2 __attribute__((vector_size(16)));
typedef long long Long4 __attribute__((vector_size(32)));

struct Avx2 : Lanes<8> {
  NPUEMU_INLINE static F fma(F a, F b, F c) { return __builtin_ia32_vfmaddps256(a, b, c); }
  NPUEMU_INLINE static F max(F a, F b) { return __builtin_ia32_maxps256(a, b); }
  NPUEMU_INLINE static F min(F a, F b) { return __builtin_ia32_minps256(a, b); }
  NPUEMU_INLINE static F widen_bfloat16(H h) { return from_bits((U)__builtin_ia32_pmovzxwd256((Short8)h) << 16); }
  NPUEMU_INLINE static H narrow_u32(U u) {  // u < 2^16 in every lane: the two halves packed
    const Int4 lo = __builtin_ia32_si_si256((Int8)u);
    const Int4 hi = (Int4)__builtin_ia32_extract128i256((Long4)u, 1);
    return (H)__builtin_ia32_packusdw128(lo, hi);
  }
  NPUEMU_INLINE static F widen_half(H h) { return __builtin_ia32_vcvtph2ps256((Short8)h); }
  NPUEMU_INLINE static H narrow_half(F v) {
    const Short8 h = __builtin_ia32_vcvtps2ph256(v, 0);  // 0: round to nearest even
    return (H)h;
  }
  NPUEMU_INLINE static H narrow_bfloat16(F v) { return round_to_bfloat16<Avx2>(v); }
  static constexpr bool kStreams = true;
  NPUEMU_INLINE static void stream(float* p, F v) { __builtin_ia32_movntps256(p, v); }
  NPUEMU_INLINE static void stream(uint16_t* p, H v) {
    __builtin_ia32_movntdq(reinterpret_cast<Long2*>(p), (Long2)v);
  }
};

struct Avx512 : Lanes<16> {
  NPUEMU_INLINE static F fma(F a, F b, F c) { return __builtin_ia32_vfmaddps512_mask(a, b, c, -1, 4); }
  static constexpr bool kScalef = true;
  NPUEMU_INLINE static F scalef(F p, F n) { return __builtin_ia32_scalefps512_mask(p, n, F{}, -1, 4); }
  // scalef(p, n) in the lanes where x is not below `bound` (NaN included), +0 in the others, which
  // are masked off the instruction: whatever it would give there costs nothing.
  NPUEMU_INLINE static F scalef_unless_below(F p, F n, F x, float bound) {
    const unsigned short keep = __builtin_ia32_cmpps512_mask(x, splat(bound), 5, (unsigned short)-1, 4);  // 5: NLT_UQ
    return __builtin_ia32_scalefps512_mask(p, n, F{}, keep, 4);
  }
  NPUEMU_INLINE static F max(F a, F b) { return __builtin_ia32_maxps512_mask(a, b, F{}, -1, 4); }
  NPUEMU_INLINE static F min(F a, F b) { return __builtin_ia32_minps512_mask(a, b, F{}, -1, 4); }
  // bf16 bits into the high half of each lane, the low half zero: one word permute (measured a few
  // percent faster than zero-extending and shifting).
  NPUEMU_INLINE static F widen_bfloat16(H h) {
    const Short32 index = {0, 0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7,
                           0, 8, 0, 9, 0, 10, 0, 11, 0, 12, 0, 13, 0, 14, 0, 15};
    const Short32 wide = (Short32)__builtin_ia32_si512_256si((Int8)h);
    return (F)__builtin_ia32_permvarhi512_mask(wide, index, Short32{}, 0xAAAAAAAAu);
  }
  NPUEMU_INLINE static H narrow_u32(U u) { return (H)__builtin_ia32_pmovdw512_mask((I)u, Short16{}, -1); }
  NPUEMU_INLINE static F widen_half(H h) {
    return __builtin_ia32_vcvtph2ps512_mask((Short16)h, F{}, -1, 4);  // 4: current rounding
  }
  NPUEMU_INLINE static H narrow_half(F v) {
    const Short16 h = __builtin_ia32_vcvtps2ph512_mask(v, 0, Short16{}, -1);  // 0: round to nearest even
    return (H)h;
  }
  NPUEMU_INLINE static H narrow_bfloat16(F v) { return round_to_bfloat16<Avx512>(v); }
  static constexpr bool kStreams = true;
  NPUEMU_INLINE static void stream(float* p, F v) { __builtin_ia32_movntps512(p, v); }
  NPUEMU_INLINE static void stream(uint16_t* p, H v) {
    __builtin_ia32_movntdq256(reinterpret_cast<Long4*>(p), (Long4)v);
  }
};

// AVX-512 with the BF16 extension: one instruction rounds to bf16, exactly as round_to_bfloat16
// does (checked over all 2^32 inputs) except that it flushes subnormal inputs to zero, so a vector
// holding any goes the long way.
struct Avx512Bf16 : Avx512 {
  NPUEMU_INLINE static H narrow_bfloat16(F v) {
    const unsigned short subnormal = __builtin_ia32_fpclassps512_mask(v, 0x20, -1);
    if (__builtin_expect(subnormal != 0, 0)) return round_to_bfloat16<Avx512>(v);
    return (H)__builtin_ia32_cvtneps2bf16_v16sf(v);
  }
};

// ---- storage <-> fp32 lanes, by element type ----

template <class V>
NPUEMU_INLINE typename V::F load(const float* p) {
  typename V::F v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class V>
NPUEMU_INLINE typename V::F load(const _Float16* p) {
  typename V::H h;
  std::memcpy(&h, p, sizeof h);
  return V::widen_half(h);
}

template <class V>
NPUEMU_INLINE typename V::F load(const bfloat16* p) {
  typename V::H h;
  std::memcpy(&h, p, sizeof h);
  return V::widen_bfloat16(h);
}

// Round to nearest even; NaN stays NaN (quieted), as from_float<bfloat16>.
template <class V>
NPUEMU_INLINE typename V::H round_to_bfloat16(typename V::F v) {
  using U = typename V::U;
  const U u = V::bits(v);
  const U rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const U quiet = (u >> 16) | 0x40u;
  return V::narrow_u32(v != v ? quiet : rounded);
}

template <class V>
NPUEMU_INLINE typename V::H narrow(typename V::F v, _Float16*) {
  return V::narrow_half(v);
}
template <class V>
NPUEMU_INLINE typename V::H narrow(typename V::F v, bfloat16*) {
  return V::narrow_bfloat16(v);
}

// Stores one vector at p; `streaming` writes past the caches and needs p aligned to the vector's
// size in storage.
template <class V, class T>
NPUEMU_INLINE void store(T* p, typename V::F v, bool streaming) {
  if constexpr (std::is_same_v<T, float>) {
    if (V::kStreams && streaming) V::stream(p, v);
    else std::memcpy(p, &v, sizeof v);
  } else {
    const typename V::H h = narrow<V>(v, p);
    if (V::kStreams && streaming) V::stream(reinterpret_cast<uint16_t*>(p), h);
    else std::memcpy(p, &h, sizeof h);
  }
}

// Makes streamed stores visible to other threads (SSE2: every x86-64 has it).
NPUEMU_INLINE void store_fence() { __builtin_ia32_sfence(); }

}  // namespace simd
}  // namespace npuemu
