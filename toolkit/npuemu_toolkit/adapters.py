"""The few C functions whose arguments Python's form of the call takes differently: what the bridge
calls instead of the public Python function, in the C argument order (toolkit/npuemu_toolkit/surface.py names them).

Importing this module (the bridge does, at start) also tells emulator.sites how to name a C caller.
"""
from __future__ import annotations

import ctypes
import functools
import math
import os
import shlex
import sys
from typing import Any, Optional

import numpy as np

import _npuemu_c  # made by the bridge (toolkit/src/core.cpp) before it imports this module
import aclnn_api
from emulator import __version__, callback, errors, hooks, memory, runtime, sites
from emulator.cargs import C_NULL
from emulator.dtypes import (ACL_BF16, ACL_COMPLEX32, ACL_DT_UNDEFINED, ACL_FLOAT4_E2M1, ACL_FLOAT6_E2M3,
                             ACL_FLOAT6_E3M2, ACL_FLOAT8_E4M3FN, ACL_FLOAT8_E5M2, ACL_FLOAT8_E8M0, ACL_INT4,
                             ACL_STRING, ACL_UINT1, DTYPE_NAMES, NUMPY_TYPES, aclDataTypeSize, dtype_name)
from emulator.interface import host_problem

from . import INTERPRETER, _interface


def _older_tree_refusal() -> str:
    """Why this package refuses the C toolkit that imports it: a tree of a build older than the core's interface
    check (toolkit/src/core.cpp, interface_mismatch), which compared nothing, and may pass its arguments by
    another convention; with the advice the core gives (reinstall_advice there)."""
    root = os.path.dirname(getattr(_npuemu_c, "library_directory", "?"))
    if os.path.isfile(os.path.join(root, INTERPRETER)):
        advice = ("this toolkit is a copy made by `npuemu toolkit install`: install the package's toolkit over it "
                  "again with the npuemu of %s (`%s -m emulator toolkit install %s`)"
                  % (sys.executable, shlex.quote(sys.executable), shlex.quote(root)))
    else:
        advice = ("reinstall npuemu in the environment of %s (`make install` or `pip install .` in the npuemu checkout)"
                  % sys.executable)
    return ("npuemu's C toolkit in %s is of a build older than the npuemu package of %s (npuemu %s, interface %s), "
            "whose calls may differ in their arguments: %s" % (root, sys.executable, __version__,
                                                                _interface.FINGERPRINT, advice))


# A core that checked the interface says so by its fingerprint (equal to ours, or it would not have started).
if not hasattr(_npuemu_c, "interface_fingerprint"):
    raise ImportError(_older_tree_refusal())

sites.register_package_dir(__file__)
sites.set_native_caller(_npuemu_c.caller, _npuemu_c.modules_generation)
sites.register_native_dir(_npuemu_c.library_directory)
memory.watch_call_frames(_npuemu_c.frames_in_use)


class _PythonCallFrames:
    """In a Python program that loaded the toolkit (ctypes), the calls of the Python API keep where their
    frames are, as the C calls do (toolkit/src/core.cpp, PythonCall): a copy a C function of the program
    queued into its own stack buffer then fails at the Python synchronisation instead of writing over the
    interpreter's frames. An observer of the calls, attached only there: a plain Python program's calls
    cost what they did."""

    @staticmethod
    def before(name: str, args: tuple, kwargs: dict) -> Optional[Any]:
        record = _npuemu_c.python_call_starts(name)
        return None if record is None else functools.partial(_npuemu_c.python_call_ends, record)


if _npuemu_c.python_host:
    hooks.attach("CALLS", _PythonCallFrames(), first=True)
    callback.watch_program_code(_npuemu_c.program_code_starts, _npuemu_c.program_code_ends)


def _command_line() -> list:
    """The C program's own command line, as the kernel keeps it (its arguments, empty ones included),
    decoded as Python decodes its own: bytes that are not UTF-8 kept as os.fsdecode keeps them."""
    try:
        with open("/proc/self/cmdline", "rb") as file:
            raw = file.read()
    except OSError:
        return []
    return [os.fsdecode(part) for part in raw[:-1].split(b"\0")] if raw else []


# The interpreter a C program embeds was given no command line (sys.argv is ['']): the trace's and the
# logs' record of the process take the program's. A Python host keeps its own.
if not any(sys.argv):
    sys.argv = _command_line() or sys.argv


class _Unreadable(Exception):
    pass


def _minifloat(bits: int, exponent_bits: int, mantissa_bits: int, bias: int, specials: str) -> float:
    """The value of a small binary floating-point number held in the low bits of `bits` (sign, exponent,
    mantissa; subnormals at exponent 0). `specials`: "ieee" (an all-ones exponent is infinity or NaN, as
    FLOAT8_E5M2), "fn" (only all ones in exponent and mantissa is NaN, as FLOAT8_E4M3FN) or "none" (the
    OCP MX FLOAT6/FLOAT4 types, all finite)."""
    top = (1 << exponent_bits) - 1
    sign = -1.0 if bits >> (exponent_bits + mantissa_bits) & 1 else 1.0
    exponent, mantissa = bits >> mantissa_bits & top, bits & ((1 << mantissa_bits) - 1)
    if specials == "ieee" and exponent == top:
        return sign * math.inf if mantissa == 0 else math.nan
    if specials == "fn" and exponent == top and mantissa == (1 << mantissa_bits) - 1:
        return math.nan
    if exponent == 0:
        return sign * math.ldexp(mantissa, 1 - bias - mantissa_bits)
    return sign * math.ldexp((1 << mantissa_bits) | mantissa, exponent - bias - mantissa_bits)


def _e8m0(bits: int) -> float:
    """FLOAT8_E8M0 (OCP MX scale): 2^(bits - 127), no sign nor mantissa; 0xFF is NaN."""
    return math.nan if bits == 0xFF else math.ldexp(1.0, bits - 127)


# The dtypes NumPy has no type for, by what reads their value from its first byte: each has one public
# bit-level definition (IEEE-style FLOAT8_E5M2, FLOAT8_E4M3FN, and the OCP Microscaling formats).
# HIFLOAT8 and FLOAT4_E1M2 have none npuemu can decode for certain: they are refused from C.
_FIRST_BYTE_DECODERS = {
    ACL_FLOAT8_E5M2: lambda byte: _minifloat(byte, 5, 2, 15, "ieee"),
    ACL_FLOAT8_E4M3FN: lambda byte: _minifloat(byte, 4, 3, 7, "fn"),
    ACL_FLOAT8_E8M0: _e8m0,
    ACL_FLOAT6_E3M2: lambda byte: _minifloat(byte & 0x3F, 3, 2, 3, "none"),
    ACL_FLOAT6_E2M3: lambda byte: _minifloat(byte & 0x3F, 2, 3, 1, "none"),
    ACL_FLOAT4_E2M1: lambda byte: _minifloat(byte & 0x0F, 2, 1, 1, "none"),
    ACL_INT4: lambda byte: (byte & 0x0F) - 16 if byte & 0x08 else byte & 0x0F,  # the low nibble, signed
    ACL_UINT1: lambda byte: byte & 1,
}


def _decoded(raw: bytes, data_type: int) -> Any:
    """The value the bytes of a C variable of `data_type` hold (a dtype _readable accepts)."""
    if data_type in _FIRST_BYTE_DECODERS:
        return _FIRST_BYTE_DECODERS[data_type](raw[0])
    if data_type == ACL_COMPLEX32:  # two float16: the real part, then the imaginary one
        real, imaginary = np.frombuffer(raw[:4], np.float16)
        return complex(float(real), float(imaginary))
    value = np.frombuffer(raw, NUMPY_TYPES[data_type])[0]
    if data_type == ACL_BF16:  # the upper half of a float32
        return float(np.array([int(value) << 16], np.uint32).view(np.float32)[0])
    return value.item()


def _readable(data_type: int) -> bool:
    return data_type in NUMPY_TYPES or data_type in _FIRST_BYTE_DECODERS or data_type == ACL_COMPLEX32


class _NotRead:
    """Stands for the value of a scalar whose dtype npuemu does not know (or is not numeric): Python's
    aclCreateScalar refuses that dtype before it looks at the value, and no dtype's conversion takes it."""

    def __init__(self, address: int):
        self.address = address

    def __repr__(self) -> str:
        return "the value at 0x%x, not read" % self.address


def _scalar_value(address: int, data_type: Any) -> Any:
    """The value a C caller's `void *value` holds for `data_type`: aclDataTypeSize(dataType) bytes read
    at once, as the library copies them. A known numeric dtype npuemu cannot decode is refused here."""
    if type(data_type) is not int or not _readable(data_type):
        if type(data_type) is int and data_type in DTYPE_NAMES and data_type not in (ACL_STRING, ACL_DT_UNDEFINED):
            raise _Unreadable("dataType: expected a dtype whose bits npuemu can read, found %s: npuemu cannot read "
                              "a value of that dtype from C (it has no public bit-level definition npuemu can "
                              "decode for certain); create it from Python, which takes the number itself"
                              % dtype_name(data_type))
        return _NotRead(address)  # Python's call names the dtype it refuses
    size = aclDataTypeSize(data_type)
    problem = host_problem(address, size)
    if problem:
        raise _Unreadable("value: " + problem)
    return _decoded(ctypes.string_at(address, size), data_type)


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
