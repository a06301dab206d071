// aclnnScaledMaskedSoftmaxBackward (spec/OPS.md §5.2). For each row r of [B, N, S1, S2] (the
// reduction runs along S2): p = gradOutput * y; s = sum(p); out = (p - s * y) * scale, and out = 0
// wherever mask (broadcast over B and N through stride 0) is true. fp32 compute, fp16/bf16 rounded
// to nearest-even on output.
//
// The op is memory-bound: each element of gradOutput and y is read from memory once, the output
// written once, and the work in between must stay well below the memory time.
// - Rows are visited in memory order, split evenly across threads; a row's result never depends
//   on which thread runs it. (Visiting the rows that share a broadcast mask row one after another
//   was measured 1.5-2x slower: it breaks the sequential streams the memory system favours.)
// - Pass 1 reads a row of gradOutput and y and folds the first level of the row sum (a fixed
//   binary tree); pass 2 finishes the row from the same inputs, now in L1/L2 (S2 <= 8192), and
//   writes each vector right after computing it, so that stores (streamed past the caches for
//   large outputs) interleave with the arithmetic.
// - With AVX-512, both passes convert fp16/bf16 in registers: the only fp32 array written is the
//   half-row of partial sums; and while a row is finished, the inputs of a row about 12 KB ahead
//   are prefetched into L2 (without that, memory sat idle while rows were computed from cache:
//   53-77% of a STREAM triad instead of ~90-110% with two threads).
// - Otherwise (other machines, strided rows, out overlapping an input other than as the same
//   tensor) the row is widened into fp32 buffers first, then finished in chunks from those buffers
//   with the same arithmetic, so results are bit-identical whichever way a row goes.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
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

// ---- fp32 arithmetic on dense arrays (every variant gives the same bits: no FMA contraction) ----

// The first level of the row sum: sum[i] = g_lo[i] * y_lo[i] + g_hi[i] * y_hi[i].
NPUEMU_VECTORIZED void add_products(float* __restrict sum, const float* g_lo, const float* y_lo, const float* g_hi,
                                    const float* y_hi, int64_t n) {
  for (int64_t i = 0; i < n; ++i) sum[i] = g_lo[i] * y_lo[i] + g_hi[i] * y_hi[i];
}

NPUEMU_VECTORIZED void add_into(float* __restrict lo, const float* __restrict hi, int64_t n) {
  for (int64_t i = 0; i < n; ++i) lo[i] += hi[i];
}

// The rest of the row sum, in the fixed binary tree of the docs: the upper half of a level (from
// index ceil(n/2)) is added onto its lower half until one value remains; the middle element of an
// odd level passes unchanged. `level` holds the n partial sums left by the first level and is
// overwritten. The order depends only on n.
float fold_to_sum(float* level, int64_t n) {
  while (n > 1) {
    const int64_t half = (n + 1) / 2;
    add_into(level, level + half, n - half);
    n = half;
  }
  return level[0];
}

// out = (g * y - sum * y) * scale (no multiply when scale is 1, as the kernel does), then +0
// where the mask is set, whatever the inputs hold there (NaN included).
NPUEMU_VECTORIZED void finish(float* __restrict out, const float* g, const float* y, const unsigned char* mask,
                              float sum, float scale, int64_t n) {
  if (scale != 1.0f) {
    for (int64_t j = 0; j < n; ++j) out[j] = mask[j] ? 0.0f : (g[j] * y[j] - sum * y[j]) * scale;
  } else {
    for (int64_t j = 0; j < n; ++j) out[j] = mask[j] ? 0.0f : g[j] * y[j] - sum * y[j];
  }
}

// fp32 row buffer starting on a cache line, so that whole-vector loads and stores never split one.
class RowBuffer {
 public:
  explicit RowBuffer(int64_t n) : storage_(n + kLineFloats) {
    const auto address = reinterpret_cast<uintptr_t>(storage_.data());
    data_ = storage_.data() + (kLineFloats - address / sizeof(float) % kLineFloats) % kLineFloats;
  }
  float* data() { return data_; }
  float& operator[](int64_t i) { return data_[i]; }

 private:
  static constexpr int64_t kLineFloats = 16;
  std::vector<float> storage_;
  float* data_;
};

// ---- visiting the rows ----

enum Operand { kGrad, kY, kMask, kOut, kOperands };
using RowPointers = std::array<char*, kOperands>;

// Rows of [B, N, S1] in order, with the byte address of each operand's row; advancing is
// incremental (no division per row).
class RowCursor {
 public:
  RowCursor(const std::array<const TensorArg*, kOperands>& operands, int64_t first_row) {
    for (int d = 0; d < 3; ++d) {
      extent_[d] = operands[kGrad]->shape[d];
      for (int t = 0; t < kOperands; ++t) step_[d][t] = operands[t]->strides[d] * operands[t]->itemsize();
    }
    for (int t = 0; t < kOperands; ++t) row_[t] = operands[t]->data;
    for (int d = 2; d >= 0; --d) {
      index_[d] = first_row % extent_[d];
      first_row /= extent_[d];
      for (int t = 0; t < kOperands; ++t) row_[t] += index_[d] * step_[d][t];
    }
  }

  const RowPointers& row() const { return row_; }

  void advance() {
    for (int d = 2; d >= 0; --d) {
      for (int t = 0; t < kOperands; ++t) row_[t] += step_[d][t];
      if (++index_[d] < extent_[d]) return;
      for (int t = 0; t < kOperands; ++t) row_[t] -= extent_[d] * step_[d][t];
      index_[d] = 0;
    }
  }

 private:
  std::array<int64_t, 3> extent_{}, index_{};
  std::array<std::array<int64_t, kOperands>, 3> step_{};
  RowPointers row_{};
};

struct Layout {
  int dtype;
  int64_t cols;
  float scale;
  bool streaming;                             // non-temporal stores for the output
  std::array<int64_t, kOperands> strides;     // element strides along S2
};

// ---- rows through fp32 buffers: any layout, any machine ----

// The whole row is widened into fp32 buffers before anything is written, so out may overlap the
// inputs in any way within a row. Dense operands go through the vectorised conversions.
template <class T>
class BufferedRows {
 public:
  explicit BufferedRows(const Layout& layout)
      : l_(layout), g_(layout.cols), y_(layout.cols), level_((layout.cols + 1) / 2) {}

  void operator()(const RowPointers& row) {
    const int64_t n = l_.cols, half = (n + 1) / 2;
    widen(row[kGrad], l_.strides[kGrad], g_.data());
    widen(row[kY], l_.strides[kY], y_.data());
    add_products(level_.data(), g_.data(), y_.data(), g_.data() + half, y_.data() + half, n - half);
    if (n & 1) level_[half - 1] = g_[half - 1] * y_[half - 1];  // no partner at the first level
    const float sum = fold_to_sum(level_.data(), half);
    for (int64_t j = 0; j < n; j += kChunk) {
      const int64_t count = std::min(kChunk, n - j);
      finish(result_, g_.data() + j, y_.data() + j, mask_chunk(row[kMask], j, count), sum, l_.scale, count);
      write(row[kOut], j, count);
    }
  }

 private:
  void widen(const char* src, int64_t stride, float* dst) const {
    if (stride == 1) return load_as_float(l_.dtype, src, dst, l_.cols);
    const T* s = reinterpret_cast<const T*>(src);
    for (int64_t j = 0; j < l_.cols; ++j) dst[j] = to_float(s[j * stride]);
  }

  const unsigned char* mask_chunk(const char* mask, int64_t at, int64_t count) {
    const int64_t stride = l_.strides[kMask];
    if (stride == 1) return reinterpret_cast<const unsigned char*>(mask) + at;
    for (int64_t k = 0; k < count; ++k) mask_[k] = mask[(at + k) * stride];
    return mask_;
  }

  void write(char* out, int64_t at, int64_t count) const {
    const int64_t stride = l_.strides[kOut];
    if (stride == 1) return store_from_float(l_.dtype, result_, out + at * sizeof(T), count, l_.streaming);
    T* o = reinterpret_cast<T*>(out);
    for (int64_t k = 0; k < count; ++k) o[(at + k) * stride] = from_float<T>(result_[k]);
  }

  Layout l_;
  RowBuffer g_, y_, level_;
  alignas(64) float result_[kChunk];
  unsigned char mask_[kChunk];
};

// ---- AVX-512 rows: dense, conversions in registers, no fp32 copies of the inputs ----

#define NPUEMU_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))

// 16 values of T <-> one fp32 vector; masked forms touch only the lanes in `m`. Streaming stores
// need an address aligned to kAlign bytes.
template <class T>
struct Lanes;

template <>
struct Lanes<float> {
  static constexpr int64_t kAlign = 64;
  NPUEMU_AVX512 static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  NPUEMU_AVX512 static __m512 load(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
  NPUEMU_AVX512 static void store(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
  NPUEMU_AVX512 static void store(float* p, __m512 v, __mmask16 m) { _mm512_mask_storeu_ps(p, m, v); }
  NPUEMU_AVX512 static void stream(float* p, __m512 v) { _mm512_stream_ps(p, v); }
};

// fp16 and bf16: 16-bit storage widened to / narrowed from fp32 by Convert.
template <class T, class Convert>
struct Lanes16 {
  static constexpr int64_t kAlign = 32;
  NPUEMU_AVX512 static __m512 load(const T* p) {
    return Convert::widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  NPUEMU_AVX512 static __m512 load(const T* p, __mmask16 m) { return Convert::widen(_mm256_maskz_loadu_epi16(m, p)); }
  NPUEMU_AVX512 static void store(T* p, __m512 v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), Convert::narrow(v));
  }
  NPUEMU_AVX512 static void store(T* p, __m512 v, __mmask16 m) { _mm256_mask_storeu_epi16(p, m, Convert::narrow(v)); }
  NPUEMU_AVX512 static void stream(T* p, __m512 v) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), Convert::narrow(v));
  }
};

struct Half {
  NPUEMU_AVX512 static __m512 widen(__m256i h) { return _mm512_cvtph_ps(h); }
  NPUEMU_AVX512 static __m256i narrow(__m512 v) { return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT); }
};

struct Brain {
  NPUEMU_AVX512 static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  // Round to nearest-even; NaN stays NaN (quiet), as from_float<bfloat16> and store_from_float do.
  NPUEMU_AVX512 static __m256i narrow(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), quiet));
  }
};

template <>
struct Lanes<_Float16> : Lanes16<_Float16, Half> {};
template <>
struct Lanes<bfloat16> : Lanes16<bfloat16, Brain> {};

NPUEMU_AVX512 inline __mmask16 first_lanes(int64_t count) { return static_cast<__mmask16>((1u << count) - 1); }

// fold_to_sum with the same additions in the same order: levels wider than a vector in memory,
// the last ones inside a register (lane i + half moved onto lane i).
NPUEMU_AVX512 float fold_to_sum_avx512(float* level, int64_t n) {
  for (; n > 16; n = (n + 1) / 2) {
    const int64_t half = (n + 1) / 2, count = n - half;
    int64_t i = 0;
    for (; i + 16 <= count; i += 16)
      _mm512_storeu_ps(level + i, _mm512_add_ps(_mm512_loadu_ps(level + i), _mm512_loadu_ps(level + half + i)));
    if (i < count) {
      const __mmask16 m = first_lanes(count - i);
      _mm512_mask_storeu_ps(level + i, m,
                            _mm512_add_ps(_mm512_maskz_loadu_ps(m, level + i), _mm512_maskz_loadu_ps(m, level + half + i)));
    }
  }
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  __m512 v = _mm512_maskz_loadu_ps(first_lanes(n), level);
  for (; n > 1; n = (n + 1) / 2) {
    const int64_t half = (n + 1) / 2;
    const __m512 upper = _mm512_permutexvar_ps(_mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(half))), v);
    v = _mm512_mask_add_ps(v, first_lanes(n - half), v, upper);
  }
  return _mm512_cvtss_f32(v);
}

// Dense rows where out is either apart from the inputs or the very same tensor as one of them
// (each vector of out is written after the same vector of the inputs is read).
template <class T>
class Avx512Rows {
 public:
  explicit Avx512Rows(const Layout& layout) : l_(layout), level_((layout.cols + 1) / 2) {}

  // Pass 1 then pass 2 of `row`; `ahead` (a later row, or null) is prefetched meanwhile.
  NPUEMU_AVX512 void operator()(const RowPointers& row, const RowPointers* ahead) {
    const float sum = row_sum(reinterpret_cast<const T*>(row[kGrad]), reinterpret_cast<const T*>(row[kY]));
    if (l_.scale != 1.0f) finish_row<true>(row, sum, ahead);
    else finish_row<false>(row, sum, ahead);
  }

 private:
  // Pass 1: the first level of the sum, g[i] * y[i] + g[i + half] * y[i + half], then the rest.
  NPUEMU_AVX512 float row_sum(const T* g, const T* y) {
    const int64_t n = l_.cols, half = (n + 1) / 2, pairs = n - half;
    float* level = level_.data();
    int64_t i = 0;
    for (; i + 16 <= pairs; i += 16) {
      const __m512 lo = _mm512_mul_ps(Lanes<T>::load(g + i), Lanes<T>::load(y + i));
      const __m512 hi = _mm512_mul_ps(Lanes<T>::load(g + half + i), Lanes<T>::load(y + half + i));
      _mm512_storeu_ps(level + i, _mm512_add_ps(lo, hi));
    }
    if (i < pairs) {
      const __mmask16 m = first_lanes(pairs - i);
      const __m512 lo = _mm512_mul_ps(Lanes<T>::load(g + i, m), Lanes<T>::load(y + i, m));
      const __m512 hi = _mm512_mul_ps(Lanes<T>::load(g + half + i, m), Lanes<T>::load(y + half + i, m));
      _mm512_mask_storeu_ps(level + i, m, _mm512_add_ps(lo, hi));
    }
    if (n & 1) level[half - 1] = to_float(g[half - 1]) * to_float(y[half - 1]);  // no partner
    return fold_to_sum_avx512(level, half);
  }

  // (g * y - sum * y) * scale, +0 where the mask byte is set, for the lanes in m.
  template <bool kScaled>
  NPUEMU_AVX512 static __m512 finish16(const T* g, const T* y, const unsigned char* mask, __m512 sum, __m512 scale,
                                       __mmask16 m) {
    const __m512 gv = Lanes<T>::load(g, m), yv = Lanes<T>::load(y, m);
    const __m128i bytes = _mm_maskz_loadu_epi8(m, mask);
    __m512 r = _mm512_sub_ps(_mm512_mul_ps(gv, yv), _mm512_mul_ps(sum, yv));
    if (kScaled) r = _mm512_mul_ps(r, scale);
    return _mm512_maskz_mov_ps(_mm_testn_epi8_mask(bytes, bytes), r);
  }

  // Pass 2: each vector stored as soon as it is computed, streamed past the caches for large
  // outputs (from the first address aligned for that).
  template <bool kScaled>
  NPUEMU_AVX512 void finish_row(const RowPointers& row, float sum_value, const RowPointers* ahead) const {
    const T* g = reinterpret_cast<const T*>(row[kGrad]);
    const T* y = reinterpret_cast<const T*>(row[kY]);
    const unsigned char* mask = reinterpret_cast<const unsigned char*>(row[kMask]);
    T* out = reinterpret_cast<T*>(row[kOut]);
    const int64_t n = l_.cols;
    const __m512 sum = _mm512_set1_ps(sum_value), scale = _mm512_set1_ps(l_.scale);
    int64_t j = 0;
    if (l_.streaming) {
      const int64_t misaligned = static_cast<int64_t>(reinterpret_cast<uintptr_t>(out) % Lanes<T>::kAlign);
      const int64_t head = std::min<int64_t>(n, (Lanes<T>::kAlign - misaligned) % Lanes<T>::kAlign / sizeof(T));
      if (head) {
        const __mmask16 m = first_lanes(head);
        Lanes<T>::store(out, finish16<kScaled>(g, y, mask, sum, scale, m), m);
        j = head;
      }
      for (; j + 16 <= n; j += 16) {
        prefetch(ahead, j);
        Lanes<T>::stream(out + j, finish16<kScaled>(g + j, y + j, mask + j, sum, scale, 0xffff));
      }
    } else {
      for (; j + 16 <= n; j += 16) {
        prefetch(ahead, j);
        Lanes<T>::store(out + j, finish16<kScaled>(g + j, y + j, mask + j, sum, scale, 0xffff));
      }
    }
    if (j < n) {
      const __mmask16 m = first_lanes(n - j);
      Lanes<T>::store(out + j, finish16<kScaled>(g + j, y + j, mask + j, sum, scale, m), m);
    }
  }

  // The inputs of row `ahead` at column j, into L2: the hardware prefetcher alone leaves memory
  // idle while a row is computed from cache.
  NPUEMU_AVX512 static void prefetch(const RowPointers* ahead, int64_t j) {
    if (!ahead) return;
    _mm_prefetch((*ahead)[kGrad] + j * sizeof(T), _MM_HINT_T1);
    _mm_prefetch((*ahead)[kY] + j * sizeof(T), _MM_HINT_T1);
    _mm_prefetch((*ahead)[kMask] + j, _MM_HINT_T1);
  }

  Layout l_;
  RowBuffer level_;
};

// ---- the call ----

void check_operands(const TensorArg& go, const TensorArg& y, const TensorArg& mask, const TensorArg& out) {
  if (go.shape.size() != 4 || y.shape != go.shape || mask.shape != go.shape || out.shape != go.shape)
    throw std::invalid_argument("scaled_masked_softmax_backward expects four [B, N, S1, S2] operands");
  if (y.dtype != go.dtype || out.dtype != go.dtype || mask.dtype != kBool)
    throw std::invalid_argument("scaled_masked_softmax_backward: gradOutput, y, out need one dtype, mask BOOL");
}

// Lowest and one-past-highest byte a tensor's elements occupy.
std::pair<const char*, const char*> byte_span(const TensorArg& t) {
  const char* low = t.data;
  const char* high = t.data + t.itemsize();
  for (size_t d = 0; d < t.shape.size(); ++d) {
    const int64_t reach = (t.shape[d] - 1) * t.strides[d] * t.itemsize();
    (reach < 0 ? low : high) += reach;
  }
  return {low, high};
}

// Whether out shares memory with `in` other than by being the very same tensor.
bool overlaps_otherwise(const TensorArg& out, const TensorArg& in) {
  if (out.data == in.data && out.strides == in.strides) return false;
  const auto a = byte_span(out), b = byte_span(in);
  return a.first < b.second && b.first < a.second;
}

bool has_avx512() {
  static const bool yes = std::strcmp(vector_isa(), "avx512") == 0;  // the same test as the conversions
  return yes;
}

// Rows ahead of the one being read to prefetch: about this many bytes of input in flight.
constexpr int64_t kPrefetchBytes = 12 << 10;

int64_t prefetch_distance(const Layout& layout) {
  const int64_t row_bytes = layout.cols * (2 * dtype_size(layout.dtype) + 1);
  return (kPrefetchBytes + row_bytes - 1) / row_bytes;
}

template <class T>
void run_rows(const std::array<const TensorArg*, kOperands>& operands, const Layout& layout, bool vector_rows) {
  const int64_t rows = operands[kGrad]->numel() / layout.cols;
  parallel_for(rows, std::max<int64_t>(1, kGrain / layout.cols), [&](int64_t begin, int64_t end) {
    RowCursor cursor(operands, begin);
    if (vector_rows) {
      Avx512Rows<T> kernel(layout);
      const int64_t distance = prefetch_distance(layout);
      RowCursor ahead(operands, std::min(begin + distance, end - 1));
      for (int64_t r = begin; r < end; ++r, cursor.advance()) {
        const bool prefetching = r + distance < end;
        kernel(cursor.row(), prefetching ? &ahead.row() : nullptr);
        if (prefetching) ahead.advance();
      }
    } else {
      BufferedRows<T> kernel(layout);
      for (int64_t r = begin; r < end; ++r, cursor.advance()) kernel(cursor.row());
    }
    if (layout.streaming) store_fence();
  });
}

void scaled_masked_softmax_backward(const TensorTuple& grad_output, const TensorTuple& y_tuple,
                                    const TensorTuple& mask_tuple, const TensorTuple& out_tuple, float scale) {
  const TensorArg go(grad_output), y(y_tuple), mask(mask_tuple), out(out_tuple);
  check_operands(go, y, mask, out);
  if (go.dtype == kDouble) throw std::invalid_argument("aclnnScaledMaskedSoftmaxBackward has no DOUBLE kernel");
  if (go.numel() == 0) return;
  py::gil_scoped_release release;
  const Layout layout{go.dtype, go.shape[3], scale, out.numel() * out.itemsize() > kStreamingThreshold,
                      {go.strides[3], y.strides[3], mask.strides[3], out.strides[3]}};
  const bool dense = layout.strides == std::array<int64_t, kOperands>{1, 1, 1, 1};
  const bool vector_rows = dense && has_avx512() && !overlaps_otherwise(out, go) && !overlaps_otherwise(out, y);
  dispatch_floating(go.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, double>) run_rows<T>({&go, &y, &mask, &out}, layout, vector_rows);
  });
}

void bind(py::module_& m) {
  m.def("scaled_masked_softmax_backward", &scaled_masked_softmax_backward,
        "out = (gradOutput*y - sum(gradOutput*y)*y) * scale, 0 where mask");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
