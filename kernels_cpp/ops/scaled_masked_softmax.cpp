// aclnnScaledMaskedSoftmax (docs/ops/scaled_masked_softmax.md). For each row of [B, N, S1, S2]
// (the softmax runs along S2):
//   z = scale * x, then z = -10000 wherever mask (broadcast over B and N through stride 0) is true;
//   y = e^(z - max z) / sum e^(z - max z).
// fp32 compute; for FLOAT16 inputs the product scale * x is rounded to fp16 first, as the kernel
// multiplies and masks in fp16 before its cast to fp32 (scale itself rounded to fp16); FLOAT and
// BFLOAT16 multiply in fp32. Outputs are rounded to nearest-even.
//
// A row goes through three passes over an fp32 buffer that stays in L1/L2 (S2 <= 8192), the
// passes of three rows at a time in one loop (ForwardRows):
// 1. z from x and the mask (x read from memory once), with the first level of the row's max;
// 2. e = exp(z - max) in place (simd::exp_nonpositive_or_zero), with the first level of the row's
//    sum;
// 3. y = e / sum, stored as it is computed (streamed past the caches for large outputs).
// The max and the sum are folded in the fixed binary tree of softmax_rows.h, and every other step
// is one IEEE operation per element, so results do not depend on the vector width (the passes
// run on the widest instruction set in force, NPUEMU_VECTOR_ISA) nor on the threads, which take
// blocks of rows. A row is read whole before any of it is written: y may be x itself.
// Strided rows are gathered into fp32 (x) and byte (mask) buffers first and scattered on output,
// through the same arithmetic.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "common/dispatch.h"
#include "common/memory_plan.h"
#include "common/registry.h"
#include "common/simd.h"
#include "common/softmax_rows.h"
#include "common/vector_io.h"
#include "common/vmath.h"

namespace py = pybind11;

namespace npuemu {
namespace {

using softmax_rows::fold_to_max_with;
using softmax_rows::fold_to_sum_with;
using softmax_rows::masked_lanes;
using softmax_rows::put;
using softmax_rows::RowBuffer;

constexpr float kMasked = -10000.0f;  // what a masked position's z becomes (not -inf)

enum Operand { kX, kMask, kY, kOperands };
using Operands = std::array<const TensorArg*, kOperands>;
using RowPointers = softmax_rows::RowPointers<kOperands>;
using RowCursor = softmax_rows::RowCursor<kOperands>;
using softmax_rows::RowRange;
using RowsAhead = softmax_rows::RowsAhead<kOperands>;

struct Layout {
  int dtype;
  int64_t cols;
  float scale;     // as the multiply uses it: the fp32 attribute, rounded to fp16 for FLOAT16
  bool streaming;  // non-temporal stores for the output
  std::array<int64_t, kOperands> strides;  // element strides along S2
};

// Bytes of input per row: x and the mask.
int64_t row_bytes(const Layout& layout) { return layout.cols * (dtype_size(layout.dtype) + 1); }

// ---- lanes (every function is always inlined into an instruction set's entry point) ----

// The arithmetic of a row, on lanes of V. T is the tensors' dtype; the input x is read as S: T
// itself, or fp32 when a strided row was gathered first.
template <class V, class T>
struct RowMath {
  using F = typename V::F;

  // z = scale * x rounded as T's arithmetic does (fp16 for FLOAT16: the product of two fp16
  // values is exact in fp32, so this rounds once, as an fp16 multiply), then -10000 where
  // masked, whatever x holds there.
  template <class S>
  NPUEMU_INLINE static F scaled(const S* x, const unsigned char* mask, float scale) {
    F z = simd::load<V>(x) * scale;
    if constexpr (std::is_same_v<T, _Float16>) z = V::widen_half(V::narrow_half(z));
    return masked_lanes<V>(mask) ? V::splat(kMasked) : z;
  }

  // Pass 1, lower half of the row: z[i].
  template <class S>
  NPUEMU_INLINE static void lower_z(const S* x, const unsigned char* mask, float scale, float* z, int64_t i) {
    put<V>(z + i, scaled(x + i, mask + i, scale));
  }

  // Pass 1, upper half: z[half + i], and level[i] = the max of z[i] and z[half + i].
  template <class S>
  NPUEMU_INLINE static void upper_z(const S* x, const unsigned char* mask, float scale, float* z, float* level,
                                    int64_t i, int64_t half) {
    const F hi = scaled(x + half + i, mask + half + i, scale);
    put<V>(z + half + i, hi);
    put<V>(level + i, V::max(simd::load<V>(z + i), hi));
  }

  // e^(z[i] - max), never of a positive number (NaN aside); +0 below -104 without computing it.
  NPUEMU_INLINE static F exp_at(const float* z, int64_t i, float max) {
    return simd::exp_nonpositive_or_zero<V>(simd::load<V>(z + i) - max);
  }

  // Pass 2, lower half: z[i] becomes e[i].
  NPUEMU_INLINE static void lower_e(float* z, float max, int64_t i) { put<V>(z + i, exp_at(z, i, max)); }

  // Pass 2, upper half: z[half + i] becomes e[half + i], and level[i] = e[i] + e[half + i].
  NPUEMU_INLINE static void upper_e(float* z, float* level, float max, int64_t i, int64_t half) {
    const F hi = exp_at(z, half + i, max);
    put<V>(z + half + i, hi);
    put<V>(level + i, simd::load<V>(z + i) + hi);
  }

  // Pass 3: y = e / sum for lanes [begin, end) (a multiple of the width), stored in T.
  NPUEMU_INLINE static void divide(T* y, const float* e, float sum, int64_t begin, int64_t end, bool streaming) {
    for (int64_t j = begin; j < end; j += V::kWidth) simd::store<V>(y + j, simd::load<V>(e + j) / sum, streaming);
  }
};

// ---- the rows ----

// How far ahead of the row read its inputs are prefetched, in bytes of input.
constexpr int64_t kPrefetchBytes = 12 << 10;

// The rows go through the passes as a pipeline, one step a row: step r runs pass 1 of row r, pass 2
// of row r - 1 and pass 3 of row r - 2 in one loop over the columns, so that the loads of pass 1,
// the exponentials of pass 2 and the divisions and stores of pass 3 share the core's units (and
// the wait for a row's max, whose fold ends pass 1, overlaps other work). In cache this is 18-25%
// faster than the rows one after the other with their columns in pairs (FLOAT, 1024 and 512
// columns, on the AMD EPYC); each element's arithmetic is the same, and so are the bits. Three row
// buffers rotate through the stages.
template <class T>
class ForwardRows {
 public:
  explicit ForwardRows(const Layout& layout)
      : l_(layout),
        buffers_{RowBuffer(layout.cols), RowBuffer(layout.cols), RowBuffer(layout.cols)},
        max_level_((layout.cols + 1) / 2),
        sum_level_((layout.cols + 1) / 2),
        x_(layout.strides[kX] == 1 ? 0 : layout.cols),
        mask_(layout.cols, layout.strides[kMask]) {}

  // The rows of `range`, on the widest instruction set in force.
  void run(const Operands& operands, const RowRange& range) { softmax_rows::visit_on_isa(*this, operands, range); }

  // Rows [begin, end) (a block: at most softmax_rows::kBlockBytes of input). While a row is read
  // (pass 1), the dense inputs of the row about kPrefetchBytes of input ahead are prefetched
  // (prefetch()), up to ahead_end: into the next blocks of this thread's run, whose first rows
  // would otherwise be read cold (with blocks prefetched only within themselves, blocks of 128 KiB
  // took 20% longer than blocks of 1 MiB on one thread and 25% on two, 2x8x1024x1024 FLOAT on the
  // Intel Xeon; with 1 MiB, prefetching across the blocks of a run is 2-3% faster on two threads
  // of the AMD EPYC and 4-5% on one). A row is written once the two after it have been read (and
  // itself): y may be x itself.
  template <class V>
  NPUEMU_INLINE void visit(const Operands& operands, const RowRange& range) {
    const bool dense = l_.strides[kX] == 1 && l_.strides[kMask] == 1;
    RowCursor cursor(operands, range.begin);
    RowsAhead ahead(operands, range, row_bytes(l_), kPrefetchBytes);
    Stages stages{buffers_[0].data(), buffers_[1].data(), buffers_[2].data()};
    for (int64_t r = range.begin; r <= range.end; ++r) {
      step<V>(r < range.end ? &cursor.row() : nullptr, dense ? ahead.at(r) : nullptr, stages);
      if (r + 1 < range.end) cursor.advance();
    }
    if (stages.pending.y) finish<V>(stages.pending);
  }

 private:
  // A dense output row whose pass 3 is still to do: y = e / sum, from a row buffer e.
  struct Pending {
    T* y = nullptr;
    const float* e = nullptr;
    float sum = 0.0f;
    int64_t head = 0, body_end = 0;  // single lanes [0, head), then vectors up to body_end
    int64_t done = 0;                // where the vectors still to store begin
    bool streaming = false;
  };

  // The pipeline between two steps: the buffer pass 1 fills next, the row waiting for its pass 2
  // (its z in `scaled`, its max, its output row) and the row waiting for its pass 3.
  struct Stages {
    float* free;
    float* scaled;
    float* exponentials;  // the buffer of `pending`
    char* scaled_y = nullptr;  // null: no row waits for pass 2
    float scaled_max = 0.0f;
    Pending pending;
  };

  // One step: pass 1 of `next` (if any), pass 2 of the row scaled at the last step (if any), and
  // the rest of the pending pass 3, then the row folds; the buffers move one stage on.
  template <class V>
  NPUEMU_INLINE void step(const RowPointers* next, const RowPointers* far, Stages& s) {
    const unsigned char* mask = next ? mask_((*next)[kMask]) : nullptr;
    float max = 0.0f;
    if (!next) {
      columns<V, T, false>(nullptr, nullptr, far, s);
    } else if (l_.strides[kX] == 1) {
      max = columns<V, T, true>(reinterpret_cast<const T*>((*next)[kX]), mask, far, s);
    } else {
      gather_as_float(l_.dtype, (*next)[kX], l_.strides[kX] * static_cast<int64_t>(sizeof(T)), x_.data(), l_.cols);
      max = columns<V, float, true>(x_.data(), mask, far, s);
    }
    if (s.scaled_y) {
      const float sum = fold_to_sum_with<V>(sum_level_.data(), (l_.cols + 1) / 2);
      if (l_.strides[kY] == 1) {
        s.pending = pass3_of<V>(reinterpret_cast<T*>(s.scaled_y), s.scaled, sum);
      } else {
        store_strided<V>(s.scaled_y, s.scaled, sum);
      }
      std::swap(s.scaled, s.exponentials);  // pass 3 reads that row's buffer from the next step on
    }
    s.scaled_y = next ? (*next)[kY] : nullptr;
    s.scaled_max = max;
    std::swap(s.free, s.scaled);
  }

  // The loop of a step over the columns: with kPass1, z of x (read as S) and the mask into s.free
  // with the first level of its max (returned, folded); when a row waits for pass 2, e = exp(z -
  // max) in place with the first level of its sum (folded by the caller); the pending pass 3 stores
  // a vector for each vector of the others, so all end together. The passes go through their rows
  // in order, the lower half then the upper half, where each column meets its partner of the lower
  // half (from the row buffer) in the first level: x is read as one stream rather than at two
  // places half a row apart (with each column next to its partner, two threads on the AMD EPYC took
  // 3-5% longer from memory, one 3-4% less).
  template <class V, class S, bool kPass1>
  NPUEMU_INLINE float columns(const S* x, const unsigned char* mask, const RowPointers* far, Stages& s) {
    const int64_t n = l_.cols, half = (n + 1) / 2;
    half_row<V, S, kPass1, false>(x, mask, far, s, half);
    half_row<V, S, kPass1, true>(x, mask, far, s, half);
    if (s.pending.y) {
      finish<V>(s.pending);
      s.pending.y = nullptr;
    }
    if (n & 1) {  // the middle column has no partner: it passes to the next level unchanged
      if constexpr (kPass1) max_level_[half - 1] = s.free[half - 1];
      if (s.scaled_y) sum_level_[half - 1] = s.scaled[half - 1];
    }
    if constexpr (kPass1) return fold_to_max_with<V>(max_level_.data(), half);
    return 0.0f;
  }

  // The columns of one half of the row, [0, half) or half + [0, n - half): two vectors a step,
  // then one, then single lanes, with the prefetches of the row ahead and the pending pass 3.
  template <class V, class S, bool kPass1, bool kUpper>
  NPUEMU_INLINE void half_row(const S* x, const unsigned char* mask, const RowPointers* far, Stages& s, int64_t half) {
    using Vector = RowMath<V, T>;
    const int64_t count = kUpper ? l_.cols - half : half, first = kUpper ? half : 0;
    const bool overlap = s.pending.y != nullptr;
    int64_t i = 0;
    for (; i + 2 * V::kWidth <= count; i += 2 * V::kWidth) {
      if (far) {
        prefetch(*far, first + i);
        prefetch(*far, first + i + V::kWidth);
      }
      column<Vector, S, kPass1, kUpper>(x, mask, s, i, half);
      column<Vector, S, kPass1, kUpper>(x, mask, s, i + V::kWidth, half);
      if (overlap) advance<V>(s.pending, 2);
    }
    if (i + V::kWidth <= count) {
      if (far) prefetch(*far, first + i);
      column<Vector, S, kPass1, kUpper>(x, mask, s, i, half);
      if (overlap) advance<V>(s.pending, 1);
      i += V::kWidth;
    }
    for (; i < count; ++i) column<RowMath<simd::Scalar, T>, S, kPass1, kUpper>(x, mask, s, i, half);
  }

  // Passes 1 and 2 at the lanes of M from column i of a half.
  template <class M, class S, bool kPass1, bool kUpper>
  NPUEMU_INLINE void column(const S* x, const unsigned char* mask, const Stages& s, int64_t i, int64_t half) {
    const bool pass2 = s.scaled_y != nullptr;
    if constexpr (kUpper) {
      if constexpr (kPass1) M::upper_z(x, mask, l_.scale, s.free, max_level_.data(), i, half);
      if (pass2) M::upper_e(s.scaled, sum_level_.data(), s.scaled_max, i, half);
    } else {
      if constexpr (kPass1) M::lower_z(x, mask, l_.scale, s.free, i);
      if (pass2) M::lower_e(s.scaled, s.scaled_max, i);
    }
  }

  // Pass 3 of a dense row, to do: single lanes up to the first address streaming stores accept,
  // whole vectors, then single lanes. The single lanes of the head are done at once.
  template <class V>
  NPUEMU_INLINE Pending pass3_of(T* y, const float* e, float sum) {
    Pending pending;
    const int64_t n = l_.cols, align = V::kWidth * static_cast<int64_t>(sizeof(T));
    const auto address = reinterpret_cast<uintptr_t>(y);
    pending.streaming = V::kStreams && l_.streaming && address % sizeof(T) == 0;
    pending.head = pending.streaming ? std::min<int64_t>(n, (align - address % align) % align / sizeof(T)) : 0;
    pending.body_end = pending.head + (n - pending.head) / V::kWidth * V::kWidth;
    pending.y = y;
    pending.e = e;
    pending.sum = sum;
    pending.done = pending.head;
    RowMath<simd::Scalar, T>::divide(y, e, sum, 0, pending.head, false);
    return pending;
  }

  // The next `vectors` vectors of pending's body (fewer at its end).
  template <class V>
  NPUEMU_INLINE static void advance(Pending& p, int64_t vectors) {
    const int64_t end = std::min(p.body_end, p.done + vectors * V::kWidth);
    RowMath<V, T>::divide(p.y, p.e, p.sum, p.done, end, p.streaming);
    p.done = end;
  }

  // The rest of pending's row: its remaining vectors, then its single lanes.
  template <class V>
  NPUEMU_INLINE void finish(Pending& p) const {
    RowMath<V, T>::divide(p.y, p.e, p.sum, p.done, p.body_end, p.streaming);
    RowMath<simd::Scalar, T>::divide(p.y, p.e, p.sum, p.body_end, l_.cols, false);
    p.done = p.body_end;
  }

  // x and the mask of a row ahead, at column j, into every cache level (prefetcht0): into L2 only
  // (prefetcht1) was 10% slower with FLOAT, the same with FLOAT16 and BFLOAT16 (2x8x1024x1024 on
  // the AMD EPYC, each call after a triad: 2.58-2.74 against 2.91-3.05 ms on two threads, 4.59
  // against 4.84 ms on one). Always inlined: to GCC a function that only prefetches has no side
  // effect, so a call to it may be deleted altogether.
  NPUEMU_INLINE static void prefetch(const RowPointers& row, int64_t j) {
    __builtin_prefetch(row[kX] + j * sizeof(T), 0, 3);
    __builtin_prefetch(row[kMask] + j, 0, 3);
  }

  // Pass 3, strided output: y = e / sum into the row buffer e, then scattered.
  template <class V>
  NPUEMU_INLINE void store_strided(char* y, float* e, float sum) {
    const int64_t n = l_.cols, body_end = n / V::kWidth * V::kWidth;
    for (int64_t j = 0; j < body_end; j += V::kWidth) put<V>(e + j, simd::load<V>(e + j) / sum);
    for (int64_t j = body_end; j < n; ++j) e[j] /= sum;
    scatter_from_float(l_.dtype, e, y, l_.strides[kY] * static_cast<int64_t>(sizeof(T)), n);
  }

  Layout l_;
  std::array<RowBuffer, 3> buffers_;  // rotating through the stages (Stages)
  RowBuffer max_level_, sum_level_, x_;
  softmax_rows::MaskRow mask_;
};

// ---- the call ----


// The longest row any chip admits (the first phase's limit): a row runs between two checkpoints.
constexpr int64_t kMaxCols = 8192;

void check_operands(const TensorArg& x, const TensorArg& mask, const TensorArg& y) {
  if (x.shape.size() != 4 || mask.shape != x.shape || y.shape != x.shape)
    throw ContractError("aclnnScaledMaskedSoftmax: expected x, mask and y viewed as one [B, N, S1, S2] shape");
  if (x.shape[3] > kMaxCols || (x.shape[3] == 0 && x.numel() > 0))
    throw ContractError("aclnnScaledMaskedSoftmax: expected 0 < S2 <= " + std::to_string(kMaxCols) + ", found " +
                        std::to_string(x.shape[3]));
  if (y.dtype != x.dtype || mask.dtype != kBool)
    throw ContractError("aclnnScaledMaskedSoftmax: expected x and y of one dtype, mask BOOL");
}

// The multiplier of the kernel: fp16 arithmetic for FLOAT16 takes the attribute rounded to fp16.
float multiplier(int dtype, float scale) {
  return dtype == kFloat16 ? half_bits_to_float(float_to_half_bits(scale)) : scale;
}

void softmax(const TensorArg& x, const TensorArg& mask, const TensorArg& y, float scale) {
  const Layout layout{x.dtype, x.shape[3], multiplier(x.dtype, scale), memory_plan().streams(y.numel() * y.itemsize()),
                      {x.strides[3], mask.strides[3], y.strides[3]}};
  dispatch_storage("aclnnScaledMaskedSoftmax", x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmax_rows::run_in_blocks<ForwardRows<T>, kOperands>({&x, &mask, &y}, layout, row_bytes(layout));
  });
}

void scaled_masked_softmax(const TensorArg& x, const TensorArg& mask, const TensorArg& y, float scale) {
  check_operands(x, mask, y);
  dispatch_storage("aclnnScaledMaskedSoftmax", x.dtype, [](auto) {});  // no DOUBLE kernel
  if (x.numel() == 0) return;
  KernelCall("aclnnScaledMaskedSoftmax").run([&] { softmax(x, mask, y, scale); });
}

void bind(py::module_& m) {
  m.def("scaled_masked_softmax", &scaled_masked_softmax,
        "y = softmax(scale * x, -10000 where mask) along the last axis");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
