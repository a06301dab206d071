"""aclIntArray, aclFloatArray, aclBoolArray and aclScalar: host values copied at creation."""
from __future__ import annotations

import numbers
from typing import Any, Optional, Sequence

import numpy as np

from emulator import leaks
from emulator.errors import AclError, api, user_site

from . import status
from emulator.dtypes import ACL_BOOL, ACL_DT_UNDEFINED, ACL_STRING, COMPLEX, DTYPE_NAMES, FLOATING, dtype_name
from .tensor import enum_arg


class _HostArray:
    kind = "array"
    __slots__ = ("values", "alive", "site")

    def __init__(self, values: tuple, site: str):
        self.values = values
        self.alive = True
        self.site = site

    def __len__(self) -> int:
        return len(self.values)

    def describe(self) -> str:
        shown = list(self.values[:8]) + (["..."] if len(self.values) > 8 else [])
        return "of %d value(s) %s" % (len(self.values), shown)

    def __repr__(self) -> str:
        return "<%s %s>" % (type(self).__name__, self.describe())


class aclIntArray(_HostArray):
    kind = "aclIntArray"


class aclFloatArray(_HostArray):
    kind = "aclFloatArray"


class aclBoolArray(_HostArray):
    kind = "aclBoolArray"


def _convert(name: str, values: Any, convert) -> tuple:
    if values is None:
        return ()  # a null or empty input gives a valid empty array (spec/RUNTIME.md §2.3)
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "value: expected a list for %s, found %r" % (name, values))
    try:
        return tuple(convert(v) for v in values)
    except (TypeError, ValueError, OverflowError) as error:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "value: expected a list of %s values, found %s" % (name, error)) from None


def _as_int64(value: Any) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError("non-integer %r" % (value,))
    result = int(value)
    if not -(1 << 63) <= result < (1 << 63):
        raise OverflowError("%d does not fit int64" % result)
    return result


def _as_float(value: Any) -> float:
    """A C float/double: any real number (not a string that happens to parse)."""
    if not isinstance(value, numbers.Real):
        raise TypeError("non-number %r" % (value,))
    return float(value)


def _as_bool(value: Any) -> bool:
    """A C bool: True/False, or the integers 0 and 1."""
    if not isinstance(value, (numbers.Integral, np.bool_)) or int(value) not in (0, 1):
        raise TypeError("non-bool %r" % (value,))
    return bool(value)


def _as_complex(value: Any) -> complex:
    if not isinstance(value, numbers.Complex):
        raise TypeError("non-number %r" % (value,))
    return complex(value)


def _make(cls, converter):
    @api("aclCreate" + cls.__name__[3:], failure=(None,), internal_code=status.ACLNN_ERR_INNER, returns_status=False)
    def create(values: Optional[Sequence]) -> Any:
        array = cls(_convert(cls.kind, values, converter), user_site())
        leaks.track(cls.kind, array, array.describe, array.site)
        return array

    @api("aclDestroy" + cls.__name__[3:], internal_code=status.ACLNN_ERR_INNER)
    def destroy(array: Any) -> None:
        if array is None:
            return
        live_array(cls, "array", array).alive = False
        leaks.untrack(array)

    @api("aclGet%sSize" % cls.__name__[3:], failure=(0,), internal_code=status.ACLNN_ERR_INNER)
    def size(array: Any) -> int:
        return len(live_array(cls, "array", array))
    return create, destroy, size


def live_array(cls, name: str, array: Any):
    if array is None:
        raise AclError(status.ACLNN_ERR_PARAM_NULLPTR, "%s: expected a proper %s, found null" % (name, cls.kind))
    if not isinstance(array, cls):
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "%s: expected an %s, found %s" % (name, cls.kind, type(array).__name__))
    if not array.alive:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID,
                       "%s: expected a live %s, found one already destroyed (made at %s)" % (name, cls.kind, array.site))
    return array


aclCreateIntArray, aclDestroyIntArray, aclGetIntArraySize = _make(aclIntArray, _as_int64)
aclCreateFloatArray, aclDestroyFloatArray, aclGetFloatArraySize = _make(aclFloatArray, _as_float)
aclCreateBoolArray, aclDestroyBoolArray, aclGetBoolArraySize = _make(aclBoolArray, _as_bool)


class aclScalar:
    __slots__ = ("value", "data_type", "alive", "site")

    def __init__(self, value: Any, data_type: int, site: str):
        self.value, self.data_type, self.alive, self.site = value, data_type, True, site

    def describe(self) -> str:
        return "%s %r" % (dtype_name(self.data_type), self.value)

    def __repr__(self) -> str:
        return "<aclScalar %s>" % self.describe()


@api("aclCreateScalar", failure=(None,), internal_code=status.ACLNN_ERR_INNER, returns_status=False)
def aclCreateScalar(value: Any, data_type: int) -> Optional[aclScalar]:
    """The value is copied now; null gives null, as in the real call."""
    if value is None:
        raise AclError(status.ACLNN_ERR_PARAM_NULLPTR, "value: expected a value, found null")
    data_type = enum_arg("dataType", data_type, DTYPE_NAMES, ACL_DT_UNDEFINED, "aclDataType")
    if data_type == ACL_STRING:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "dataType: expected a numeric aclDataType, found STRING")
    convert = (_as_float if data_type in FLOATING else _as_bool if data_type == ACL_BOOL
               else _as_complex if data_type in COMPLEX else _as_int64)
    try:
        copied = convert(value)
    except (TypeError, ValueError, OverflowError) as error:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "value: expected a %s value, found %r (%s)"
                       % (dtype_name(data_type), value, error)) from None
    scalar = aclScalar(copied, data_type, user_site())
    leaks.track("aclScalar", scalar, scalar.describe, scalar.site)
    return scalar


def live_scalar(name: str, scalar: Any) -> aclScalar:
    """The argument as a live aclScalar, or 161001 (null) / 161002 (not a scalar, destroyed)."""
    if scalar is None:
        raise AclError(status.ACLNN_ERR_PARAM_NULLPTR, "%s: expected a proper aclScalar, found null" % name)
    if not isinstance(scalar, aclScalar):
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "%s: expected an aclScalar, found %s" % (name, type(scalar).__name__))
    if not scalar.alive:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID,
                       "%s: expected a live aclScalar, found one already destroyed (made at %s)" % (name, scalar.site))
    return scalar


@api("aclDestroyScalar", internal_code=status.ACLNN_ERR_INNER)
def aclDestroyScalar(scalar: Optional[aclScalar]) -> None:
    """0 for null, as the real call; a second destroy is reported (the real library would double free)."""
    if scalar is None:
        return
    live_scalar("scalar", scalar).alive = False
    leaks.untrack(scalar)
