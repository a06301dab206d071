"""aclDataType and aclFormat with their real values, item sizes, NumPy equivalents, and the one
type-promotion table every operator uses (docs/runtime.md lists them)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from . import errors as _errors, status as _status  # private: `from dtypes import *` is public API
from .cargs import is_integer as _is_integer, shown as _shown

ACL_DT_UNDEFINED = -1
ACL_FLOAT = 0
ACL_FLOAT16 = 1
ACL_INT8 = 2
ACL_INT32 = 3
ACL_UINT8 = 4
ACL_INT16 = 6
ACL_UINT16 = 7
ACL_UINT32 = 8
ACL_INT64 = 9
ACL_UINT64 = 10
ACL_DOUBLE = 11
ACL_BOOL = 12
ACL_STRING = 13
ACL_COMPLEX64 = 16
ACL_COMPLEX128 = 17
ACL_BF16 = 27
ACL_INT4 = 29
ACL_UINT1 = 30
ACL_COMPLEX32 = 33
ACL_HIFLOAT8 = 34
ACL_FLOAT8_E5M2 = 35
ACL_FLOAT8_E4M3FN = 36
ACL_FLOAT8_E8M0 = 37
ACL_FLOAT6_E3M2 = 38
ACL_FLOAT6_E2M3 = 39
ACL_FLOAT4_E2M1 = 40
ACL_FLOAT4_E1M2 = 41

ACL_FORMAT_UNDEFINED = -1
ACL_FORMAT_NCHW = 0
ACL_FORMAT_NHWC = 1
ACL_FORMAT_ND = 2
ACL_FORMAT_NC1HWC0 = 3
ACL_FORMAT_FRACTAL_Z = 4
ACL_FORMAT_NC1HWC0_C04 = 12
ACL_FORMAT_HWCN = 16
ACL_FORMAT_NDHWC = 27
ACL_FORMAT_FRACTAL_NZ = 29
ACL_FORMAT_NCDHW = 30
ACL_FORMAT_NDC1HWC0 = 32
ACL_FRACTAL_Z_3D = 33
ACL_FORMAT_NC = 35
ACL_FORMAT_NCL = 47
ACL_FORMAT_FRACTAL_NZ_C0_16 = 50
ACL_FORMAT_FRACTAL_NZ_C0_32 = 51
ACL_FORMAT_FRACTAL_NZ_C0_2 = 52
ACL_FORMAT_FRACTAL_NZ_C0_4 = 53
ACL_FORMAT_FRACTAL_NZ_C0_8 = 54

DTYPE_NAMES = {value: name[4:] for name, value in list(globals().items())
               if name.startswith("ACL_") and not name.startswith(("ACL_FORMAT", "ACL_FRACTAL")) and isinstance(value, int)}
FORMAT_NAMES = {value: name[4:] for name, value in list(globals().items())
                if name.startswith(("ACL_FORMAT", "ACL_FRACTAL")) and isinstance(value, int)}

# aclDataTypeSize (docs/runtime.md, "Data types"): 0 for STRING/UNDEFINED, 8 for the default branch.
ITEM_SIZES = {ACL_STRING: 0, ACL_DT_UNDEFINED: 0, ACL_INT4: 1, ACL_UINT1: 1, ACL_BOOL: 1, ACL_INT8: 1, ACL_UINT8: 1,
          ACL_HIFLOAT8: 1, ACL_FLOAT8_E5M2: 1, ACL_FLOAT8_E4M3FN: 1, ACL_FLOAT8_E8M0: 1,
          ACL_FLOAT16: 2, ACL_INT16: 2, ACL_UINT16: 2, ACL_BF16: 2,
          ACL_FLOAT: 4, ACL_INT32: 4, ACL_UINT32: 4, ACL_COMPLEX32: 4, ACL_COMPLEX128: 16}


def item_size(data_type: int) -> int:
    """Bytes per element; 8 for unknown values (the real default branch); 0, with a message, for a
    Python value that is no integer at all."""
    if type(data_type) is int:  # the common case, asked on every tensor made
        return ITEM_SIZES.get(data_type, 8)
    if not _is_integer(data_type):
        _errors.record(_status.ACL_ERROR_INVALID_PARAM, "aclDataTypeSize",
                      "dataType: expected an aclDataType, found %s" % _shown(data_type))
        return 0
    return ITEM_SIZES.get(int(data_type), 8)


# The public call (a wrong argument count is 0 with a message); the library itself asks item_size.
aclDataTypeSize = _errors.value_call("aclDataTypeSize", 0)(item_size)


def dtype_name(data_type: int) -> str:
    return DTYPE_NAMES.get(data_type, "aclDataType(%s)" % data_type)


def format_name(fmt: int) -> str:
    return FORMAT_NAMES.get(fmt, "aclFormat(%s)" % fmt)


# Host-side NumPy equivalents (BF16 has none: it travels as uint16 bit patterns).
NUMPY_TYPES = {ACL_FLOAT: np.float32, ACL_FLOAT16: np.float16, ACL_DOUBLE: np.float64, ACL_INT8: np.int8,
               ACL_INT16: np.int16, ACL_INT32: np.int32, ACL_INT64: np.int64, ACL_UINT8: np.uint8,
               ACL_UINT16: np.uint16, ACL_UINT32: np.uint32, ACL_UINT64: np.uint64, ACL_BOOL: np.bool_,
               ACL_BF16: np.uint16, ACL_COMPLEX64: np.complex64, ACL_COMPLEX128: np.complex128}

FLOATING = (ACL_FLOAT16, ACL_BF16, ACL_FLOAT, ACL_DOUBLE)
# The 8-, 6- and 4-bit floating dtypes (no operator takes them; an aclScalar of one holds a real number).
LOW_BIT_FLOATING = (ACL_HIFLOAT8, ACL_FLOAT8_E5M2, ACL_FLOAT8_E4M3FN, ACL_FLOAT8_E8M0, ACL_FLOAT6_E3M2,
                    ACL_FLOAT6_E2M3, ACL_FLOAT4_E2M1, ACL_FLOAT4_E1M2)
# The integer dtypes narrower than a byte, by the (minimum, maximum) value they hold.
LOW_BIT_INTEGER_RANGES = {ACL_INT4: (-8, 7), ACL_UINT1: (0, 1)}
INTEGRAL = (ACL_BOOL, ACL_UINT8, ACL_INT8, ACL_INT16, ACL_INT32, ACL_INT64)
COMPLEX = (ACL_COMPLEX32, ACL_COMPLEX64, ACL_COMPLEX128)
_INT_RANK = {ACL_BOOL: 0, ACL_UINT8: 1, ACL_INT8: 1, ACL_INT16: 2, ACL_INT32: 3, ACL_INT64: 4}
_INT_BY_RANK = {2: ACL_INT16, 3: ACL_INT32, 4: ACL_INT64}


def promote_types(a: int, b: int) -> Optional[int]:
    """The framework's promotion table (the aclnn framework's type promotion); None where the table has no entry."""
    if a == b:
        return a
    if a in FLOATING and b in FLOATING:
        if ACL_DOUBLE in (a, b):
            return ACL_DOUBLE
        return ACL_FLOAT  # f16+f32, bf16+f32 and f16+bf16 all give f32
    if a in FLOATING and b in _INT_RANK:
        return a
    if b in FLOATING and a in _INT_RANK:
        return b
    if a in _INT_RANK and b in _INT_RANK:
        if {a, b} == {ACL_UINT8, ACL_INT8}:
            return ACL_INT16
        return a if _INT_RANK[a] >= _INT_RANK[b] else b
    return None


def can_cast(source: int, target: int) -> bool:
    """CanCast: forbidden are complex to non-complex, floating to integral, non-bool to bool."""
    if source in COMPLEX and target not in COMPLEX:
        return False
    if source in FLOATING and target in _INT_RANK:
        return False
    if target == ACL_BOOL and source != ACL_BOOL:
        return False
    return True


# What `from emulator.dtypes import *` gives `acl` and `aclnn_api`: the C API's names and the host
# types; the helpers above are npuemu's own.
__all__ = [name for name in list(globals()) if name.startswith("ACL_")] + ["aclDataTypeSize", "NUMPY_TYPES"]
