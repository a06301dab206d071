// Moving contiguous runs of elements between their storage dtype and fp32 buffers, with the
// fastest instructions of the machine (AVX-512, AVX2+F16C, or portable code), chosen at run time.
// Stores can stream past the caches (non-temporal): one write instead of read-for-ownership plus
// write, for outputs far larger than the caches.
#pragma once
#include <cstdint>

namespace npuemu {

// dst[i] = (float) src[i] for a FLOAT, FLOAT16, BFLOAT16 (or DOUBLE) source.
void load_as_float(int dtype, const void* src, float* dst, int64_t n);

// dst[i] = src[i] rounded to nearest-even into dtype; `streaming` bypasses the caches.
void store_from_float(int dtype, const float* src, void* dst, int64_t n, bool streaming);

// Make streamed stores visible before the kernel returns.
void store_fence();

// Outputs larger than this many bytes are written with streaming stores.
constexpr int64_t kStreamingThreshold = int64_t(8) << 20;

const char* vector_isa();  // "avx512", "avx2" or "baseline": what this machine runs

}  // namespace npuemu
