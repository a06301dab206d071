// What a kernel receives for each tensor: a raw pointer to its first element (already offset),
// its aclDataType, the shape the kernel iterates and the element strides that read it.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace npuemu {

// aclDataType values (spec/RUNTIME.md §2.4).
enum DataType : int {
  kFloat = 0, kFloat16 = 1, kInt8 = 2, kInt32 = 3, kUInt8 = 4, kInt16 = 6,
  kInt64 = 9, kDouble = 11, kBool = 12, kBFloat16 = 27,
};

using TensorTuple = std::tuple<uintptr_t, int, std::vector<int64_t>, std::vector<int64_t>>;

struct TensorArg {
  char* data;
  int dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements

  explicit TensorArg(const TensorTuple& t)
      : data(reinterpret_cast<char*>(std::get<0>(t))), dtype(std::get<1>(t)),
        shape(std::get<2>(t)), strides(std::get<3>(t)) {}

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int64_t itemsize() const;
};

inline int64_t dtype_size(int dtype) {
  switch (dtype) {
    case kFloat16: case kBFloat16: case kInt16: return 2;
    case kFloat: case kInt32: return 4;
    case kDouble: case kInt64: return 8;
    case kInt8: case kUInt8: case kBool: return 1;
    default: throw std::invalid_argument("unsupported aclDataType " + std::to_string(dtype));
  }
}

inline int64_t TensorArg::itemsize() const { return dtype_size(dtype); }

}  // namespace npuemu
