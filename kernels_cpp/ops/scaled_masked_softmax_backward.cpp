// aclnnScaledMaskedSoftmaxBackward (docs/ops/scaled_masked_softmax_backward.md). For each row r of [B, N, S1, S2] (the
// reduction runs along S2): p = gradOutput * y; s = sum(p); out = (p - s * y) * scale, and out = 0
// wherever mask (broadcast over B and N through stride 0) is true. fp32 compute, fp16/bf16 rounded
// to nearest-even on output.
//
// The op is memory-bound: each element of gradOutput and y is read from memory once, the output
// written once, and the work in between must stay well below the memory time.
// - Rows are visited in memory order, in blocks of about 1 MiB of input that the threads take from
//   a shared counter in runs of consecutive blocks (a thread that starts late or is slowed down
//   takes fewer); a row's result never depends on which thread runs it. (Visiting the rows that
//   share a broadcast mask row one after another was measured 1.5-2x slower: it breaks the
//   sequential streams memory favours.)
// - Pass 1 reads a row of gradOutput and y and folds the first level of the row sum (a fixed
//   binary tree); pass 2 finishes the row from the same inputs, now in L1/L2 (S2 <= 8192), and
//   writes each vector right after computing it, so that stores (streamed past the caches for
//   large outputs) interleave with the arithmetic.
// - Dense rows (VectorRows, on the widest instruction set in force) convert fp16/bf16 in registers
//   in both passes (the only fp32 array written is the half-row of partial sums), and pass 2
//   prefetches the rows ahead (AheadRow): without that, memory sat idle while rows were computed
//   from cache (53-77% of a STREAM triad with two threads, against ~90-115% with it).
// - Otherwise (strided rows, out overlapping an input other than as the same tensor) the row is
//   widened into fp32 buffers first, then finished in chunks from those buffers with the same
//   arithmetic, so results are bit-identical whichever way a row goes.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "common/dispatch.h"
#include "common/elementwise.h"
#include "common/memory_plan.h"
#include "common/registry.h"
#include "common/softmax_rows.h"
#include "common/thread_pool.h"
#include "common/vector_io.h"
#include "common/vmath.h"

namespace py = pybind11;

namespace npuemu {
namespace {

using softmax_rows::fold_to_sum;
using softmax_rows::put;
using softmax_rows::RowBuffer;
using softmax_rows::run_in_blocks;

// ---- fp32 arithmetic on dense arrays (every variant gives the same bits: no FMA contraction) ----

// The first level of the row sum: sum[i] = g_lo[i] * y_lo[i] + g_hi[i] * y_hi[i].
NPUEMU_VECTORIZED void add_products(float* __restrict sum, const float* g_lo, const float* y_lo, const float* g_hi,
                                    const float* y_hi, int64_t n) {
  for (int64_t i = 0; i < n; ++i) sum[i] = g_lo[i] * y_lo[i] + g_hi[i] * y_hi[i];
}

// out = (g * y - sum * y) * scale (no multiply when scale is 1, as the kernel does), then +0
// where the mask is set, whatever the inputs hold there (NaN included).
NPUEMU_VECTORIZED void finish(float* __restrict out, const float* g, const float* y, const unsigned char* mask,
                              float sum, float scale, int64_t n) {
  if (scale != 1.0f) {
    for (int64_t j = 0; j < n; ++j) out[j] = mask[j] ? 0.0f : (g[j] * y[j] - sum * y[j]) * scale;
  } else {
    for (int64_t j = 0; j < n; ++j) out[j] = mask[j] ? 0.0f : g[j] * y[j] - sum * y[j];
  }
}

constexpr int64_t kChunk = 256;  // elements of a buffered row finished and stored together

// ---- visiting the rows ----

enum Operand { kGrad, kY, kMask, kOut, kOperands };
using RowPointers = softmax_rows::RowPointers<kOperands>;
using RowCursor = softmax_rows::RowCursor<kOperands>;
using softmax_rows::RowRange;
using RowsAhead = softmax_rows::RowsAhead<kOperands>;

struct Layout {
  int dtype;
  int64_t cols;
  float scale;
  bool streaming;                             // non-temporal stores for the output
  std::array<int64_t, kOperands> strides;     // element strides along S2
};

// Bytes of input per row: gradOutput, y and the mask.
int64_t row_bytes(const Layout& layout) { return layout.cols * (2 * dtype_size(layout.dtype) + 1); }

// ---- rows through fp32 buffers: any layout, any machine ----

// The whole row is widened into fp32 buffers before anything is written, so out may overlap the
// inputs in any way within a row. Dense operands go through the vectorised conversions.
template <class T>
class BufferedRows {
 public:
  explicit BufferedRows(const Layout& layout)
      : l_(layout), g_(layout.cols), y_(layout.cols), level_((layout.cols + 1) / 2) {}

  // The rows of `range` (nothing is prefetched).
  void run(const std::array<const TensorArg*, kOperands>& operands, const RowRange& range) {
    RowCursor cursor(operands, range.begin);
    for (int64_t r = range.begin; r < range.end; ++r, cursor.advance()) (*this)(cursor.row());
  }

  void operator()(const RowPointers& row) {
    const int64_t n = l_.cols, half = (n + 1) / 2;
    widen(row[kGrad], l_.strides[kGrad], g_.data());
    widen(row[kY], l_.strides[kY], y_.data());
    add_products(level_.data(), g_.data(), y_.data(), g_.data() + half, y_.data() + half, n - half);
    if (n & 1) level_[half - 1] = g_[half - 1] * y_[half - 1];  // no partner at the first level
    const float sum = fold_to_sum(level_.data(), half);
    for (int64_t j = 0; j < n; j += kChunk) {
      const int64_t count = std::min(kChunk, n - j);
      finish(result_, g_.data() + j, y_.data() + j, mask_chunk(row[kMask], j, count), sum, l_.scale, count);
      write(row[kOut], j, count);
    }
  }

 private:
  void widen(const char* src, int64_t stride, float* dst) const {
    if (stride == 1) return load_as_float(l_.dtype, src, dst, l_.cols);
    const T* s = reinterpret_cast<const T*>(src);
    for (int64_t j = 0; j < l_.cols; ++j) dst[j] = to_float(s[j * stride]);
  }

  const unsigned char* mask_chunk(const char* mask, int64_t at, int64_t count) {
    const int64_t stride = l_.strides[kMask];
    if (stride == 1) return reinterpret_cast<const unsigned char*>(mask) + at;
    for (int64_t k = 0; k < count; ++k) mask_[k] = mask[(at + k) * stride];
    return mask_;
  }

  void write(char* out, int64_t at, int64_t count) const {
    const int64_t stride = l_.strides[kOut];
    if (stride == 1) return store_from_float(l_.dtype, result_, out + at * sizeof(T), count, l_.streaming);
    T* o = reinterpret_cast<T*>(out);
    for (int64_t k = 0; k < count; ++k) o[(at + k) * stride] = from_float<T>(result_[k]);
  }

  Layout l_;
  RowBuffer g_, y_, level_;
  alignas(64) float result_[kChunk];
  unsigned char mask_[kChunk];
};

// ---- dense rows: conversions in registers, no fp32 copies of the inputs ----

// While a row is finished from cache, the inputs of the row about kPrefetchBytes of input ahead
// are prefetched into every cache level (prefetcht0): the hardware prefetcher alone leaves memory
// idle while a row is computed from cache. Into L2 only (prefetcht1), with the next row also
// prefetched into L1 for FLOAT, was 5-10% slower on the AMD EPYC, whatever the dtype and threads
// (FLOAT 2x8x1024x1024, 1 / 2 threads: 5.35 against 4.90 ms / 2.80 against 2.54 ms; BFLOAT16
// 3.61 against 2.98 / 1.95 against 1.77 ms; whole calls, each after a triad).
constexpr int64_t kPrefetchBytes = 12 << 10;

// Columns between two prefetches of the row ahead: a line of FLOAT (and half a line of 16-bit
// types), whatever the vector width.
constexpr int64_t kPrefetchColumns = 16;

template <class T>
struct AheadRow {
  const RowPointers* row = nullptr;  // none: no row ahead in this thread's run

  // kPrefetchColumns columns from j: a few prefetches between the vectors of pass 2 keep the
  // requests flowing (issuing them in bursts measured slower). Always inlined: to GCC a function
  // that only prefetches has no side effect, so a call to it may be deleted altogether.
  NPUEMU_INLINE void prefetch(int64_t j) const {
    if (!row) return;
    __builtin_prefetch((*row)[kGrad] + j * sizeof(T), 0, 3);
    __builtin_prefetch((*row)[kY] + j * sizeof(T), 0, 3);
    __builtin_prefetch((*row)[kMask] + j, 0, 3);
  }
};

// Dense rows where out is either apart from the inputs or the very same tensor as one of them
// (each vector of out is written after the same vector of the inputs is read), on the widest
// instruction set in force (softmax_rows::visit_on_isa): the lanes of V, then single lanes.
// Before 2026-11-27 these rows had AVX-512 code of their own and every other machine took the
// buffered rows (fp32 copies, no prefetch): on AVX2, 8x16x512x512 FLOAT16 / BFLOAT16 took 2.6x as
// long as on AVX-512 (docs/performance.md).
template <class T>
class VectorRows {
  using Ahead = AheadRow<T>;

 public:
  explicit VectorRows(const Layout& layout) : l_(layout), level_((layout.cols + 1) / 2) {}

  void run(const std::array<const TensorArg*, kOperands>& operands, const RowRange& range) {
    softmax_rows::visit_on_isa(*this, operands, range);
  }

  // The rows of `range`, prefetching the row about kPrefetchBytes of input ahead of each.
  template <class V>
  NPUEMU_INLINE void visit(const std::array<const TensorArg*, kOperands>& operands, const RowRange& range) {
    RowCursor cursor(operands, range.begin);
    RowsAhead ahead(operands, range, row_bytes(l_), kPrefetchBytes);
    for (int64_t r = range.begin; r < range.end; ++r, cursor.advance()) {
      const RowPointers& row = cursor.row();
      const float sum = row_sum<V>(reinterpret_cast<const T*>(row[kGrad]), reinterpret_cast<const T*>(row[kY]));
      if (l_.scale != 1.0f) finish_row<V, true>(row, sum, Ahead{ahead.at(r)});
      else finish_row<V, false>(row, sum, Ahead{ahead.at(r)});
    }
  }

 private:
  // g * y at the lanes of V from column j.
  template <class V>
  NPUEMU_INLINE static typename V::F product(const T* g, const T* y, int64_t j) {
    return simd::load<V>(g + j) * simd::load<V>(y + j);
  }

  // Pass 1: the first level of the sum, g[i] * y[i] + g[half + i] * y[half + i] (the middle column
  // of an odd row alone), then the rest. The row is read in order, the lower half then the upper
  // half, where each product meets its partner's in the level: FLOAT 3-5% faster on the AMD EPYC
  // than each column next to its partner, half a row apart (2x8x1024x1024, 1 / 2 threads: 4.90
  // against 5.04 ms / 2.60 against 2.72 ms), FLOAT16 and BFLOAT16 the same.
  template <class V>
  NPUEMU_INLINE float row_sum(const T* g, const T* y) {
    using One = simd::Scalar;
    const int64_t n = l_.cols, half = (n + 1) / 2, pairs = n - half;
    float* level = level_.data();
    int64_t i = 0;
    for (; i + V::kWidth <= half; i += V::kWidth) put<V>(level + i, product<V>(g, y, i));
    for (; i < half; ++i) put<One>(level + i, product<One>(g, y, i));
    for (i = 0; i + V::kWidth <= pairs; i += V::kWidth)
      put<V>(level + i, simd::load<V>(level + i) + product<V>(g + half, y + half, i));
    for (; i < pairs; ++i) put<One>(level + i, simd::load<One>(level + i) + product<One>(g + half, y + half, i));
    return softmax_rows::fold_to_sum_with<V>(level, half);
  }

  // (g * y - sum * y) * scale, +0 where the mask byte is set, at the lanes of V from column j.
  template <class V, bool kScaled>
  NPUEMU_INLINE static typename V::F finish(const T* g, const T* y, const unsigned char* mask, float sum, float scale,
                                            int64_t j) {
    const typename V::F gv = simd::load<V>(g + j), yv = simd::load<V>(y + j);
    typename V::F r = gv * yv - sum * yv;
    if constexpr (kScaled) r = r * scale;
    return softmax_rows::masked_lanes<V>(mask + j) ? V::splat(0.0f) : r;
  }

  // Pass 2: each vector stored as soon as it is computed, streamed past the caches for large
  // outputs (from the first address aligned for that; single lanes before it and at the end).
  template <class V, bool kScaled>
  NPUEMU_INLINE void finish_row(const RowPointers& row, float sum, const Ahead& ahead) const {
    using One = simd::Scalar;
    const T* g = reinterpret_cast<const T*>(row[kGrad]);
    const T* y = reinterpret_cast<const T*>(row[kY]);
    const unsigned char* mask = reinterpret_cast<const unsigned char*>(row[kMask]);
    T* out = reinterpret_cast<T*>(row[kOut]);
    const int64_t n = l_.cols, align = V::kWidth * static_cast<int64_t>(sizeof(T));
    const float scale = l_.scale;
    const auto address = reinterpret_cast<uintptr_t>(out);
    const bool streaming = V::kStreams && l_.streaming && address % sizeof(T) == 0;
    const int64_t head = streaming ? std::min<int64_t>(n, (align - address % align) % align / sizeof(T)) : 0;
    for (int64_t j = 0; j < head; ++j) simd::store<One>(out + j, finish<One, kScaled>(g, y, mask, sum, scale, j), false);
    int64_t j = head;
    for (; j + kPrefetchColumns <= n; j += kPrefetchColumns) {
      ahead.prefetch(j);
      for (int64_t k = 0; k < kPrefetchColumns; k += V::kWidth)
        simd::store<V>(out + j + k, finish<V, kScaled>(g, y, mask, sum, scale, j + k), streaming);
    }
    for (; j + V::kWidth <= n; j += V::kWidth)
      simd::store<V>(out + j, finish<V, kScaled>(g, y, mask, sum, scale, j), streaming);
    for (; j < n; ++j) simd::store<One>(out + j, finish<One, kScaled>(g, y, mask, sum, scale, j), false);
  }

  Layout l_;
  RowBuffer level_;
};

// ---- the call ----

// The longest row a chip admits (the first phase's limit): a row runs between two checkpoints.
constexpr int64_t kMaxCols = 8192;

void check_operands(const TensorArg& go, const TensorArg& y, const TensorArg& mask, const TensorArg& out) {
  if (go.shape.size() != 4 || y.shape != go.shape || mask.shape != go.shape || out.shape != go.shape)
    throw ContractError("aclnnScaledMaskedSoftmaxBackward: expected four [B, N, S1, S2] operands of one shape");
  if (go.shape[3] > kMaxCols)
    throw ContractError("aclnnScaledMaskedSoftmaxBackward: expected S2 <= " + std::to_string(kMaxCols) + ", found " +
                        std::to_string(go.shape[3]));
  if (y.dtype != go.dtype || out.dtype != go.dtype || mask.dtype != kBool)
    throw ContractError("aclnnScaledMaskedSoftmaxBackward: expected gradOutput, y and out of one dtype, mask BOOL");
}

// Lowest and one-past-highest byte a tensor's elements occupy.
std::pair<const char*, const char*> byte_span(const TensorArg& t) {
  const char* low = t.data;
  const char* high = t.data + t.itemsize();
  for (size_t d = 0; d < t.shape.size(); ++d) {
    const int64_t reach = (t.shape[d] - 1) * t.strides[d] * t.itemsize();
    (reach < 0 ? low : high) += reach;
  }
  return {low, high};
}

// Whether out shares memory with `in` other than by being the very same tensor.
bool overlaps_otherwise(const TensorArg& out, const TensorArg& in) {
  if (out.data == in.data && out.strides == in.strides) return false;
  const auto a = byte_span(out), b = byte_span(in);
  return a.first < b.second && b.first < a.second;
}

void compute_gradient(const TensorArg& go, const TensorArg& y, const TensorArg& mask, const TensorArg& out,
                      float scale) {
  const Layout layout{go.dtype, go.shape[3], scale, memory_plan().streams(out.numel() * out.itemsize()),
                      {go.strides[3], y.strides[3], mask.strides[3], out.strides[3]}};
  const bool dense = layout.strides == std::array<int64_t, kOperands>{1, 1, 1, 1};
  const bool vector_rows = dense && !overlaps_otherwise(out, go) && !overlaps_otherwise(out, y);
  dispatch_storage("aclnnScaledMaskedSoftmaxBackward", go.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (vector_rows) run_in_blocks<VectorRows<T>, kOperands>({&go, &y, &mask, &out}, layout, row_bytes(layout));
    else run_in_blocks<BufferedRows<T>, kOperands>({&go, &y, &mask, &out}, layout, row_bytes(layout));
  });
}

void scaled_masked_softmax_backward(const TensorArg& go, const TensorArg& y, const TensorArg& mask,
                                    const TensorArg& out, float scale) {
  check_operands(go, y, mask, out);
  dispatch_storage("aclnnScaledMaskedSoftmaxBackward", go.dtype, [](auto) {});  // no DOUBLE kernel
  if (go.numel() == 0) return;
  KernelCall("aclnnScaledMaskedSoftmaxBackward").run([&] { compute_gradient(go, y, mask, out, scale); });
}

void bind(py::module_& m) {
  m.def("scaled_masked_softmax_backward", &scaled_masked_softmax_backward,
        "out = (gradOutput*y - sum(gradOutput*y)*y) * scale, 0 where mask");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
