// What the two scaled masked softmax kernels (forward and backward) share: both work on the rows of
// the last axis S2 of [B, N, S1, S2] operands, one row at a time, through
// - RowCursor: the byte address of each operand's row, in row order, advanced incrementally;
// - RowBuffer: fp32 scratch for a row, starting on a cache line;
// - fold_to_sum / fold_to_max: a row's reduction in one fixed binary tree, so that its result
//   depends only on the row's length, never on the machine's vector width or the threads;
// - run_in_blocks: rows handed to the threads in blocks of about kBlockBytes of input.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "common/elementwise.h"  // kGrain
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

// ---- rows shared between the threads ----

// Rows are handed out in blocks of about this many bytes of input, by default.
constexpr int64_t kBlockBytes = 1 << 20;

// Runs Rows(layout).run(operands, begin, end) over every row of operands[0] ([B, N, S1, S2], S2 =
// layout.cols > 0), each thread taking blocks of rows from a shared counter (a thread that starts
// late or is slowed down takes fewer); a row's result never depends on which thread runs it.
// `row_bytes`: the bytes of input a row reads; `block_bytes`: of a block.
template <class Rows, int N, class Layout>
void run_in_blocks(const std::array<const TensorArg*, N>& operands, const Layout& layout, int64_t row_bytes,
                   int64_t block_bytes = kBlockBytes) {
  const int64_t rows = operands[0]->numel() / layout.cols;
  const int64_t block_rows = std::max<int64_t>(1, block_bytes / row_bytes);
  const int64_t blocks = (rows + block_rows - 1) / block_rows;
  const int64_t grains = (rows * layout.cols + kGrain - 1) / kGrain;  // below kGrain elements a thread costs more
  share_blocks(blocks, std::min<int64_t>(threads(), grains), [&](const auto& take) {
    Rows kernel(layout);
    for (int64_t block = take(); block >= 0; block = take()) {
      const int64_t begin = block * block_rows;
      kernel.run(operands, begin, std::min(rows, begin + block_rows));
    }
    if (layout.streaming) store_fence();
  });
}

}  // namespace softmax_rows
}  // namespace npuemu
