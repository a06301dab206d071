"""C arguments: the Python values a public call accepts where the C prototype has an integer, a
pointer, a handle, an enum, a bool or a double, and the status a value no C compiler would accept
gets.

Both layers use these converters; they differ only in their codes (`RUNTIME`: 100000 for both a
null and a bad value; `ACLNN`: 161001 for null, 161002 for a bad value). Integers of every NumPy
integer type are accepted as sizes, handles and enums; `bool` is not an integer here, and NumPy
arrays and other non-scalars are rejected with the layer's invalid-parameter code and a message,
never the internal-error code.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Iterable, Optional

import numpy as np

from .errors import AclError


@dataclass(frozen=True)
class Layer:
    """The status codes of one layer for arguments it cannot use."""
    name: str
    null_code: int      # a required pointer or handle is null
    invalid_code: int   # a value of the wrong type or out of range
    stale_code: int     # a handle that is destroyed or was never made


RUNTIME = Layer("runtime", null_code=100000, invalid_code=100000, stale_code=107017)  # ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_INVALID_HANDLE
ACLNN = Layer("aclnn", null_code=161001, invalid_code=161002, stale_code=161002)      # ACLNN_ERR_PARAM_NULLPTR / _INVALID

INT32 = (-(1 << 31), (1 << 31) - 1)
UINT32 = (0, (1 << 32) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)
UINT64 = (0, (1 << 64) - 1)
SIZE_T = UINT64


def shown(value: Any) -> str:
    """A value as a message shows it: integers in hex when they look like addresses, arrays by type."""
    if isinstance(value, np.ndarray):
        return "a numpy.ndarray of shape %s" % (value.shape,)
    if is_integer(value) and abs(int(value)) >= 1 << 128:  # no C type of the API is as wide
        return "an integer of %d bits" % abs(int(value)).bit_length()
    if is_integer(value) and int(value) > 0xFFFF:
        return "0x%x" % int(value)
    if type(value).__repr__ is object.__repr__:  # "<object object at 0x...>" says nothing a type name does not
        return "an instance of %s" % type(value).__qualname__
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def is_integer(value: Any) -> bool:
    """An integer scalar of Python or NumPy (not bool, not an array)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


# A C caller's NULL array with a count above 0, where Python's None means something else (storage dims:
# the view dims; a tensor or scalar list: an empty one): the toolkit's adapters pass it for that NULL.
C_NULL = type("CNull", (), {"__repr__": lambda self: "NULL"})()


def is_null(value: Any) -> bool:
    """None or the integer 0: what a C null pointer arrives as."""
    return value is None or (is_integer(value) and int(value) == 0)


def integer(name: str, value: Any, bounds: tuple = INT64, layer: Layer = RUNTIME) -> int:
    """An integer argument within the (minimum, maximum) of its C type (None: unbounded)."""
    if not is_integer(value):
        raise AclError(layer.invalid_code, "%s: expected an integer, found %s" % (name, shown(value)))
    number = int(value)
    minimum, maximum = bounds
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise AclError(layer.invalid_code, "%s: expected an integer in [%s, %s], found %d"
                       % (name, "-inf" if minimum is None else minimum, "inf" if maximum is None else maximum, number))
    return number


def size(name: str, value: Any, layer: Layer = RUNTIME) -> int:
    """A size_t / uint64_t argument."""
    return integer(name, value, SIZE_T, layer)


def pointer(name: str, value: Any, layer: Layer = RUNTIME) -> int:
    """A required pointer: a non-null address (pyACL passes pointers as plain ints)."""
    if is_null(value):
        raise AclError(layer.null_code, "%s: expected a non-null pointer, found null" % name)
    return integer(name, value, (1, UINT64[1]), layer)


def optional_pointer(name: str, value: Any, layer: Layer = RUNTIME) -> int:
    """A pointer that may be null: 0 for None."""
    return 0 if value is None else integer(name, value, UINT64, layer)


def enum(name: str, value: Any, names: dict, kind: str, layer: Layer = RUNTIME,
         excluded: Iterable[int] = ()) -> int:
    """A C enum argument: one of the values in `names` (and not in `excluded`, e.g. UNDEFINED)."""
    number = int(value) if is_integer(value) else None
    if number not in names or number in excluded:
        raise AclError(layer.invalid_code, "%s: expected an %s, found %s" % (name, kind, shown(value)))
    return number


def as_bool(value: Any) -> Optional[bool]:
    """value as a C bool: True/False (Python or NumPy), or the integers 0 and 1; None for anything else."""
    if isinstance(value, (bool, np.bool_)) or (is_integer(value) and int(value) in (0, 1)):
        return bool(value)
    return None


def as_double(value: Any) -> Optional[float]:
    """value as a C double: any real number scalar of Python or NumPy; None for anything else (a bool,
    a string, an array, or an integer beyond a double's range, which float() refuses with an
    OverflowError)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def boolean(name: str, value: Any, layer: Layer = RUNTIME) -> bool:
    """A C bool: True/False (Python or NumPy), or the integers 0 and 1."""
    result = as_bool(value)
    if result is None:
        raise AclError(layer.invalid_code, "%s: expected a bool, found %s" % (name, shown(value)))
    return result


def double(name: str, value: Any, layer: Layer = RUNTIME) -> float:
    """A C float/double: any real number scalar that a double holds (not a string, not an array)."""
    result = as_double(value)
    if result is None:
        raise AclError(layer.invalid_code, "%s: expected a number, found %s" % (name, shown(value)))
    return result


def integer_list(name: str, values: Any, bounds: tuple = INT64, layer: Layer = RUNTIME) -> tuple:
    """A `const int64_t *` + count pair: a sequence of integers (a 1-D NumPy integer array too)."""
    if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype.kind in "iu":
        values = values.tolist()
    if isinstance(values, (str, bytes, np.ndarray)) or not hasattr(values, "__iter__"):
        raise AclError(layer.invalid_code, "%s: expected a list of integers, found %s" % (name, shown(values)))
    values = tuple(values)
    try:
        return tuple(integer(name, value, bounds, layer) for value in values)
    except AclError:  # again, naming the element and the count: a C count too large reads garbage past the array
        for index, value in enumerate(values):
            integer("%s[%d] (of the %d read)" % (name, index, len(values)), value, bounds, layer)
        raise


def optional_string(name: str, value: Any, layer: Layer = RUNTIME) -> Optional[str]:
    """A `const char *` that may be null."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise AclError(layer.invalid_code, "%s: expected a string, found %s" % (name, shown(value)))
    return value
