// What the two scaled masked softmax kernels (forward and backward) share: both work on the rows of
// the last axis S2 of [B, N, S1, S2] operands, one row at a time, through
// - RowCursor: the byte address of each operand's row, in row order, advanced incrementally;
// - RowRange / RowsAhead: the rows a kernel computes, and the row ahead of each that it prefetches;
// - RowBuffer: fp32 scratch for a row, starting on a cache line; MaskRow: a mask row as dense bytes;
// - masked_lanes: a vector's mask bytes as lane masks; put: lanes into a row buffer;
// - visit_on_isa: a kernel's rows on the widest instruction set in force, one entry point per set;
// - fold_to_sum / fold_to_max: a row's reduction in one fixed binary tree, so that its result
//   depends only on the row's length, never on the machine's vector width or the threads (the
//   _avx512 forms: the same tree, faster);
// - run_in_blocks: rows handed to the threads in runs of blocks of a power of two of rows, at most
//   kBlockBytes of input and about four per thread (block_rows).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/elementwise.h"  // kGrain
#include "common/simd.h"         // NPUEMU_TARGET_AVX512
#include "common/tensor_arg.h"
#include "common/thread_pool.h"
#include "common/vector_io.h"    // store_fence
#include "common/vmath.h"        // NPUEMU_VECTORIZED

namespace npuemu {
namespace softmax_rows {

// fp32 row buffer starting on a cache line, so that whole-vector loads and stores never split one.
class RowBuffer {
 public:
  explicit RowBuffer(int64_t n) : storage_(n + kLineFloats) {
    const auto address = reinterpret_cast<uintptr_t>(storage_.data());
    data_ = storage_.data() + (kLineFloats - address / sizeof(float) % kLineFloats) % kLineFloats;
  }
  float* data() { return data_; }
  float& operator[](int64_t i) { return data_[i]; }

 private:
  static constexpr int64_t kLineFloats = 16;
  std::vector<float> storage_;
  float* data_;
};

// A row of the mask as dense bytes: the row itself where the mask is dense along S2, else its bytes
// gathered into a buffer of the row's length.
class MaskRow {
 public:
  MaskRow(int64_t cols, int64_t stride) : stride_(stride), bytes_(stride == 1 ? 0 : cols) {}
  const unsigned char* operator()(const char* mask) {
    if (stride_ == 1) return reinterpret_cast<const unsigned char*>(mask);
    for (size_t j = 0; j < bytes_.size(); ++j) bytes_[j] = mask[static_cast<int64_t>(j) * stride_];
    return bytes_.data();
  }

 private:
  int64_t stride_;
  std::vector<unsigned char> bytes_;
};

// The rows of [B, N, S1] in order, with the byte address of each of N operands' row (the first
// operand gives the extents); advancing is incremental (no division per row).
template <int N>
using RowPointers = std::array<char*, N>;

template <int N>
class RowCursor {
 public:
  RowCursor(const std::array<const TensorArg*, N>& operands, int64_t first_row) {
    for (int d = 0; d < 3; ++d) {
      extent_[d] = operands[0]->shape[d];
      for (int t = 0; t < N; ++t) step_[d][t] = operands[t]->strides[d] * operands[t]->itemsize();
    }
    for (int t = 0; t < N; ++t) row_[t] = operands[t]->data;
    for (int d = 2; d >= 0; --d) {
      index_[d] = first_row % extent_[d];
      first_row /= extent_[d];
      for (int t = 0; t < N; ++t) row_[t] += index_[d] * step_[d][t];
    }
  }

  const RowPointers<N>& row() const { return row_; }

  void advance() {
    for (int d = 2; d >= 0; --d) {
      for (int t = 0; t < N; ++t) row_[t] += step_[d][t];
      if (++index_[d] < extent_[d]) return;
      for (int t = 0; t < N; ++t) row_[t] -= extent_[d] * step_[d][t];
      index_[d] = 0;
    }
  }

 private:
  std::array<int64_t, 3> extent_{}, index_{};
  std::array<std::array<int64_t, N>, 3> step_{};
  RowPointers<N> row_{};
};

// Rows [begin, end) to compute, and the rows up to ahead_end (the ones the thread runs next) that
// may be prefetched.
struct RowRange {
  int64_t begin, end, ahead_end;
};

// The row about `bytes` of input ahead of each row of a range, for its prefetches: at(r), called
// for r = begin, begin + 1, ..., is row r + distance while that is before ahead_end, else null.
template <int N>
class RowsAhead {
 public:
  RowsAhead(const std::array<const TensorArg*, N>& operands, const RowRange& range, int64_t row_bytes, int64_t bytes)
      : distance_((bytes + row_bytes - 1) / row_bytes),
        ahead_end_(range.ahead_end),
        cursor_(operands, std::min(range.begin + distance_, range.ahead_end - 1)) {}

  const RowPointers<N>* at(int64_t r) {
    if (r + distance_ >= ahead_end_) return nullptr;
    if (used_) cursor_.advance();
    used_ = true;
    return &cursor_.row();
  }

 private:
  int64_t distance_, ahead_end_;
  RowCursor<N> cursor_;
  bool used_ = false;
};

// ---- lanes and instruction sets (every function is always inlined into an entry point) ----

typedef char Bytes16 __attribute__((vector_size(16)));
typedef long long Words2 __attribute__((vector_size(16)));

// All ones in the lanes whose mask byte is set (any non-zero byte is true): the bytes widened with
// one instruction (GCC's generic __builtin_convertvector took one instruction per byte).
template <class V>
NPUEMU_INLINE typename V::I masked_lanes(const unsigned char* mask) {
  using I = typename V::I;
  if constexpr (V::kWidth == 1) {
    return I{mask[0] ? -1 : 0};
  } else {
    if constexpr (V::kWidth == 8) {
      // The 8 bytes as one 64-bit load into the low half of a vector: copied into a zeroed vector
      // in memory instead, they were stored as 8 bytes and read back as 16, a store that cannot
      // forward to the load (a stall of a dozen cycles or more per vector).
      uint64_t word;
      std::memcpy(&word, mask, 8);
      const Bytes16 bytes = (Bytes16)(Words2{static_cast<long long>(word), 0});
      return (I)__builtin_ia32_pmovzxbd256(bytes) != 0;
    } else {
      Bytes16 bytes;
      std::memcpy(&bytes, mask, 16);
      return (I)__builtin_ia32_pmovzxbd512_mask(bytes, I{}, -1) != 0;
    }
  }
}

// The lanes of v stored at p (a row buffer's fp32 values).
template <class V>
NPUEMU_INLINE void put(float* p, typename V::F v) {
  std::memcpy(p, &v, sizeof v);
}

// The entry points of the instruction sets: each compiles Rows::visit<V> (always inlined) for its
// own, and visit_on_isa calls the one of the widest instruction set in force.
template <class Rows, class Operands>
NPUEMU_TARGET_AVX512_BF16 void visit_avx512_bf16(Rows& rows, const Operands& ops, const RowRange& range) {
  rows.template visit<simd::Avx512Bf16>(ops, range);
}
template <class Rows, class Operands>
NPUEMU_TARGET_AVX512 void visit_avx512(Rows& rows, const Operands& ops, const RowRange& range) {
  rows.template visit<simd::Avx512>(ops, range);
}
template <class Rows, class Operands>
NPUEMU_TARGET_AVX2 void visit_avx2(Rows& rows, const Operands& ops, const RowRange& range) {
  rows.template visit<simd::Avx2>(ops, range);
}
template <class Rows, class Operands>
void visit_scalar(Rows& rows, const Operands& ops, const RowRange& range) {
  rows.template visit<simd::Scalar>(ops, range);
}

template <class Rows, class Operands>
void visit_on_isa(Rows& rows, const Operands& ops, const RowRange& range) {
  switch (simd::isa()) {
    case simd::Isa::kAvx512Bf16: return visit_avx512_bf16(rows, ops, range);
    case simd::Isa::kAvx512: return visit_avx512(rows, ops, range);
    case simd::Isa::kAvx2: return visit_avx2(rows, ops, range);
    default: return visit_scalar(rows, ops, range);
  }
}

// ---- reductions in a fixed binary tree ----
//
// The upper half of a level (from index ceil(n/2)) is combined onto its lower half until one value
// remains; the middle element of an odd level passes unchanged. `level` holds the n values of a
// level (the caller forms the first one) and is overwritten. The order depends only on n, and each
// step is one IEEE operation per element, so every vector width gives the same bits.

NPUEMU_VECTORIZED inline void add_into(float* __restrict lo, const float* __restrict hi, int64_t n) {
  for (int64_t i = 0; i < n; ++i) lo[i] += hi[i];
}

// a > b ? a : b, the x86 max instruction and simd.h's V::max: when either is NaN, the upper one.
NPUEMU_VECTORIZED inline void max_into(float* __restrict lo, const float* __restrict hi, int64_t n) {
  for (int64_t i = 0; i < n; ++i) lo[i] = lo[i] > hi[i] ? lo[i] : hi[i];
}

inline float fold_to_sum(float* level, int64_t n) {
  while (n > 1) {
    const int64_t half = (n + 1) / 2;
    add_into(level, level + half, n - half);
    n = half;
  }
  return level[0];
}

inline float fold_to_max(float* level, int64_t n) {
  while (n > 1) {
    const int64_t half = (n + 1) / 2;
    max_into(level, level + half, n - half);
    n = half;
  }
  return level[0];
}

// The same folds on AVX-512, with the same operations in the same order: the levels wider than a
// vector in memory, or in registers from where a level is a power of two of whole vectors, at
// most kRegisterFold, and the last ones inside one register (lane i + half moved onto lane i).
// One call for the whole tree, where the portable form makes one (through the loader) per level:
// about 95 cycles for a level of 512 against about 40.
NPUEMU_TARGET_AVX512 inline __mmask16 first_lanes(int64_t count) { return static_cast<__mmask16>((1u << count) - 1); }

template <bool kMax>
NPUEMU_TARGET_AVX512 inline __m512 fold_step(__m512 lo, __m512 hi) {
  if constexpr (kMax) return _mm512_max_ps(lo, hi);  // lo > hi ? lo : hi, as max_into
  return _mm512_add_ps(lo, hi);
}

// The levels of M vectors (M a power of two) down to one, in registers: vector k meets vector
// k + M/2, as in memory, without a level's stores and loads between one level and the next (a
// chain the rows' loops wait for). aclnnScaledMaskedSoftmax on one thread, from memory, on the
// AMD EPYC: 8x16x512x512 FLOAT 8.9 -> 7.3 ms, 2x8x1024x1024 FLOAT 4.0 -> 3.6-3.7 ms, FLOAT16 4.27
// -> 3.91 ms; two threads the same within the noise.
template <bool kMax, int M>
NPUEMU_TARGET_AVX512 inline __m512 fold_vectors(__m512* v) {
  if constexpr (M == 1) {
    return v[0];
  } else {
    for (int k = 0; k < M / 2; ++k) v[k] = fold_step<kMax>(v[k], v[k + M / 2]);
    return fold_vectors<kMax, M / 2>(v);
  }
}

// The `vectors` whole vectors of a level (a power of two, at most kRegisterFold) folded to one in
// registers. Not 32: they take every register, and 2x8x1024x1024 FLOAT took 5.6 ms instead of 4.0
// (one thread, from memory, the AMD EPYC), though a microbenchmark in cache ran 5% faster.
constexpr int kRegisterFold = 16;

template <bool kMax, int M = kRegisterFold>
NPUEMU_TARGET_AVX512 inline __m512 fold_in_registers(const float* level, int64_t vectors) {
  if constexpr (M > 1) {
    if (vectors < M) return fold_in_registers<kMax, M / 2>(level, vectors);
  }
  __m512 v[M];
  for (int k = 0; k < M; ++k) v[k] = _mm512_loadu_ps(level + 16 * k);
  return fold_vectors<kMax, M>(v);
}

// Whether a level of n values is a power of two of whole vectors that fold_in_registers takes.
constexpr bool folds_in_registers(int64_t n) {
  return n % 16 == 0 && n / 16 <= kRegisterFold && (n / 16 & (n / 16 - 1)) == 0;
}

template <bool kMax>
NPUEMU_TARGET_AVX512 inline float fold_avx512(float* level, int64_t n) {
  for (; n > 16 && !folds_in_registers(n); n = (n + 1) / 2) {
    const int64_t half = (n + 1) / 2, count = n - half;
    int64_t i = 0;
    for (; i + 16 <= count; i += 16)
      _mm512_storeu_ps(level + i, fold_step<kMax>(_mm512_loadu_ps(level + i), _mm512_loadu_ps(level + half + i)));
    if (i < count) {
      const __mmask16 m = first_lanes(count - i);
      const __m512 lo = _mm512_maskz_loadu_ps(m, level + i), hi = _mm512_maskz_loadu_ps(m, level + half + i);
      _mm512_mask_storeu_ps(level + i, m, fold_step<kMax>(lo, hi));
    }
  }
  __m512 v;
  if (folds_in_registers(n)) {
    v = fold_in_registers<kMax>(level, n / 16);
    n = 16;
  } else {
    v = _mm512_maskz_loadu_ps(first_lanes(n), level);
  }
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  for (; n > 1; n = (n + 1) / 2) {
    const int64_t half = (n + 1) / 2;
    const __m512 upper = _mm512_permutexvar_ps(_mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(half))), v);
    v = _mm512_mask_mov_ps(v, first_lanes(n - half), fold_step<kMax>(v, upper));
  }
  return _mm512_cvtss_f32(v);
}

NPUEMU_TARGET_AVX512 inline float fold_to_sum_avx512(float* level, int64_t n) { return fold_avx512<false>(level, n); }
NPUEMU_TARGET_AVX512 inline float fold_to_max_avx512(float* level, int64_t n) { return fold_avx512<true>(level, n); }

// The fold of the caller's instruction set V (its rows' code is compiled for V's target).
template <class V>
NPUEMU_INLINE float fold_to_sum_with(float* level, int64_t n) {
  if constexpr (V::kWidth == 16) return fold_to_sum_avx512(level, n);
  return fold_to_sum(level, n);
}

template <class V>
NPUEMU_INLINE float fold_to_max_with(float* level, int64_t n) {
  if constexpr (V::kWidth == 16) return fold_to_max_avx512(level, n);
  return fold_to_max(level, n);
}

// ---- rows shared between the threads ----

// Rows are handed out in blocks of at most this many bytes of input, by default.
constexpr int64_t kBlockBytes = 1 << 20;

// Rows per block: at most block_bytes of input, about four blocks per thread (as the element-wise
// engine's block_elements), rounded down to a power of two, so that a power of two of rows shares
// evenly between the threads. With 42 rows a block (1024 FLOAT16 columns, 128 KiB), 128 rows made
// 42/42/42/2 and 2 threads finished at different times; `make bench`'s in-cache calls are such
// powers of two, and their difference then measured one thread's blocks (aclnnScaledMaskedSoftmax's
// 2-thread ceiling came out at 2.7 times the 1-thread one, ScaledMaskedSoftmaxBackward's below it).
inline int64_t block_rows(int64_t rows, int64_t cols, int64_t participants, int64_t row_bytes, int64_t block_bytes) {
  const int64_t most = std::max<int64_t>(1, block_bytes / row_bytes);
  const int64_t wanted = std::max<int64_t>(1, block_elements(rows * cols, participants, most * cols) / cols);
  int64_t power = 1;
  while (power * 2 <= wanted) power *= 2;
  return power;
}

// Runs Rows(layout).run(operands, RowRange) over every row of operands[0] ([B, N, S1, S2], S2 =
// layout.cols > 0), block by block, each thread taking runs of consecutive blocks from a shared
// counter (share_block_runs: a thread that starts late or is slowed down takes fewer); a row's
// result never depends on which thread runs it. A block's RowRange reaches ahead to the end of the
// thread's run. `row_bytes`: the bytes of input a row reads; `block_bytes`: the most of a block.
template <class Rows, int N, class Layout>
void run_in_blocks(const std::array<const TensorArg*, N>& operands, const Layout& layout, int64_t row_bytes,
                   int64_t block_bytes = kBlockBytes) {
  const int64_t rows = operands[0]->numel() / layout.cols;
  const int64_t grains = (rows * layout.cols + kGrain - 1) / kGrain;  // below kGrain elements a thread costs more
  const int64_t participants = std::max<int64_t>(1, std::min<int64_t>(threads(), grains));
  const int64_t rows_per_block = block_rows(rows, layout.cols, participants, row_bytes, block_bytes);
  const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  share_block_runs(blocks, participants, [&](const auto& take) {
    Rows kernel(layout);
    for (RunBlock block = take(); block.index >= 0; block = take()) {
      const int64_t begin = block.index * rows_per_block, run_end = block.run_end * rows_per_block;
      kernel.run(operands, RowRange{begin, std::min(rows, begin + rows_per_block), std::min(rows, run_end)});
    }
    if (layout.streaming) store_fence();
  });
}

}  // namespace softmax_rows
}  // namespace npuemu
