// The pybind11 module aclnn_api._kernels: the operators' kernels plus the pool settings.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "common/registry.h"
#include "common/thread_pool.h"
#include "common/vector_io.h"

namespace py = pybind11;

static std::string build_info() {
  std::string info = "pybind11 module, ";
  info += std::to_string(npuemu::threads()) + " thread(s), vector ISA ";
  info += npuemu::vector_isa();
  return info;
}

PYBIND11_MODULE(_kernels, m) {
  m.doc() = "npuemu operator kernels (C++): raw pointers, shapes and strides; fp32 compute";
  m.def("set_threads", &npuemu::set_threads, "Host threads a kernel may use");
  m.def("threads", &npuemu::threads);
  m.def("build_info", &build_info);
  for (auto binder : npuemu::binders()) binder(m);
}
