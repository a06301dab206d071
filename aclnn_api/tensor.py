"""aclTensor: a view (shape, strides, offset in elements) over a device address (spec/RUNTIME.md §2.3).

element address = tensor_data + (offset + sum(index[i] * strides[i])) * itemsize
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from emulator import errors, leaks
from emulator.errors import AclError, api, user_site

from . import status
from emulator.dtypes import ACL_DT_UNDEFINED, ACL_FORMAT_UNDEFINED, DTYPE_NAMES, FORMAT_NAMES, aclDataTypeSize, dtype_name, format_name


class aclTensor:
    """An aclTensor descriptor. Create it with aclCreateTensor, release it with aclDestroyTensor."""

    __slots__ = ("view_dims", "data_type", "strides", "offset", "format", "storage_dims", "data", "alive", "site",
                 "view_nbytes")

    def __init__(self, view_dims, data_type, strides, offset, fmt, storage_dims, data, site):
        self.view_dims: tuple = view_dims
        self.data_type: int = data_type
        self.strides: tuple = strides
        self.offset: int = offset
        self.format: int = fmt
        self.storage_dims: tuple = storage_dims
        self.data: int = data
        self.alive = True
        self.site = site
        self.view_nbytes: int = view_nbytes(view_dims, strides, aclDataTypeSize(data_type))

    @property
    def itemsize(self) -> int:
        return aclDataTypeSize(self.data_type)

    @property
    def rank(self) -> int:
        return len(self.view_dims)

    @property
    def numel(self) -> int:
        count = 1
        for dim in self.view_dims:
            count *= dim
        return count

    @property
    def is_empty(self) -> bool:
        """Empty when any view dim is 0; a 0-D tensor holds one element (spec/OPS.md §0.4)."""
        return 0 in self.view_dims

    def describe(self) -> str:
        return ("%s%s at 0x%x (strides %s, offset %d, %s)"
                % (dtype_name(self.data_type), list(self.view_dims), self.data, list(self.strides),
                   self.offset, format_name(self.format)))

    def __repr__(self) -> str:
        return "<aclTensor %s>" % self.describe()


def view_nbytes(dims: Sequence[int], strides: Sequence[int], itemsize: int) -> int:
    """Bytes from a view's first element to the end of its last one; 0 for an empty view."""
    last = 0  # element index of the last element, relative to the first
    for dim, stride in zip(dims, strides):
        if dim == 0:
            return 0
        last += (dim - 1) * stride
    return (last + 1) * itemsize


def contiguous_strides(dims: Sequence[int]) -> tuple:
    strides, step = [], 1
    for dim in reversed(dims):
        strides.append(step)
        step *= max(dim, 1)
    return tuple(reversed(strides))


INT64_MAX = (1 << 63) - 1


def int64_arg(name: str, value: Any, minimum: int = 0) -> int:
    """An int64_t argument of the C prototype: an integer in [minimum, INT64_MAX]."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "%s: expected an integer, found %r" % (name, value))
    value = int(value)
    if not minimum <= value <= INT64_MAX:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID,
                       "%s: expected an integer in [%d, 2^63), found %d" % (name, minimum, value))
    return value


def _int_list(name: str, values: Any) -> tuple:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "%s: expected a list of integers, found %r" % (name, values))
    return tuple(int64_arg(name, value) for value in values)


def enum_arg(name: str, value: Any, names: dict, undefined: int, kind: str) -> int:
    """A C enum argument: one of the defined values (any Python integer type; never a hashing error)."""
    number = int(value) if hasattr(value, "__index__") and not isinstance(value, bool) else None
    if number not in names or number == undefined:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "%s: expected an %s, found %r" % (name, kind, value))
    return number


@api("aclCreateTensor", failure=(None,), internal_code=status.ACLNN_ERR_INNER, returns_status=False)
def aclCreateTensor(view_dims: Sequence[int], data_type: int, strides: Optional[Sequence[int]], offset: int,
                    format: int, storage_dims: Optional[Sequence[int]], tensor_data: Optional[int]) -> Optional[aclTensor]:
    """None (with a message) where the real call would return NULL or the descriptor is unusable:
    missing dims, an unknown dtype or format, negative dims, strides or offset."""
    if view_dims is None:
        raise AclError(status.ACLNN_ERR_PARAM_NULLPTR, "viewDims: expected a list of dims, found null")
    dims = _int_list("viewDims", view_dims)
    data_type = enum_arg("dataType", data_type, DTYPE_NAMES, ACL_DT_UNDEFINED, "aclDataType")
    steps = contiguous_strides(dims) if strides is None else _int_list("stride", strides)
    if len(steps) != len(dims):
        raise AclError(status.ACLNN_ERR_PARAM_INVALID,
                       "stride: expected %d strides (one per view dim), found %d" % (len(dims), len(steps)))
    offset = int64_arg("offset", offset)
    format = enum_arg("format", format, FORMAT_NAMES, ACL_FORMAT_UNDEFINED, "aclFormat")
    storage = dims if storage_dims is None else _int_list("storageDims", storage_dims)
    data = 0 if tensor_data is None else int64_arg("tensorData", tensor_data)
    site = user_site()
    tensor = aclTensor(dims, data_type, steps, offset, format, storage, data, site)
    leaks.track("aclTensor", tensor, tensor.describe, site)
    return tensor


def live_tensor(name: str, tensor: Any) -> aclTensor:
    """The argument as a live aclTensor, or 161001 (null) / 161002 (not a tensor, destroyed)."""
    if tensor is None:
        raise AclError(status.ACLNN_ERR_PARAM_NULLPTR, "%s: expected a proper tensor, found null" % name)
    if not isinstance(tensor, aclTensor):
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "%s: expected an aclTensor, found %s" % (name, type(tensor).__name__))
    if not tensor.alive:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID,
                       "%s: expected a live aclTensor, found one already destroyed (made at %s)" % (name, tensor.site))
    return tensor


@api("aclDestroyTensor", internal_code=status.ACLNN_ERR_INNER)
def aclDestroyTensor(tensor: Optional[aclTensor]) -> None:
    """0 for null, as the real call; a second destroy is reported (the real library would double free)."""
    if tensor is None:
        return
    live_tensor("tensor", tensor).alive = False
    leaks.untrack(tensor)


def _getter(name: str, read):
    @api(name, failure=(None,), internal_code=status.ACLNN_ERR_INNER)
    def get(tensor: aclTensor):
        return read(live_tensor("tensor", tensor))
    get.__name__ = name
    return get


aclGetViewShape = _getter("aclGetViewShape", lambda t: list(t.view_dims))
aclGetStorageShape = _getter("aclGetStorageShape", lambda t: list(t.storage_dims))
aclGetViewStrides = _getter("aclGetViewStrides", lambda t: list(t.strides))
aclGetViewOffset = _getter("aclGetViewOffset", lambda t: t.offset)
aclGetFormat = _getter("aclGetFormat", lambda t: t.format)
aclGetDataType = _getter("aclGetDataType", lambda t: t.data_type)
aclGetRawTensorAddr = _getter("aclGetRawTensorAddr", lambda t: t.data)


@api("aclSetRawTensorAddr", internal_code=status.ACLNN_ERR_INNER)
def aclSetRawTensorAddr(tensor: aclTensor, addr: int) -> None:
    live_tensor("tensor", tensor).data = 0 if addr is None else int64_arg("addr", addr)


errors.register_package_dir(__file__)
