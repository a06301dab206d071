// aclnnLogSigmoidBackward (spec/OPS.md §4.2): gradInput = gradOutput * 1/(1 + e^x), in fp32:
// z = exp(-|x|); numerator = x < 0 ? 1 : z; gradInput = numerator / (1 + z) * gradOutput.
// One pass over the data; large outputs are streamed past the caches.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "common/dispatch.h"
#include "common/elementwise.h"
#include "common/registry.h"
#include "common/vmath.h"

namespace py = pybind11;

namespace npuemu {
namespace {

NPUEMU_INLINE float log_sigmoid_grad(float grad, float x) {
  const float z = vm_exp(-__builtin_fabsf(x));
  const float numerator = x < 0.0f ? 1.0f : z;
  return numerator / (1.0f + z) * grad;
}

// `__restrict`: out may only alias an input exactly (in place), where element i is read first.
NPUEMU_VECTORIZED void compute(float* __restrict out, const float* const* in, int64_t n) {
  const float* __restrict grad = in[0];
  const float* __restrict x = in[1];
  for (int64_t i = 0; i < n; ++i) out[i] = log_sigmoid_grad(grad[i], x[i]);
}

struct Body {
  int dtype;
  bool streaming;
  // operands: gradInput (out), gradOutput, self
  void contiguous(std::array<char*, 3> p, int64_t n) {
    float_chunks<2>(p[0], dtype, {p[1], p[2]}, {dtype, dtype}, n, streaming, compute);
  }
  void strided(std::array<char*, 3> p, const std::array<int64_t, 3>& s, int64_t n) {
    dispatch_floating(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      for (int64_t i = 0; i < n; ++i) {
        const float grad = to_float(*reinterpret_cast<const T*>(p[1] + i * s[1]));
        const float x = to_float(*reinterpret_cast<const T*>(p[2] + i * s[2]));
        *reinterpret_cast<T*>(p[0] + i * s[0]) = from_float<T>(log_sigmoid_grad(grad, x));
      }
    });
  }
};

void log_sigmoid_backward(const TensorTuple& grad_output, const TensorTuple& self, const TensorTuple& grad_input) {
  const TensorArg go(grad_output), x(self), gi(grad_input);
  if (gi.dtype == kDouble) throw std::invalid_argument("aclnnLogSigmoidBackward has no DOUBLE kernel");
  py::gil_scoped_release release;
  Body body{gi.dtype, gi.numel() * gi.itemsize() > kStreamingThreshold};
  for_each_element<3>({&gi, &go, &x}, gi.shape, body);
}

void bind(py::module_& m) {
  m.def("log_sigmoid_backward", &log_sigmoid_backward, "gradInput = gradOutput / (1 + exp(self))");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
