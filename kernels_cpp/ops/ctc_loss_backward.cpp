// aclnnCtcLossBackward (spec/OPS.md §2.2): PyTorch CPU's _ctc_loss_backward, step for step.
// Per batch item b (input length L, target length S, extended labels l' of width 2S+1 with the
// blank at even positions): log beta from t = L-1 down to 0, lcab[t, c] = log-sum over s with
// l'_s = c of logAlpha[b, t, s] + log beta[t, s] (accumulated in descending s, as PyTorch does),
// then out[t, b, c] = (exp(lp) - exp(lcab + nll - lp)) * gradOut[b] for t < L and 0 beyond.
// Beta row t only needs row t+1, so each output row is written as soon as its beta row exists:
// the scratch per batch item is two beta rows, one lcab row and the label row, in the workspace.
// Computed in fp32 (fp64 for DOUBLE); batch items run in parallel, each entirely on one thread.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/dispatch.h"
#include "common/registry.h"
#include "common/thread_pool.h"

namespace py = pybind11;

namespace npuemu {
namespace {

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

// targets[elem] as a double (exact for every label that can be valid), for range checks and messages.
double target_value(const TensorArg& targets, int64_t elem) {
  switch (targets.dtype) {
    case kInt32: return reinterpret_cast<const int32_t*>(targets.data)[elem];
    case kInt64: return static_cast<double>(reinterpret_cast<const int64_t*>(targets.data)[elem]);
    case kBool: return reinterpret_cast<const uint8_t*>(targets.data)[elem] != 0;
    case kFloat: return reinterpret_cast<const float*>(targets.data)[elem];
    case kFloat16: return static_cast<double>(reinterpret_cast<const _Float16*>(targets.data)[elem]);
    default: throw std::invalid_argument("targets: no cast to INT64 from aclDataType " + std::to_string(targets.dtype));
  }
}

// targets[elem] cast to INT64 as the library does before its kernel: floats truncate toward zero.
// A value that truncates into [0, classes) lies in (-1, classes); NaN fails that test.
bool label_in_range(double value, int64_t classes) { return value > -1.0 && value < static_cast<double>(classes); }
int64_t label_of(double value) { return static_cast<int64_t>(value); }

struct Problem {
  TensorArg grad_out, log_probs, targets, nll, log_alpha, out;
  std::vector<int64_t> input_lengths, target_lengths;
  std::vector<int64_t> target_offsets;  // element offset of each batch item's first label
  int64_t blank;
  bool zero_infinity;
  int64_t T, N, C, width;  // width: 2 * max target length + 1, the label / beta row length
  int64_t target_step;     // element stride between consecutive labels of one batch item

  int64_t lp_at(int64_t t, int64_t b, int64_t c) const {
    return t * log_probs.strides[0] + b * log_probs.strides[1] + c * log_probs.strides[2];
  }
  int64_t out_at(int64_t t, int64_t b, int64_t c) const {
    return t * out.strides[0] + b * out.strides[1] + c * out.strides[2];
  }
  int64_t alpha_at(int64_t b, int64_t t, int64_t s) const {
    return b * log_alpha.strides[0] + t * log_alpha.strides[1] + s * log_alpha.strides[2];
  }
};

// A target value as the user wrote it: integers without decimals, floats (and nan) as printed by C++.
std::string format_value(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e18) return std::to_string(static_cast<int64_t>(v));
  std::ostringstream text;
  text << v;
  return text.str();
}

std::string where(int64_t b) { return " (batch item " + std::to_string(b) + ")"; }

// The data the first phase could not see: lengths and labels. Runs on the calling thread before
// any parallel work, so that a bad value is reported and nothing reads out of bounds.
void validate_data(Problem& p) {
  const bool padded = p.targets.shape.size() == 2;
  if (p.out.shape != p.log_probs.shape || p.log_alpha.shape[0] != p.N || p.grad_out.shape[0] != p.N ||
      p.nll.shape[0] != p.N || (padded && p.targets.shape[0] != p.N))  // the first phase's checks, relied on below
    throw std::invalid_argument("tensors: expected the shapes the first phase validated, found others");
  if (static_cast<int64_t>(p.input_lengths.size()) != p.N || static_cast<int64_t>(p.target_lengths.size()) != p.N)
    throw std::invalid_argument("inputLengths/targetLengths: expected " + std::to_string(p.N) + " lengths each, found " +
                                std::to_string(p.input_lengths.size()) + " and " +
                                std::to_string(p.target_lengths.size()));
  const int64_t capacity = padded ? p.targets.shape[1] : p.targets.shape[0];
  p.target_step = padded ? p.targets.strides[1] : p.targets.strides[0];
  int64_t concatenated = 0;  // labels of the 1-D targets used by the previous batch items
  p.target_offsets.assign(p.N, 0);
  for (int64_t b = 0; b < p.N; ++b) {
    const int64_t L = p.input_lengths[b], S = p.target_lengths[b];
    if (L < 0 || L > p.T || L > p.log_alpha.shape[1])
      throw std::out_of_range("inputLengths[" + std::to_string(b) + "]: expected a length in [0, " +
                              std::to_string(p.T) + "], found " + std::to_string(L));
    const int64_t row = std::min(p.width, p.log_alpha.shape[2]);  // 2S+1 must fit the label and alpha rows
    const int64_t max_target = row >= 1 ? (row - 1) / 2 : -1;
    if (S < 0 || S > max_target)
      throw std::out_of_range("targetLengths[" + std::to_string(b) + "]: expected a length in [0, " +
                              std::to_string(max_target) + "], found " + std::to_string(S));
    const int64_t first = padded ? 0 : concatenated;
    if (first + S > capacity)
      throw std::out_of_range("targets: expected at least " + std::to_string(first + S) + " labels" + where(b) +
                              ", found " + std::to_string(capacity));
    p.target_offsets[b] = padded ? b * p.targets.strides[0] : first * p.targets.strides[0];
    concatenated += S;
    for (int64_t i = 0; i < S; ++i) {
      const double value = target_value(p.targets, p.target_offsets[b] + i * p.target_step);
      if (!label_in_range(value, p.C))
        throw std::invalid_argument("targets: expected labels in [0, C = " + std::to_string(p.C) + "), found " +
                                    format_value(value) + " at label " + std::to_string(i) + where(b));
    }
  }
}

// log(exp(a) + exp(b)) in PyTorch's order: the first term of an empty sum is taken as is.
template <class A>
inline A log_add(A sum, A term) {
  constexpr A neginf = -std::numeric_limits<A>::infinity();
  if (sum == neginf) return term;
  const A max = std::max(sum, term);
  return std::log(std::exp(sum - max) + std::exp(term - max)) + max;
}

// Scratch of one batch item at a time, carved from the workspace.
template <class A>
struct Scratch {
  int64_t* labels;  // width
  A* beta;          // 2 * width: rows t and t + 1
  A* lcab;          // C
};

template <class T>
void zero_rows(const Problem& p, int64_t b, int64_t from) {
  for (int64_t t = from; t < p.T; ++t)
    for (int64_t c = 0; c < p.C; ++c) store<T>(p.out, p.out_at(t, b, c), Acc<T>(0));
}

// Log beta at t = L-1 and its lcab entries: PyTorch sets (does not log-add) the two entries, so
// a target equal to the blank at the last position replaces the blank's value.
template <class T>
void last_step(const Problem& p, int64_t b, int64_t t, int64_t S, Scratch<Acc<T>>& w, Acc<T>* beta) {
  const int64_t* l = w.labels;
  beta[2 * S] = load<T>(p.log_probs, p.lp_at(t, b, p.blank));
  w.lcab[p.blank] = load<T>(p.log_alpha, p.alpha_at(b, t, 2 * S)) + beta[2 * S];
  if (S > 0) {
    beta[2 * S - 1] = load<T>(p.log_probs, p.lp_at(t, b, l[2 * S - 1]));
    w.lcab[l[2 * S - 1]] = load<T>(p.log_alpha, p.alpha_at(b, t, 2 * S - 1)) + beta[2 * S - 1];
  }
}

// Log beta at t < L-1 from row t+1 (`next`), log-adding alpha + beta into lcab, s descending.
template <class T>
void step(const Problem& p, int64_t b, int64_t t, int64_t S, Scratch<Acc<T>>& w, Acc<T>* beta, const Acc<T>* next) {
  using A = Acc<T>;
  constexpr A neginf = -std::numeric_limits<A>::infinity();
  const int64_t* l = w.labels;
  for (int64_t s = 2 * S; s >= 0; --s) {
    const A lb1 = next[s];
    A lbmax = lb1, lb2 = neginf, lb3 = neginf;
    if (s < 2 * S) {
      lb2 = next[s + 1];
      if (lb2 > lbmax) lbmax = lb2;
    }
    if (s < 2 * S - 1 && l[s + 2] != l[s]) {
      lb3 = next[s + 2];
      if (lb3 > lbmax) lbmax = lb3;
    }
    if (lbmax == neginf) lbmax = 0;
    beta[s] = std::log(std::exp(lb1 - lbmax) + std::exp(lb2 - lbmax) + std::exp(lb3 - lbmax)) + lbmax +
              load<T>(p.log_probs, p.lp_at(t, b, l[s]));
    w.lcab[l[s]] = log_add(w.lcab[l[s]], load<T>(p.log_alpha, p.alpha_at(b, t, s)) + beta[s]);
  }
}

template <class T>
void backward_item(const Problem& p, int64_t b, Scratch<Acc<T>>& w) {
  using A = Acc<T>;
  constexpr A neginf = -std::numeric_limits<A>::infinity();
  const A nll = load<T>(p.nll, b * p.nll.strides[0]);
  if (p.zero_infinity && nll == std::numeric_limits<A>::infinity()) return zero_rows<T>(p, b, 0);
  const int64_t L = p.input_lengths[b], S = p.target_lengths[b];
  for (int64_t s = 0; s <= 2 * S; ++s)
    w.labels[s] = s % 2 == 0 ? p.blank : label_of(target_value(p.targets, p.target_offsets[b] + (s / 2) * p.target_step));
  const A grad = load<T>(p.grad_out, b * p.grad_out.strides[0]);
  A* beta = w.beta;
  A* next = w.beta + p.width;
  for (int64_t t = L - 1; t >= 0; --t) {
    std::fill(w.lcab, w.lcab + p.C, neginf);
    if (t == L - 1) {
      std::fill(beta, beta + 2 * S + 1, neginf);
      last_step<T>(p, b, t, S, w, beta);
    } else {
      step<T>(p, b, t, S, w, beta, next);
    }
    for (int64_t c = 0; c < p.C; ++c) {
      const A lp = load<T>(p.log_probs, p.lp_at(t, b, c));
      // Most classes are in no label: exp(-inf + finite) is exactly 0, without calling exp.
      const bool none = w.lcab[c] == neginf && std::isfinite(nll) && std::isfinite(lp);
      store<T>(p.out, p.out_at(t, b, c), (std::exp(lp) - (none ? A(0) : std::exp(w.lcab[c] + nll - lp))) * grad);
    }
    std::swap(beta, next);
  }
  zero_rows<T>(p, b, std::max<int64_t>(L, 0));
}

void ctc_loss_backward(const TensorTuple& grad_out, const TensorTuple& log_probs, const TensorTuple& targets,
                       const TensorTuple& nll, const TensorTuple& log_alpha, const TensorTuple& out,
                       std::vector<int64_t> input_lengths, std::vector<int64_t> target_lengths, int64_t blank,
                       bool zero_infinity, int64_t slots, int64_t width, uintptr_t labels_ws, uintptr_t beta_ws,
                       uintptr_t lcab_ws, const std::vector<int64_t>& workspace_sizes) {
  Problem p{TensorArg(grad_out), TensorArg(log_probs), TensorArg(targets), TensorArg(nll), TensorArg(log_alpha),
            TensorArg(out), std::move(input_lengths), std::move(target_lengths), {}, blank, zero_infinity,
            0, 0, 0, width, 0};
  p.T = p.log_probs.shape[0];
  p.N = p.log_probs.shape[1];
  p.C = p.log_probs.shape[2];
  const int64_t acc_size = p.log_probs.dtype == kDouble ? 8 : 4;
  const std::vector<int64_t> needed = {slots * width * 8, slots * 2 * width * acc_size, slots * p.C * acc_size};
  if (slots < 1 || width < 1 || workspace_sizes != needed)
    throw std::invalid_argument("workspace: expected the layout of " + std::to_string(slots) + " slot(s) of width " +
                                std::to_string(width) + ", found other part sizes");
  if (blank < 0 || blank >= p.C)
    throw std::out_of_range("blank: expected a class in [0, " + std::to_string(p.C) + "), found " + std::to_string(blank));
  py::gil_scoped_release release;
  validate_data(p);
  dispatch_floating(p.log_probs.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    parallel_for(slots, 1, [&](int64_t begin, int64_t end) {
      for (int64_t slot = begin; slot < end; ++slot) {
        Scratch<A> w{reinterpret_cast<int64_t*>(labels_ws) + slot * width,
                     reinterpret_cast<A*>(beta_ws) + slot * 2 * width, reinterpret_cast<A*>(lcab_ws) + slot * p.C};
        for (int64_t b = p.N * slot / slots; b < p.N * (slot + 1) / slots; ++b) backward_item<T>(p, b, w);
      }
    });
  });
}

void bind(py::module_& m) {
  m.def("ctc_loss_backward", &ctc_loss_backward,
        "CTC loss gradient wrt logProbs (PyTorch CPU _ctc_loss_backward algorithm)");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
