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
// - The rows run on the widest instruction set in force (BackwardRows). Dense inputs are converted
//   from fp16/bf16 in registers in both passes (the only fp32 array written is the half-row of
//   partial sums), and pass 2 prefetches the rows ahead (AheadRow): without that, memory sat idle
//   while rows were computed from cache (53-77% of a STREAM triad with two threads, against
//   ~90-115% with it).
// - Strided inputs, or an out that overlaps them other than as the same tensor, are first copied
//   into fp32 rows; a strided out is scattered from an fp32 row. The arithmetic is the same
//   whichever way a row goes, so are the bits.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <string>

#include "common/dispatch.h"
#include "common/memory_plan.h"
#include "common/registry.h"
#include "common/softmax_rows.h"
#include "common/vector_io.h"

namespace py = pybind11;

namespace npuemu {
namespace {

using softmax_rows::put;
using softmax_rows::RowBuffer;
using softmax_rows::run_in_blocks;

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
  bool copies;  // gradOutput and y read through fp32 copies of each row (strided, or out overlaps them)
};

// Bytes of input per row: gradOutput, y and the mask.
int64_t row_bytes(const Layout& layout) { return layout.cols * (2 * dtype_size(layout.dtype) + 1); }

// ---- the rows ----

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

// The rows, on the widest instruction set in force (softmax_rows::visit_on_isa): the lanes of V,
// then single lanes. Dense inputs are read in their dtype and converted in registers, with the row
// about kPrefetchBytes of input ahead prefetched; out is then either apart from them or the very
// same tensor as one of them (each vector of out is written after the same vector of the inputs is
// read). Strided inputs, or an out that overlaps them otherwise, are first copied into fp32 rows (the
// whole row before anything is written, so out may overlap the inputs in any way within a row); a
// strided out is scattered from an fp32 row. The arithmetic is the same on every path, and so are
// the bits. Before 2026-11-27 the dense rows had AVX-512 code of their own and every other machine
// took the copies, without prefetch: on AVX2, 8x16x512x512 FLOAT16 / BFLOAT16 took 2.6x as long as
// on AVX-512 (docs/performance.md).
template <class T>
class BackwardRows {
  using Ahead = AheadRow<T>;

 public:
  explicit BackwardRows(const Layout& layout)
      : l_(layout),
        level_((layout.cols + 1) / 2),
        g_(layout.copies ? layout.cols : 0),
        y_(layout.copies ? layout.cols : 0),
        result_(layout.strides[kOut] == 1 ? 0 : layout.cols),
        mask_(layout.cols, layout.strides[kMask]) {}

  void run(const std::array<const TensorArg*, kOperands>& operands, const RowRange& range) {
    softmax_rows::visit_on_isa(*this, operands, range);
  }

  template <class V>
  NPUEMU_INLINE void visit(const std::array<const TensorArg*, kOperands>& operands, const RowRange& range) {
    RowCursor cursor(operands, range.begin);
    RowsAhead ahead(operands, range, row_bytes(l_), kPrefetchBytes);
    for (int64_t r = range.begin; r < range.end; ++r, cursor.advance()) {
      const RowPointers& row = cursor.row();
      const RowPointers* far = ahead.at(r);
      const unsigned char* mask = mask_(row[kMask]);
      if (l_.copies) {
        copy_row(row[kGrad], l_.strides[kGrad], g_.data());
        copy_row(row[kY], l_.strides[kY], y_.data());
        both_passes<V>(g_.data(), y_.data(), mask, row[kOut], Ahead{});
      } else {
        both_passes<V>(reinterpret_cast<const T*>(row[kGrad]), reinterpret_cast<const T*>(row[kY]), mask, row[kOut],
                       Ahead{far});
      }
    }
  }

 private:
  // The row's sum, then its out: dense, stored as it is computed, or into an fp32 row scattered
  // after. S: the inputs' storage type (T, or float for the copies).
  template <class V, class S>
  NPUEMU_INLINE void both_passes(const S* g, const S* y, const unsigned char* mask, char* out, const Ahead& ahead) {
    const float sum = row_sum<V>(g, y);
    const bool scaled = l_.scale != 1.0f;
    if (l_.strides[kOut] == 1) {
      T* dense = reinterpret_cast<T*>(out);
      if (scaled) write_row<V, true>(g, y, mask, sum, dense, l_.streaming, ahead);
      else write_row<V, false>(g, y, mask, sum, dense, l_.streaming, ahead);
    } else {
      if (scaled) write_row<V, true>(g, y, mask, sum, result_.data(), false, ahead);
      else write_row<V, false>(g, y, mask, sum, result_.data(), false, ahead);
      scatter_from_float(l_.dtype, result_.data(), out, l_.strides[kOut] * static_cast<int64_t>(sizeof(T)), l_.cols);
    }
  }

  void copy_row(const char* src, int64_t stride, float* dst) const {
    if (stride == 1) return load_as_float(l_.dtype, src, dst, l_.cols);
    gather_as_float(l_.dtype, src, stride * static_cast<int64_t>(sizeof(T)), dst, l_.cols);
  }

  // g * y at the lanes of V from column j.
  template <class V, class S>
  NPUEMU_INLINE static typename V::F product(const S* g, const S* y, int64_t j) {
    return simd::load<V>(g + j) * simd::load<V>(y + j);
  }

  // Pass 1: the first level of the sum, g[i] * y[i] + g[half + i] * y[half + i] (the middle column
  // of an odd row alone), then the rest. The row is read in order, the lower half then the upper
  // half, where each product meets its partner's in the level: FLOAT 3-5% faster on the AMD EPYC
  // than each column next to its partner, half a row apart (2x8x1024x1024, 1 / 2 threads: 4.90
  // against 5.04 ms / 2.60 against 2.72 ms), FLOAT16 and BFLOAT16 the same.
  template <class V, class S>
  NPUEMU_INLINE float row_sum(const S* g, const S* y) {
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

  // (g * y - sum * y) * scale (no multiply when scale is 1, as the kernel does), +0 where the mask
  // byte is set whatever the inputs hold there (NaN included), at the lanes of V from column j.
  template <class V, bool kScaled, class S>
  NPUEMU_INLINE static typename V::F gradient(const S* g, const S* y, const unsigned char* mask, float sum,
                                              float scale, int64_t j) {
    const typename V::F gv = simd::load<V>(g + j), yv = simd::load<V>(y + j);
    typename V::F r = gv * yv - sum * yv;
    if constexpr (kScaled) r = r * scale;
    return softmax_rows::masked_lanes<V>(mask + j) ? V::splat(0.0f) : r;
  }

  // Pass 2 into out (of type O: T, or float for an fp32 row): each vector stored as soon as it is
  // computed, streamed past the caches for large outputs (from the first address aligned for that;
  // single lanes before it and at the end).
  template <class V, bool kScaled, class S, class O>
  NPUEMU_INLINE void write_row(const S* g, const S* y, const unsigned char* mask, float sum, O* out, bool streams,
                               const Ahead& ahead) const {
    using One = simd::Scalar;
    const int64_t n = l_.cols, align = V::kWidth * static_cast<int64_t>(sizeof(O));
    const float scale = l_.scale;
    const auto address = reinterpret_cast<uintptr_t>(out);
    const bool streaming = V::kStreams && streams && address % sizeof(O) == 0;
    const int64_t head = streaming ? std::min<int64_t>(n, (align - address % align) % align / sizeof(O)) : 0;
    for (int64_t j = 0; j < head; ++j)
      simd::store<One>(out + j, gradient<One, kScaled>(g, y, mask, sum, scale, j), false);
    int64_t j = head;
    for (; j + kPrefetchColumns <= n; j += kPrefetchColumns) {
      ahead.prefetch(j);
      for (int64_t k = 0; k < kPrefetchColumns; k += V::kWidth)
        simd::store<V>(out + j + k, gradient<V, kScaled>(g, y, mask, sum, scale, j + k), streaming);
    }
    for (; j + V::kWidth <= n; j += V::kWidth)
      simd::store<V>(out + j, gradient<V, kScaled>(g, y, mask, sum, scale, j), streaming);
    for (; j < n; ++j) simd::store<One>(out + j, gradient<One, kScaled>(g, y, mask, sum, scale, j), false);
  }

  Layout l_;
  RowBuffer level_, g_, y_, result_;
  softmax_rows::MaskRow mask_;
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
  const bool dense_inputs = go.strides[3] == 1 && y.strides[3] == 1;
  const Layout layout{go.dtype,
                      go.shape[3],
                      scale,
                      memory_plan().streams(out.numel() * out.itemsize()),
                      {go.strides[3], y.strides[3], mask.strides[3], out.strides[3]},
                      !dense_inputs || overlaps_otherwise(out, go) || overlaps_otherwise(out, y)};
  dispatch_storage("aclnnScaledMaskedSoftmaxBackward", go.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    run_in_blocks<BackwardRows<T>, kOperands>({&go, &y, &mask, &out}, layout, row_bytes(layout));
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
