// stream_triad: the STREAM benchmark's triad a[i] = b[i] + s * c[i] over float32 host buffers, split
// across the kernels' thread pool. bench/ times it from Python to get this machine's attainable
// memory bandwidth at a given byte volume, with the same threads and call path as the kernels.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>

#include "common/registry.h"
#include "common/thread_pool.h"

namespace py = pybind11;

namespace npuemu {
namespace {

// Below this many elements per chunk a second thread costs more than it saves.
constexpr int64_t kTriadGrain = 1 << 14;
constexpr int64_t kTriadBlock = 1 << 15;

void stream_triad(uintptr_t a_address, uintptr_t b_address, uintptr_t c_address, int64_t n, float scalar) {
  if (n < 0) throw std::invalid_argument("stream_triad: expected n >= 0");
  float* a = reinterpret_cast<float*>(a_address);
  const float* b = reinterpret_cast<const float*>(b_address);
  const float* c = reinterpret_cast<const float*>(c_address);
  py::gil_scoped_release release;
  // Blocks taken as threads come, as the kernels do: a late worker does not hold up the others.
  const int64_t blocks = (n + kTriadBlock - 1) / kTriadBlock;
  share_blocks(blocks, std::min<int64_t>(threads(), (n + kTriadGrain - 1) / kTriadGrain), [=](const auto& take) {
    for (int64_t block = take(); block >= 0; block = take())
      for (int64_t i = block * kTriadBlock, end = std::min(n, i + kTriadBlock); i < end; ++i) a[i] = b[i] + scalar * c[i];
  });
}

void bind(py::module_& m) {
  m.def("stream_triad", &stream_triad, py::arg("a"), py::arg("b"), py::arg("c"), py::arg("n"), py::arg("scalar"),
        "STREAM triad a[i] = b[i] + scalar * c[i] over n float32 values at raw host addresses (for bench/)");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace
}  // namespace npuemu
