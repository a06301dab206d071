// aclnnCtcLossBackward (docs/ops/ctc_loss_backward.md): PyTorch CPU's _ctc_loss_backward, step for step.
// Per batch item b (input length L, target length S, extended labels l' of width 2S+1 with the
// blank at even positions): log beta from t = L-1 down to 0, lcab[t, c] = log-sum over s with
// l'_s = c of logAlpha[b, t, s] + log beta[t, s] (accumulated in descending s, as PyTorch does),
// then out[t, b, c] = (exp(lp) - exp(lcab + nll - lp)) * gradOut[b] for t < L and 0 beyond.
//
// Where the time goes: the recursion is O(T·S) per item but scalar, with library calls (exp, log)
// in every cell; the output has T·N·C elements, each needing exp(lp). At T400 N64 C5000 S200 on the
// AMD EPYC, one thread, the recursion is about 70% of the call (FLOAT 110 ms, 78 ms with the rows
// cut to 64 classes; FLOAT16 124 and 88 ms). lcab is -inf for every class outside l', where the
// second term is exactly 0 (for finite nll and lp), so an output row is exp(lp)·g for all C classes
// (vmath.h exp, vectorised, streamed to memory chunk by chunk) with the few classes of l' patched
// by the full formula. The recursion keeps PyTorch's scalar expressions and order (std::exp /
// std::log) and skips only the calls whose result is exact without them (exp(0) = 1, exp(x) = 0
// far below the range, log(1) = 0, log(0) = -inf, an exp too small to change the sum >= 1 it is
// added to): bit for bit PyTorch's values.
// That arithmetic, the reading of targets and the run-time checks of lengths and labels are
// common/ctc.h's, shared with the forward's alpha recursion (ops/ctc_loss.cpp).
//
// Beta row t only needs row t+1, so each output row is written as soon as its beta row exists:
// the scratch of a batch item is its labels, two beta rows and lcab per class of l' (workspace).
// Computed in fp32 (fp64 for DOUBLE). Threads claim scratch slots (each a fixed set of batch
// items) as they finish the previous one; every item is computed by one thread in one fixed
// order, so the result is bit-identical for every thread count.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/ctc.h"
#include "common/dispatch.h"
#include "common/elementwise.h"
#include "common/memory_plan.h"
#include "common/registry.h"
#include "common/thread_pool.h"
#include "common/thread_scratch.h"
#include "common/vector_io.h"
#include "common/vmath.h"

namespace py = pybind11;

namespace npuemu {
namespace {

// The compute type, loads and stores, targets read as the library casts them, the run-time checks
// of lengths and labels and PyTorch's log-space arithmetic are shared with the forward (aclnnCtcLoss).
using ctc::Acc;
using ctc::exp_of;
using ctc::kNegInf;
using ctc::load;
using ctc::log_add;
using ctc::store;

struct Problem {
  TensorArg grad_out, log_probs, targets, nll, log_alpha, out;
  std::vector<int64_t> input_lengths, target_lengths;
  ctc::LabelPlaces labels;  // where each batch item's labels are in `targets`
  int64_t blank;
  bool zero_infinity;
  int64_t T, N, C, width;  // width: 2 * max target length + 1, the label / beta row length
  bool streaming;          // output rows bypass the caches (an output far larger than them)

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

// The data the first phase could not see: lengths and labels (KernelDataError, as the device's
// AI-core exception), after the shapes it did check (ContractError). Runs on the calling thread
// before any parallel work, so that a bad value is reported and nothing reads out of bounds.
void validate_data(Problem& p) {
  const bool padded = p.targets.shape.size() == 2;
  if (p.out.shape != p.log_probs.shape || p.log_alpha.shape[0] != p.N || p.grad_out.shape[0] != p.N ||
      p.nll.shape[0] != p.N || (padded && p.targets.shape[0] != p.N))  // the first phase's checks, relied on below
    throw ContractError("aclnnCtcLossBackward: tensors: expected the shapes the first phase validated, found others");
  if (static_cast<int64_t>(p.input_lengths.size()) != p.N || static_cast<int64_t>(p.target_lengths.size()) != p.N)
    throw ContractError("aclnnCtcLossBackward: inputLengths/targetLengths: expected " + std::to_string(p.N) +
                        " lengths each, found " +
                                std::to_string(p.input_lengths.size()) + " and " +
                                std::to_string(p.target_lengths.size()));
  const int64_t row = std::min(p.width, p.log_alpha.shape[2]);  // 2S+1 must fit the label and alpha rows
  p.labels = ctc::locate_labels(p.targets, p.input_lengths, p.target_lengths, std::min(p.T, p.log_alpha.shape[1]),
                                row >= 1 ? (row - 1) / 2 : -1, p.C);
}

// Scratch of one batch item at a time, carved from the workspace.
template <class A>
struct Scratch {
  int64_t* labels;    // width: l'
  int64_t* class_of;  // width: index in `classes` of l'_s
  int64_t* classes;   // (width + 1) / 2: the distinct classes of l', ascending
  A* beta;            // 2 * width: rows t and t + 1
  A* lcab;            // (width + 1) / 2: lcab row t of each class in `classes`
  int64_t count = 0;  // distinct classes in use
};

// l' of batch item b and its classes: the blank plus the labels, sorted, without repeats.
template <class A>
void extended_labels(const Problem& p, int64_t b, int64_t S, Scratch<A>& w) {
  ctc::extended_labels(p.targets, p.labels, b, S, p.blank, w.labels);
  w.classes[0] = p.blank;
  for (int64_t i = 0; i < S; ++i) w.classes[i + 1] = w.labels[2 * i + 1];
  std::sort(w.classes, w.classes + S + 1);
  w.count = std::unique(w.classes, w.classes + S + 1) - w.classes;
  for (int64_t s = 0; s <= 2 * S; ++s)
    w.class_of[s] = std::lower_bound(w.classes, w.classes + w.count, w.labels[s]) - w.classes;
}

// Log beta at t = L-1 and its lcab entries: PyTorch sets (does not log-add) the two entries, so
// a target equal to the blank at the last position replaces the blank's value.
template <class T>
void last_step(const Problem& p, int64_t b, int64_t t, int64_t S, Scratch<Acc<T>>& w, Acc<T>* beta) {
  std::fill(beta, beta + 2 * S + 1, kNegInf<Acc<T>>);
  beta[2 * S] = load<T>(p.log_probs, p.lp_at(t, b, p.blank));
  w.lcab[w.class_of[2 * S]] = load<T>(p.log_alpha, p.alpha_at(b, t, 2 * S)) + beta[2 * S];
  if (S > 0) {
    beta[2 * S - 1] = load<T>(p.log_probs, p.lp_at(t, b, w.labels[2 * S - 1]));
    w.lcab[w.class_of[2 * S - 1]] = load<T>(p.log_alpha, p.alpha_at(b, t, 2 * S - 1)) + beta[2 * S - 1];
  }
}

// A row of logProbs in memory, to be fetched into the caches a line at a time. The recursion reads
// a row at the 2S+1 scattered classes of l' (mostly cache misses that its serial arithmetic cannot
// overlap), then the output pass reads all of it: the row is fetched while the previous row's
// recursion runs, so both find it in the caches.
struct Prefetch {
  const char* begin = nullptr;
  int64_t lines = 0;
  int64_t per_step = 0;  // lines fetched per step of the recursion

  Prefetch(const Problem& p, int64_t t, int64_t b, int64_t steps) {
    if (t < 0 || p.log_probs.strides[2] != 1) return;  // a strided row spans too much memory
    begin = p.log_probs.data + p.lp_at(t, b, 0) * p.log_probs.itemsize();
    lines = (p.C * p.log_probs.itemsize() + 63) / 64 + 1;  // + 1: the row need not start a line
    per_step = (lines + steps - 1) / std::max<int64_t>(steps, 1);
  }
  void operator()(int64_t step) const {
    for (int64_t i = step * per_step; i < std::min(lines, (step + 1) * per_step); ++i)
      __builtin_prefetch(begin + i * 64, 0, 2);
  }
  void all() const {
    for (int64_t i = 0; i < lines; ++i) __builtin_prefetch(begin + i * 64, 0, 2);
  }
};

// Log beta at t < L-1 from row t+1 (`next`), log-adding alpha + beta into lcab, s descending.
template <class T>
void step(const Problem& p, int64_t b, int64_t t, int64_t S, Scratch<Acc<T>>& w, Acc<T>* beta, const Acc<T>* next,
          const Prefetch& fetch) {
  using A = Acc<T>;
  const int64_t* l = w.labels;
  const TensorArg& lp = p.log_probs;
  const int64_t lp_row = p.lp_at(t, b, 0), lp_step = lp.strides[2];
  const int64_t alpha_row = p.alpha_at(b, t, 0), alpha_step = p.log_alpha.strides[2];
  for (int64_t s = 2 * S; s >= 0; --s) {
    fetch(s);
    const A lb2 = s < 2 * S ? next[s + 1] : kNegInf<A>;
    const A lb3 = s < 2 * S - 1 && l[s + 2] != l[s] ? next[s + 2] : kNegInf<A>;
    beta[s] = ctc::log_sum3_plus(next[s], lb2, lb3, load<T>(lp, lp_row + l[s] * lp_step));
    A& lcab = w.lcab[w.class_of[s]];
    lcab = log_add(lcab, load<T>(p.log_alpha, alpha_row + s * alpha_step) + beta[s]);
  }
}

// ---- the output rows: exp(lp)·g everywhere, the classes of l' patched ----

constexpr int64_t kRowChunk = 1024;  // elements of a row converted, computed and stored together

// out = exp(lp) * g where lcab = -inf and nll is finite or -inf: the second term is exp(-inf) = 0,
// except at lp = -inf where it is exp(NaN) (-inf + inf), so the formula gives NaN there.
struct ExpTimes {
  static constexpr int kInputs = 1;  // lp
  float g;

  template <class V>
  NPUEMU_INLINE typename V::F apply(const typename V::F* in) const {
    const typename V::F value = simd::exp<V>(in[0]) * g;
    return in[0] == kNegInf<float> ? V::splat(std::numeric_limits<float>::quiet_NaN()) : value;
  }
};

void exp_times(float* out, const float* lp, int64_t n, float g) {
  run_dense(ExpTimes{g}, {out, const_cast<float*>(lp)}, {kFloat, kFloat}, n, false);
}

void exp_times(double* out, const double* lp, int64_t n, double g) {
  for (int64_t i = 0; i < n; ++i) out[i] = lp[i] == kNegInf<double> ? std::numeric_limits<double>::quiet_NaN() : std::exp(lp[i]) * g;
}

// n elements of a row starting at `first` (element offset) into `dst` as the compute type; a
// contiguous FLOAT / DOUBLE row is returned in place.
template <class T>
const Acc<T>* load_chunk(const TensorArg& a, int64_t first, int64_t step, int64_t n, Acc<T>* dst) {
  using A = Acc<T>;
  if (step == 1) {
    if constexpr (std::is_same_v<T, A>) {
      return reinterpret_cast<const A*>(a.data) + first;
    } else {
      load_as_float(a.dtype, reinterpret_cast<const T*>(a.data) + first, dst, n);
      return dst;
    }
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = load<T>(a, first + i * step);
  return dst;
}

template <class T>
void store_chunk(const Problem& p, const Acc<T>* src, int64_t first, int64_t step, int64_t n) {
  if (step == 1) {
    T* dst = reinterpret_cast<T*>(p.out.data) + first;
    if constexpr (std::is_same_v<T, double>) {
      std::memcpy(dst, src, n * sizeof(double));
    } else {
      store_from_float(p.out.dtype, src, dst, n, p.streaming);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) store<T>(p.out, first + i * step, src[i]);
}

template <class T>
void zero_rows(const Problem& p, int64_t b, int64_t from, Pacer& pacer) {
  alignas(64) static const Acc<T> zeros[kRowChunk] = {};
  for (int64_t t = from; t < p.T; ++t)
    for (int64_t c = 0; c < p.C; c += kRowChunk) {
      pacer(kRowChunk);
      store_chunk<T>(p, zeros, p.out_at(t, b, c), p.out.strides[2], std::min(kRowChunk, p.C - c));
    }
}

// The gradient at a class of l' whose lcab is `lcab`, from its log-probability x: PyTorch's full
// expression (patched into a row of exp(lp)·g).
template <class A>
A label_gradient(A x, A lcab, A nll, A g) {
  return (std::exp(x) - exp_of(lcab + nll - x)) * g;
}

// Output row t of item b where the second term vanishes outside l' (finite nll) and both rows are
// dense, in the FLOAT types: chunk by chunk, exp(lp)·g from lp's dtype straight into a chunk of
// out's dtype (the engine converts in registers), the classes of l' patched, the chunk's bytes
// stored as they are (copy_elements). The same arithmetic and roundings as through fp32 buffers
// (output_row), same bits. On the AMD EPYC (T400 N64 C5000 S200, 1 / 2 threads): two passes over a
// chunk instead of three, FLOAT16 137.5 -> 124.8 / 73.4 -> 66.2 ms, BFLOAT16 131.8 -> 119.8 /
// 70.6 -> 63.6 ms, FLOAT the same; then the chunk copied as bytes instead of through fp32, FLOAT16
// 134.4 -> 122.3 / 73.8 -> 67.3 ms, BFLOAT16 121.4 -> 111.4 / 66.0 -> 60.0, FLOAT 111.4 -> 107.2 /
// 62.2 -> 59.1.
template <class T>
void dense_output_row(const Problem& p, int64_t b, int64_t t, const Scratch<float>& w, float nll, float g,
                      Pacer& pacer) {
  alignas(64) T chunk[kRowChunk];
  const T* lp = reinterpret_cast<const T*>(p.log_probs.data) + p.lp_at(t, b, 0);
  T* out = reinterpret_cast<T*>(p.out.data) + p.out_at(t, b, 0);
  int64_t k = 0;  // next class of l' to patch
  for (int64_t c0 = 0; c0 < p.C; c0 += kRowChunk) {
    const int64_t n = std::min(kRowChunk, p.C - c0);
    pacer(n);
    run_dense(ExpTimes{g}, {chunk, const_cast<T*>(lp + c0)}, {p.out.dtype, p.log_probs.dtype}, n, false);
    for (; k < w.count && w.classes[k] < c0 + n; ++k) {
      const float x = to_float(lp[w.classes[k]]);
      chunk[w.classes[k] - c0] = from_float<T>(label_gradient(x, w.lcab[k], nll, g));
    }
    copy_elements(p.out.dtype, chunk, out + c0, n, p.streaming);
  }
}

// A thread's chunk of lp and of the output row in the accumulation type (16 KiB for DOUBLE: in
// thread_scratch, not on its stack).
template <class A>
struct RowChunks {
  alignas(64) A lp[kRowChunk];
  alignas(64) A row[kRowChunk];
};

// Output row t of item b, through fp32 (DOUBLE: fp64) buffers where dense_output_row does not
// apply: strided rows, DOUBLE, and `general` items, whose nll is NaN or +inf, where the second term
// is not 0 outside l' either, so every element takes the full formula (with lcab = -inf).
template <class T>
void output_row(const Problem& p, int64_t b, int64_t t, const Scratch<Acc<T>>& w, Acc<T> nll, Acc<T> g, bool general,
                Pacer& pacer) {
  using A = Acc<T>;
  if constexpr (std::is_same_v<A, float>) {
    if (!general && p.log_probs.strides[2] == 1 && p.out.strides[2] == 1)
      return dense_output_row<T>(p, b, t, w, nll, g, pacer);
  }
  RowChunks<A>& chunks = thread_scratch<RowChunks<A>>();
  A* lp_buffer = chunks.lp;
  A* row = chunks.row;
  int64_t k = 0;  // next class of l' to patch
  for (int64_t c0 = 0; c0 < p.C; c0 += kRowChunk) {
    const int64_t n = std::min(kRowChunk, p.C - c0);
    pacer(n);
    const A* lp = load_chunk<T>(p.log_probs, p.lp_at(t, b, c0), p.log_probs.strides[2], n, lp_buffer);
    if (general) {
      for (int64_t i = 0; i < n; ++i) row[i] = (std::exp(lp[i]) - std::exp(kNegInf<A> + nll - lp[i])) * g;
    } else {
      exp_times(row, lp, n, g);
    }
    for (; k < w.count && w.classes[k] < c0 + n; ++k) {
      const A x = lp[w.classes[k] - c0];
      row[w.classes[k] - c0] = label_gradient(x, w.lcab[k], nll, g);
    }
    store_chunk<T>(p, row, p.out_at(t, b, c0), p.out.strides[2], n);
  }
}

template <class T>
void backward_item(const Problem& p, int64_t b, Scratch<Acc<T>>& w, Pacer& pacer) {
  using A = Acc<T>;
  const A nll = load<T>(p.nll, b * p.nll.strides[0]);
  if (p.zero_infinity && nll == std::numeric_limits<A>::infinity()) return zero_rows<T>(p, b, 0, pacer);
  const int64_t L = p.input_lengths[b], S = p.target_lengths[b];
  extended_labels(p, b, S, w);
  const A grad = load<T>(p.grad_out, b * p.grad_out.strides[0]);
  const bool general = std::isnan(nll) || nll == std::numeric_limits<A>::infinity();
  A* beta = w.beta;
  A* next = w.beta + p.width;
  for (int64_t t = L - 1; t >= 0; --t) {
    pacer(2 * S + 1);  // the recursion's step; output_row counts the row
    std::fill(w.lcab, w.lcab + w.count, kNegInf<A>);
    const Prefetch fetch(p, t - 1, b, 2 * S + 1);  // the row the next step reads
    if (t == L - 1) {
      Prefetch(p, t, b, 1).all();
      last_step<T>(p, b, t, S, w, beta);
      fetch.all();
    } else {
      step<T>(p, b, t, S, w, beta, next, fetch);
    }
    output_row<T>(p, b, t, w, nll, grad, general, pacer);
    std::swap(beta, next);
  }
  zero_rows<T>(p, b, std::max<int64_t>(L, 0), pacer);
}

// The workspace of the slots: each part's base address; slot k uses the k-th stretch of each.
struct Workspace {
  int64_t slots;
  uintptr_t labels, class_of, classes, beta, lcab;
};

void compute_gradient(Problem& p, const Workspace& ws) {
  validate_data(p);
  const int64_t slots = ws.slots, stride = ctc::slot_stride(p.width);
  const int64_t class_stride = ctc::slot_stride((p.width + 1) / 2);
  dispatch_floating(p.log_probs.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    // Each slot owns batch items N·slot/slots .. N·(slot+1)/slots and its scratch; a thread that
    // is done (or whose core was busy with other work) takes the next free slot.
    share_blocks(slots, threads(), [&](const auto& take) {
      Pacer pacer;
      for (int64_t slot = take(); slot >= 0; slot = take()) {
        Scratch<A> w{reinterpret_cast<int64_t*>(ws.labels) + slot * stride,
                     reinterpret_cast<int64_t*>(ws.class_of) + slot * stride,
                     reinterpret_cast<int64_t*>(ws.classes) + slot * class_stride,
                     reinterpret_cast<A*>(ws.beta) + slot * 2 * stride,
                     reinterpret_cast<A*>(ws.lcab) + slot * class_stride};
        for (int64_t b = p.N * slot / slots; b < p.N * (slot + 1) / slots; ++b) backward_item<T>(p, b, w, pacer);
      }
      if (p.streaming) store_fence();  // this thread's streamed rows, visible before the kernel returns
    });
  });
}

void ctc_loss_backward(const TensorArg& grad_out, const TensorArg& log_probs, const TensorArg& targets,
                       const TensorArg& nll, const TensorArg& log_alpha, const TensorArg& out,
                       std::vector<int64_t> input_lengths, std::vector<int64_t> target_lengths, int64_t blank,
                       bool zero_infinity, int64_t slots, int64_t width, uintptr_t labels_ws, uintptr_t class_of_ws,
                       uintptr_t classes_ws, uintptr_t beta_ws, uintptr_t lcab_ws,
                       const std::vector<int64_t>& workspace_sizes) {
  if (log_probs.shape.size() != 3 || out.shape.size() != 3 || log_alpha.shape.size() != 3 ||
      grad_out.shape.size() != 1 || nll.shape.size() != 1 || (targets.shape.size() != 1 && targets.shape.size() != 2))
    throw ContractError("aclnnCtcLossBackward: tensors: expected the ranks the first phase validated, found others");
  Problem p{grad_out, log_probs, targets, nll, log_alpha, out, std::move(input_lengths), std::move(target_lengths),
            {}, blank, zero_infinity, 0, 0, 0, width, false};
  p.T = p.log_probs.shape[0];
  p.N = p.log_probs.shape[1];
  p.C = p.log_probs.shape[2];
  const int64_t acc_size = p.log_probs.dtype == kDouble ? 8 : 4;
  const int64_t stride = ctc::slot_stride(width), class_stride = ctc::slot_stride((width + 1) / 2);
  const std::vector<int64_t> needed = {slots * stride * 8, slots * stride * 8, slots * class_stride * 8,
                                       slots * 2 * stride * acc_size, slots * class_stride * acc_size};
  if (slots < 1 || width < 1 || width % 2 == 0 || workspace_sizes != needed)
    throw ContractError("aclnnCtcLossBackward: workspace: expected the layout of " + std::to_string(slots) +
                        " slot(s) of width " + std::to_string(width) + ", found other part sizes");
  if (blank < 0 || blank >= p.C)
    throw ContractError("aclnnCtcLossBackward: blank: expected a class in [0, " + std::to_string(p.C) + "), found " +
                        std::to_string(blank));
  dispatch_floating(p.log_probs.dtype, [](auto) {});  // a dtype without a kernel fails before any work
  const Workspace ws{slots, labels_ws, class_of_ws, classes_ws, beta_ws, lcab_ws};
  KernelCall("aclnnCtcLossBackward").run([&] {
    // Inside the call: the first use of the plan measures, without the GIL.
    p.streaming = p.out.strides[2] == 1 && memory_plan().streams(p.out.numel() * p.out.itemsize());
    compute_gradient(p, ws);
  });
}

void bind(py::module_& m) {
  m.def("ctc_loss_backward", &ctc_loss_backward,
        "CTC loss gradient wrt logProbs (PyTorch CPU _ctc_loss_backward algorithm)");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
