// The one iteration helper of the element-wise kernels. Operands (output first) share an
// iteration shape, each with its own element strides (0 along broadcast dims). Dims are
// coalesced where every operand is contiguous across them, so a contiguous call becomes one flat
// loop that the compiler vectorises; anything else runs row by row with explicit strides.
// Work is split into fixed chunks across the pool: the result never depends on the thread count.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "common/tensor_arg.h"
#include "common/thread_pool.h"
#include "common/vector_io.h"

namespace npuemu {

template <int N>
struct Operands {
  std::array<char*, N> data;
  std::array<int64_t, N> itemsize;
  std::vector<int64_t> shape;                    // coalesced iteration shape
  std::vector<std::array<int64_t, N>> strides;   // byte strides per coalesced dim
};

template <int N>
Operands<N> coalesce(const std::array<const TensorArg*, N>& args, const std::vector<int64_t>& shape) {
  Operands<N> ops;
  for (int k = 0; k < N; ++k) {
    ops.data[k] = args[k]->data;
    ops.itemsize[k] = args[k]->itemsize();
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    std::array<int64_t, N> s;
    for (int k = 0; k < N; ++k) s[k] = args[k]->strides[d] * ops.itemsize[k];
    if (!ops.shape.empty()) {
      bool mergeable = true;  // the previous dim steps exactly over this one for every operand
      for (int k = 0; k < N; ++k) mergeable &= ops.strides.back()[k] == s[k] * shape[d];
      if (mergeable) {
        ops.shape.back() *= shape[d];
        ops.strides.back() = s;
        continue;
      }
    }
    ops.shape.push_back(shape[d]);
    ops.strides.push_back(s);
  }
  if (ops.shape.empty()) {  // 0-D or all ones: one element
    ops.shape.push_back(1);
    ops.strides.push_back({});
    for (int k = 0; k < N; ++k) ops.strides.back()[k] = ops.itemsize[k];
  }
  return ops;
}

constexpr int64_t kGrain = 1 << 14;  // elements per chunk at least: below that threads cost more than they save

// Body must provide:
//   contiguous(std::array<char*, N> p, int64_t n)       every operand dense over n elements
//   strided(std::array<char*, N> p, const std::array<int64_t, N>& byte_strides, int64_t n)
template <int N, class Body>
void for_each_element(const std::array<const TensorArg*, N>& args, const std::vector<int64_t>& shape, Body& body) {
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  if (total == 0) return;
  Operands<N> ops = coalesce<N>(args, shape);
  const int rank = static_cast<int>(ops.shape.size());
  const int64_t inner = ops.shape[rank - 1];
  const auto& inner_strides = ops.strides[rank - 1];
  bool dense = rank == 1;
  for (int k = 0; k < N; ++k) dense &= inner_strides[k] == ops.itemsize[k];

  if (dense) {
    parallel_for(inner, kGrain, [&](int64_t begin, int64_t end) {
      std::array<char*, N> p;
      for (int k = 0; k < N; ++k) p[k] = ops.data[k] + begin * ops.itemsize[k];
      body.contiguous(p, end - begin);
    });
    return;
  }
  const int64_t rows = total / inner;
  bool inner_dense = true;
  for (int k = 0; k < N; ++k) inner_dense &= inner_strides[k] == ops.itemsize[k];
  parallel_for(rows, std::max<int64_t>(1, kGrain / inner), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> index(rank - 1, 0);
    int64_t r = begin;  // unravel the first row index of this chunk
    for (int d = rank - 2; d >= 0; --d) {
      index[d] = r % ops.shape[d];
      r /= ops.shape[d];
    }
    for (int64_t row = begin; row < end; ++row) {
      std::array<char*, N> p = ops.data;
      for (int d = 0; d < rank - 1; ++d)
        for (int k = 0; k < N; ++k) p[k] += index[d] * ops.strides[d][k];
      if (inner_dense) body.contiguous(p, inner);
      else body.strided(p, inner_strides, inner);
      for (int d = rank - 2; d >= 0; --d) {  // next row
        if (++index[d] < ops.shape[d]) break;
        index[d] = 0;
      }
    }
  });
}

// Contiguous runs computed through fp32 chunk buffers: each input is converted to fp32 (vectorised),
// `compute(float* out, const float* const* in, int64_t n)` works on fp32 arrays (write it as a
// NPUEMU_VECTORIZED loop), and the result is rounded to the output dtype, streamed past the caches
// when `streaming`. FLOAT inputs and outputs are used in place, without copies.
constexpr int64_t kChunk = 256;

template <int NIN, class Compute>
void float_chunks(char* out, int out_dtype, const std::array<const char*, NIN>& in, const std::array<int, NIN>& in_dtypes,
                  int64_t n, bool streaming, Compute&& compute) {
  alignas(64) float buffers[NIN][kChunk];
  alignas(64) float result[kChunk];
  const int64_t out_size = dtype_size(out_dtype);
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t count = n - i < kChunk ? n - i : kChunk;
    const float* args[NIN];
    for (int k = 0; k < NIN; ++k) {
      if (in_dtypes[k] == kFloat) {
        args[k] = reinterpret_cast<const float*>(in[k]) + i;
      } else {
        load_as_float(in_dtypes[k], in[k] + i * dtype_size(in_dtypes[k]), buffers[k], count);
        args[k] = buffers[k];
      }
    }
    float* dst = (out_dtype == kFloat && !streaming) ? reinterpret_cast<float*>(out) + i : result;
    compute(dst, args, count);
    if (dst == result) store_from_float(out_dtype, result, out + i * out_size, count, streaming);
  }
  if (streaming) store_fence();
}

}  // namespace npuemu
