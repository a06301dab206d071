#include "common/tensor_arg.h"

namespace npuemu {
namespace {

// A Python integer (or an object with __index__, never a float: Python 3.9's PyLong_AsLongLong would
// truncate one) as an int64; false, the error cleared, otherwise.
bool read_int(PyObject* object, int64_t& value) {
  PyObject* index = PyLong_CheckExact(object) ? (Py_INCREF(object), object) : PyNumber_Index(object);
  const long long v = index ? PyLong_AsLongLong(index) : -1;
  Py_XDECREF(index);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  value = v;
  return true;
}

// A tuple or list of at most kMaxDims integers.
bool read_ints(PyObject* sequence, Dims& values) {
  if (!PyTuple_Check(sequence) && !PyList_Check(sequence)) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(sequence);
  if (n > kMaxDims) return false;
  PyObject** items = PySequence_Fast_ITEMS(sequence);
  values.resize(n);
  for (Py_ssize_t i = 0; i < n; ++i)
    if (!read_int(items[i], values[i])) return false;
  return true;
}

}  // namespace

bool read_tensor_tuple(PyObject* tuple, TensorArg& arg) {
  if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != 4) return false;
  PyObject* pointer = PyNumber_Index(PyTuple_GET_ITEM(tuple, 0));  // an integer of any type, not a float
  const unsigned long long address = pointer ? PyLong_AsUnsignedLongLong(pointer) : 0;
  Py_XDECREF(pointer);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  int64_t dtype;
  if (!read_int(PyTuple_GET_ITEM(tuple, 1), dtype) || dtype != static_cast<int>(dtype)) return false;
  if (!read_ints(PyTuple_GET_ITEM(tuple, 2), arg.shape) || !read_ints(PyTuple_GET_ITEM(tuple, 3), arg.strides))
    return false;
  if (arg.shape.size() != arg.strides.size()) return false;
  for (int64_t size : arg.shape)
    if (size < 0) return false;
  // A dim of one moves no address, so its stride may be anything (2^62 is a valid view), but kernels
  // scale strides by the item size, which would overflow: it takes the stride a dense layout gives it
  // (the next dim's extent), which keeps the contiguity tests the kernels make on the other dims.
  for (size_t d = arg.shape.size(); d-- > 0;) {
    if (arg.shape[d] != 1) continue;
    int64_t dense = 1;
    if (d + 1 < arg.shape.size() && __builtin_mul_overflow(arg.strides[d + 1], arg.shape[d + 1], &dense))
      dense = 0;  // a view no allocation holds, refused before any kernel runs
    arg.strides[d] = dense;
  }
  arg.data = reinterpret_cast<char*>(static_cast<uintptr_t>(address));
  arg.dtype = static_cast<int>(dtype);
  return true;
}

}  // namespace npuemu
