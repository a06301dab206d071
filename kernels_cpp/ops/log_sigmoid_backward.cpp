// aclnnLogSigmoidBackward (spec/OPS.md §4.2): gradInput = gradOutput * 1/(1 + e^x), in fp32:
// z = exp(-|x|); numerator = x < 0 ? 1 : z; gradInput = numerator / (1 + z) * gradOutput.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>

#include "common/dispatch.h"
#include "common/elementwise.h"
#include "common/registry.h"

namespace py = pybind11;

namespace npuemu {
namespace {

inline float log_sigmoid_grad(float grad, float x) {
  const float z = std::exp(-std::fabs(x));
  const float numerator = x < 0.0f ? 1.0f : z;
  return numerator / (1.0f + z) * grad;
}

template <class T>
struct Body {
  // operands: gradInput (out), gradOutput, self
  void contiguous(std::array<char*, 3> p, int64_t n) {
    T* out = reinterpret_cast<T*>(p[0]);
    const T* grad = reinterpret_cast<const T*>(p[1]);
    const T* x = reinterpret_cast<const T*>(p[2]);
    for (int64_t i = 0; i < n; ++i) out[i] = from_float<T>(log_sigmoid_grad(to_float(grad[i]), to_float(x[i])));
  }
  void strided(std::array<char*, 3> p, const std::array<int64_t, 3>& s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const float grad = to_float(*reinterpret_cast<const T*>(p[1] + i * s[1]));
      const float x = to_float(*reinterpret_cast<const T*>(p[2] + i * s[2]));
      *reinterpret_cast<T*>(p[0] + i * s[0]) = from_float<T>(log_sigmoid_grad(grad, x));
    }
  }
};

void log_sigmoid_backward(const TensorTuple& grad_output, const TensorTuple& self, const TensorTuple& grad_input) {
  const TensorArg go(grad_output), x(self), gi(grad_input);
  py::gil_scoped_release release;
  dispatch_floating(gi.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>) {
      throw std::invalid_argument("aclnnLogSigmoidBackward has no DOUBLE kernel");
    } else {
      Body<T> body;
      for_each_element<3>({&gi, &go, &x}, gi.shape, body);
    }
  });
}

void bind(py::module_& m) {
  m.def("log_sigmoid_backward", &log_sigmoid_backward, "gradInput = gradOutput / (1 + exp(self))");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
