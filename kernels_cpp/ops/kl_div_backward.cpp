// aclnnKlDivBackward (docs/ops/kl_div_backward.md). Over the broadcast shape B (gradOutput and target arrive
// as views of shape B): grad = -(w * gradOutput) * coefficient with w = target, or exp(target)
// when logTarget; then summed over the axes that broadcasting added to self (leading axes, and
// axes where self has size 1 but B does not) into out, which has self's shape. fp32 throughout,
// one rounding to out's dtype at the end. Each operand is read in its own dtype.
//
// When out has as many elements as B, nothing is summed: a pure element-wise pass. Otherwise each
// output element sums its reduced elements in row-major index order, in blocks of kBlock terms
// whose sums are combined pairwise (Cascade), and threads split the output elements: the result
// never depends on the thread count.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <vector>

#include "common/dispatch.h"
#include "common/elementwise.h"
#include "common/registry.h"
#include "common/vmath.h"

namespace py = pybind11;

namespace npuemu {
namespace {

// Inputs: gradOutput, target.
template <bool LogTarget>
struct KlDivGrad {
  static constexpr int kInputs = 2;
  float coefficient;

  template <class V>
  NPUEMU_INLINE typename V::F apply(const typename V::F* in) const {
    const typename V::F weight = LogTarget ? simd::exp<V>(in[1]) : in[1];
    return -(weight * in[0]) * coefficient;
  }
};

// One term of a sum, with the very arithmetic of the element-wise pass.
template <bool LogTarget>
NPUEMU_INLINE float kl_grad(float grad, float target, float coefficient) {
  const simd::Scalar::F in[2] = {{grad}, {target}};
  return KlDivGrad<LogTarget>{coefficient}.template apply<simd::Scalar>(in)[0];
}

template <class T>
inline float load(const char* p) {
  return to_float(*reinterpret_cast<const T*>(p));
}

// The axes of B split into those out keeps and those summed away, with byte strides. Axes of
// size 1 are dropped: they change neither the addresses nor the order of the sum. There is at
// least one summed axis (otherwise out has as many elements as B: the element-wise path).
struct Reduction {
  std::vector<int64_t> kept_shape;
  std::vector<std::array<int64_t, 3>> kept_strides;   // out, gradOutput, target
  std::vector<int64_t> summed_shape;
  std::vector<std::array<int64_t, 2>> summed_strides;  // gradOutput, target
  int64_t outputs = 1;
  int64_t terms = 1;         // summed elements per output element (0 if B is empty)
  bool inner_kept = false;   // B's innermost axis is one that out keeps
};

Reduction split_axes(const TensorArg& out, const TensorArg& grad, const TensorArg& target) {
  Reduction r;
  const int rank = static_cast<int>(grad.shape.size());
  const int lead = rank - static_cast<int>(out.shape.size());
  for (int d = 0; d < rank; ++d) {
    const int64_t size = grad.shape[d];
    const int64_t g = grad.strides[d] * grad.itemsize(), t = target.strides[d] * target.itemsize();
    if (size == 1) continue;
    r.inner_kept = d >= lead && out.shape[d - lead] != 1;
    if (r.inner_kept) {
      r.kept_shape.push_back(size);
      r.kept_strides.push_back({out.strides[d - lead] * out.itemsize(), g, t});
      r.outputs *= size;
    } else {
      r.summed_shape.push_back(size);
      r.summed_strides.push_back({g, t});
      r.terms *= size;
    }
  }
  return r;
}

// Calls row(gradOutput offset, target offset) for every index of the summed axes but the last,
// in row-major order; walking the last summed axis from each gives every term in index order.
template <class Row>
void for_each_summed_row(const Reduction& r, Row&& row) {
  if (r.terms == 0) return;
  const int outer = static_cast<int>(r.summed_shape.size()) - 1;
  std::vector<int64_t> index(outer, 0);
  for (int64_t n = 0, rows = r.terms / r.summed_shape[outer]; n < rows; ++n) {
    int64_t g = 0, t = 0;
    for (int d = 0; d < outer; ++d) {
      g += index[d] * r.summed_strides[d][0];
      t += index[d] * r.summed_strides[d][1];
    }
    row(g, t);
    for (int d = outer - 1; d >= 0; --d) {
      if (++index[d] < r.summed_shape[d]) break;
      index[d] = 0;
    }
  }
}

// Terms per block: a block's terms are added one after the other in fp32 (as a lane accumulates them).
constexpr int64_t kBlock = 1024;

// The block sums of one output element combined pairwise as they complete, as a binary counter
// carries: block 2k+1 meets block 2k, their sum meets the sum of blocks 2k-2 and 2k-1, and so on; the
// levels still pending, and the last partial block, are folded from the newest up at the end. The
// order depends only on the number of terms; the rounding error grows with the number of blocks'
// logarithm, not with the number of terms (one running sum stopped growing at 2^24: a term of 1 is
// below half its ulp, and 2^25 terms of 1 summed to 2^24).
class Cascade {
 public:
  void push(float block) {
    int level = 0;
    for (int64_t b = blocks_; b & 1; b >>= 1, ++level) block = levels_[level] + block;
    levels_[level] = block;
    ++blocks_;
  }
  float total(float partial) const {
    float sum = partial;
    for (int level = 0; level < kLevels; ++level)
      if (blocks_ >> level & 1) sum = levels_[level] + sum;
    return sum;
  }

 private:
  static constexpr int kLevels = 40;  // 2^40 blocks of kBlock terms: more than any view holds (2^37)
  float levels_[kLevels];
  int64_t blocks_ = 0;
};

// One output element: its terms, from gradOutput/target addresses g and t, added in index order.
template <class TO, class TG, class TT, bool LogTarget>
void sum_one(const Reduction& r, const std::array<char*, 3>& p, float coefficient, Pacer& pacer) {
  const int64_t n = r.summed_shape.back(), gs = r.summed_strides.back()[0], ts = r.summed_strides.back()[1];
  Cascade cascade;
  float block = 0.0f;
  int64_t in_block = 0;
  for_each_summed_row(r, [&](int64_t g, int64_t t) {
    const char* gp = p[1] + g;
    const char* tp = p[2] + t;
    for (int64_t piece = 0; piece < n; piece += kCheckpointWork) {  // a summed axis can be any length
      pacer(kCheckpointWork);
      for (int64_t j = piece; j < std::min(n, piece + kCheckpointWork); ++j) {
        block += kl_grad<LogTarget>(load<TG>(gp + j * gs), load<TT>(tp + j * ts), coefficient);
        if (++in_block == kBlock) {
          cascade.push(block);
          block = 0.0f, in_block = 0;
        }
      }
    }
  });
  *reinterpret_cast<TO*>(p[0]) = from_float<TO>(cascade.total(block));
}

constexpr int64_t kRun = 512;  // output elements summed together along a kept innermost axis

// A run of `length` output elements along B's innermost axis (a kept one): each term is added
// into all of them before the next, which reads memory in order. Every output still adds its
// terms in the order of sum_one, in the same blocks, so the two paths give identical bits.
template <class TO, class TG, class TT, bool LogTarget>
void sum_run(const Reduction& r, const std::array<char*, 3>& p, int64_t length, float coefficient, Pacer& pacer) {
  float sums[kRun] = {};  // the blocks in progress
  std::vector<Cascade> cascades(length);
  int64_t in_block = 0;
  const int64_t n = r.summed_shape.back(), gs = r.summed_strides.back()[0], ts = r.summed_strides.back()[1];
  const std::array<int64_t, 3>& step = r.kept_strides.back();
  for_each_summed_row(r, [&](int64_t g, int64_t t) {
    for (int64_t j = 0; j < n; ++j) {
      pacer(length);
      const char* gp = p[1] + g + j * gs;
      const char* tp = p[2] + t + j * ts;
      for (int64_t i = 0; i < length; ++i)
        sums[i] += kl_grad<LogTarget>(load<TG>(gp + i * step[1]), load<TT>(tp + i * step[2]), coefficient);
      if (++in_block == kBlock) {
        for (int64_t i = 0; i < length; ++i) cascades[i].push(sums[i]), sums[i] = 0.0f;
        in_block = 0;
      }
    }
  });
  for (int64_t i = 0; i < length; ++i)
    *reinterpret_cast<TO*>(p[0] + i * step[0]) = from_float<TO>(cascades[i].total(sums[i]));
}

// Threads split the output elements; which thread sums an element never changes its order.
template <class TO, class TG, class TT, bool LogTarget>
void reduce_into_out(const TensorArg& out, const TensorArg& grad, const TensorArg& target, float coefficient) {
  const Reduction r = split_axes(out, grad, target);
  const int rank = static_cast<int>(r.kept_shape.size());
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, r.terms));
  parallel_for(r.outputs, grain, [&](int64_t begin, int64_t end) {
    Pacer pacer;
    std::vector<int64_t> index(rank, 0);
    int64_t rest = begin;  // unravel the first output element of this chunk
    for (int d = rank - 1; d >= 0; --d) {
      index[d] = rest % r.kept_shape[d];
      rest /= r.kept_shape[d];
    }
    for (int64_t o = begin; o < end;) {
      std::array<char*, 3> p = {out.data, grad.data, target.data};
      for (int d = 0; d < rank; ++d)
        for (int k = 0; k < 3; ++k) p[k] += index[d] * r.kept_strides[d][k];
      int64_t length = 1;
      if (r.inner_kept) {
        length = std::min({end - o, r.kept_shape[rank - 1] - index[rank - 1], kRun});
        sum_run<TO, TG, TT, LogTarget>(r, p, length, coefficient, pacer);
      } else {
        sum_one<TO, TG, TT, LogTarget>(r, p, coefficient, pacer);
      }
      o += length;
      if (rank > 0) index[rank - 1] += length - 1;  // a run stays within the innermost axis
      for (int d = rank - 1; d >= 0; --d) {  // next output element
        if (++index[d] < r.kept_shape[d]) break;
        index[d] = 0;
      }
    }
  });
}

// Out seen with B's rank: leading axes of size 1 (stride irrelevant) before its own axes.
TensorArg out_over_b(const TensorArg& out, const Dims& b_shape) {
  TensorArg widened;
  widened.data = out.data;
  widened.dtype = out.dtype;
  const size_t lead = b_shape.size() - out.shape.size();
  widened.shape.resize(lead, 1);
  widened.strides.resize(lead, 0);
  for (size_t d = 0; d < out.shape.size(); ++d) {
    widened.shape.push_back(out.shape[d]);
    widened.strides.push_back(out.strides[d]);
  }
  return widened;
}

// out's dims must be those of B or 1 (its trailing ones), as the first phase guarantees.
bool reduces_to(const Dims& b_shape, const Dims& out_shape) {
  if (b_shape.size() < out_shape.size()) return false;
  const size_t lead = b_shape.size() - out_shape.size();
  for (size_t d = 0; d < out_shape.size(); ++d)
    if (out_shape[d] != 1 && out_shape[d] != b_shape[lead + d]) return false;
  return true;
}

void compute_gradient(const TensorArg& out, const TensorArg& grad, const TensorArg& target, double coefficient,
                      bool log_target) {
  const float factor = static_cast<float>(coefficient);
  if (out.numel() == grad.numel()) {  // out's shape is B up to axes of size 1: nothing to sum
    const TensorArg widened = out_over_b(out, grad.shape);
    if (log_target) run_elementwise(KlDivGrad<true>{factor}, {&widened, &grad, &target}, grad.shape);
    else run_elementwise(KlDivGrad<false>{factor}, {&widened, &grad, &target}, grad.shape);
    return;
  }
  dispatch_storage("aclnnKlDivBackward", out.dtype, [&](auto o) {
    dispatch_storage("aclnnKlDivBackward", grad.dtype, [&](auto g) {
      dispatch_storage("aclnnKlDivBackward", target.dtype, [&](auto t) {
        using TO = typename decltype(o)::type;
        using TG = typename decltype(g)::type;
        using TT = typename decltype(t)::type;
        if (log_target) reduce_into_out<TO, TG, TT, true>(out, grad, target, factor);
        else reduce_into_out<TO, TG, TT, false>(out, grad, target, factor);
      });
    });
  });
}

void kl_div_backward(const TensorArg& out, const TensorArg& grad, const TensorArg& target, double coefficient,
                     bool log_target) {
  if (grad.shape != target.shape || !reduces_to(grad.shape, out.shape))
    throw ContractError("aclnnKlDivBackward: expected gradOutput and target viewed with the broadcast shape, and out "
                        "reducing it");
  require_float_dtypes("aclnnKlDivBackward", {&out, &grad, &target});
  KernelCall("aclnnKlDivBackward").run([&] { compute_gradient(out, grad, target, coefficient, log_target); });
}

void bind(py::module_& m) {
  m.def("kl_div_backward", &kl_div_backward,
        "out = sum over broadcast axes of -(target or exp(target)) * gradOutput * coefficient");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
