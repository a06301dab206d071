// Moving runs of elements between their storage dtype (FLOAT, FLOAT16, BFLOAT16) and fp32 arrays,
// with the fastest instructions of the machine (AVX-512, AVX2+F16C, or portable code), chosen at
// run time. Stores can stream past the caches (non-temporal): one write instead of
// read-for-ownership plus write, for outputs far larger than the caches.
#pragma once
#include <cstdint>

namespace npuemu {

// dst[i] = (float) src[i] for n dense elements.
void load_as_float(int dtype, const void* src, float* dst, int64_t n);

// dst[i] = src[i] rounded to nearest-even into dtype; `streaming` bypasses the caches. Streamed
// stores are not fenced here: the kernel calls store_fence() once its work is done (a fence waits
// until every streamed line has reached memory; after each chunk of a row, it made
// ScaledMaskedSoftmaxBackward's buffered rows 1.7x slower).
void store_from_float(int dtype, const float* src, void* dst, int64_t n, bool streaming);

// dst[i] = src[i] for n dense elements of one dtype, bit for bit; `streaming` bypasses the caches,
// unfenced as above.
void copy_elements(int dtype, const void* src, void* dst, int64_t n, bool streaming);

// The same one element at a time, `stride` bytes apart.
void gather_as_float(int dtype, const char* src, int64_t stride, float* dst, int64_t n);
void scatter_from_float(int dtype, const float* src, char* dst, int64_t stride, int64_t n);

// Make streamed stores visible before the kernel returns: every thread that streamed, once its work is done.
void store_fence();

const char* vector_isa();  // "avx512", "avx2" or "baseline": what this machine runs

}  // namespace npuemu
