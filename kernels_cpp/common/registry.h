// Each operator's C++ file registers its bindings here, so adding an operator touches no shared file.
#pragma once
#include <pybind11/pybind11.h>

#include <vector>

namespace npuemu {

using Binder = void (*)(pybind11::module_&);

inline std::vector<Binder>& binders() {
  static std::vector<Binder> all;
  return all;
}

struct RegisterOp {
  explicit RegisterOp(Binder binder) { binders().push_back(binder); }
};

}  // namespace npuemu

#define NPUEMU_REGISTER_OP(binder) static ::npuemu::RegisterOp npuemu_register_##binder(binder)
