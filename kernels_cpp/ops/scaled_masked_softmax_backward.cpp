// aclnnScaledMaskedSoftmaxBackward (spec/OPS.md §5.2). For each row r of [B, N, S1, S2] (the
// reduction runs along S2): p = gradOutput * y; s = sum(p); out = (p - s * y) * scale, and out = 0
// wherever mask (broadcast over B and N through stride 0) is true. fp32 compute, fp16/bf16 rounded
// to nearest-even on output.
//
// Each row is read once into three per-thread fp32 buffers (y, p, and the tree-sum scratch), which
// stay in L1/L2 (S2 <= 8192), then written in a second pass over those buffers. A row is fully
// read before it is written, so out may alias gradOutput or y with the same layout.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <vector>

#include "common/dispatch.h"
#include "common/elementwise.h"
#include "common/registry.h"
#include "common/thread_pool.h"
#include "common/vector_io.h"
#include "common/vmath.h"

namespace py = pybind11;

namespace npuemu {
namespace {

// Sum of p[0, n) in a fixed binary tree: the upper half is folded onto the lower half (element
// i + ceil(n/2) added to element i) until one value remains. The order depends only on n, so the
// result is the same whatever thread computes the row; each fold is a dense, vectorisable add.
float tree_sum(const float* p, float* scratch, int64_t n) {
  if (n == 1) return p[0];
  int64_t half = (n + 1) / 2;
  for (int64_t i = 0; i < n - half; ++i) scratch[i] = p[i] + p[i + half];
  if (n & 1) scratch[half - 1] = p[half - 1];  // the middle element has no partner at this level
  for (n = half; n > 1; n = half) {
    half = (n + 1) / 2;
    for (int64_t i = 0; i < n - half; ++i) scratch[i] += scratch[i + half];
  }
  return scratch[0];
}

NPUEMU_VECTORIZED void multiply_into(float* p, const float* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) p[j] *= y[j];
}

// out = (p - s * y) * scale, skipped multiply for scale 1, then 0 where the (dense) mask is set.
NPUEMU_VECTORIZED void finish_row(float* out, const float* p, const float* y, const unsigned char* mask, float sum,
                                  float scale, int64_t n) {
  if (scale != 1.0f) {
    for (int64_t j = 0; j < n; ++j) out[j] = mask[j] ? 0.0f : (p[j] - sum * y[j]) * scale;
  } else {
    for (int64_t j = 0; j < n; ++j) out[j] = mask[j] ? 0.0f : p[j] - sum * y[j];
  }
}

struct Row {
  const char* grad;
  const char* y;
  const unsigned char* mask;
  char* out;
};

template <class T>
class RowKernel {
 public:
  RowKernel(int dtype, int64_t cols, int64_t grad_stride, int64_t y_stride, int64_t mask_stride, int64_t out_stride,
            float scale, bool streaming)
      : dtype_(dtype), cols_(cols), grad_stride_(grad_stride), y_stride_(y_stride), mask_stride_(mask_stride),
        out_stride_(out_stride), scale_(scale), streaming_(streaming), y_(cols), p_(cols), scratch_(cols) {}

  void operator()(const Row& row) {
    load(row);
    const float sum = tree_sum(p_.data(), scratch_.data(), cols_);
    store(row, sum);
  }

 private:
  // Pass 1: the only read of gradOutput and y for this row.
  void load(const Row& row) {
    const T* grad = reinterpret_cast<const T*>(row.grad);
    const T* y = reinterpret_cast<const T*>(row.y);
    float* yf = y_.data();
    float* p = p_.data();
    if (grad_stride_ == 1 && y_stride_ == 1) {  // dense rows: vectorised conversion and multiply
      load_as_float(dtype_, y, yf, cols_);
      load_as_float(dtype_, grad, p, cols_);
      multiply_into(p, yf, cols_);
    } else {
      for (int64_t j = 0; j < cols_; ++j) {
        yf[j] = to_float(y[j * y_stride_]);
        p[j] = to_float(grad[j * grad_stride_]) * yf[j];
      }
    }
  }

  // Pass 2: out = (p - s * y) * scale (the multiply is skipped for scale 1, as the kernel does),
  // then 0 where the mask is set, whatever the inputs hold there (NaN included).
  void store(const Row& row, float sum) {
    T* out = reinterpret_cast<T*>(row.out);
    const float* yf = y_.data();
    const float* p = p_.data();
    if (mask_stride_ == 1 && out_stride_ == 1) {  // dense rows: the result overwrites the scratch buffer
      float* result = scratch_.data();
      finish_row(result, p, yf, row.mask, sum, scale_, cols_);
      store_from_float(dtype_, result, out, cols_, streaming_);
      return;
    }
    const bool scaled = scale_ != 1.0f;
    for (int64_t j = 0; j < cols_; ++j) {
      float value = p[j] - sum * yf[j];
      if (scaled) value *= scale_;
      if (row.mask[j * mask_stride_]) value = 0.0f;
      out[j * out_stride_] = from_float<T>(value);
    }
  }

  int dtype_;
  int64_t cols_, grad_stride_, y_stride_, mask_stride_, out_stride_;
  float scale_;
  bool streaming_;
  std::vector<float> y_, p_, scratch_;
};

// Byte offset of row `r` (flat index over B, N, S1) in a tensor with element strides `strides`.
int64_t row_offset(int64_t r, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                   int64_t itemsize) {
  int64_t offset = 0;
  for (int d = 2; d >= 0; --d) {
    offset += (r % shape[d]) * strides[d];
    r /= shape[d];
  }
  return offset * itemsize;
}

void check_operands(const TensorArg& go, const TensorArg& y, const TensorArg& mask, const TensorArg& out) {
  if (go.shape.size() != 4 || y.shape != go.shape || mask.shape != go.shape || out.shape != go.shape)
    throw std::invalid_argument("scaled_masked_softmax_backward expects four [B, N, S1, S2] operands");
  if (y.dtype != go.dtype || out.dtype != go.dtype || mask.dtype != kBool)
    throw std::invalid_argument("scaled_masked_softmax_backward: gradOutput, y, out need one dtype, mask BOOL");
}

void scaled_masked_softmax_backward(const TensorTuple& grad_output, const TensorTuple& y_tuple,
                                    const TensorTuple& mask_tuple, const TensorTuple& out_tuple, float scale) {
  const TensorArg go(grad_output), y(y_tuple), mask(mask_tuple), out(out_tuple);
  check_operands(go, y, mask, out);
  const int64_t cols = go.shape[3];
  const int64_t rows = go.shape[0] * go.shape[1] * go.shape[2];
  if (rows == 0 || cols == 0) return;
  py::gil_scoped_release release;
  dispatch_floating(go.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>) {
      throw std::invalid_argument("aclnnScaledMaskedSoftmaxBackward has no DOUBLE kernel");
    } else {
      const int64_t size = sizeof(T);
      const bool streaming = out.numel() * size > kStreamingThreshold;
      parallel_for(rows, std::max<int64_t>(1, kGrain / cols), [&](int64_t begin, int64_t end) {
        RowKernel<T> kernel(go.dtype, cols, go.strides[3], y.strides[3], mask.strides[3], out.strides[3], scale,
                            streaming);
        for (int64_t r = begin; r < end; ++r) {
          const Row row{go.data + row_offset(r, go.shape, go.strides, size),
                        y.data + row_offset(r, y.shape, y.strides, size),
                        reinterpret_cast<const unsigned char*>(mask.data + row_offset(r, mask.shape, mask.strides, 1)),
                        out.data + row_offset(r, out.shape, out.strides, size)};
          kernel(row);
        }
        if (streaming) store_fence();
      });
    }
  });
}

void bind(py::module_& m) {
  m.def("scaled_masked_softmax_backward", &scaled_masked_softmax_backward,
        "out = (gradOutput*y - sum(gradOutput*y)*y) * scale, 0 where mask");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
