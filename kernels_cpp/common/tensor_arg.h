// What a kernel receives for each tensor: a raw pointer to its first element (already offset),
// its aclDataType, the shape the kernel iterates and the element strides that read it. From
// Python, the tuple (pointer, dtype, shape, strides), read straight from the Python objects (no
// intermediate C++ tuple): a launch of a few elements costs little more than its arithmetic.
#pragma once
#include <pybind11/pybind11.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "common/kernel_call.h"

namespace npuemu {

// aclDataType values (emulator/dtypes.py).
enum DataType : int {
  kFloat = 0, kFloat16 = 1, kInt8 = 2, kInt32 = 3, kUInt8 = 4, kInt16 = 6,
  kInt64 = 9, kDouble = 11, kBool = 12, kBFloat16 = 27,
};

// A short list kept inline, of at most kMaxDims items: the dims of a tensor (the first phases admit
// at most 8) and what the kernels derive from them. No allocation per launch: a small launch
// costs little more than its arithmetic.
constexpr int kMaxDims = 16;

template <class T>
class Small {
 public:
  Small() = default;
  Small(size_t n, const T& value) { resize(n, value); }
  Small(std::initializer_list<T> items) {
    for (const T& item : items) push_back(item);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return items_[i]; }
  const T& operator[](size_t i) const { return items_[i]; }
  T& back() { return items_[size_ - 1]; }
  const T& back() const { return items_[size_ - 1]; }
  T* begin() { return items_.data(); }
  T* end() { return items_.data() + size_; }
  const T* begin() const { return items_.data(); }
  const T* end() const { return items_.data() + size_; }

  // Callers keep within kMaxDims (a tensor tuple of more dims is refused at the door).
  void push_back(const T& item) { items_[size_++] = item; }
  void resize(size_t n, const T& value = T()) {
    for (size_t i = size_; i < n; ++i) items_[i] = value;
    size_ = n;
  }

  bool operator==(const Small& other) const { return std::equal(begin(), end(), other.begin(), other.end()); }
  bool operator!=(const Small& other) const { return !(*this == other); }

 private:
  std::array<T, kMaxDims> items_{};
  size_t size_ = 0;
};

using Dims = Small<int64_t>;

struct TensorArg;
using TensorArgs = Small<const TensorArg*>;  // the operands of a kernel

struct TensorArg {
  char* data = nullptr;
  int dtype = kFloat;
  Dims shape;
  Dims strides;  // in elements

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int64_t itemsize() const;
};

// Fills `arg` from a Python (pointer, dtype, shape, strides) tuple; false (no Python error set)
// if `tuple` is not one: a pointer-sized integer, an int, and two sequences of as many integers,
// the sizes >= 0, at most kMaxDims of them.
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
