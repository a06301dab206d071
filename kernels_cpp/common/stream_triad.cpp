// stream_triad: the STREAM benchmark's triad a[i] = b[i] + s * c[i] over float32 host buffers, split
// across the kernels' thread pool. bench/ times it from Python to get this machine's attainable
// memory bandwidth at a given byte volume, with the same threads and call path as the kernels.
//
// It runs on the element-wise engine (elementwise.h), so it measures the kernels' own memory path:
// the same vector loop, the memory plan's prefetch distance and block size, and its store kind
// (streaming above the plan's threshold, when the plan streams).
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "common/elementwise.h"
#include "common/memory_plan.h"
#include "common/registry.h"
#include "common/softmax_rows.h"
#include "common/thread_pool.h"
#include "common/without_gil.h"

namespace py = pybind11;

namespace npuemu {
namespace {

struct Triad {
  static constexpr int kInputs = 2;  // b, c
  float scalar;
  template <class V>
  NPUEMU_INLINE typename V::F apply(const typename V::F* in) const {
    return in[0] + in[1] * scalar;  // two roundings, as STREAM's C compiled without contraction
  }
};

// The triad's work, without the GIL.
void triad(const std::array<void*, 3>& data, int64_t n, float scalar) {
  const MemoryPlan plan = memory_plan();
  const bool stream = plan.streams(n * int64_t(sizeof(float)));
  // Blocks taken as threads come, in runs, as the kernels do: a late worker does not hold up the
  // others.
  const int64_t participants = std::min<int64_t>(threads(), (n + kGrain - 1) / kGrain);
  const int64_t block = block_elements(n, std::max<int64_t>(1, participants), plan.block);
  const int64_t blocks = (n + block - 1) / block;
  share_block_runs(blocks, participants, [&](const auto& take) {
    for (RunBlock taken = take(); taken.index >= 0; taken = take()) {
      const int64_t b = taken.index;
      std::array<void*, 3> at;
      for (int k = 0; k < 3; ++k) at[k] = static_cast<float*>(data[k]) + b * block;
      run_dense(Triad{scalar}, at, {kFloat, kFloat, kFloat}, std::min(block, n - b * block), stream);
    }
  });
}

void stream_triad(uintptr_t a_address, uintptr_t b_address, uintptr_t c_address, int64_t n, float scalar) {
  if (n < 0) throw std::invalid_argument("stream_triad: expected n >= 0");
  std::array<void*, 3> data = {reinterpret_cast<void*>(a_address), reinterpret_cast<void*>(b_address),
                               reinterpret_cast<void*>(c_address)};
  without_gil([&] { triad(data, n, scalar); });
}

// ValueError naming the first of `counts` below 1, what was expected and what was found.
void require_positive(const char* function, std::initializer_list<std::pair<const char*, int64_t>> counts) {
  for (const auto& [name, value] : counts)
    if (value < 1)
      throw std::invalid_argument(std::string(function) + ": " + name + ": expected >= 1, found " +
                                  std::to_string(value));
}

void bind(py::module_& m) {
  m.def("stream_triad", &stream_triad, py::arg("a"), py::arg("b"), py::arg("c"), py::arg("n"), py::arg("scalar"),
        "STREAM triad a[i] = b[i] + scalar * c[i] over n float32 values at raw host addresses (for bench/), "
        "with the memory plan's store kind");
  // Elements per thread below which the element-wise engine (and the softmax) use fewer threads:
  // bench/roofline.py sizes its in-cache calls above it.
  m.attr("ELEMENTWISE_GRAIN") = kGrain;
  // The rows of a softmax block: bench/roofline.py's in-cache calls must share evenly between the
  // threads (tests/test_bench_results.py). Both are the kernels' own arithmetic, which their
  // callers feed only positive counts; from Python the counts are checked first.
  m.def(
      "softmax_block_rows",
      [](int64_t rows, int64_t cols, int64_t threads, int64_t row_bytes, int64_t block_bytes) {
        require_positive("softmax_block_rows", {{"rows", rows}, {"cols", cols}, {"threads", threads},
                                                {"row_bytes", row_bytes}, {"block_bytes", block_bytes}});
        return softmax_rows::block_rows(rows, cols, threads, row_bytes, block_bytes);
      },
      py::arg("rows"), py::arg("cols"), py::arg("threads"), py::arg("row_bytes"), py::arg("block_bytes"),
      "rows per block of the softmax kernels (softmax_rows.h)");
  m.def(
      "block_run_length",
      [](int64_t left, int64_t threads) {
        require_positive("block_run_length", {{"left", left}, {"threads", threads}});
        return block_run_length(left, threads);
      },
      py::arg("left"), py::arg("threads"),
      "blocks of the next run a thread takes when `left` remain (thread_pool.h's share_block_runs)");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
