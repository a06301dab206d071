#include "common/vector_io.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "common/numeric.h"
#include "common/tensor_arg.h"

namespace npuemu {
namespace {

enum class Isa { kBaseline, kAvx2, kAvx512 };

Isa detect() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return Isa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
  return Isa::kBaseline;
}

const Isa kIsa = detect();

// ---- portable ----
void load_baseline(int dtype, const void* src, float* dst, int64_t n) {
  switch (dtype) {
    case kFloat16: {
      auto s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = half_bits_to_float(s[i]);
      break;
    }
    case kBFloat16: {
      auto s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bits_to_float(static_cast<uint32_t>(s[i]) << 16);
      break;
    }
    case kDouble: {
      auto s = static_cast<const double*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      break;
    }
    default: std::memcpy(dst, src, n * sizeof(float));
  }
}

void store_baseline(int dtype, const float* src, void* dst, int64_t n) {
  switch (dtype) {
    case kFloat16: {
      auto d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_half_bits(src[i]);
      break;
    }
    case kBFloat16: {
      auto d = static_cast<bfloat16*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = from_float<bfloat16>(src[i]);
      break;
    }
    case kDouble: {
      auto d = static_cast<double*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = src[i];
      break;
    }
    default: std::memcpy(dst, src, n * sizeof(float));
  }
}

// Streams whole 16-byte blocks once dst is 16-byte aligned (SSE2: every x86-64 has it).
void stream_bytes(char* dst, const char* src, int64_t bytes) {
  int64_t head = (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16;
  if (head > bytes) head = bytes;
  std::memcpy(dst, src, head);
  int64_t i = head;
  for (; i + 16 <= bytes; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
  std::memcpy(dst + i, src + i, bytes - i);
}

// ---- AVX2 + F16C ----
__attribute__((target("avx2,f16c,fma"))) void load_avx2(int dtype, const void* src, float* dst, int64_t n) {
  int64_t i = 0;
  if (dtype == kFloat16) {
    auto s = static_cast<const uint16_t*>(src);
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  } else if (dtype == kBFloat16) {
    auto s = static_cast<const uint16_t*>(src);
    for (; i + 8 <= n; i += 8) {
      __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
      _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
    }
  }
  if (i < n) load_baseline(dtype, static_cast<const char*>(src) + i * dtype_size(dtype), dst + i, n - i);
}

__attribute__((target("avx2,f16c,fma"))) __m128i bf16_round_avx2(__m256 v) {
  __m256i u = _mm256_castps_si256(v);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  __m256i r = _mm256_blendv_epi8(rounded, quiet, _mm256_castps_si256(nan));
  __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
  return _mm_packus_epi32(lo, hi);
}

// Elements to store one by one before dst reaches an `align`-byte boundary (streaming stores
// need aligned addresses).
int64_t head_elements(const void* dst, int64_t align, int64_t size, int64_t n) {
  const int64_t bytes = (align - static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst) % align)) % align;
  return std::min(n, bytes / size);
}

__attribute__((target("avx2,f16c,fma"))) void store_avx2(int dtype, const float* src, void* dst, int64_t n,
                                                          bool streaming) {
  const int64_t size = dtype_size(dtype);
  int64_t i = streaming ? head_elements(dst, dtype == kFloat ? 32 : 16, size, n) : 0;
  if (i) store_baseline(dtype, src, dst, i);
  if (dtype == kFloat) {
    auto d = static_cast<float*>(dst);
    for (; i + 8 <= n; i += 8) {
      const __m256 v = _mm256_loadu_ps(src + i);
      if (streaming) _mm256_stream_ps(d + i, v);
      else _mm256_storeu_ps(d + i, v);
    }
  } else if (dtype == kFloat16 || dtype == kBFloat16) {
    auto d = static_cast<uint16_t*>(dst);
    for (; i + 8 <= n; i += 8) {
      const __m256 v = _mm256_loadu_ps(src + i);
      const __m128i h = dtype == kFloat16 ? _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT) : bf16_round_avx2(v);
      if (streaming) _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), h);
      else _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), h);
    }
  }
  if (i < n) store_baseline(dtype, src + i, static_cast<char*>(dst) + i * size, n - i);
}

// ---- AVX-512 ----
__attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma"))) void load_avx512(int dtype, const void* src, float* dst,
                                                                                int64_t n) {
  int64_t i = 0;
  if (dtype == kFloat16) {
    auto s = static_cast<const uint16_t*>(src);
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
  } else if (dtype == kBFloat16) {
    auto s = static_cast<const uint16_t*>(src);
    for (; i + 16 <= n; i += 16) {
      __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
      _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
    }
  }
  if (i < n) load_avx2(dtype, static_cast<const char*>(src) + i * dtype_size(dtype), dst + i, n - i);
}

__attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma"))) __m256i bf16_round_avx512(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet));
}

__attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma"))) void store_avx512(int dtype, const float* src, void* dst,
                                                                                 int64_t n, bool streaming) {
  const int64_t size = dtype_size(dtype);
  int64_t i = streaming ? head_elements(dst, dtype == kFloat ? 64 : 32, size, n) : 0;
  if (i) store_baseline(dtype, src, dst, i);
  if (dtype == kFloat) {
    auto d = static_cast<float*>(dst);
    for (; i + 16 <= n; i += 16) {
      const __m512 v = _mm512_loadu_ps(src + i);
      if (streaming) _mm512_stream_ps(d + i, v);
      else _mm512_storeu_ps(d + i, v);
    }
  } else if (dtype == kFloat16 || dtype == kBFloat16) {
    auto d = static_cast<uint16_t*>(dst);
    for (; i + 16 <= n; i += 16) {
      const __m512 v = _mm512_loadu_ps(src + i);
      const __m256i h = dtype == kFloat16 ? _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT) : bf16_round_avx512(v);
      if (streaming) _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), h);
      else _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), h);
    }
  }
  if (i < n) store_avx2(dtype, src + i, static_cast<char*>(dst) + i * size, n - i, streaming);
}

}  // namespace

void load_as_float(int dtype, const void* src, float* dst, int64_t n) {
  switch (kIsa) {
    case Isa::kAvx512: load_avx512(dtype, src, dst, n); break;
    case Isa::kAvx2: load_avx2(dtype, src, dst, n); break;
    default: load_baseline(dtype, src, dst, n);
  }
}

void store_from_float(int dtype, const float* src, void* dst, int64_t n, bool streaming) {
  switch (kIsa) {
    case Isa::kAvx512: store_avx512(dtype, src, dst, n, streaming); return;
    case Isa::kAvx2: store_avx2(dtype, src, dst, n, streaming); return;
    default: break;
  }
  if (!streaming) {
    store_baseline(dtype, src, dst, n);
    return;
  }
  alignas(64) char converted[1024];  // convert a block in L1, then stream it out (SSE2)
  const int64_t size = dtype_size(dtype), block = sizeof(converted) / size;
  for (int64_t i = 0; i < n; i += block) {
    const int64_t count = n - i < block ? n - i : block;
    store_baseline(dtype, src + i, converted, count);
    stream_bytes(static_cast<char*>(dst) + i * size, converted, count * size);
  }
}

void store_fence() { _mm_sfence(); }

const char* vector_isa() {
  switch (kIsa) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    default: return "baseline";
  }
}

}  // namespace npuemu
