// The pybind11 module aclnn_api._kernels: the operators' kernels plus the pool settings.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "common/kernel_call.h"
#include "common/registry.h"
#include "common/simd.h"
#include "common/tensor_arg.h"
#include "common/thread_pool.h"
#include "common/vector_io.h"

namespace py = pybind11;

// Limits the kernels to an instruction set ("auto": the machine's widest); returns the one in force.
static std::string set_vector_isa(const std::string& name) {
  using npuemu::simd::Isa;
  if (name == "auto" || name == "avx512_bf16") npuemu::simd::limit_isa(Isa::kAvx512Bf16);
  else if (name == "avx512") npuemu::simd::limit_isa(Isa::kAvx512);
  else if (name == "avx2") npuemu::simd::limit_isa(Isa::kAvx2);
  else if (name == "baseline") npuemu::simd::limit_isa(Isa::kScalar);
  else throw std::invalid_argument("vector ISA: expected auto, avx512_bf16, avx512, avx2 or baseline, found '" + name + "'");
  return npuemu::vector_isa();
}

static std::string build_info() {
  std::string info = "pybind11 module, ";
  info += std::to_string(npuemu::threads()) + " thread(s), vector ISA ";
  info += npuemu::vector_isa();
  return info;
}

PYBIND11_MODULE(_kernels, m) {
  m.doc() = "npuemu operator kernels (C++): raw pointers, shapes and strides; fp32 compute";
  // The data given to a kernel is at fault (the device's AI-core exception); any other error of a
  // kernel is npuemu's own (RuntimeError, TypeError): see common/kernel_call.h.
  py::register_exception<npuemu::KernelDataError>(m, "KernelDataError", PyExc_Exception);
  npuemu::set_main_thread(py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>());
  // Without the GIL: resizing waits for a running kernel, which may need the GIL to check for Ctrl-C.
  m.def("set_threads", [](int count) {
          std::string why_short;
          npuemu::without_gil([&] { why_short = npuemu::set_threads(count); });
          return why_short;
        },
        "Host threads a kernel may use; returns '' or, when the system started fewer (threads()), its reason");
  m.def("set_task_timeout", &npuemu::set_task_timeout, py::arg("seconds"),
        "Seconds a kernel may run (NPUEMU_TASK_TIMEOUT; 0: no limit) before it stops with TimeoutError");
  m.def("task_timeout", &npuemu::task_timeout, "The task timeout in force, in seconds (0: no limit)");
  m.def("threads", &npuemu::threads);
  m.def("set_vector_isa", &set_vector_isa, "Widest vector instruction set the kernels may use");
  m.def("vector_isa", [] { return std::string(npuemu::vector_isa()); }, "The vector instruction set in force");
  m.def("machine_vector_isa", [] { return std::string(npuemu::simd::isa_name(npuemu::simd::machine_isa())); },
        "The widest vector instruction set this machine runs");
  m.def("build_info", &build_info);
  m.attr("MAX_DIMS") = npuemu::kMaxDims;  // the most dims of a view a kernel takes
  for (auto binder : npuemu::binders()) binder(m);
}
