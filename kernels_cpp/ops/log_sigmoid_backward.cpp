// aclnnLogSigmoidBackward (docs/ops/log_sigmoid_backward.md): gradInput = gradOutput * 1/(1 + e^x), in fp32:
// z = exp(-|x|); numerator = x < 0 ? 1 : z; gradInput = numerator / (1 + z) * gradOutput.
// One pass over memory through the element-wise engine (common/elementwise.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "common/elementwise.h"
#include "common/registry.h"
#include "common/vmath.h"

namespace py = pybind11;

namespace npuemu {
namespace {

struct LogSigmoidGrad {
  static constexpr int kInputs = 2;  // gradOutput, self

  template <class V>
  NPUEMU_INLINE typename V::F apply(const typename V::F* in) const {
    using F = typename V::F;
    const F grad = in[0], x = in[1];
    const F z = simd::exp_nonpositive<V>(V::from_bits(V::bits(x) | 0x80000000u));  // e^-|x|
    const F numerator = x < 0.0f ? V::splat(1.0f) : z;
    return numerator / (1.0f + z) * grad;
  }
};

void log_sigmoid_backward(const TensorArg& go, const TensorArg& x, const TensorArg& gi) {
  require_float_dtypes("aclnnLogSigmoidBackward", {&go, &x, &gi});
  require_views_of("aclnnLogSigmoidBackward", gi.shape, {&go, &x});
  KernelCall("aclnnLogSigmoidBackward").run([&] { run_elementwise(LogSigmoidGrad{}, {&gi, &go, &x}, gi.shape); });
}

void bind(py::module_& m) {
  m.def("log_sigmoid_backward", &log_sigmoid_backward, "gradInput = gradOutput / (1 + exp(self))");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
