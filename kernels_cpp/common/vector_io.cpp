#include "common/vector_io.h"

#include <stdexcept>
#include <string>

#include "common/elementwise.h"

namespace npuemu {
namespace {

// The engine of elementwise.h with nothing to compute: conversion on load, rounding on store.
struct Copy {
  static constexpr int kInputs = 1;
  template <class V>
  NPUEMU_INLINE typename V::F apply(const typename V::F* in) const {
    return in[0];
  }
};

void check_dtype(int dtype) {
  if (dtype != kFloat && dtype != kFloat16 && dtype != kBFloat16)
    throw std::invalid_argument("no fp32 conversion for aclDataType " + std::to_string(dtype));
}

void copy(int out_dtype, void* out, int in_dtype, const void* in, int64_t n, bool streaming) {
  check_dtype(out_dtype);
  check_dtype(in_dtype);
  run_dense(Copy{}, {out, const_cast<void*>(in)}, {out_dtype, in_dtype}, n, streaming);
}

template <class F>
void with_storage_type(int dtype, F&& f) {
  switch (dtype) {
    case kFloat16: return f(_Float16{});
    case kBFloat16: return f(bfloat16{});
    case kFloat: return f(float{});
    default: check_dtype(dtype);
  }
}

}  // namespace

void load_as_float(int dtype, const void* src, float* dst, int64_t n) { copy(kFloat, dst, dtype, src, n, false); }

void store_from_float(int dtype, const float* src, void* dst, int64_t n, bool streaming) {
  copy(dtype, dst, kFloat, src, n, streaming);
}

void gather_as_float(int dtype, const char* src, int64_t stride, float* dst, int64_t n) {
  with_storage_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < n; ++i) dst[i] = to_float(*reinterpret_cast<const T*>(src + i * stride));
  });
}

void scatter_from_float(int dtype, const float* src, char* dst, int64_t stride, int64_t n) {
  with_storage_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(dst + i * stride) = from_float<T>(src[i]);
  });
}

void store_fence() { simd::store_fence(); }

const char* vector_isa() { return simd::isa_name(simd::isa()); }

}  // namespace npuemu
