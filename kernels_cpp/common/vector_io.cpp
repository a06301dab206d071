#include "common/vector_io.h"

#include "common/dispatch.h"
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

void copy(int out_dtype, void* out, int in_dtype, const void* in, int64_t n, bool streaming) {
  for (int dtype : {out_dtype, in_dtype}) dispatch_storage("fp32 conversion", dtype, [](auto) {});
  run_dense(Copy{}, {out, const_cast<void*>(in)}, {out_dtype, in_dtype}, n, streaming);
}

}  // namespace

void load_as_float(int dtype, const void* src, float* dst, int64_t n) { copy(kFloat, dst, dtype, src, n, false); }

void store_from_float(int dtype, const float* src, void* dst, int64_t n, bool streaming) {
  copy(dtype, dst, kFloat, src, n, streaming);
}

void copy_elements(int dtype, const void* src, void* dst, int64_t n, bool streaming) {
  copy(dtype, dst, dtype, src, n, streaming);
}

void gather_as_float(int dtype, const char* src, int64_t stride, float* dst, int64_t n) {
  dispatch_storage("fp32 conversion", dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t i = 0; i < n; ++i) dst[i] = to_float(*reinterpret_cast<const T*>(src + i * stride));
  });
}

void scatter_from_float(int dtype, const float* src, char* dst, int64_t stride, int64_t n) {
  dispatch_storage("fp32 conversion", dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(dst + i * stride) = from_float<T>(src[i]);
  });
}

void store_fence() { simd::store_fence(); }

const char* vector_isa() { return simd::isa_name(simd::isa()); }

}  // namespace npuemu
