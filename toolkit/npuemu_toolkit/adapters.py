"""The few C functions whose arguments Python's form of the call takes differently: what the bridge
calls instead of the public Python function, in the C argument order (toolkit/npuemu_toolkit/surface.py names them).

Importing this module (the bridge does, at start) also tells emulator.sites how to name a C caller.
"""
from __future__ import annotations

import ctypes
import sys
from typing import Any, Optional

import numpy as np

import _npuemu_c  # made by the bridge (toolkit/src/core.cpp) before it imports this module
import aclnn_api
from emulator import errors, runtime, sites
from emulator.cargs import C_NULL
from emulator.dtypes import ACL_BF16, NUMPY_TYPES, aclDataTypeSize
from emulator.interface import host_problem

sites.register_package_dir(__file__)
sites.set_native_caller(_npuemu_c.caller)


def _command_line() -> list:
    """The C program's own command line, as the kernel keeps it (its arguments, empty ones included)."""
    try:
        with open("/proc/self/cmdline", "rb") as file:
            raw = file.read()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw[:-1].split(b"\0")] if raw else []


# The interpreter a C program embeds was given no command line (sys.argv is ['']): the trace's and the
# logs' record of the process take the program's. A Python host keeps its own.
if not any(sys.argv):
    sys.argv = _command_line() or sys.argv


class _Unreadable(Exception):
    pass


def _scalar_value(address: int, data_type: Any) -> Any:
    """The value a C caller's `void *value` holds for `data_type`; the address itself when the dtype is
    one aclCreateScalar refuses anyway (it names the dtype)."""
    numpy_type = NUMPY_TYPES.get(data_type) if type(data_type) is int else None
    if numpy_type is None:
        return address
    size = aclDataTypeSize(data_type)
    problem = host_problem(address, size)
    if problem:
        raise _Unreadable("value: " + problem)
    value = np.frombuffer(ctypes.string_at(address, size), numpy_type)[0]
    if data_type == ACL_BF16:  # the upper half of a float32
        return float(np.array([int(value) << 16], np.uint32).view(np.float32)[0])
    return value.item()


def aclCreateScalar(value: Optional[int], dataType: int) -> Optional[aclnn_api.aclScalar]:
    """aclCreateScalar(void *value, aclDataType dataType): the value read at `value` as `dataType`."""
    try:
        return aclnn_api.aclCreateScalar(None if value is None else _scalar_value(value, dataType), dataType)
    except _Unreadable as error:
        errors.record(aclnn_api.ACLNN_ERR_PARAM_INVALID, "aclCreateScalar", str(error))
        return None


# A NULL dims array with a count above 0 arrives as None (with a count of 0, as an empty list). Python's
# aclCreateTensor / aclInitTensor take None storage dims for the view dims; C's fail as for NULL view dims.
def aclCreateTensor(viewDims: Optional[list], dataType: int, stride: Optional[list], offset: int, format: int,
                    storageDims: Optional[list], tensorData: Optional[int]) -> Optional[aclnn_api.aclTensor]:
    """aclCreateTensor as C has it: NULL `storageDims` with a count is NULL, as NULL `viewDims` is."""
    storage = C_NULL if storageDims is None else storageDims
    return aclnn_api.aclCreateTensor(viewDims, dataType, stride, offset, format, storage, tensorData)


def aclInitTensor(tensor: Any, viewDims: Optional[list], dataType: int, stride: Optional[list], offset: int,
                  format: int, storageDims: Optional[list], tensorDataAddr: Optional[int]) -> int:
    """aclInitTensor as C has it: NULL `storageDims` with a count is 161001, the tensor left as it was."""
    storage = C_NULL if storageDims is None else storageDims
    return aclnn_api.aclInitTensor(tensor, viewDims, dataType, stride, offset, format, storage, tensorDataAddr)


# Python's None tensor or scalar list is an empty list; a C NULL with a count is NULL (the card's
# constructor would read the count's pointers from NULL). With a count of 0 it is an empty list.
def aclCreateTensorList(value: Optional[list]) -> Optional[aclnn_api.aclTensorList]:
    """aclCreateTensorList as C has it: NULL `value` with a count is NULL with a message."""
    return aclnn_api.aclCreateTensorList(C_NULL if value is None else value)


def aclCreateScalarList(value: Optional[list]) -> Optional[aclnn_api.aclScalarList]:
    """aclCreateScalarList as C has it: NULL `value` with a count is NULL with a message."""
    return aclnn_api.aclCreateScalarList(C_NULL if value is None else value)


class CFunction:
    """A C callback `void fn(void *)` as a Python callable, named as a Python function is: the runtime
    names the callback's task and its messages by `__name__` and repr(), so a C program reads
    `aclrtLaunchCallback(on_done)` where a Python one does, not a repr of a wrapper. The name is the
    C function's symbol where dladdr finds one starting at its address (a shared library's function, a
    program linked with -rdynamic), else the address in hex."""

    __slots__ = ("address", "symbol", "__name__", "__qualname__")

    def __init__(self, address: int):
        self.address = address
        self.symbol = _npuemu_c.symbol(address)
        self.__name__ = self.__qualname__ = self.symbol or "0x%x" % address

    def __call__(self, user_data: Optional[int]) -> None:
        _npuemu_c.call(self.address, user_data)

    def __repr__(self) -> str:  # as a Python function's: <function on_done at 0x...>
        return "<function %sat 0x%x>" % (self.symbol + " " if self.symbol else "", self.address)


def aclrtLaunchCallback(fn: Optional[int], userData: Optional[int], blockType: int, stream: Optional[int]) -> int:
    """aclrtLaunchCallback(aclrtCallback fn, void *userData, ...): fn(userData) runs in C, without the GIL,
    on the thread that processes the stream's reports."""
    callback = None if fn is None else CFunction(fn)
    return runtime.aclrtLaunchCallback(callback, userData, blockType, stream)
