// aclnnBinaryCrossEntropyWithLogits (docs/ops/binary_cross_entropy_with_logits.md), per element in fp32:
//   ls   = min(x, 0) − log1p(e^−|x|)                  (log σ(x), never overflows)
//   loss = w · [(1 − t)·x − (1 + (p − 1)·t)·ls]
// with x = self, t = target, w = weight, p = posWeight (absent: no multiply, factor 1). Then:
// reduction none writes loss into out (self's shape) through the element-wise engine
// (common/elementwise.h); mean and sum add the losses in fp32 and write one element.
//
// The sum's order is fixed by the element count alone, never by the threads or the instruction
// set: the losses, in row-major order of self's shape, are cut into blocks of kSumBlock; each block
// is added by halving (pairwise_sum), its sum kept in the workspace; the block sums are then added
// the same way. The result (divided by numel for mean) is rounded once into out's dtype.
//
// weight and posWeight arrive with their own shapes and are broadcast to self's here. One whose
// dtype the compute dtype cannot represent exactly (the first phase decides: e.g. FLOAT with a
// FLOAT16 compute dtype, or any integer, bool or DOUBLE) is first cast into the workspace, as the
// library casts it before its kernel: read as fp32 (rounded to nearest-even once), then rounded
// to the compute dtype.
//
// A second entry point, binary_cross_entropy_with_logits_fill, writes one value into every element
// of out: what mean (NaN) and sum (0) give for an empty self.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/dispatch.h"
#include "common/elementwise.h"
#include "common/registry.h"
#include "common/thread_scratch.h"
#include "common/vector_io.h"
#include "common/vmath.h"

namespace py = pybind11;

namespace npuemu {
namespace {

constexpr const char* kName = "aclnnBinaryCrossEntropyWithLogits";
constexpr int64_t kSumBlock = 1 << 12;        // losses per block sum (fixes the order of the additions)
constexpr int64_t kBlocksPerTask = 16;        // block sums computed per block taken by a thread
constexpr int64_t kCastRun = 1 << 14;         // elements cast between two checkpoints
constexpr int kNone = 0, kMean = 1;

// Inputs: self, target, then weight and posWeight when present. The operations in the formula's
// order, one fp32 rounding each (no fused multiply-add outside exp and log1p).
template <bool kWeight, bool kPosWeight>
struct BceWithLogits {
  static constexpr int kInputs = 2 + kWeight + kPosWeight;

  template <class V>
  NPUEMU_INLINE typename V::F apply(const typename V::F* in) const {
    using F = typename V::F;
    const F x = in[0], t = in[1];
    const F z = simd::exp_nonpositive<V>(V::from_bits(V::bits(x) | 0x80000000u));  // e^-|x|
    const F log_sigmoid = V::min(x, V::splat(0.0f)) - simd::log1p_unit<V>(z);
    F weighted = log_sigmoid;
    if (kPosWeight) weighted = (1.0f + (in[2 + kWeight] - 1.0f) * t) * log_sigmoid;
    const F loss = (1.0f - t) * x - weighted;
    return kWeight ? in[2] * loss : loss;
  }
};

// `t` read as a tensor of `shape`: right-aligned, stride 0 along the dims it broadcasts.
TensorArg broadcast_to(const TensorArg& t, const Dims& shape) {
  const size_t rank = shape.size(), lead = rank - t.shape.size();
  if (t.shape.size() > rank) throw ContractError(std::string(kName) + ": a weight has more dims than self");
  TensorArg result = t;
  result.shape = shape;
  result.strides = Dims(rank, 0);
  for (size_t d = lead; d < rank; ++d) {
    const int64_t dim = t.shape[d - lead];
    if (dim != shape[d] && dim != 1) throw ContractError(std::string(kName) + ": a weight does not broadcast to self");
    result.strides[d] = dim == shape[d] ? t.strides[d - lead] : 0;
  }
  return result;
}

// ---- the cast of a weight into the workspace ----

template <class T>
NPUEMU_INLINE float element_as_float(const char* p) {
  if constexpr (std::is_same_v<T, bool>) {
    return *reinterpret_cast<const uint8_t*>(p) != 0 ? 1.0f : 0.0f;  // any nonzero byte is true
  } else if constexpr (std::is_same_v<T, _Float16> || std::is_same_v<T, bfloat16>) {
    return to_float(*reinterpret_cast<const T*>(p));
  } else {
    return static_cast<float>(*reinterpret_cast<const T*>(p));  // one rounding to nearest-even
  }
}

template <class F>
void dispatch_source(int dtype, F&& f) {
  switch (dtype) {
    case kBool: return f(Type<bool>{});
    case kInt8: return f(Type<int8_t>{});
    case kUInt8: return f(Type<uint8_t>{});
    case kInt16: return f(Type<int16_t>{});
    case kInt32: return f(Type<int32_t>{});
    case kInt64: return f(Type<int64_t>{});
    case kDouble: return f(Type<double>{});
    default: return dispatch_storage(kName, dtype, f);
  }
}

// dst (contiguous, of src's shape, in `dtype`) = src converted, element by element in row-major
// order; rows are shared out among the threads.
void cast_into(const TensorArg& src, int dtype, char* dst) {
  const int64_t total = src.numel();
  if (total == 0) return;
  const int rank = static_cast<int>(src.shape.size());
  const int64_t inner = rank ? src.shape[rank - 1] : 1, inner_stride = rank ? src.strides[rank - 1] : 0;
  const int64_t rows = total / inner, rows_per_block = std::max<int64_t>(1, kCastRun / inner);
  const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  const int64_t participants = std::min<int64_t>(threads(), (total + kGrain - 1) / kGrain);
  const int64_t size = src.itemsize();
  dispatch_source(src.dtype, [&](auto source) {
    using S = typename decltype(source)::type;
    dispatch_storage(kName, dtype, [&](auto target) {
      using T = typename decltype(target)::type;
      share_blocks(blocks, participants, [&](const auto& take) {
        for (int64_t block = take(); block >= 0; block = take()) {
          for (int64_t row = block * rows_per_block; row < std::min(rows, (block + 1) * rows_per_block); ++row) {
            const char* p = src.data;  // the row's start: its index unravelled over the outer dims
            for (int64_t d = rank - 2, index = row; d >= 0; --d) {
              p += (index % src.shape[d]) * src.strides[d] * size;
              index /= src.shape[d];
            }
            T* out = reinterpret_cast<T*>(dst) + row * inner;
            for (int64_t i = 0; i < inner; ++i) {
              if (i > 0 && i % kCastRun == 0) checkpoint();  // a row longer than a block
              out[i] = from_float<T>(element_as_float<S>(p + i * inner_stride * size));
            }
          }
        }
      });
    });
  });
}

// ---- the sum ----

// The sum of a[0..n) (overwritten), by halving: a[i] += a[i + ceil(n/2)] while more than one is
// left. The order depends on n alone; the loop has no dependence between its additions.
float pairwise_sum(float* a, int64_t n, Pacer& pacer) {
  if (n == 0) return 0.0f;
  while (n > 1) {
    const int64_t half = (n + 1) / 2;
    for (int64_t i = 0; i < n / 2; ++i) a[i] = a[i] + a[i + half];
    pacer(n / 2);
    n = half;
  }
  return a[0];
}

// How the sum reads its inputs: each by its kind (elementwise.h's Flat), an input that only varies
// along the rows from its one row repeated to a block and a row more (`tiles`, in its own dtype).
// Row by row, rows of a few elements cost more than their losses (self (20000, 5) with a weight
// [5], reduction mean, one thread, Intel Xeon: 4.2 ms, PyTorch 0.63 ms).
template <int M>
struct SumInputs {
  elementwise_detail::Operands<M> ops;
  std::array<elementwise_detail::Flat, M> kinds;
  std::array<std::vector<char>, M> tiles;
  std::array<float, M> repeated;  // the one element of a kRepeated input
};

template <int M>
SumInputs<M> sum_inputs(const std::array<const TensorArg*, M>& inputs, const Dims& shape) {
  using elementwise_detail::Flat;
  SumInputs<M> in{elementwise_detail::coalesce<M>(inputs, shape)};
  in.kinds = elementwise_detail::flat_kinds(in.ops, 0);
  const int64_t inner = in.ops.shape.back();
  for (int k = 0; k < M; ++k) {
    if (in.kinds[k] == Flat::kRepeated) gather_as_float(in.ops.dtype[k], in.ops.data[k], 0, &in.repeated[k], 1);
    if (in.kinds[k] == Flat::kTiled) in.tiles[k] = elementwise_detail::row_tile(in.ops, k, kSumBlock + inner);
  }
  return in;
}

// The inputs' fp32 values of the elements [begin, begin + n) in row-major order of the coalesced shape.
template <int M>
void gather_range(const SumInputs<M>& in, int64_t begin, int64_t n, float (*dst)[kSumBlock]) {
  using elementwise_detail::Flat;
  const auto& ops = in.ops;
  bool gathers = false;
  for (int k = 0; k < M; ++k) {
    const int64_t size = ops.itemsize[k];
    switch (in.kinds[k]) {
      case Flat::kDense: load_as_float(ops.dtype[k], ops.data[k] + begin * size, dst[k], n); break;
      case Flat::kRepeated: std::fill(dst[k], dst[k] + n, in.repeated[k]); break;
      case Flat::kTiled: load_as_float(ops.dtype[k], in.tiles[k].data() + begin % ops.shape.back() * size, dst[k], n); break;
      case Flat::kGathered: gathers = true; break;
    }
  }
  if (!gathers) return;
  std::array<float*, M> rows;
  for (int k = 0; k < M; ++k) rows[k] = dst[k];
  elementwise_detail::gather_rows(ops, in.kinds, 0, begin, n, rows);
}

// A thread's inputs and losses of one block (80 KiB with four inputs: thread_scratch, not its stack).
template <int M>
struct SumBlockScratch {
  alignas(64) float in[M][kSumBlock];
  alignas(64) float loss[kSumBlock];
};

// partials[b] = the sum of the losses of block b, for every block; returns the sum of them all.
template <class Op>
float sum_losses(const Op& op, const std::array<const TensorArg*, Op::kInputs>& inputs, const Dims& shape,
                 float* partials, int64_t block_count) {
  using namespace elementwise_detail;
  constexpr int M = Op::kInputs;
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  const SumInputs<M> reads = sum_inputs<M>(inputs, shape);
  const int64_t tasks = (block_count + kBlocksPerTask - 1) / kBlocksPerTask;
  const int64_t participants = std::min<int64_t>(threads(), (total + kGrain - 1) / kGrain);
  share_blocks(tasks, participants, [&](const auto& take) {
    SumBlockScratch<M>& scratch = thread_scratch<SumBlockScratch<M>>();
    float(*in)[kSumBlock] = scratch.in;
    float* loss = scratch.loss;
    std::array<void*, M + 1> data;
    std::array<int, M + 1> dtype;
    data[0] = loss;
    dtype.fill(kFloat);
    for (int k = 0; k < M; ++k) data[k + 1] = in[k];
    Pacer pacer;
    for (int64_t task = take(); task >= 0; task = take()) {
      for (int64_t b = task * kBlocksPerTask; b < std::min(block_count, (task + 1) * kBlocksPerTask); ++b) {
        const int64_t begin = b * kSumBlock, n = std::min(kSumBlock, total - begin);
        gather_range<M>(reads, begin, n, in);
        run_dense(op, data, dtype, n, false);
        partials[b] = pairwise_sum(loss, n, pacer);
      }
    }
  });
  Pacer pacer;
  return pairwise_sum(partials, block_count, pacer);
}

// ---- the entry points ----

struct Problem {
  const TensorArg& out;
  std::array<TensorArg, 4> inputs;  // self, target, then the weights present, all of self's shape
  int count;
  int reduction;
  float* partials;
  int64_t block_count;
};

template <bool kWeight, bool kPosWeight>
void compute(const Problem& p) {
  using Op = BceWithLogits<kWeight, kPosWeight>;
  const Dims& shape = p.inputs[0].shape;
  if (p.reduction == kNone) {
    std::array<const TensorArg*, Op::kInputs + 1> args;
    args[0] = &p.out;
    for (int k = 0; k < Op::kInputs; ++k) args[k + 1] = &p.inputs[k];
    run_elementwise(Op{}, args, shape);
    return;
  }
  std::array<const TensorArg*, Op::kInputs> inputs;
  for (int k = 0; k < Op::kInputs; ++k) inputs[k] = &p.inputs[k];
  const float sum = sum_losses(Op{}, inputs, shape, p.partials, p.block_count);
  const int64_t numel = p.inputs[0].numel();
  const float result = p.reduction == kMean ? static_cast<float>(static_cast<double>(sum) / numel) : sum;
  dispatch_storage(kName, p.out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    *reinterpret_cast<T*>(p.out.data) = from_float<T>(result);
  });
}

// The weight as the kernel reads it: itself, or its cast copy in the workspace; broadcast to self.
TensorArg weight_operand(const TensorArg& w, std::optional<uintptr_t> cast, int compute_dtype, const Dims& shape) {
  if (!cast) return broadcast_to(w, shape);
  char* copy = reinterpret_cast<char*>(*cast);
  cast_into(w, compute_dtype, copy);
  TensorArg dense = w;
  dense.data = copy;
  dense.dtype = compute_dtype;
  int64_t step = 1;
  for (int d = static_cast<int>(w.shape.size()) - 1; d >= 0; --d) {
    dense.strides[d] = step;
    step *= w.shape[d];
  }
  return broadcast_to(dense, shape);
}

void binary_cross_entropy_with_logits(const TensorArg& out, const TensorArg& x, const TensorArg& t,
                                      const std::optional<TensorArg>& w, const std::optional<TensorArg>& p,
                                      int compute_dtype, int reduction, std::optional<uintptr_t> w_cast,
                                      std::optional<uintptr_t> p_cast, std::optional<uintptr_t> partials,
                                      int64_t block_count) {
  TensorArgs operands = {&out, &x, &t};
  require_float_dtypes(kName, operands);
  require_views_of(kName, x.shape, {&t});
  dispatch_storage(kName, compute_dtype, [](auto) {});
  if (reduction == kNone) {
    require_views_of(kName, x.shape, {&out});
  } else if (out.numel() != 1 || !partials || block_count != (x.numel() + kSumBlock - 1) / kSumBlock) {
    throw ContractError(std::string(kName) + ": expected one output element and a block sum per " +
                        std::to_string(kSumBlock) + " elements for mean and sum");
  }
  if (w && !w_cast) dispatch_storage(kName, w->dtype, [](auto) {});  // read as it is: a storage dtype
  if (p && !p_cast) dispatch_storage(kName, p->dtype, [](auto) {});
  Problem problem{out, {x, t}, 2, reduction, partials ? reinterpret_cast<float*>(*partials) : nullptr, block_count};
  KernelCall(kName).run([&] {
    if (w) problem.inputs[problem.count++] = weight_operand(*w, w_cast, compute_dtype, x.shape);
    if (p) problem.inputs[problem.count++] = weight_operand(*p, p_cast, compute_dtype, x.shape);
    if (w && p) compute<true, true>(problem);
    else if (w) compute<true, false>(problem);
    else if (p) compute<false, true>(problem);
    else compute<false, false>(problem);
  });
}

// Every element of out = value (rounded to out's dtype), whatever its layout.
void binary_cross_entropy_with_logits_fill(const TensorArg& out, double value) {
  require_float_dtypes(kName, {&out});
  KernelCall(kName).run([&] {
    dispatch_storage(kName, out.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T item = from_float<T>(static_cast<float>(value));
      const int rank = static_cast<int>(out.shape.size());
      Dims index(rank, 0);
      Pacer pacer;
      for (int64_t i = 0, total = out.numel(); i < total; ++i) {
        char* q = out.data;
        for (int d = 0; d < rank; ++d) q += index[d] * out.strides[d] * out.itemsize();
        *reinterpret_cast<T*>(q) = item;
        for (int d = rank - 1; d >= 0; --d) {
          if (++index[d] < out.shape[d]) break;
          index[d] = 0;
        }
        pacer();
      }
    });
  });
}

void bind(py::module_& m) {
  m.def("binary_cross_entropy_with_logits", &binary_cross_entropy_with_logits,
        "loss = w*((1 - t)*x - (1 + (p - 1)*t)*log_sigmoid(x)); none, or mean/sum in a fixed order");
  m.def("binary_cross_entropy_with_logits_fill", &binary_cross_entropy_with_logits_fill,
        "every element of out = value (mean and sum of an empty self)");
  m.attr("BCE_WITH_LOGITS_SUM_BLOCK") = kSumBlock;
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
