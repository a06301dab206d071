// aclnnBinaryCrossEntropyWithLogitsBackward (spec/OPS.md §1.2), per element in fp32:
//   out = ((p·t + 1 − t)·σ(x) − p·t) · g · w · scale
// with g = gradOutput, x = self, t = target, w = weight, p = posWeight (absent → 1) and scale
// = 1/numel(self) for "mean", 1 otherwise. gradOutput/weight/posWeight arrive as stride-0
// broadcast views of self's shape. σ(x) = (x ≥ 0 ? 1 : e^−|x|) / (1 + e^−|x|) never overflows.
//
// Two paths: every operand of out's dtype (the usual case) runs a loop templated on that dtype
// and on which weights are present; operands of different dtypes (promotion to f32) are loaded
// block by block into fp32 buffers, each from its own dtype — exactly a cast to the promoted f32.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "common/dispatch.h"
#include "common/elementwise.h"
#include "common/registry.h"

namespace py = pybind11;

namespace npuemu {
namespace {

inline float stable_sigmoid(float x) {
  const float z = std::exp(-std::fabs(x));
  return (x >= 0.0f ? 1.0f : z) / (1.0f + z);
}

inline float bce_logits_grad(float g, float x, float t, float w, float p, float scale) {
  const float pt = p * t;
  return ((pt + 1.0f - t) * stable_sigmoid(x) - pt) * g * w * scale;
}

// Operands: 0 out, 1 gradOutput, 2 self, 3 target, then weight and posWeight when present.
template <class T, bool kWeight, bool kPosWeight>
struct SameDtypeBody {
  static constexpr int N = 4 + kWeight + kPosWeight;
  static constexpr int kW = 4;
  static constexpr int kP = 4 + kWeight;
  float scale;

  void contiguous(std::array<char*, N> p, int64_t n) {
    T* out = reinterpret_cast<T*>(p[0]);
    const T* g = reinterpret_cast<const T*>(p[1]);
    const T* x = reinterpret_cast<const T*>(p[2]);
    const T* t = reinterpret_cast<const T*>(p[3]);
    const T* w = reinterpret_cast<const T*>(p[kW]);
    const T* pw = reinterpret_cast<const T*>(p[kP]);
    for (int64_t i = 0; i < n; ++i) {
      float weight = 1.0f, pos_weight = 1.0f;
      if constexpr (kWeight) weight = to_float(w[i]);
      if constexpr (kPosWeight) pos_weight = to_float(pw[i]);
      out[i] = from_float<T>(
          bce_logits_grad(to_float(g[i]), to_float(x[i]), to_float(t[i]), weight, pos_weight, scale));
    }
  }

  void strided(std::array<char*, N> p, const std::array<int64_t, N>& s, int64_t n) {
    auto at = [&](int k, int64_t i) { return to_float(*reinterpret_cast<const T*>(p[k] + i * s[k])); };
    for (int64_t i = 0; i < n; ++i) {
      float weight = 1.0f, pos_weight = 1.0f;
      if constexpr (kWeight) weight = at(kW, i);
      if constexpr (kPosWeight) pos_weight = at(kP, i);
      *reinterpret_cast<T*>(p[0] + i * s[0]) =
          from_float<T>(bce_logits_grad(at(1, i), at(2, i), at(3, i), weight, pos_weight, scale));
    }
  }
};

template <class T, bool kWeight, bool kPosWeight>
void run_same_dtype(const std::array<const TensorArg*, 6>& all, float scale) {
  using Body = SameDtypeBody<T, kWeight, kPosWeight>;
  std::array<const TensorArg*, Body::N> args{};
  for (int k = 0; k < 4; ++k) args[k] = all[k];
  if constexpr (kWeight) args[Body::kW] = all[4];
  if constexpr (kPosWeight) args[Body::kP] = all[5];
  Body body{scale};
  for_each_element<Body::N>(args, all[0]->shape, body);
}

template <class T>
void run_same_dtype(const std::array<const TensorArg*, 6>& all, float scale) {
  const bool weight = all[4] != nullptr, pos_weight = all[5] != nullptr;
  if (weight && pos_weight) run_same_dtype<T, true, true>(all, scale);
  else if (weight) run_same_dtype<T, true, false>(all, scale);
  else if (pos_weight) run_same_dtype<T, false, true>(all, scale);
  else run_same_dtype<T, false, false>(all, scale);
}

constexpr int64_t kBlock = 256;  // elements converted per operand at a time (fits in L1 with 6 buffers)

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

// All six operands (absent weights are a stride-0 fp32 one), each in its own dtype.
struct MixedDtypeBody {
  std::array<int, 6> dtype;
  float scale;

  void contiguous(std::array<char*, 6> p, int64_t n) {
    std::array<int64_t, 6> s;
    for (int k = 0; k < 6; ++k) s[k] = dtype_size(dtype[k]);
    strided(p, s, n);
  }

  void strided(std::array<char*, 6> p, const std::array<int64_t, 6>& s, int64_t n) {
    float in[5][kBlock], result[kBlock];
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t m = std::min(kBlock, n - b);
      for (int k = 1; k < 6; ++k) load_block(dtype[k], p[k] + b * s[k], s[k], m, in[k - 1]);
      for (int64_t i = 0; i < m; ++i)
        result[i] = bce_logits_grad(in[0][i], in[1][i], in[2][i], in[3][i], in[4][i], scale);
      store_block(dtype[0], p[0] + b * s[0], s[0], m, result);  // after the loads: in place is safe
    }
  }
};

void run_mixed_dtypes(const std::array<const TensorArg*, 6>& all, float scale) {
  float one = 1.0f;
  const TensorArg ones(TensorTuple(reinterpret_cast<uintptr_t>(&one), kFloat, all[0]->shape,
                                   std::vector<int64_t>(all[0]->shape.size(), 0)));
  std::array<const TensorArg*, 6> args = all;
  MixedDtypeBody body{{}, scale};
  for (int k = 0; k < 6; ++k) {
    if (args[k] == nullptr) args[k] = &ones;
    body.dtype[k] = args[k]->dtype;
  }
  for_each_element<6>(args, all[0]->shape, body);
}

void binary_cross_entropy_with_logits_backward(const TensorTuple& out, const TensorTuple& grad_output,
                                               const TensorTuple& self, const TensorTuple& target,
                                               const std::optional<TensorTuple>& weight,
                                               const std::optional<TensorTuple>& pos_weight, float scale) {
  const TensorArg o(out), g(grad_output), x(self), t(target);
  std::optional<TensorArg> w, p;
  if (weight) w.emplace(*weight);
  if (pos_weight) p.emplace(*pos_weight);
  const std::array<const TensorArg*, 6> all = {&o, &g, &x, &t, w ? &*w : nullptr, p ? &*p : nullptr};
  bool same_dtype = true;
  for (const TensorArg* arg : all) {
    if (arg == nullptr) continue;
    with_element_type(arg->dtype, [](auto) {});  // reject other dtypes here, not inside a worker thread
    same_dtype &= arg->dtype == o.dtype;
  }
  py::gil_scoped_release release;
  if (!same_dtype) {
    run_mixed_dtypes(all, scale);
    return;
  }
  with_element_type(o.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    run_same_dtype<T>(all, scale);
  });
}

void bind(py::module_& m) {
  m.def("binary_cross_entropy_with_logits_backward", &binary_cross_entropy_with_logits_backward,
        "out = ((p*t + 1 - t) * sigmoid(self) - p*t) * gradOutput * weight * scale");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
