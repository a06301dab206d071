// Dtype dispatch: calls f(Type<T>{}) with the C++ element type of an aclDataType.
#pragma once
#include <string>

#include "common/numeric.h"
#include "common/tensor_arg.h"

namespace npuemu {

template <class T>
struct Type {
  using type = T;
};

template <class F>
void dispatch_floating(int dtype, F&& f) {
  switch (dtype) {
    case kFloat: f(Type<float>{}); break;
    case kFloat16: f(Type<_Float16>{}); break;
    case kBFloat16: f(Type<bfloat16>{}); break;
    case kDouble: f(Type<double>{}); break;
    default: throw ContractError("no kernel for aclDataType " + std::to_string(dtype));
  }
}

// The storage dtypes the fp32 kernels read and write: FLOAT, FLOAT16 and BFLOAT16. Anything else is
// a caller's bug (the first phases admit nothing else): an error naming `who`.
template <class F>
void dispatch_storage(const char* who, int dtype, F&& f) {
  switch (dtype) {
    case kFloat: f(Type<float>{}); break;
    case kFloat16: f(Type<_Float16>{}); break;
    case kBFloat16: f(Type<bfloat16>{}); break;
    default: throw ContractError(std::string(who) + " has no kernel for aclDataType " + std::to_string(dtype));
  }
}

}  // namespace npuemu
