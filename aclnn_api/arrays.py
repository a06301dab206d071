"""aclIntArray, aclFloatArray, aclBoolArray and aclScalar: host values copied at creation.

Each is a `Resource` (an integer handle, the site where it was made, destroyed once); every call that
takes one takes the object or its handle.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable, Optional, Sequence

import numpy as np

from emulator import cargs
from emulator.cargs import ACLNN, INT64
from emulator.dtypes import (ACL_BOOL, ACL_DT_UNDEFINED, ACL_STRING, COMPLEX, DTYPE_NAMES, FLOATING, LOW_BIT_FLOATING,
                             LOW_BIT_INTEGER_RANGES, NUMPY_TYPES, dtype_name)
from emulator.errors import AclError, api
from emulator.resource import Resource, live

from . import status


class HostArray(Resource):
    """A copied array of host values (the C side passes a pointer and a count)."""

    layer = ACLNN
    __slots__ = ("values",)

    def __init__(self, values: tuple):
        self.values = values
        super().__init__()

    def __len__(self) -> int:
        return len(self.values)

    def describe(self) -> str:
        shown = list(self.values[:8]) + (["..."] if len(self.values) > 8 else [])
        return "of %d value(s) %s" % (len(self.values), shown)

    def destroy(self) -> None:
        """aclDestroy...: the program releases the array."""
        self.release()


class aclIntArray(HostArray):
    kind = "aclIntArray"
    __slots__ = ()


class aclFloatArray(HostArray):
    kind = "aclFloatArray"
    __slots__ = ()


class aclBoolArray(HostArray):
    kind = "aclBoolArray"
    __slots__ = ()


def sequence(kind: str, values: Any) -> Sequence:
    """The values of a `const T *value` + count argument: a list, a tuple or a 1-D NumPy array;
    null (None) is an empty one, as in the library."""
    if values is None:
        return ()
    if isinstance(values, np.ndarray) and values.ndim == 1:
        return values.tolist()
    if isinstance(values, (str, bytes, np.ndarray)) or not hasattr(values, "__iter__"):
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "value: expected a list of %s values, found %s"
                       % (kind, cargs.shown(values)))
    return values


def _int64(name: str, value: Any) -> int:
    return cargs.integer(name, value, INT64, ACLNN)


def _float(name: str, value: Any) -> float:
    return cargs.double(name, value, ACLNN)


def _bool(name: str, value: Any) -> bool:
    return cargs.boolean(name, value, ACLNN)


def _complex(name: str, value: Any) -> complex:
    if isinstance(value, bool) or not isinstance(value, numbers.Complex):
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "%s: expected a number, found %s" % (name, cargs.shown(value)))
    return complex(value)


def array_calls(cls: type, values_of: Callable[[Any], tuple], holding: str, keywords: Optional[dict] = None,
                size_parameter: str = "array") -> tuple:
    """aclCreate<X>(value), aclDestroy<X>(array) and aclGet<X>Size(array) of a HostArray class:
    `values_of` turns the argument into the values held (raising AclError), `holding` says what the
    new object holds, for the docstring; `keywords`: the create's contract keyword names (emulator.errors.api);
    `size_parameter`: the name aclGet<X>Size's C prototype gives its object, which its messages name."""
    words = cls.__name__[3:]  # IntArray, TensorList, ...

    def create(value: Optional[Sequence]) -> Optional[HostArray]:
        return cls(values_of(value))

    def destroy(array: Any) -> int:
        if not cargs.is_null(array):
            live(cls, "array", array).destroy()

    def size(array: Any) -> int:
        return len(live(cls, size_parameter, array))

    # Named, documented and annotated before `api` wraps them: help() shows what the wrapper copied then.
    create.__doc__ = ("The new %s holding %s (None: an empty one), or None with a message for a value it "
                      "cannot hold." % (cls.kind, holding))
    create.__annotations__["return"] = "Optional[%s]" % cls.kind  # the class itself, not "cls" or the base
    destroy.__doc__ = ("Returns the status: 0, also for null; 161002 for one already destroyed. %s"
                       % (cls.destroy.__doc__ or "")).strip()
    size.__doc__ = "Returns (number of values, status); (0, 161001) for null."
    for function, name in ((create, "aclCreate" + words), (destroy, "aclDestroy" + words),
                           (size, "aclGet%sSize" % words)):
        function.__name__ = function.__qualname__ = name
    return (api(create.__name__, failure=(None,), internal_code=status.ACLNN_ERR_INNER, returns_status=False,
                keywords=keywords)(create),
            api(destroy.__name__, internal_code=status.ACLNN_ERR_INNER)(destroy),
            api(size.__name__, failure=(0,), internal_code=status.ACLNN_ERR_INNER)(size))


def _copied(kind: str, convert: Callable[[str, Any], Any]) -> Callable[[Any], tuple]:
    return lambda values: tuple(convert("value", value) for value in sequence(kind, values))


# The Python contract's aclCreateIntArray(values), and the float and bool arrays' alike.
_VALUES = {"values": "value"}
aclCreateIntArray, aclDestroyIntArray, aclGetIntArraySize = array_calls(
    aclIntArray, _copied("int64", _int64), "a copy of the int64 values", _VALUES)
aclCreateFloatArray, aclDestroyFloatArray, aclGetFloatArraySize = array_calls(
    aclFloatArray, _copied("float", _float), "a copy of the float values", _VALUES)
aclCreateBoolArray, aclDestroyBoolArray, aclGetBoolArraySize = array_calls(
    aclBoolArray, _copied("bool", _bool), "a copy of the bool values", _VALUES)


class aclScalar(Resource):
    kind = "aclScalar"
    layer = ACLNN
    __slots__ = ("value", "data_type")

    def __init__(self, value: Any, data_type: int):
        self.value, self.data_type = value, data_type
        super().__init__()

    def describe(self) -> str:
        return "%s %r" % (dtype_name(self.data_type), self.value)


def _integer_range(data_type: int) -> tuple:
    """(minimum, maximum) of an integer dtype: the values a C variable of it holds (a UINT64 above 2^63
    too; INT4 and UINT1 by their bits)."""
    if data_type in LOW_BIT_INTEGER_RANGES:
        return LOW_BIT_INTEGER_RANGES[data_type]
    info = np.iinfo(NUMPY_TYPES[data_type])
    return int(info.min), int(info.max)


def _scalar_converter(data_type: int) -> Callable[[str, Any], Any]:
    """What turns a value into the one a scalar of the (numeric, known) dtype holds."""
    if data_type in FLOATING or data_type in LOW_BIT_FLOATING:
        return _float
    if data_type == ACL_BOOL:
        return _bool
    if data_type in COMPLEX:
        return _complex
    bounds = _integer_range(data_type)
    return lambda name, value: cargs.integer(name, value, bounds, ACLNN)


@api("aclCreateScalar", failure=(None,), internal_code=status.ACLNN_ERR_INNER, returns_status=False)
def aclCreateScalar(value: Any, data_type: int) -> Optional[aclScalar]:
    """The new aclScalar holding a copy of the value, or None with a message (null gives null, as in
    the real call; a value the dtype cannot hold, an unknown dtype)."""
    if value is None:
        raise AclError(status.ACLNN_ERR_PARAM_NULLPTR, "value: expected a value, found null")
    data_type = cargs.enum("dataType", data_type, DTYPE_NAMES, "aclDataType", ACLNN, excluded=(ACL_DT_UNDEFINED,))
    if data_type == ACL_STRING:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "dataType: expected a numeric aclDataType, found STRING")
    try:
        copied = _scalar_converter(data_type)("value", value)
    except AclError as error:
        raise AclError(error.code, "%s (for a scalar of dtype %s)" % (error.message, dtype_name(data_type))) from None
    return aclScalar(copied, data_type)


@api("aclDestroyScalar", internal_code=status.ACLNN_ERR_INNER)
def aclDestroyScalar(scalar: Optional[aclScalar]) -> int:
    """Returns the status: 0, also for null as the real call; a second destroy is 161002 naming where
    the scalar was made and destroyed (the real library would double free)."""
    if not cargs.is_null(scalar):
        live(aclScalar, "scalar", scalar).release()
