// What a kernel receives for each tensor: a raw pointer to its first element (already offset),
// its aclDataType, the shape the kernel iterates and the element strides that read it. From
// Python, the tuple (pointer, dtype, shape, strides), read straight from the Python objects (no
// intermediate C++ tuple): a launch of a few elements costs little more than its arithmetic.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/kernel_call.h"

namespace npuemu {

// aclDataType values (emulator/dtypes.py).
enum DataType : int {
  kFloat = 0, kFloat16 = 1, kInt8 = 2, kInt32 = 3, kUInt8 = 4, kInt16 = 6,
  kInt64 = 9, kDouble = 11, kBool = 12, kBFloat16 = 27,
};

struct TensorArg {
  char* data = nullptr;
  int dtype = kFloat;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int64_t itemsize() const;
};

// Fills `arg` from a Python (pointer, dtype, shape, strides) tuple; false (no Python error set)
// if `tuple` is not one: a pointer-sized integer, an int, and two sequences of as many integers,
// the sizes >= 0.
bool read_tensor_tuple(PyObject* tuple, TensorArg& arg);

inline int64_t dtype_size(int dtype) {
  switch (dtype) {
    case kFloat16: case kBFloat16: case kInt16: return 2;
    case kFloat: case kInt32: return 4;
    case kDouble: case kInt64: return 8;
    case kInt8: case kUInt8: case kBool: return 1;
    default: throw ContractError("unsupported aclDataType " + std::to_string(dtype));
  }
}

inline int64_t TensorArg::itemsize() const { return dtype_size(dtype); }

}  // namespace npuemu

namespace pybind11 {
namespace detail {

// A tuple that does not have the form fails the call's argument conversion: TypeError.
template <>
struct type_caster<npuemu::TensorArg> {
  PYBIND11_TYPE_CASTER(npuemu::TensorArg, const_name("tuple[int, int, Sequence[int], Sequence[int]]"));
  bool load(handle src, bool) { return npuemu::read_tensor_tuple(src.ptr(), value); }
};

}  // namespace detail
}  // namespace pybind11
