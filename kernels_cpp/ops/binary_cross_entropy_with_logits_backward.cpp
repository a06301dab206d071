// aclnnBinaryCrossEntropyWithLogitsBackward (docs/ops/binary_cross_entropy_with_logits_backward.md), per element in fp32:
//   out = ((p·t + 1 − t)·σ(x) − p·t) · g · w · scale
// with g = gradOutput, x = self, t = target, w = weight, p = posWeight (absent → 1) and scale
// = 1/numel(self) for "mean", 1 otherwise. gradOutput/weight/posWeight arrive as stride-0
// broadcast views of self's shape. σ(x) = (x ≥ 0 ? 1 : e^−|x|) / (1 + e^−|x|) never overflows.
//
// Every operand is read from its own dtype into fp32 (mixed dtypes always promote to f32, so this
// is exactly the promotion cast), in one pass through the element-wise engine
// (common/elementwise.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "common/elementwise.h"
#include "common/registry.h"
#include "common/vmath.h"

namespace py = pybind11;

namespace npuemu {
namespace {

// Inputs: gradOutput, self, target, then weight and posWeight when present. The operations in the
// order of the formula, one rounding each (no fused multiply-add: this is the order the documented
// sample's values come from); the multiplication by scale is skipped when it is 1 (exact anyway).
template <bool kWeight, bool kPosWeight, bool kScaled>
struct BceWithLogitsGrad {
  static constexpr int kInputs = 3 + kWeight + kPosWeight;
  float scale;

  template <class V>
  NPUEMU_INLINE typename V::F apply(const typename V::F* in) const {
    using F = typename V::F;
    const F g = in[0], x = in[1], t = in[2];
    const F p = kPosWeight ? in[3 + kWeight] : V::splat(1.0f);
    const F z = simd::exp_nonpositive<V>(V::from_bits(V::bits(x) | 0x80000000u));  // e^-|x|
    const F sigmoid = (x >= 0.0f ? V::splat(1.0f) : z) / (1.0f + z);
    const F pt = p * t;
    F result = ((pt + 1.0f - t) * sigmoid - pt) * g;
    if (kWeight) result = result * in[3];
    return kScaled ? result * scale : result;
  }
};

template <bool kWeight, bool kPosWeight, bool kScaled>
void run(const TensorArgs& operands, float scale) {
  using Op = BceWithLogitsGrad<kWeight, kPosWeight, kScaled>;
  std::array<const TensorArg*, Op::kInputs + 1> args;
  for (int k = 0; k <= Op::kInputs; ++k) args[k] = operands[k];
  run_elementwise(Op{scale}, args, args[0]->shape);
}

template <bool kScaled>
void run(const TensorArgs& operands, bool weight, bool pos_weight, float scale) {
  if (weight && pos_weight) run<true, true, kScaled>(operands, scale);
  else if (weight) run<true, false, kScaled>(operands, scale);
  else if (pos_weight) run<false, true, kScaled>(operands, scale);
  else run<false, false, kScaled>(operands, scale);
}

void binary_cross_entropy_with_logits_backward(const TensorArg& o, const TensorArg& g, const TensorArg& x,
                                               const TensorArg& t, const std::optional<TensorArg>& w,
                                               const std::optional<TensorArg>& p, float scale) {
  constexpr const char* kName = "aclnnBinaryCrossEntropyWithLogitsBackward";
  TensorArgs operands = {&o, &g, &x, &t};
  if (w) operands.push_back(&*w);
  if (p) operands.push_back(&*p);
  require_float_dtypes(kName, operands);
  require_views_of(kName, o.shape, operands);
  KernelCall(kName).run([&] {
    if (scale != 1.0f) run<true>(operands, bool(w), bool(p), scale);
    else run<false>(operands, bool(w), bool(p), scale);
  });
}

void bind(py::module_& m) {
  m.def("binary_cross_entropy_with_logits_backward", &binary_cross_entropy_with_logits_backward,
        "out = ((p*t + 1 - t) * sigmoid(self) - p*t) * gradOutput * weight * scale");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
