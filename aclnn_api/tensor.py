"""aclTensor: a view (shape, strides, offset in elements) over a device address (spec/RUNTIME.md §2.3).

element address = tensor_data + (offset + sum(index[i] * strides[i])) * itemsize
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from emulator import errors, leaks
from emulator.errors import AclError, api, user_site

from . import status
from .dtypes import ACL_DT_UNDEFINED, ACL_FORMAT_UNDEFINED, DTYPE_NAMES, FORMAT_NAMES, aclDataTypeSize, dtype_name, format_name


class aclTensor:
    """An aclTensor descriptor. Create it with aclCreateTensor, release it with aclDestroyTensor."""

    __slots__ = ("view_dims", "data_type", "strides", "offset", "format", "storage_dims", "data", "alive", "site")

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


def contiguous_strides(dims: Sequence[int]) -> tuple:
    strides, step = [], 1
    for dim in reversed(dims):
        strides.append(step)
        step *= max(dim, 1)
    return tuple(reversed(strides))


def _int_list(name: str, values: Any, allow_negative: bool = False) -> tuple:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "%s: expected a list of integers, found %r" % (name, values))
    result = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
            raise AclError(status.ACLNN_ERR_PARAM_INVALID, "%s: expected integers, found %r" % (name, value))
        value = int(value)
        if value < 0 and not allow_negative:
            raise AclError(status.ACLNN_ERR_PARAM_INVALID, "%s: expected non-negative integers, found %d" % (name, value))
        result.append(value)
    return tuple(result)


@api("aclCreateTensor", failure=(None,), internal_code=status.ACLNN_ERR_INNER, returns_status=False)
def aclCreateTensor(view_dims: Sequence[int], data_type: int, strides: Optional[Sequence[int]], offset: int,
                    format: int, storage_dims: Optional[Sequence[int]], tensor_data: Optional[int]) -> Optional[aclTensor]:
    """None (with a message) where the real call would return NULL or the descriptor is unusable:
    missing dims, an unknown dtype or format, negative dims, strides or offset."""
    if view_dims is None:
        raise AclError(status.ACLNN_ERR_PARAM_NULLPTR, "viewDims: expected a list of dims, found null")
    dims = _int_list("viewDims", view_dims)
    if isinstance(data_type, bool) or data_type not in DTYPE_NAMES or data_type == ACL_DT_UNDEFINED:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "dataType: expected an aclDataType, found %r" % (data_type,))
    steps = contiguous_strides(dims) if strides is None else _int_list("stride", strides)
    if len(steps) != len(dims):
        raise AclError(status.ACLNN_ERR_PARAM_INVALID,
                       "stride: expected %d strides (one per view dim), found %d" % (len(dims), len(steps)))
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "offset: expected a non-negative element offset, found %r" % (offset,))
    if isinstance(format, bool) or format not in FORMAT_NAMES or format == ACL_FORMAT_UNDEFINED:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "format: expected an aclFormat, found %r" % (format,))
    storage = dims if storage_dims is None else _int_list("storageDims", storage_dims)
    data = 0 if tensor_data is None else tensor_data
    if isinstance(data, bool) or not isinstance(data, int) or data < 0:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "tensorData: expected a device address, found %r" % (tensor_data,))
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
    target = live_tensor("tensor", tensor)
    if isinstance(addr, bool) or not isinstance(addr, int) or addr < 0:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "addr: expected a device address, found %r" % (addr,))
    target.data = addr


errors.register_package_dir(__file__)
