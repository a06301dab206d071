// aclnnBinaryCrossEntropyWithLogitsBackward (spec/OPS.md §1.2), per element in fp32:
//   out = ((p·t + 1 − t)·σ(x) − p·t) · g · w · scale
// with g = gradOutput, x = self, t = target, w = weight, p = posWeight (absent → 1) and scale
// = 1/numel(self) for "mean", 1 otherwise. gradOutput/weight/posWeight arrive as stride-0
// broadcast views of self's shape. σ(x) = (x ≥ 0 ? 1 : e^−|x|) / (1 + e^−|x|) never overflows.
//
// Every operand is read from its own dtype into fp32 (mixed dtypes always promote to f32, so this
// is exactly the promotion cast): contiguous runs through the vectorised chunk pipeline, strided
// runs in blocks of fp32 buffers. Large outputs are streamed past the caches.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>

#include "common/dispatch.h"
#include "common/elementwise.h"
#include "common/registry.h"
#include "common/vmath.h"

namespace py = pybind11;

namespace npuemu {
namespace {

NPUEMU_INLINE float stable_sigmoid(float x) {
  const float z = vm_exp(-__builtin_fabsf(x));
  return (x >= 0.0f ? 1.0f : z) / (1.0f + z);
}

NPUEMU_INLINE float bce_logits_grad(float g, float x, float t, float w, float p, float scale) {
  const float pt = p * t;
  return ((pt + 1.0f - t) * stable_sigmoid(x) - pt) * g * w * scale;
}

// in = gradOutput, self, target[, weight][, posWeight]: fp32 arrays of n elements. `__restrict`:
// out may only be one of the inputs exactly (in place), where element i is read before it is
// written; without it the compiler gives up vectorising over the alias checks of six pointers.
NPUEMU_VECTORIZED void compute(float* __restrict out, const float* const* in, int64_t n, bool has_weight,
                               bool has_pos_weight, float scale) {
  const float* __restrict g = in[0];
  const float* __restrict x = in[1];
  const float* __restrict t = in[2];
  const float* __restrict w = has_weight ? in[3] : nullptr;
  const float* __restrict p = has_pos_weight ? in[3 + has_weight] : nullptr;
  if (w && p) {
    for (int64_t i = 0; i < n; ++i) out[i] = bce_logits_grad(g[i], x[i], t[i], w[i], p[i], scale);
  } else if (w) {
    for (int64_t i = 0; i < n; ++i) out[i] = bce_logits_grad(g[i], x[i], t[i], w[i], 1.0f, scale);
  } else if (p) {
    for (int64_t i = 0; i < n; ++i) out[i] = bce_logits_grad(g[i], x[i], t[i], 1.0f, p[i], scale);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = bce_logits_grad(g[i], x[i], t[i], 1.0f, 1.0f, scale);
  }
}

constexpr int64_t kBlock = 256;  // elements per operand converted at a time on strided runs

template <class F>
void with_element_type(int dtype, F&& f) {
  dispatch_floating(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>) {
      throw std::invalid_argument("aclnnBinaryCrossEntropyWithLogitsBackward has no DOUBLE kernel");
    } else {
      f(tag);
    }
  });
}

void load_block(int dtype, const char* p, int64_t stride, int64_t n, float* dst) {
  with_element_type(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t i = 0; i < n; ++i) dst[i] = to_float(*reinterpret_cast<const T*>(p + i * stride));
  });
}

void store_block(int dtype, char* p, int64_t stride, int64_t n, const float* src) {
  with_element_type(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p + i * stride) = from_float<T>(src[i]);
  });
}

// Operands: out, gradOutput, self, target, then weight and posWeight when present; each in its
// own dtype (mixed dtypes promote to f32, so loading each into fp32 is exactly the promotion cast).
template <int N>
struct Body {
  std::array<int, N> dtype;
  bool has_weight, has_pos_weight, streaming;
  float scale;

  void contiguous(std::array<char*, N> p, int64_t n) {
    std::array<const char*, N - 1> in;
    std::array<int, N - 1> in_dtype;
    for (int k = 1; k < N; ++k) in[k - 1] = p[k], in_dtype[k - 1] = dtype[k];
    float_chunks<N - 1>(p[0], dtype[0], in, in_dtype, n, streaming, [&](float* out, const float* const* args, int64_t m) {
      compute(out, args, m, has_weight, has_pos_weight, scale);
    });
  }

  void strided(std::array<char*, N> p, const std::array<int64_t, N>& s, int64_t n) {
    float in[N - 1][kBlock], result[kBlock];
    const float* args[N - 1];
    for (int k = 0; k < N - 1; ++k) args[k] = in[k];
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t m = std::min(kBlock, n - b);
      for (int k = 1; k < N; ++k) load_block(dtype[k], p[k] + b * s[k], s[k], m, in[k - 1]);
      compute(result, args, m, has_weight, has_pos_weight, scale);
      store_block(dtype[0], p[0] + b * s[0], s[0], m, result);  // after the loads: in place is safe
    }
  }
};

template <int N>
void run(const std::vector<const TensorArg*>& operands, bool has_weight, bool has_pos_weight, float scale) {
  std::array<const TensorArg*, N> args;
  Body<N> body{};
  for (int k = 0; k < N; ++k) args[k] = operands[k], body.dtype[k] = operands[k]->dtype;
  body.has_weight = has_weight;
  body.has_pos_weight = has_pos_weight;
  body.scale = scale;
  body.streaming = args[0]->numel() * args[0]->itemsize() > kStreamingThreshold;
  for_each_element<N>(args, args[0]->shape, body);
}

void binary_cross_entropy_with_logits_backward(const TensorTuple& out, const TensorTuple& grad_output,
                                               const TensorTuple& self, const TensorTuple& target,
                                               const std::optional<TensorTuple>& weight,
                                               const std::optional<TensorTuple>& pos_weight, float scale) {
  const TensorArg o(out), g(grad_output), x(self), t(target);
  std::optional<TensorArg> w, p;
  if (weight) w.emplace(*weight);
  if (pos_weight) p.emplace(*pos_weight);
  std::vector<const TensorArg*> operands = {&o, &g, &x, &t};
  if (w) operands.push_back(&*w);
  if (p) operands.push_back(&*p);
  for (const TensorArg* arg : operands) with_element_type(arg->dtype, [](auto) {});  // reject before threads start
  py::gil_scoped_release release;
  switch (operands.size()) {
    case 4: run<4>(operands, false, false, scale); break;
    case 5: run<5>(operands, bool(w), bool(p), scale); break;
    default: run<6>(operands, true, true, scale); break;
  }
}

void bind(py::module_& m) {
  m.def("binary_cross_entropy_with_logits_backward", &binary_cross_entropy_with_logits_backward,
        "out = ((p*t + 1 - t) * sigmoid(self) - p*t) * gradOutput * weight * scale");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
