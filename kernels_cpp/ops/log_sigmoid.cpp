// aclnnLogSigmoid and aclnnLogSigmoidForward (docs/ops/log_sigmoid.md): out = log(1/(1 + e^-x)), in
// fp32, in the form that neither overflows nor cancels: out = min(x, 0) - log1p(e^-|x|).
// e^-|x| is in (0, 1], so log1p's argument never overflows, and for large |x| the result is
// min(x, 0) minus a tiny term that log1p keeps (log(1 + z) would round it away); simd::log1p_unit
// evaluates it for z in [0, 1] without a division. One pass over memory through the element-wise
// engine (common/elementwise.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "common/elementwise.h"
#include "common/registry.h"
#include "common/vmath.h"

namespace py = pybind11;

namespace npuemu {
namespace {

struct LogSigmoid {
  static constexpr int kInputs = 1;  // self

  template <class V>
  NPUEMU_INLINE typename V::F apply(const typename V::F* in) const {
    using F = typename V::F;
    const F x = in[0];
    const F z = simd::exp_nonpositive<V>(V::from_bits(V::bits(x) | 0x80000000u));  // e^-|x|; NaN stays NaN
    // min's second operand is returned when either is NaN (simd.h): a NaN x gives NaN, and -0 stays -0.
    return V::min(V::splat(0.0f), x) - simd::log1p_unit<V>(z);
  }
};

// Both operators run this one kernel, as they run the library's one LogSigmoid kernel; `op` names
// the operator whose launch it is, in messages.
void log_sigmoid(const TensorArg& self, const TensorArg& out, const std::string& op) {
  require_float_dtypes(op.c_str(), {&self, &out});
  require_views_of(op.c_str(), out.shape, {&self});
  KernelCall(op.c_str()).run([&] { run_elementwise(LogSigmoid{}, {&out, &self}, out.shape); });
}

void bind(py::module_& m) {
  m.def("log_sigmoid", &log_sigmoid, "out = log(sigmoid(self)) = min(self, 0) - log1p(exp(-|self|))");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
