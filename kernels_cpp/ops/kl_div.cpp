// aclnnKlDiv (docs/ops/kl_div.md). Over the broadcast shape B (self and target arrive as views of
// shape B), per element
//   L = target * (log(target) - self), with log(1) in place of log(0) where target == 0
//       (so L = 0 there; a negative target gives NaN from the log)          (logTarget false)
//   L = exp(target) * (target - self)                                        (logTarget true)
// computed in fp32 whatever the storage dtypes, each operand read in its own dtype.
//
// kl_div (reduction none): L on the element-wise engine, rounded to the compute dtype
// promote(self, target) and then stored in out's dtype.
//
// kl_div_reduce (sum, mean, batchmean): the sum of L over B in fp32, in an order that depends on
// numel(B) alone (never on the thread count, the instruction set or the layouts): B's elements in
// row-major order are cut into chunks of kChunk; a chunk's L are summed by 16 accumulators (the
// i-th takes the elements i, i + 16, ... in order), which are then added pairwise; the chunk sums
// are added pairwise (PairwiseSum: a fixed binary tree). Threads share whole groups of chunks, a
// power of two of them, each group a node of that tree. The sum is
// divided by the host's divisor (1, numel(B) or B[0]) in double, then rounded to fp32, to the
// compute dtype, and stored in out's one element.
//
// kl_div_fill: out, whatever its shape, set to one value (an empty self or target: NaN or 0).
#include <pybind11/pybind11.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "common/dispatch.h"
#include "common/elementwise.h"
#include "common/registry.h"
#include "common/thread_scratch.h"
#include "common/vmath.h"

namespace py = pybind11;

namespace npuemu {
namespace {

constexpr const char* kName = "aclnnKlDiv";

// Where the result is rounded to the compute dtype before out's dtype: only when the two differ
// and the compute dtype is a 16-bit one (an fp32 result needs no extra step).
enum Rounding { kAsIs, kToHalf, kToBFloat16 };

Rounding rounding(int compute_dtype, int out_dtype) {
  if (compute_dtype == out_dtype || compute_dtype == kFloat) return kAsIs;
  return compute_dtype == kFloat16 ? kToHalf : kToBFloat16;
}

template <class V, int R>
NPUEMU_INLINE typename V::F round_to_compute(typename V::F v) {
  if constexpr (R == kToHalf) return V::widen_half(V::narrow_half(v));
  else if constexpr (R == kToBFloat16) return V::widen_bfloat16(V::narrow_bfloat16(v));
  else return v;
}

// Inputs: self, target.
template <bool LogTarget, int R>
struct KlDivLoss {
  static constexpr int kInputs = 2;

  template <class V>
  NPUEMU_INLINE typename V::F apply(const typename V::F* in) const {
    using F = typename V::F;
    const F x = in[0], t = in[1];
    F loss;
    if constexpr (LogTarget) {
      loss = simd::exp<V>(t) * (t - x);
    } else {
      const F log_t = simd::log<V>(t == 0.0f ? V::splat(1.0f) : t);  // -0.0 too
      loss = t * (log_t - x);
    }
    return round_to_compute<V, R>(loss);
  }
};

// ---- reduction none ----

template <bool LogTarget>
void loss_elementwise(const TensorArg& out, const TensorArg& self, const TensorArg& target, Rounding r) {
  switch (r) {
    case kToHalf: return run_elementwise(KlDivLoss<LogTarget, kToHalf>{}, {&out, &self, &target}, out.shape);
    case kToBFloat16: return run_elementwise(KlDivLoss<LogTarget, kToBFloat16>{}, {&out, &self, &target}, out.shape);
    default: return run_elementwise(KlDivLoss<LogTarget, kAsIs>{}, {&out, &self, &target}, out.shape);
  }
}

// ---- reductions ----

constexpr int64_t kChunk = 4096;         // elements of B whose L one partial sum holds
constexpr int kAccumulators = 16;        // of a chunk's sum
constexpr int64_t kMostGroups = 1 << 16;  // group sums kept at once (a few hundred KiB at most)

// The sum of n values: accumulator i takes values i, i + 16, i + 32, ... in order; then
// accumulators i and i + 8, i and i + 4, i and i + 2, 0 and 1 are added. The compiler may use
// vector instructions for the 16 sums; each still adds its values in the same order.
NPUEMU_VECTORIZED float chunk_sum(const float* values, int64_t n) {
  float acc[kAccumulators] = {};
  int64_t j = 0;
  for (; j + kAccumulators <= n; j += kAccumulators)
    for (int i = 0; i < kAccumulators; ++i) acc[i] += values[j + i];
  for (int i = 0; j + i < n; ++i) acc[i] += values[j + i];
  for (int width = kAccumulators / 2; width > 0; width /= 2)
    for (int i = 0; i < width; ++i) acc[i] += acc[i + width];
  return acc[0];
}

// Sums of consecutive values added pairwise as they come, the first half of each pair being the
// largest power of two below its length: a binary counter whose stack holds the sums of runs of
// 2^k values, two equal runs added (earlier + later) as soon as they are complete, the rest added
// from the last at the end. No more memory than 64 sums, however many values; and a run of 2^k
// values starting at a multiple of 2^k (a whole group of chunks) is one node of the tree.
class PairwiseSum {
 public:
  void add(float value) {
    stack_[depth_++] = value;
    for (int64_t n = ++count_; (n & 1) == 0; n >>= 1) {
      stack_[depth_ - 2] += stack_[depth_ - 1];
      --depth_;
    }
  }
  float total() const {
    if (depth_ == 0) return 0.0f;
    float sum = stack_[depth_ - 1];
    for (int d = depth_ - 2; d >= 0; --d) sum = stack_[d] + sum;
    return sum;
  }

 private:
  float stack_[64];
  int depth_ = 0;
  int64_t count_ = 0;
};

// self and target over B, their dims coalesced where both step evenly (the first operand is a
// dense fp32 stand-in for B itself, so that coalescing keeps B's row-major order).
// A chunk reads each of them by its kind (elementwise.h's Flat): in place, its one element, from a
// tile of its one row repeated (in its own dtype, a chunk and a row long, made once), or gathered
// row by row. Chunk by chunk rather than row by row: rows of a few elements cost more than their
// losses (self (20000, 5) with a target [5], reduction mean, one thread, Intel Xeon: 2.9-3.1 ms,
// PyTorch 0.46 ms).
struct Walk {
  elementwise_detail::Operands<3> ops;
  std::array<elementwise_detail::Flat, 3> kinds;
  std::array<std::vector<char>, 3> tiles;
  int rank = 0;
  int64_t inner = 0;
  int64_t prefetch = 0;  // the memory plan's, as for the element-wise engine's runs
  int hint = 0;
};

Walk walk_of(const TensorArg& self, const TensorArg& target) {
  TensorArg dense;
  dense.dtype = kFloat;
  dense.shape = self.shape;
  dense.strides.resize(self.shape.size(), 1);
  for (int d = static_cast<int>(self.shape.size()) - 2; d >= 0; --d)
    dense.strides[d] = dense.strides[d + 1] * std::max<int64_t>(1, self.shape[d + 1]);
  Walk w;
  w.ops = elementwise_detail::coalesce<3>({&dense, &self, &target}, self.shape);
  w.rank = static_cast<int>(w.ops.shape.size());
  w.inner = w.ops.shape[w.rank - 1];
  const MemoryPlan plan = memory_plan();  // inputs read in place are prefetched ahead of the loads
  w.prefetch = plan.prefetch_for(2);  // self and target
  w.hint = plan.hint;
  w.kinds = elementwise_detail::flat_kinds(w.ops);
  for (int k = 1; k < 3; ++k)  // a chunk and a row long: any chunk, from wherever in a row it starts
    if (w.kinds[k] == elementwise_detail::Flat::kTiled) w.tiles[k] = elementwise_detail::row_tile(w.ops, k, kChunk + w.inner);
  return w;
}

// A thread's strided inputs of a chunk gathered into fp32, and its chunk of L: 48 KiB together, in
// thread_scratch, not on its stack.
struct GatheredChunk {
  alignas(64) float inputs[2][kChunk];
};
struct LossChunk {
  alignas(64) float loss[kChunk];
};

// L of B's elements [begin, begin + n) (row-major), into `loss`, with the engine's arithmetic: one run.
template <class Op>
void chunk_loss(const Op& op, const Walk& w, int64_t begin, int64_t n, float* loss) {
  using namespace elementwise_detail;
  Run<3> r{};
  r.data[0] = reinterpret_cast<char*>(loss);
  r.dtype[0] = kFloat;
  r.n = n;
  r.prefetch = w.prefetch;  // the loss block is in L1; a gathered input too, prefetched for nothing
  r.hint = w.hint;
  bool gathers = false;
  for (int k = 1; k < 3; ++k) {
    r.dtype[k] = w.ops.dtype[k];
    switch (w.kinds[k]) {
      case Flat::kDense: r.data[k] = w.ops.data[k] + begin * w.ops.itemsize[k]; break;
      case Flat::kRepeated: r.data[k] = w.ops.data[k], r.broadcast[k] = true; break;
      case Flat::kTiled: r.data[k] = const_cast<char*>(w.tiles[k].data()) + begin % w.inner * w.ops.itemsize[k]; break;
      case Flat::kGathered:
        r.data[k] = reinterpret_cast<char*>(thread_scratch<GatheredChunk>().inputs[k - 1]), r.dtype[k] = kFloat;
        gathers = true;
        break;
    }
  }
  if (gathers) {
    std::array<float*, 3> dst;
    for (int k = 0; k < 3; ++k) dst[k] = reinterpret_cast<float*>(r.data[k]);
    gather_rows(w.ops, w.kinds, 1, begin, n, dst);
  }
  run(op, r);
}

template <class Op>
float sum_of_loss(const Op& op, const TensorArg& self, const TensorArg& target) {
  const Walk w = walk_of(self, target);
  const int64_t total = self.numel();
  const int64_t chunks = (total + kChunk - 1) / kChunk;
  int64_t group = 1;  // chunks per group: a power of two that depends on numel(B) alone
  while ((chunks + group - 1) / group > kMostGroups) group *= 2;
  const int64_t groups = (chunks + group - 1) / group;
  std::vector<float> group_sums(groups);
  const int64_t participants = std::min<int64_t>(threads(), (total + kGrain - 1) / kGrain);
  share_blocks(groups, participants, [&](const auto& take) {
    float* loss = thread_scratch<LossChunk>().loss;
    for (int64_t g = take(); g >= 0; g = take()) {
      const int64_t first = g * group, count = std::min(group, chunks - first);
      PairwiseSum sum;
      for (int64_t c = 0; c < count; ++c) {
        if (c > 0) checkpoint();
        const int64_t begin = (first + c) * kChunk, n = std::min(kChunk, total - begin);
        chunk_loss(op, w, begin, n, loss);
        sum.add(chunk_sum(loss, n));
      }
      group_sums[g] = sum.total();
    }
  });
  PairwiseSum sum;
  for (float s : group_sums) sum.add(s);
  return sum.total();
}

template <class T>
float round_through(float v) {
  return to_float(from_float<T>(v));
}

void store_one(const TensorArg& out, float value, int compute_dtype) {
  dispatch_storage(kName, compute_dtype, [&](auto c) { value = round_through<typename decltype(c)::type>(value); });
  dispatch_storage(kName, out.dtype, [&](auto o) {
    using T = typename decltype(o)::type;
    *reinterpret_cast<T*>(out.data) = from_float<T>(value);
  });
}

void check_operands(const TensorArg& out, const TensorArg& self, const TensorArg& target, int compute_dtype) {
  if (self.shape != target.shape)
    throw ContractError("aclnnKlDiv: expected self and target viewed with the broadcast shape");
  require_float_dtypes(kName, {&out, &self, &target});
  dispatch_storage(kName, compute_dtype, [](auto) {});
}

void kl_div(const TensorArg& out, const TensorArg& self, const TensorArg& target, bool log_target, int compute_dtype) {
  check_operands(out, self, target, compute_dtype);
  if (out.shape != self.shape) throw ContractError("aclnnKlDiv: expected out with the broadcast shape");
  const Rounding r = rounding(compute_dtype, out.dtype);
  KernelCall(kName).run([&] {
    if (log_target) loss_elementwise<true>(out, self, target, r);
    else loss_elementwise<false>(out, self, target, r);
  });
}

void kl_div_reduce(const TensorArg& out, const TensorArg& self, const TensorArg& target, bool log_target,
                   int compute_dtype, double divisor) {
  check_operands(out, self, target, compute_dtype);
  if (out.numel() != 1 || self.numel() == 0)
    throw ContractError("aclnnKlDiv: expected out of one element and a non-empty broadcast shape");
  KernelCall(kName).run([&] {
    const float sum = log_target ? sum_of_loss(KlDivLoss<true, kAsIs>{}, self, target)
                                 : sum_of_loss(KlDivLoss<false, kAsIs>{}, self, target);
    store_one(out, static_cast<float>(static_cast<double>(sum) / divisor), compute_dtype);
  });
}

void kl_div_fill(const TensorArg& out, double value) {
  require_float_dtypes(kName, {&out});
  KernelCall(kName).run([&] {
    dispatch_storage(kName, out.dtype, [&](auto o) {
      using T = typename decltype(o)::type;
      const T item = from_float<T>(static_cast<float>(value));
      const int rank = static_cast<int>(out.shape.size());
      Dims index(rank, 0);
      Pacer pacer;  // out can be any size
      for (int64_t i = 0, n = out.numel(); i < n; ++i) {
        pacer();
        int64_t offset = 0;
        for (int d = 0; d < rank; ++d) offset += index[d] * out.strides[d];
        *reinterpret_cast<T*>(out.data + offset * sizeof(T)) = item;
        for (int d = rank - 1; d >= 0; --d) {
          if (++index[d] < out.shape[d]) break;
          index[d] = 0;
        }
      }
    });
  });
}

void bind(py::module_& m) {
  m.def("kl_div", &kl_div, "out = L(self, target) over the broadcast shape (reduction none)");
  m.def("kl_div_reduce", &kl_div_reduce, "out's one element = sum of L(self, target) / divisor");
  m.def("kl_div_fill", &kl_div_fill, "every element of out = value");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
