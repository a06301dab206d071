// What the CTC loss's two kernels share (ops/ctc_loss.cpp, the forward: log alpha and the loss;
// ops/ctc_loss_backward.cpp: log beta and the gradient): the compute type, reading targets the way
// the library casts them, the run-time checks of lengths and labels, the extended label sequence,
// and PyTorch CPU's scalar log-space arithmetic, without the library calls whose results are known.
//
// Both recursions keep PyTorch's expressions and order (std::exp / std::log, the max-shifted sum
// of three terms), so their values are PyTorch's bit for bit in the compute type: fp32 for FLOAT,
// FLOAT16 and BFLOAT16 (the halves are converted on load, rounded once on store), fp64 for DOUBLE.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "common/kernel_call.h"
#include "common/numeric.h"
#include "common/tensor_arg.h"

namespace npuemu {
namespace ctc {

// ---- the workspace's scratch slots ----

// Elements from one slot's scratch row to the next slot's: `width` rounded up to 16, so that no
// cache line holds two slots' rows (which the threads that own them write at every step: sharing
// a line made 2 threads no faster than 1 on 4 batch items). The workspace layouts of aclnn_api ask
// for it (_kernels.ctc_slot_stride).
inline int64_t slot_stride(int64_t width) { return (width + 15) / 16 * 16; }

// ---- the compute type, loads and stores ----

template <class T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T>
inline Acc<T> load(const TensorArg& a, int64_t elem) {
  const T v = reinterpret_cast<const T*>(a.data)[elem];
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return to_float(v);
  }
}

template <class T>
inline void store(const TensorArg& a, int64_t elem, Acc<T> v) {
  if constexpr (std::is_same_v<T, double>) {
    reinterpret_cast<T*>(a.data)[elem] = v;
  } else {
    reinterpret_cast<T*>(a.data)[elem] = from_float<T>(v);
  }
}

// ---- targets, cast to INT64 as the library does before its kernels ----

// targets[elem] as a double (exact for every label that can be valid), for range checks and messages.
inline double target_value(const TensorArg& targets, int64_t elem) {
  switch (targets.dtype) {
    case kInt32: return reinterpret_cast<const int32_t*>(targets.data)[elem];
    case kInt64: return static_cast<double>(reinterpret_cast<const int64_t*>(targets.data)[elem]);
    case kBool: return reinterpret_cast<const uint8_t*>(targets.data)[elem] != 0;
    case kFloat: return reinterpret_cast<const float*>(targets.data)[elem];
    case kFloat16: return static_cast<double>(reinterpret_cast<const _Float16*>(targets.data)[elem]);
    default: throw ContractError("CTC loss: targets: no cast to INT64 from aclDataType " + std::to_string(targets.dtype));
  }
}

// Floats truncate toward zero: a value that truncates into [0, classes) lies in (-1, classes);
// NaN fails that test.
inline bool label_in_range(double value, int64_t classes) {
  return value > -1.0 && value < static_cast<double>(classes);
}
inline int64_t label_of(double value) { return static_cast<int64_t>(value); }

// A target value as the user wrote it: integers without decimals, floats (and nan) as printed by C++.
inline std::string format_value(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e18) return std::to_string(static_cast<int64_t>(v));
  std::ostringstream text;
  text << v;
  return text.str();
}

inline std::string where(int64_t b) { return " (batch item " + std::to_string(b) + ")"; }

// Where each batch item's labels are: element offset of its first label, and the element step
// between its consecutive labels (padded 2-D targets: row b; concatenated 1-D targets: the slice
// after the labels of the items before it).
struct LabelPlaces {
  std::vector<int64_t> offsets;
  int64_t step = 0;

  int64_t at(int64_t b, int64_t i) const { return offsets[b] + i * step; }
};

// The data the first phase could not see, checked before any parallel work so that a bad value
// is reported (KernelDataError, as the device's AI-core exception) and nothing reads out of
// bounds: every input length in [0, max_input], every target length in [0, max_target], the
// labels inside the targets tensor, each label in [0, C).
inline LabelPlaces locate_labels(const TensorArg& targets, const std::vector<int64_t>& input_lengths,
                                 const std::vector<int64_t>& target_lengths, int64_t max_input, int64_t max_target,
                                 int64_t C) {
  const bool padded = targets.shape.size() == 2;
  const int64_t capacity = padded ? targets.shape[1] : targets.shape[0];
  const int64_t N = static_cast<int64_t>(input_lengths.size());
  LabelPlaces places;
  places.step = padded ? targets.strides[1] : targets.strides[0];
  places.offsets.assign(N, 0);
  int64_t concatenated = 0;  // labels of the 1-D targets used by the previous batch items
  for (int64_t b = 0; b < N; ++b) {
    const int64_t L = input_lengths[b], S = target_lengths[b];
    if (L < 0 || L > max_input)
      throw KernelDataError("inputLengths[" + std::to_string(b) + "]: expected a length in [0, " +
                            std::to_string(max_input) + "], found " + std::to_string(L));
    if (S < 0 || S > max_target)
      throw KernelDataError("targetLengths[" + std::to_string(b) + "]: expected a length in [0, " +
                            std::to_string(max_target) + "], found " + std::to_string(S));
    const int64_t first = padded ? 0 : concatenated;
    if (first + S > capacity)
      throw KernelDataError("targets: expected at least " + std::to_string(first + S) + " labels" + where(b) +
                            ", found " + std::to_string(capacity));
    places.offsets[b] = padded ? b * targets.strides[0] : first * targets.strides[0];
    concatenated += S;
    for (int64_t i = 0; i < S; ++i) {
      const double value = target_value(targets, places.at(b, i));
      if (!label_in_range(value, C))
        throw KernelDataError("targets: expected labels in [0, C = " + std::to_string(C) + "), found " +
                              format_value(value) + " at label " + std::to_string(i) + where(b));
    }
  }
  return places;
}

// l' of batch item b (2S+1 entries): the blank at even positions, its labels at odd ones.
inline void extended_labels(const TensorArg& targets, const LabelPlaces& places, int64_t b, int64_t S, int64_t blank,
                            int64_t* labels) {
  for (int64_t s = 0; s <= 2 * S; ++s)
    labels[s] = s % 2 == 0 ? blank : label_of(target_value(targets, places.at(b, s / 2)));
}

// ---- PyTorch's scalar arithmetic, minus the library calls with known results ----

template <class A>
constexpr A kNegInf = -std::numeric_limits<A>::infinity();

// Below this, exp rounds to +0 (e^x < half the smallest subnormal): float 2^-150 = e^-103.97,
// double 2^-1075 = e^-745.13.
template <class A>
constexpr A kExpUnderflow = std::is_same_v<A, double> ? A(-746) : A(-104);

// Below this, exp(x) <= 2^-25 (fp64: 2^-54), under half an ulp of any sum >= 1: adding it to such
// a sum changes nothing.
template <class A>
constexpr A kExpNegligible = std::is_same_v<A, double> ? A(-37.5) : A(-17.5);

// std::exp(x), without the call where the result is known: 1 at 0, and 0 below `zero_below`.
// With kExpUnderflow that is std::exp bit for bit (the recursions' terms are differences from
// their maximum, so one is always 0 and many are -inf or far below; NaN still goes through
// std::exp); with kExpNegligible it is exact wherever the caller only adds the result to sums >= 1.
template <class A>
inline A exp_unless_known(A x, A zero_below) {
  if (x == A(0)) return A(1);
  if (x < zero_below) return A(0);
  return std::exp(x);
}

template <class A>
inline A exp_of(A x) {
  return exp_unless_known(x, kExpUnderflow<A>);
}

template <class A>
inline A exp_beside_one(A x) {
  return exp_unless_known(x, kExpNegligible<A>);
}

// (exp(d1) + exp(d2)) + exp(d3), PyTorch's sum, bit for bit, for differences from their maximum:
// one of them is 0 (its exp is 1), or all are -inf, or NaN is involved. When the 0 is d1 or d2,
// both partial sums are >= 1 and negligible terms can be dropped; when it is d3, two negligible
// d1, d2 add up to at most 2^-24 (fp64: 2^-53), which 1 absorbs, but one alone must be exact.
template <class A>
inline A sum_exp3(A d1, A d2, A d3) {
  if (d1 == A(0) || d2 == A(0)) return (exp_beside_one(d1) + exp_beside_one(d2)) + exp_beside_one(d3);
  if (d1 < kExpNegligible<A> && d2 < kExpNegligible<A>) return A(0) + exp_of(d3);
  return (exp_of(d1) + exp_of(d2)) + exp_of(d3);
}

// std::log(x), bit for bit, without the call where the result is exact: log(1) = 0 (a sum whose
// other terms vanished next to its 1), log(0) = -inf (all terms -inf).
template <class A>
inline A log_of(A x) {
  if (x == A(1)) return A(0);
  if (x == A(0)) return kNegInf<A>;
  return std::log(x);
}

// One step of either recursion, PyTorch's expression: log(e^(x1-m) + e^(x2-m) + e^(x3-m)) + m + lp,
// where m is the largest of the terms taken in that order (x2, x3 count only when strictly
// larger: a NaN never becomes m) and 0 when it is -inf. x2 / x3 are -inf where they do not apply.
template <class A>
inline A log_sum3_plus(A x1, A x2, A x3, A lp) {
  A m = x1;
  if (x2 > m) m = x2;
  if (x3 > m) m = x3;
  if (m == kNegInf<A>) m = 0;
  return log_of(sum_exp3(x1 - m, x2 - m, x3 - m)) + m + lp;
}

// log(exp(a) + exp(b)) in PyTorch's order: the first term of an empty sum is taken as is.
template <class A>
inline A log_add(A sum, A term) {
  if (sum == kNegInf<A>) return term;
  const A max = std::max(sum, term);  // one difference is 0 (or NaN is involved): the sum is >= 1
  return log_of(exp_beside_one(sum - max) + exp_beside_one(term - max)) + max;
}

}  // namespace ctc
}  // namespace npuemu
