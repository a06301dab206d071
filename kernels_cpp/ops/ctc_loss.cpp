// aclnnCtcLoss (docs/ops/ctc_loss.md): PyTorch CPU's _ctc_loss forward, step for step.
// Per batch item b (input length L, target length S, extended labels l' of width 2S+1 with the
// blank at even positions): log alpha row 0 holds lp[0, blank] and lp[0, l'_1] (S > 0), -inf
// elsewhere; row t < L is, for each s <= 2S,
//   alpha[t, s] = log(e^(a1-m) + e^(a2-m) + e^(a3-m)) + m + lp[t, l'_s]
// with a1 = alpha[t-1, s], a2 = alpha[t-1, s-1] (s >= 1), a3 = alpha[t-1, s-2] (s >= 2 and
// l'_s != l'_{s-2}), m their max (0 if -inf). nll = -log(e^(alpha[L-1, 2S]) + e^(alpha[L-1, 2S-1]))
// (-alpha[L-1, 0] for S = 0; for L = 0: -0 if S = 0, else +inf), and 0 for +inf with zeroInfinity.
//
// logAlphaOut[b, t, s] is alpha[t, s] for t < L and s <= 2S; every other position of its width A
// (the NPU's padding: s > 2S, rows t >= L, all of an item with L = 0) is -inf. The step is
// common/ctc.h's, shared with the backward: PyTorch's scalar expressions and order (std::exp /
// std::log), skipping only the calls whose result is exact without them, so the values are
// PyTorch's bit for bit in the compute type: fp32 (FLOAT16 / BFLOAT16 converted on load, rounded
// to nearest-even once on store), fp64 for DOUBLE.
//
// Row t only needs row t-1: the scratch of a batch item is its labels and two alpha rows
// (workspace); each row is written out as soon as it exists. The recursion reads row t of
// logProbs at the 2S+1 scattered classes of l' (cache misses its serial arithmetic cannot
// overlap), so the classes of row t+1 are prefetched while row t is computed. Threads claim
// scratch slots (each a fixed set of batch items) as they finish the previous one; every item is
// computed by one thread in one fixed order, so the result is bit-identical for every thread count.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/ctc.h"
#include "common/dispatch.h"
#include "common/registry.h"
#include "common/thread_pool.h"
#include "common/vector_io.h"

namespace py = pybind11;

namespace npuemu {
namespace {

using ctc::Acc;
using ctc::kNegInf;
using ctc::load;
using ctc::store;

struct Problem {
  TensorArg log_probs, targets, nll, log_alpha;  // logProbs (T, N, C): an unbatched (T, C) comes as N = 1
  std::vector<int64_t> input_lengths, target_lengths;
  ctc::LabelPlaces labels;  // where each batch item's labels are in `targets`
  int64_t blank;
  bool zero_infinity;
  int64_t T, N, C, A;  // A: logAlpha's width
  int64_t width;       // 2 * max target length + 1: the label and scratch row length

  int64_t lp_at(int64_t t, int64_t b, int64_t c) const {
    return t * log_probs.strides[0] + b * log_probs.strides[1] + c * log_probs.strides[2];
  }
  int64_t alpha_at(int64_t b, int64_t t, int64_t s) const {
    return b * log_alpha.strides[0] + t * log_alpha.strides[1] + s * log_alpha.strides[2];
  }
};

// Row t of item b of logAlpha: the n values of `row`, then -inf to the width A.
// A dense FLOAT16 row is rounded in one vector pass: fp16's scalar rounding takes a dozen
// instructions and branches (T400 N64 C5000 S200 on the AMD EPYC, 1 / 2 threads: 56.0 -> 51.5 /
// 28.6 -> 26.4 ms, same bits); BFLOAT16's is a few integer operations, and the call of the vector
// pass made it 1-2% slower.
template <class T>
void store_row(const Problem& p, int64_t b, int64_t t, const Acc<T>* row, int64_t n, Pacer& pacer) {
  pacer(p.A);
  const int64_t first = p.alpha_at(b, t, 0), step = p.log_alpha.strides[2];
  if constexpr (std::is_same_v<T, _Float16>) {
    if (step == 1) {
      T* out = reinterpret_cast<T*>(p.log_alpha.data) + first;
      if (n > 0) store_from_float(p.log_alpha.dtype, row, out, n, false);
      const T minus_inf = from_float<T>(kNegInf<float>);
      std::fill(out + n, out + p.A, minus_inf);
      return;
    }
  }
  for (int64_t s = 0; s < n; ++s) store<T>(p.log_alpha, first + s * step, row[s]);
  for (int64_t s = n; s < p.A; ++s) store<T>(p.log_alpha, first + s * step, kNegInf<Acc<T>>);
}

// Fetches the classes of l' in row t of logProbs into every cache level (prefetcht0), one per step
// s of the row before. Into L2 only (prefetcht1) was 3-6% slower on two threads of the AMD EPYC and
// the same on one (T400 N64 C5000 S200 FLOAT, whole calls after a triad: 27.2-27.6 against
// 28.0-29.3 ms).
struct NextRow {
  const char* begin = nullptr;  // null: no row to fetch
  int64_t step_bytes = 0;

  NextRow(const Problem& p, int64_t t, int64_t L, int64_t b) {
    if (t >= L) return;
    begin = p.log_probs.data + p.lp_at(t, b, 0) * p.log_probs.itemsize();
    step_bytes = p.log_probs.strides[2] * p.log_probs.itemsize();
  }
  void operator()(int64_t label) const {
    if (begin) __builtin_prefetch(begin + label * step_bytes, 0, 3);
  }
};

// Alpha row t (1 <= t < L) from row t-1 (`prev`), s ascending.
template <class T>
void alpha_step(const Problem& p, int64_t b, int64_t t, int64_t S, const int64_t* l, const Acc<T>* prev, Acc<T>* cur,
                const NextRow& fetch) {
  using A = Acc<T>;
  const TensorArg& lp = p.log_probs;
  const int64_t lp_row = p.lp_at(t, b, 0), lp_step = lp.strides[2];
  for (int64_t s = 0; s <= 2 * S; ++s) {
    fetch(l[s]);
    const A a2 = s >= 1 ? prev[s - 1] : kNegInf<A>;
    const A a3 = s >= 2 && l[s - 2] != l[s] ? prev[s - 2] : kNegInf<A>;
    cur[s] = ctc::log_sum3_plus(prev[s], a2, a3, load<T>(lp, lp_row + l[s] * lp_step));
  }
}

// The log-likelihood from the last alpha row, PyTorch's expression.
template <class A>
A log_likelihood(const A* last, int64_t S) {
  if (S == 0) return last[0];  // an empty target has no label state to end in
  const A l1 = last[2 * S], l2 = last[2 * S - 1];
  A m = std::max(l1, l2);
  m = m == kNegInf<A> ? A(0) : m;
  return std::log(std::exp(l1 - m) + std::exp(l2 - m)) + m;
}

// logAlpha rows and the loss of batch item b; `labels` (width) and `rows` (2 * width) are its scratch.
template <class T>
void forward_item(const Problem& p, int64_t b, int64_t* labels, Acc<T>* rows, Pacer& pacer) {
  using A = Acc<T>;
  const int64_t L = p.input_lengths[b], S = p.target_lengths[b], K = 2 * S + 1;
  A log_likelihood_b = S == 0 ? A(0) : kNegInf<A>;  // L = 0: only an empty target has an alignment
  if (L > 0) {
    ctc::extended_labels(p.targets, p.labels, b, S, p.blank, labels);
    A* prev = rows;
    A* cur = rows + p.width;
    const NextRow first_fetch(p, 1, L, b);
    for (int64_t s = 0; s < K; ++s) first_fetch(labels[s]);
    std::fill(cur, cur + K, kNegInf<A>);
    cur[0] = load<T>(p.log_probs, p.lp_at(0, b, p.blank));
    if (S > 0) cur[1] = load<T>(p.log_probs, p.lp_at(0, b, labels[1]));
    store_row<T>(p, b, 0, cur, K, pacer);
    for (int64_t t = 1; t < L; ++t) {
      std::swap(prev, cur);
      pacer(K);
      alpha_step<T>(p, b, t, S, labels, prev, cur, NextRow(p, t + 1, L, b));
      store_row<T>(p, b, t, cur, K, pacer);
    }
    log_likelihood_b = log_likelihood(cur, S);
  }
  for (int64_t t = std::max<int64_t>(L, 0); t < p.T; ++t) store_row<T>(p, b, t, nullptr, 0, pacer);
  A nll = -log_likelihood_b;
  if (p.zero_infinity && nll == std::numeric_limits<A>::infinity()) nll = 0;
  store<T>(p.nll, b * p.nll.strides[0], nll);
}

// The workspace of the slots: each part's base address; slot k uses the k-th stretch of each.
struct Workspace {
  int64_t slots;
  uintptr_t labels, rows;
};

void compute_loss(Problem& p, const Workspace& ws) {
  const int64_t row = std::min(p.width, p.A);  // 2S+1 must fit the label and alpha rows
  p.labels = ctc::locate_labels(p.targets, p.input_lengths, p.target_lengths, p.T, row >= 1 ? (row - 1) / 2 : -1,
                                p.C);
  const int64_t slots = ws.slots, stride = ctc::slot_stride(p.width);
  dispatch_floating(p.log_probs.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    // Each slot owns batch items N·slot/slots .. N·(slot+1)/slots and its scratch; a thread that
    // is done (or whose core was busy with other work) takes the next free slot.
    share_blocks(slots, threads(), [&](const auto& take) {
      Pacer pacer;
      for (int64_t slot = take(); slot >= 0; slot = take()) {
        int64_t* labels = reinterpret_cast<int64_t*>(ws.labels) + slot * stride;
        A* rows = reinterpret_cast<A*>(ws.rows) + slot * 2 * stride;
        for (int64_t b = p.N * slot / slots; b < p.N * (slot + 1) / slots; ++b) forward_item<T>(p, b, labels, rows, pacer);
      }
    });
  });
}

void check_contract(const Problem& p, int64_t slots, const std::vector<int64_t>& workspace_sizes) {
  const bool padded = p.targets.shape.size() == 2;
  if (p.log_alpha.shape[0] != p.N || p.log_alpha.shape[1] != p.T || p.nll.shape[0] != p.N ||
      (padded && p.targets.shape[0] != p.N))  // the first phase's checks, relied on below
    throw ContractError("aclnnCtcLoss: tensors: expected the shapes the first phase validated, found others");
  if (static_cast<int64_t>(p.input_lengths.size()) != p.N || static_cast<int64_t>(p.target_lengths.size()) != p.N)
    throw ContractError("aclnnCtcLoss: inputLengths/targetLengths: expected " + std::to_string(p.N) +
                        " lengths each, found " + std::to_string(p.input_lengths.size()) + " and " +
                        std::to_string(p.target_lengths.size()));
  const int64_t acc_size = p.log_probs.dtype == kDouble ? 8 : 4;
  const int64_t stride = ctc::slot_stride(p.width);
  const std::vector<int64_t> needed = {slots * stride * 8, slots * 2 * stride * acc_size};
  if (slots < 1 || p.width < 1 || p.width % 2 == 0 || workspace_sizes != needed)
    throw ContractError("aclnnCtcLoss: workspace: expected the layout of " + std::to_string(slots) +
                        " slot(s) of width " + std::to_string(p.width) + ", found other part sizes");
  if (p.blank < 0 || p.blank >= p.C)
    throw ContractError("aclnnCtcLoss: blank: expected a class in [0, " + std::to_string(p.C) + "), found " +
                        std::to_string(p.blank));
  for (const TensorArg* out : {&p.nll, &p.log_alpha})
    if (out->dtype != p.log_probs.dtype)
      throw ContractError("aclnnCtcLoss: outputs: expected the dtype of logProbs, found aclDataType " +
                          std::to_string(out->dtype));
}

void ctc_loss(const TensorArg& log_probs, const TensorArg& targets, const TensorArg& nll, const TensorArg& log_alpha,
              std::vector<int64_t> input_lengths, std::vector<int64_t> target_lengths, int64_t blank,
              bool zero_infinity, int64_t slots, int64_t width, uintptr_t labels_ws, uintptr_t rows_ws,
              const std::vector<int64_t>& workspace_sizes) {
  if (log_probs.shape.size() != 3 || log_alpha.shape.size() != 3 || nll.shape.size() != 1 ||
      (targets.shape.size() != 1 && targets.shape.size() != 2))
    throw ContractError("aclnnCtcLoss: tensors: expected the ranks the first phase validated, found others");
  Problem p{log_probs, targets, nll, log_alpha, std::move(input_lengths), std::move(target_lengths), {}, blank,
            zero_infinity, log_probs.shape[0], log_probs.shape[1], log_probs.shape[2], log_alpha.shape[2], width};
  check_contract(p, slots, workspace_sizes);
  dispatch_floating(p.log_probs.dtype, [](auto) {});  // a dtype without a kernel fails before any work
  const Workspace ws{slots, labels_ws, rows_ws};
  KernelCall("aclnnCtcLoss").run([&] { compute_loss(p, ws); });
}

void bind(py::module_& m) {
  m.def("ctc_loss", &ctc_loss, "CTC loss forward: negLogLikelihood and logAlpha (PyTorch CPU _ctc_loss algorithm)");
  m.def("ctc_slot_stride", &ctc::slot_stride, "elements from one CTC scratch slot's row to the next's, for a row width");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
