// The one engine of the element-wise kernels. An operator is a small struct:
//
//   struct Op {
//     static constexpr int kInputs = ...;
//     template <class V> NPUEMU_INLINE typename V::F apply(const typename V::F* in) const;
//   };
//
// apply() computes the output lanes from fp32 input lanes with the generic vector code of simd.h /
// vmath.h. run_elementwise() walks operands (output first) that share an iteration shape, each in
// its own dtype with its own element strides (0 along broadcast dims):
// - dims are coalesced where every operand steps evenly across them, so a dense call is one flat
//   run and a row-broadcast operand (bias-like) is dense rows;
// - a run where every operand is dense or broadcast (stride 0) is computed in registers: inputs
//   converted from their dtype as they are loaded, the result rounded to the output dtype and
//   stored, streamed past the caches for large outputs (one pass over memory, no fp32 copies), with
//   the widest instructions of the machine (chosen at run time);
//   a run's ends (fewer elements than a vector) are copied into one vector's worth of storage;
// - any other run is gathered into fp32 blocks, computed by the same code, and scattered back;
// - rows shorter than kShortRow elements are computed in flat blocks of whole rows, not a run each.
// Every path rounds the same way (simd.h), so the result never depends on the path, the machine or
// the threads, which take blocks of elements (whole rows) as they come, in runs of consecutive
// blocks (share_block_runs): a run's loops prefetch past each block's end into the next one.
//
// An output may be the very same tensor as an input (in place): each vector, or each gathered
// block, is read completely before it is written.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/dispatch.h"
#include "common/memory_plan.h"
#include "common/simd.h"
#include "common/tensor_arg.h"
#include "common/thread_pool.h"
#include "common/thread_scratch.h"
#include "common/vector_io.h"  // gather_as_float, scatter_from_float

namespace npuemu {

namespace elementwise_detail {

template <int N>
struct Operands {
  std::array<char*, N> data;
  std::array<int, N> dtype;
  std::array<int64_t, N> itemsize;
  Dims shape;                             // coalesced iteration shape
  Small<std::array<int64_t, N>> strides;  // byte strides per coalesced dim
};

template <int N>
Operands<N> coalesce(const std::array<const TensorArg*, N>& args, const Dims& shape) {
  Operands<N> ops;
  for (int k = 0; k < N; ++k) {
    ops.data[k] = args[k]->data;
    ops.dtype[k] = args[k]->dtype;
    ops.itemsize[k] = args[k]->itemsize();
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    std::array<int64_t, N> s;
    for (int k = 0; k < N; ++k) s[k] = args[k]->strides[d] * ops.itemsize[k];
    if (!ops.shape.empty()) {
      bool mergeable = true;  // the previous dim steps exactly over this one for every operand
      for (int k = 0; k < N; ++k) mergeable &= ops.strides.back()[k] == s[k] * shape[d];
      if (mergeable) {
        ops.shape.back() *= shape[d];
        ops.strides.back() = s;
        continue;
      }
    }
    ops.shape.push_back(shape[d]);
    ops.strides.push_back(s);
  }
  if (ops.shape.empty()) {  // 0-D or all ones: one element
    ops.shape.push_back(1);
    ops.strides.push_back(ops.itemsize);
  }
  return ops;
}

// n consecutive elements of every operand; an input with broadcast[k] repeats its first element.
template <int N>
struct Run {
  std::array<char*, N> data;
  std::array<int, N> dtype;
  std::array<bool, N> broadcast;
  int64_t n;
  bool streaming;
  int64_t prefetch;  // bytes ahead of the loads that inputs are prefetched (memory_plan.h); 0: none
  int hint;          // into which caches: __builtin_prefetch's locality, 0 (nta) to 3 (t0)
  bool fence = true; // streaming stores fenced at the end of the run (else the caller fences)
};

// One prefetch of the line at p. The locality must be a constant: a switch, whose branch the CPU
// predicts every time (the hint never changes within a run).
NPUEMU_INLINE void prefetch_line(const char* p, int hint) {
  switch (hint) {
    case 3: return __builtin_prefetch(p, 0, 3);
    case 2: return __builtin_prefetch(p, 0, 2);
    case 1: return __builtin_prefetch(p, 0, 1);
    default: return __builtin_prefetch(p, 0, 0);
  }
}

// How a loop reaches its operands: every operand of one storage type T known at compile time (the
// common case, where the compiler keeps the whole loop in registers), or each operand by its dtype.
template <class T>
struct AllOf {
  template <class V>
  NPUEMU_INLINE static typename V::F load(int, const char* p) {
    return simd::load<V>(reinterpret_cast<const T*>(p));
  }
  template <class V>
  NPUEMU_INLINE static void store(int, char* p, typename V::F v, bool streaming) {
    simd::store<V>(reinterpret_cast<T*>(p), v, streaming);
  }
};

struct ByDtype {
  template <class V>
  NPUEMU_INLINE static typename V::F load(int dtype, const char* p) {
    switch (dtype) {
      case kFloat16: return AllOf<_Float16>::load<V>(dtype, p);
      case kBFloat16: return AllOf<bfloat16>::load<V>(dtype, p);
      default: return AllOf<float>::load<V>(dtype, p);
    }
  }
  template <class V>
  NPUEMU_INLINE static void store(int dtype, char* p, typename V::F v, bool streaming) {
    switch (dtype) {
      case kFloat16: return AllOf<_Float16>::store<V>(dtype, p, v, streaming);
      case kBFloat16: return AllOf<bfloat16>::store<V>(dtype, p, v, streaming);
      default: return AllOf<float>::store<V>(dtype, p, v, streaming);
    }
  }
};

// Where each input's loads start for the elements from `begin`: in its own data, or, when it is
// broadcast, in `repeated[k]`, its one element copied to a whole vector in its dtype. Returns which
// inputs move on with the elements.
template <class V, int N>
NPUEMU_INLINE std::array<bool, N> input_starts(const Run<N>& r, int64_t begin,
                                               char (*repeated)[V::kWidth * sizeof(float)],
                                               std::array<const char*, N>& in) {
  std::array<bool, N> moves{};
  for (int k = 1; k < N; ++k) {
    const int64_t size = dtype_size(r.dtype[k]);
    moves[k] = !r.broadcast[k];
    if (moves[k]) {
      in[k] = r.data[k] + begin * size;
    } else {
      for (int j = 0; j < V::kWidth; ++j) std::memcpy(repeated[k] + j * size, r.data[k], size);
      in[k] = repeated[k];
    }
  }
  return moves;
}

// Elements [begin, end) of a run, V::kWidth at a time; end - begin must be a multiple of it.
// Each input is prefetched r.prefetch bytes ahead of its loads (the memory plan's distance): the
// hardware prefetchers alone keep too few lines in flight when there is much arithmetic per line
// and several inputs. (Prefetching never faults, past the end of a buffer included.)
// Every input is read through a pointer that moves on by one vector of its storage per step, or
// not at all when the input is broadcast: then it points at `repeated`, the element copied to a
// whole vector in its own dtype. The loop has no branch per input (choosing per input between a
// register and a load kept BCE-with-logits' six operands out of line: 0.42 -> 0.38 ns per fp32
// element in cache).
template <class V, class Access, class Op, int N>
NPUEMU_INLINE void lanes_by_step(const Op& op, const Run<N>& r, int64_t begin, int64_t end, bool streaming) {
  using F = typename V::F;
  alignas(64) char repeated[N][V::kWidth * sizeof(float)];
  std::array<const char*, N> in;
  const std::array<bool, N> moves = input_starts<V, N>(r, begin, repeated, in);
  std::array<int64_t, N> step;
  for (int k = 1; k < N; ++k) step[k] = moves[k] ? V::kWidth * dtype_size(r.dtype[k]) : 0;
  const std::array<int, N> dtype = r.dtype;  // a local: the compiler cannot tell the stores never write r
  const Op local = op;  // a copy no store can reach: its constants stay in registers
  const int64_t out_step = V::kWidth * dtype_size(dtype[0]);
  char* const out = r.data[0] + begin * dtype_size(dtype[0]);
  const int64_t prefetch = r.prefetch;
  const int hint = r.hint;
  // Every address is base + j * step, never a pointer carried from one step to the next: stores
  // may alias anything, so carried pointers went through memory, a chain of store-to-load
  // forwarding through the loop (KlDiv's multiply, 1e5 fp32 elements in cache: 0.23 ns an
  // element that way, 0.14 this way).
  for (int64_t j = 0, count = (end - begin) / V::kWidth; j < count; ++j) {
    F values[N - 1];
    for (int k = 1; k < N; ++k) {
      const char* p = in[k] + j * step[k];
      if (V::kWidth > 1 && prefetch > 0) prefetch_line(p + prefetch, hint);
      values[k - 1] = Access::template load<V>(dtype[k], p);
    }
    Access::template store<V>(dtype[0], out + j * out_step, local.template apply<V>(values), streaming);
  }
}

// The same where every operand has one storage size and the plan's prefetch hint is written in
// (hint_written_in): one offset addresses all the operands (a broadcast input reads `repeated` at
// offset & 0), and the store kind and the prefetch hint are fixed at compile time. With a step per
// input and both as run-time values, GCC kept each pointer's step in a vector register, tested the
// store kind in every step and chose the hint in every step. BCE-with-logits' backward (six FLOAT16
// operands, 4096x4096, whole calls after a triad, AMD EPYC) ran 6.71 ms on one thread and 3.43 on
// two, 5.83 and 3.25 with one offset and the store kind fixed, then 3-6% faster again with the hint
// fixed (5.70 -> 5.40 and 6.06 -> 5.69 ms on one thread, two runs); aclnnLogSigmoid and
// aclnnBinaryCrossEntropyWithLogits FLOAT16 3-4% faster; the memory-bound FLOAT rows the same. With
// a 0-D gradOutput (reduction mean, a broadcast input), the same backward FLOAT16 7.05 -> 5.67 ms on
// one thread, 3.56 -> 2.92 on two. Same bits.
template <class V, class Access>
struct OffsetLoop {
  template <bool kStream, int kHint, class Op, int N>
  NPUEMU_INLINE static void run(const Op& op, const Run<N>& r, int64_t begin, int64_t end) {
    using F = typename V::F;
    const int64_t size = dtype_size(r.dtype[0]);
    alignas(64) char repeated[N][V::kWidth * sizeof(float)];
    std::array<const char*, N> in;
    const std::array<bool, N> moving = input_starts<V, N>(r, begin, repeated, in);
    std::array<int64_t, N> moves;  // all bits set: the input moves with the output; 0: broadcast
    for (int k = 1; k < N; ++k) moves[k] = moving[k] ? -1 : 0;
    const std::array<int, N> dtype = r.dtype;
    const Op local = op;
    char* const out = r.data[0] + begin * size;
    const int64_t step = V::kWidth * size, stop = (end - begin) * size;
    const int64_t prefetch = r.prefetch;
    for (int64_t at = 0; at < stop; at += step) {
      F values[N - 1];
      for (int k = 1; k < N; ++k) {
        const char* p = in[k] + (at & moves[k]);
        if (V::kWidth > 1 && prefetch > 0) __builtin_prefetch(p + prefetch, 0, kHint);
        values[k - 1] = Access::template load<V>(dtype[k], p);
      }
      Access::template store<V>(dtype[0], out + at, local.template apply<V>(values), kStream);
    }
  }
};

// Whether the plan's prefetch hint is one the loops have written in: the two the memory plan
// chooses between (prefetcht0 and prefetchnta, memory_plan.h), or none at all. Another, forced by
// NPUEMU_MEMORY_PLAN, goes through the loop with a step per input.
inline bool hint_written_in(int hint, int64_t prefetch) { return prefetch == 0 || hint == 3 || hint == 0; }

// Loop::template run<kStream, kHint>(args...) for the store kind and the hint in force (one of
// those hint_written_in accepts).
template <class Loop, class... Args>
NPUEMU_INLINE void with_store_and_hint(bool streaming, int hint, int64_t prefetch, const Args&... args) {
  const bool t0 = prefetch == 0 || hint == 3;
  if (streaming) return t0 ? Loop::template run<true, 3>(args...) : Loop::template run<true, 0>(args...);
  return t0 ? Loop::template run<false, 3>(args...) : Loop::template run<false, 0>(args...);
}

// Elements [begin, end) of a run, by whichever of the two loops above fits its operands.
template <class V, class Access, class Op, int N>
NPUEMU_INLINE void lanes(const Op& op, const Run<N>& r, int64_t begin, int64_t end, bool streaming) {
  bool by_offset = hint_written_in(r.hint, r.prefetch);
  for (int k = 1; k < N; ++k) by_offset &= dtype_size(r.dtype[k]) == dtype_size(r.dtype[0]);
  if (!by_offset) return lanes_by_step<V, Access>(op, r, begin, end, streaming);
  with_store_and_hint<OffsetLoop<V, Access>>(streaming, r.hint, r.prefetch, op, r, begin, end);
}

// Whether Op only converts its one input to the output's dtype (vector_io.cpp's Copy): such runs
// between two dtypes get a loop of their own per pair of storage types.
template <class Op, class = void>
struct Converts : std::false_type {};
template <class Op>
struct Converts<Op, std::void_t<decltype(Op::kConverts)>> : std::bool_constant<Op::kConverts> {};

// A conversion run from TIn to TOut, the input dense: both pointers step by their own element, and
// the store kind and the prefetch hint are fixed at compile time. Through ByDtype's loop (a step per
// operand, the dtypes chosen at every load and store) the widening and rounding passes of
// ScaledMaskedSoftmaxBackward's buffered rows (which AVX2 machines took until its dense rows ran on
// every instruction set) made its FLOAT16 rows 1.9x slower than its FLOAT ones: 2x8x1024x1024 with
// NPUEMU_VECTOR_ISA=avx2 on the AMD EPYC, FLOAT16 15.0 -> 6.9 ms on one thread, 8.1 -> 4.3 on two,
// BFLOAT16 15.7 -> 7.7 / 8.5 -> 4.9 (FLOAT 8.0 / 4.5); aclnnCtcLoss's FLOAT16 rows 2% faster.
template <class V, class TOut, class TIn>
struct ConvertLoop {
  template <bool kStream, int kHint, class Op>
  NPUEMU_INLINE static void run(const Op& op, const Run<2>& r, int64_t begin, int64_t end) {
    using F = typename V::F;
    const TIn* in = reinterpret_cast<const TIn*>(r.data[1]) + begin;
    TOut* out = reinterpret_cast<TOut*>(r.data[0]) + begin;
    const Op local = op;
    const int64_t prefetch = r.prefetch;
    for (int64_t j = 0, n = end - begin; j < n; j += V::kWidth) {
      if (V::kWidth > 1 && prefetch > 0) __builtin_prefetch(reinterpret_cast<const char*>(in + j) + prefetch, 0, kHint);
      const F value = simd::load<V>(in + j);
      simd::store<V>(out + j, local.template apply<V>(&value), kStream);
    }
  }
};

template <class V, class TOut, class Op>
NPUEMU_INLINE void convert_to(const Op& op, const Run<2>& r, int64_t begin, int64_t end, bool streaming) {
  switch (r.dtype[1]) {
    case kFloat16:
      return with_store_and_hint<ConvertLoop<V, TOut, _Float16>>(streaming, r.hint, r.prefetch, op, r, begin, end);
    case kBFloat16:
      return with_store_and_hint<ConvertLoop<V, TOut, bfloat16>>(streaming, r.hint, r.prefetch, op, r, begin, end);
    default:
      return with_store_and_hint<ConvertLoop<V, TOut, float>>(streaming, r.hint, r.prefetch, op, r, begin, end);
  }
}

template <class V, class Op, int N>
NPUEMU_INLINE void lanes(const Op& op, const Run<N>& r, int64_t begin, int64_t end, bool streaming) {
  bool uniform = true;
  for (int k = 1; k < N; ++k) uniform &= r.dtype[k] == r.dtype[0];
  if constexpr (N == 2 && Converts<Op>::value) {
    if (!uniform && !r.broadcast[1] && hint_written_in(r.hint, r.prefetch)) {
      switch (r.dtype[0]) {
        case kFloat16: return convert_to<V, _Float16>(op, r, begin, end, streaming);
        case kBFloat16: return convert_to<V, bfloat16>(op, r, begin, end, streaming);
        default: return convert_to<V, float>(op, r, begin, end, streaming);
      }
    }
  }
  // Operands of several dtypes (rare: the first phases promote most mixes) take the loop with a step
  // per input, which chooses each dtype at each load and store.
  if (!uniform) return lanes_by_step<V, ByDtype>(op, r, begin, end, streaming);
  switch (r.dtype[0]) {
    case kFloat16: return lanes<V, AllOf<_Float16>>(op, r, begin, end, streaming);
    case kBFloat16: return lanes<V, AllOf<bfloat16>>(op, r, begin, end, streaming);
    default: return lanes<V, AllOf<float>>(op, r, begin, end, streaming);
  }
}

// Elements [begin, end) of a run, fewer than V::kWidth (its edges): each input's elements copied
// into a vector's worth of local storage in their own dtype (zeros after them, computed and never
// stored), or its repeated element; one vector computed; its first lanes copied out. One loop for
// every dtype, and one vector where the edges were up to 2 (V::kWidth - 1) single lanes, each with
// the loops of the whole vectors: those loops were two thirds of the kernels' machine code and of
// their build time, and rows of 316 elements spent most of their time in their 12 single lanes.
// Every lane is computed alike: same bits. In place is safe: the inputs are copied first.
template <class V, class Op, int N>
NPUEMU_INLINE void edge_vector(const Op& op, const Run<N>& r, int64_t begin, int64_t end) {
  using F = typename V::F;
  alignas(64) char lanes_in[N][V::kWidth * sizeof(float)] = {};
  F values[N - 1];
  for (int k = 1; k < N; ++k) {
    const int64_t size = dtype_size(r.dtype[k]);
    if (r.broadcast[k]) {
      for (int j = 0; j < V::kWidth; ++j) std::memcpy(lanes_in[k] + j * size, r.data[k], size);
    } else {
      std::memcpy(lanes_in[k], r.data[k] + begin * size, (end - begin) * size);
    }
    values[k - 1] = ByDtype::load<V>(r.dtype[k], lanes_in[k]);
  }
  ByDtype::store<V>(r.dtype[0], lanes_in[0], op.template apply<V>(values), false);
  const int64_t out_size = dtype_size(r.dtype[0]);
  std::memcpy(r.data[0] + begin * out_size, lanes_in[0], (end - begin) * out_size);
}

// A whole run: the elements up to the first output address that streaming stores accept, whole
// vectors, then the rest.
template <class V, class Op, int N>
NPUEMU_INLINE void run_lanes(const Op& op, const Run<N>& r) {
  const int64_t out_size = dtype_size(r.dtype[0]);
  const int64_t align = V::kWidth * out_size;
  const auto address = reinterpret_cast<uintptr_t>(r.data[0]);
  const bool streaming = V::kStreams && r.streaming && address % out_size == 0;
  const int64_t head = streaming ? std::min(r.n, static_cast<int64_t>((align - address % align) % align) / out_size) : 0;
  const int64_t body_end = head + (r.n - head) / V::kWidth * V::kWidth;
  if (head > 0) edge_vector<V>(op, r, 0, head);
  lanes<V>(op, r, head, body_end, streaming);
  if (body_end < r.n) edge_vector<V>(op, r, body_end, r.n);
  if (streaming && r.fence) simd::store_fence();
}

template <class Op, int N>
NPUEMU_TARGET_AVX512_BF16 void run_avx512_bf16(const Op& op, const Run<N>& r) { run_lanes<simd::Avx512Bf16>(op, r); }
template <class Op, int N>
NPUEMU_TARGET_AVX512 void run_avx512(const Op& op, const Run<N>& r) { run_lanes<simd::Avx512>(op, r); }
template <class Op, int N>
NPUEMU_TARGET_AVX2 void run_avx2(const Op& op, const Run<N>& r) { run_lanes<simd::Avx2>(op, r); }
// Plain x86-64 (no AVX2: machines from before 2013, or NPUEMU_VECTOR_ISA=baseline): one lane at a
// time, each operand by its dtype, through one loop: the same bits, built once, slower.
template <class Op, int N>
void run_scalar(const Op& op, const Run<N>& r) { lanes_by_step<simd::Scalar, ByDtype>(op, r, 0, r.n, false); }

template <class Op, int N>
void run(const Op& op, const Run<N>& r, simd::Isa isa = simd::isa()) {
  switch (isa) {
    case simd::Isa::kAvx512Bf16: return run_avx512_bf16(op, r);
    case simd::Isa::kAvx512: return run_avx512(op, r);
    case simd::Isa::kAvx2: return run_avx2(op, r);
    default: return run_scalar(op, r);
  }
}

// Strided runs: blocks of every operand gathered into fp32, computed as dense FLOAT runs, the
// result scattered in the output's dtype (after the whole block is read: in place is safe). The
// blocks are in L1: nothing to prefetch.
constexpr int64_t kBlock = 256;

template <class Op, int N>
void run_strided(const Op& op, const std::array<char*, N>& p, const std::array<int, N>& dtype,
                 const std::array<int64_t, N>& stride, int64_t n) {
  alignas(64) float block[N][kBlock];
  Run<N> r{};
  r.prefetch = 0;
  for (int k = 0; k < N; ++k) r.data[k] = reinterpret_cast<char*>(block[k]), r.dtype[k] = kFloat;
  Pacer pacer;  // a strided row can be any length (a broadcast view of a huge shape)
  for (int64_t b = 0; b < n; b += kBlock) {
    pacer(kBlock);
    r.n = std::min(kBlock, n - b);
    for (int k = 1; k < N; ++k) gather_as_float(dtype[k], p[k] + b * stride[k], stride[k], block[k], r.n);
    run(op, r);
    scatter_from_float(dtype[0], block[0], p[0] + b * stride[0], stride[0], r.n);
  }
}

// Calls row(pointers) for rows [begin, end) of the coalesced operands (all dims but the last).
template <int N, class Row>
void for_rows(const Operands<N>& ops, int64_t begin, int64_t end, Row&& row) {
  const int rank = static_cast<int>(ops.shape.size());
  Dims index(rank - 1, 0);
  int64_t remaining = begin;  // unravel the first row's index
  for (int d = rank - 2; d >= 0; --d) {
    index[d] = remaining % ops.shape[d];
    remaining /= ops.shape[d];
  }
  for (int64_t r = begin; r < end; ++r) {
    std::array<char*, N> p = ops.data;
    for (int d = 0; d < rank - 1; ++d)
      for (int k = 0; k < N; ++k) p[k] += index[d] * ops.strides[d][k];
    row(p);
    for (int d = rank - 2; d >= 0; --d) {  // next row
      if (++index[d] < ops.shape[d]) break;
      index[d] = 0;
    }
  }
}

// ---- short rows ----
//
// A row of a few elements is not worth a run of its own: with a weight of shape [C] broadcast to
// (N, C), each row of C elements paid the run's set-up and its edges' one-lane loop
// (aclnnBinaryCrossEntropyWithLogits, (20000, 5) FLOAT with a weight [5], one thread, Intel Xeon:
// 3-4 ms, PyTorch 0.38 ms). Such rows are computed in blocks of whole rows, each block one flat run
// of its elements, every operand read as it best can be:
enum class Flat {
  kDense,     // in place: dense across the rows (its own dtype)
  kRepeated,  // in place: one element everywhere (a broadcast input)
  kTiled,     // its one row repeated to a whole block, once per call (the rows vary only along it)
  kGathered,  // row by row into fp32 (any other layout; the output then is scattered back)
};

constexpr int64_t kShortRow = 256;    // rows shorter than this (elements) go in flat blocks
constexpr int64_t kFlatBlock = 4096;  // elements of a flat block: a thread's fp32 buffers stay in L1/L2

// Operands [0, first_input) are outputs: written in place or scattered.
template <int N>
std::array<Flat, N> flat_kinds(const Operands<N>& ops, int first_input = 1) {
  const int rank = static_cast<int>(ops.shape.size());
  std::array<Flat, N> kinds;
  for (int k = 0; k < N; ++k) {
    bool dense = true, repeated = true, tiled = true;
    int64_t step = ops.itemsize[k];  // the stride of a dense layout along dim d
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t stride = ops.strides[d][k];
      dense &= stride == step;
      repeated &= stride == 0;
      if (d < rank - 1) tiled &= stride == 0;
      step *= ops.shape[d];
    }
    const bool input = k >= first_input;
    kinds[k] = dense ? Flat::kDense : input && repeated ? Flat::kRepeated : input && tiled ? Flat::kTiled : Flat::kGathered;
  }
  return kinds;
}

// Operand k's one row (a Flat::kTiled input) repeated to `elements` elements (at least a row), in
// its own dtype: element i is the row's element i % inner, whatever i a block starts at.
template <int N>
std::vector<char> row_tile(const Operands<N>& ops, int k, int64_t elements) {
  const int rank = static_cast<int>(ops.shape.size());
  const int64_t inner = ops.shape[rank - 1], size = ops.itemsize[k], step = ops.strides[rank - 1][k];
  std::vector<char> tile(elements * size);
  for (int64_t i = 0; i < inner; ++i) std::memcpy(tile.data() + i * size, ops.data[k] + i * step, size);
  const int64_t total = static_cast<int64_t>(tile.size());
  for (int64_t filled = inner * size; filled < total; filled *= 2)  // each copy doubles what is there
    std::memcpy(tile.data() + filled, tile.data(), std::min(filled, total - filled));
  return tile;
}

// Each Flat::kGathered operand k >= first: its elements [begin, begin + n), in row-major order of the
// coalesced shape, converted to fp32 at dst[k] (row by row; the range may start and end within rows).
// (N comes from `ops` alone: std::array's size is a size_t.)
template <int N>
void gather_rows(const Operands<N>& ops, const std::common_type_t<std::array<Flat, N>>& kinds, int first,
                 int64_t begin, int64_t n, const std::common_type_t<std::array<float*, N>>& dst) {
  const int rank = static_cast<int>(ops.shape.size());
  const int64_t inner = ops.shape[rank - 1];
  Dims index(rank, 0);
  for (int64_t rest = begin, d = rank - 1; d >= 0; --d) {
    index[d] = rest % ops.shape[d];
    rest /= ops.shape[d];
  }
  for (int64_t done = 0; done < n;) {
    const int64_t count = std::min(inner - index[rank - 1], n - done);
    for (int k = first; k < N; ++k) {
      if (kinds[k] != Flat::kGathered) continue;
      const char* p = ops.data[k];
      for (int d = 0; d < rank; ++d) p += index[d] * ops.strides[d][k];
      gather_as_float(ops.dtype[k], p, ops.strides[rank - 1][k], dst[k] + done, count);
    }
    done += count;
    index[rank - 1] = 0;
    for (int d = rank - 2; d >= 0; --d) {  // the next row
      if (++index[d] < ops.shape[d]) break;
      index[d] = 0;
    }
  }
}

template <int N>
struct FlatBlock {
  alignas(64) float values[N][kFlatBlock];
};

// out = op(inputs...) over coalesced operands whose rows (the last dim) are shorter than kShortRow;
// `base` carries the dtypes and the memory plan's settings.
template <class Op, int N>
void run_short_rows(const Op& op, const Operands<N>& ops, const Run<N>& base, int64_t participants) {
  const int rank = static_cast<int>(ops.shape.size());
  const int64_t inner = ops.shape[rank - 1];
  int64_t rows = 1;
  for (int d = 0; d < rank - 1; ++d) rows *= ops.shape[d];
  const int64_t block_rows = kFlatBlock / inner, blocks = (rows + block_rows - 1) / block_rows;
  const std::array<Flat, N> kinds = flat_kinds(ops);
  const auto& inner_strides = ops.strides[rank - 1];
  // Every tiled input's row repeated to a whole block (every block starts a row), in its own dtype:
  // with the other operands', the loop of one storage type reads it.
  std::array<std::vector<char>, N> tiles;
  bool gathers = false;
  for (int k = 1; k < N; ++k) {
    if (kinds[k] == Flat::kTiled) tiles[k] = row_tile(ops, k, block_rows * inner);
    gathers |= kinds[k] == Flat::kGathered;
  }
  const bool streaming = base.streaming && kinds[0] == Flat::kDense;
  share_block_runs(blocks, participants, [&](const auto& take) {
    float(*buffer)[kFlatBlock] = thread_scratch<FlatBlock<N>>().values;
    std::array<float*, N> buffers;
    for (int k = 0; k < N; ++k) buffers[k] = buffer[k];
    for (RunBlock taken = take(); taken.index >= 0; taken = take()) {
      const int64_t first = taken.index * block_rows, count = std::min(block_rows, rows - first);
      Run<N> r = base;
      r.n = count * inner;
      r.streaming = streaming;
      r.fence = false;  // once, after the thread's last block
      for (int k = 0; k < N; ++k) {
        r.broadcast[k] = kinds[k] == Flat::kRepeated;
        switch (kinds[k]) {
          case Flat::kDense: r.data[k] = ops.data[k] + first * inner * ops.itemsize[k]; break;
          case Flat::kRepeated: r.data[k] = ops.data[k]; break;
          case Flat::kTiled: r.data[k] = tiles[k].data(); break;
          case Flat::kGathered: r.data[k] = reinterpret_cast<char*>(buffer[k]), r.dtype[k] = kFloat; break;
        }
      }
      if (gathers) gather_rows(ops, kinds, 1, first * inner, r.n, buffers);
      run(op, r);  // every gathered input is read before the output is written: in place is safe
      if (kinds[0] == Flat::kGathered) {
        int64_t row = 0;
        for_rows(ops, first, first + count, [&](const std::array<char*, N>& p) {
          scatter_from_float(ops.dtype[0], buffer[0] + row++ * inner, p[0], inner_strides[0], inner);
        });
      }
    }
    if (streaming) simd::store_fence();
  });
}

}  // namespace elementwise_detail

// out = op(inputs...) over n dense elements of every operand (output first), each in its dtype.
// Streaming stores are fenced before it returns unless `fence` is false: then the caller calls
// store_fence() before its work ends (a fence waits for every streamed line to reach memory: once
// per chunk of a row, it made such loops wait for memory at every chunk).
template <class Op>
void run_dense(const Op& op, const std::array<void*, Op::kInputs + 1>& data,
               const std::array<int, Op::kInputs + 1>& dtype, int64_t n, bool streaming, bool fence = true) {
  const MemoryPlan plan = memory_plan();
  elementwise_detail::Run<Op::kInputs + 1> r{{}, dtype, {}, n, streaming, plan.prefetch_for(Op::kInputs), plan.hint,
                                             fence};
  for (int k = 0; k <= Op::kInputs; ++k) r.data[k] = static_cast<char*>(data[k]);
  elementwise_detail::run(op, r);
}

// The engine computes FLOAT, FLOAT16 and BFLOAT16 operands; anything else is a caller's bug.
inline void require_float_dtypes(const char* op_name, const TensorArgs& args) {
  for (const TensorArg* t : args) dispatch_storage(op_name, t->dtype, [](auto) {});
}

// The operands must be views of the iteration shape (the first phase broadcasts them to it);
// anything else is a caller's bug.
inline void require_views_of(const char* op_name, const Dims& shape,
                             const TensorArgs& args) {
  for (const TensorArg* t : args)
    if (t->shape != shape) throw ContractError(std::string(op_name) + ": expected every operand viewed with the output's shape");
}

constexpr int64_t kGrain = 1 << 14;  // elements per thread at least: below that threads cost more than they save
constexpr int64_t kLongRun = 1 << 16;  // elements of a dense row computed between two checkpoints (a multiple of every vector width)

// Elements handed to a thread at a time: about four blocks per thread, so that the threads finish
// together (LogSigmoid, 1e5 fp32 elements, 2 threads: blocks of 2^15 made three whole blocks and a
// sliver, one thread computed two whole ones, 19-21 us; eight blocks take 14.4 us), between 2^13
// elements (smaller ones cost more to hand out than they save) and the memory plan's block.
inline int64_t block_elements(int64_t total, int64_t participants, int64_t most) {
  constexpr int64_t kBlocksPerThread = 4, kFewest = 1 << 13;
  const int64_t even = (total + participants * kBlocksPerThread - 1) / (participants * kBlocksPerThread);
  return std::min(most, std::max(std::min(kFewest, most), even));
}

// out = op(inputs...) over `shape`; args = output then Op::kInputs inputs, views of `shape`.
template <class Op>
void run_elementwise(const Op& op, const std::array<const TensorArg*, Op::kInputs + 1>& args,
                     const Dims& shape) {
  using namespace elementwise_detail;
  constexpr int N = Op::kInputs + 1;
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  if (total == 0) return;
  const Operands<N> ops = coalesce<N>(args, shape);
  const MemoryPlan plan = memory_plan();
  const bool streaming = plan.streams(total * ops.itemsize[0]);
  const int rank = static_cast<int>(ops.shape.size());
  const int64_t inner = ops.shape[rank - 1];
  const auto& inner_strides = ops.strides[rank - 1];
  bool lanes_ok = inner_strides[0] == ops.itemsize[0];  // the output dense, every input dense or broadcast
  Run<N> run_template{ops.data, ops.dtype, {}, 0, streaming, plan.prefetch_for(Op::kInputs), plan.hint};
  for (int k = 1; k < N; ++k) {
    run_template.broadcast[k] = inner_strides[k] == 0;
    lanes_ok &= inner_strides[k] == ops.itemsize[k] || inner_strides[k] == 0;
  }

  // Blocks of about block_size elements, rows kept whole, handed out to the threads as they come.
  const int64_t participants = std::min<int64_t>(threads(), (total + kGrain - 1) / kGrain);
  if (rank > 1 && inner < kShortRow) return run_short_rows(op, ops, run_template, participants);
  const int64_t block_size = block_elements(total, participants, plan.block);
  const int64_t rows = total / inner;
  const int64_t block_rows = std::max<int64_t>(1, block_size / inner);
  const int64_t run_blocks = rank == 1 && lanes_ok ? (inner + block_size - 1) / block_size : 0;
  const int64_t blocks = run_blocks ? run_blocks : (rows + block_rows - 1) / block_rows;
  share_block_runs(blocks, participants, [&](const auto& take) {
    for (RunBlock taken = take(); taken.index >= 0; taken = take()) {
      const int64_t block = taken.index;
      if (run_blocks) {  // one dense run, cut in blocks
        Run<N> r = run_template;
        const int64_t begin = block * block_size;
        for (int k = 0; k < N; ++k) r.data[k] += begin * inner_strides[k];
        r.n = std::min(block_size, inner - begin);
        run(op, r);
      } else {
        for_rows(ops, block * block_rows, std::min(rows, (block + 1) * block_rows), [&](const std::array<char*, N>& p) {
          if (lanes_ok) {  // a row too long to go without a checkpoint goes in pieces of kLongRun
            for (int64_t begin = 0; begin < inner; begin += kLongRun) {
              if (begin > 0) checkpoint();
              Run<N> r = run_template;
              for (int k = 0; k < N; ++k) r.data[k] = p[k] + begin * inner_strides[k];
              r.n = std::min(kLongRun, inner - begin);
              run(op, r);
            }
          } else {
            run_strided<Op, N>(op, p, ops.dtype, inner_strides, inner);
          }
        });
      }
    }
  });
}

}  // namespace npuemu
