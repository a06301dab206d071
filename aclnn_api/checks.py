"""Validation helpers of the first phase, one per check of the library's op_error_check.h (null,
dtype supported / matching / same, shape equal, broadcast, rank limit, castable). Each raises
AclError with the real code (161001 for a null, 161002 otherwise) and a message that names the
parameter, what was expected and what was found.

Every operator also runs `valid_shapes` at its shape step on the tensors it checks: no negative
dim (aclCreateTensor accepts one, as the real one does; the operator rejects it) and at most
MAX_VIEW_ELEMENTS elements, the bytes of the largest device memory of any emulated chip
(Ascend950's 128 GiB = 2^37): no device could address more distinct elements even at one byte
each, and a larger view (e.g. 2^62 elements of stride 0 over a 64-byte buffer) would only make the
kernel loop for ever."""
from __future__ import annotations

import math

from typing import Any, Iterable, Optional, Sequence

from emulator import cargs
from emulator.errors import AclError
from emulator.resource import live, optional

from . import status
from .arrays import aclIntArray
from emulator.dtypes import can_cast, dtype_name, format_name, promote_types
from .shapes import broadcast_shapes
from .tensor import aclTensor

INVALID = status.ACLNN_ERR_PARAM_INVALID


def fail(message: str) -> None:
    raise AclError(INVALID, message)


def not_null(**tensors: Any) -> None:
    """Every named argument is a live aclTensor (161001 for null; 161002 for a destroyed one or another
    object), in the order given."""
    for name, tensor in tensors.items():
        if type(tensor) is not aclTensor or not tensor.alive:  # the common case needs no more checking
            live(aclTensor, name, tensor)


def not_null_arrays(**arrays: Any) -> None:
    """Every named argument is a live aclIntArray (161001 for null, 161002 otherwise), in order."""
    for name, array in arrays.items():
        live(aclIntArray, name, array)


def optional_tensor(name: str, tensor: Any) -> Optional[aclTensor]:
    """None for a null optional tensor, else the live aclTensor (161002 for a destroyed one)."""
    if tensor is None or (type(tensor) is aclTensor and tensor.alive):  # the common cases need no more checking
        return tensor
    return optional(aclTensor, name, tensor)


def _names(dtypes: Iterable[int]) -> str:
    return "[%s]" % ", ".join(dtype_name(d) for d in dtypes)


MAX_VIEW_ELEMENTS = 1 << 37


def valid_shapes(**tensors: aclTensor) -> None:
    """Each named tensor has no negative dim and at most MAX_VIEW_ELEMENTS elements, in order."""
    for name, tensor in tensors.items():
        dims = tensor.view_dims
        if dims is tensor.valid_dims:  # accepted before, and the tensor has not been described anew
            continue
        if dims and min(dims) < 0:
            fail("%s: expected dims >= 0, found shape %s" % (name, list(dims)))
        count = math.prod(dims)
        if count > MAX_VIEW_ELEMENTS:
            fail("%s: expected at most 2^37 elements (more than any device could address), found %d (shape %s)"
                 % (name, count, list(dims)))
        tensor.valid_dims = dims


def attr_in(name: str, value: Any, valid: dict) -> int:
    """An integer attribute that must be one of `valid` ({value: meaning})."""
    number = int_attr(name, value)
    if number not in valid:
        fail("%s: expected %s, found %d" % (name, _choices(valid), number))
    return number


def _choices(valid: dict) -> str:
    items = ["%d (%s)" % (v, meaning) for v, meaning in valid.items()]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def dtype_in(name: str, tensor: aclTensor, allowed: Sequence[int], chip: str = "") -> None:
    if tensor.data_type not in allowed:
        fail("%s: expected a dtype in %s%s, found %s"
             % (name, _names(allowed), " on " + chip if chip else "", dtype_name(tensor.data_type)))


def dtype_is(name: str, tensor: aclTensor, expected: int, because: str) -> None:
    if tensor.data_type != expected:
        fail("%s: expected dtype %s (%s), found %s" % (name, dtype_name(expected), because, dtype_name(tensor.data_type)))


def same_dtype(name: str, tensor: aclTensor, other_name: str, other: aclTensor) -> None:
    if tensor.data_type != other.data_type:
        dtype_is(name, tensor, other.data_type, "the dtype of %s" % other_name)


def castable(source_name: str, source: aclTensor, target_name: str, target: aclTensor) -> None:
    if not can_cast(source.data_type, target.data_type):
        fail("%s: expected a dtype that can be cast to %s's %s, found %s"
             % (source_name, target_name, dtype_name(target.data_type), dtype_name(source.data_type)))


def promoted(named: Sequence[tuple]) -> int:
    """The promoted dtype of (name, tensor) pairs, left to right; 161002 where the table has no entry."""
    result = named[0][1].data_type
    for name, tensor in named[1:]:
        promoted_dtype = promote_types(result, tensor.data_type)
        if promoted_dtype is None:
            fail("%s: expected a dtype that promotes with %s, found %s"
                 % (name, dtype_name(result), dtype_name(tensor.data_type)))
        result = promoted_dtype
    return result


def max_rank(name: str, tensor: aclTensor, limit: int = 8) -> None:
    if tensor.rank > limit:
        fail("%s: expected at most %d dims, found %d (shape %s)" % (name, limit, tensor.rank, list(tensor.view_dims)))


def rank_is(name: str, tensor: aclTensor, ranks: Sequence[int]) -> None:
    if tensor.rank not in ranks:
        fail("%s: expected %s dims, found %d (shape %s)"
             % (name, " or ".join(str(r) for r in ranks), tensor.rank, list(tensor.view_dims)))


def same_shape(name: str, tensor: aclTensor, other_name: str, other: aclTensor) -> None:
    if tensor.view_dims != other.view_dims:
        fail("%s: expected the shape of %s %s, found %s"
             % (name, other_name, list(other.view_dims), list(tensor.view_dims)))


def one_element(name: str, tensor: aclTensor, reduction: str) -> None:
    """A reduction's output holds its one result: any shape of one element ([], [1], [1, 1]...), as
    the library's CheckReduceOutShape accepts."""
    if tensor.numel != 1:
        fail("%s: expected exactly one element for %s, found shape %s" % (name, reduction, list(tensor.view_dims)))


def broadcast_pair(name: str, tensor: aclTensor, other_name: str, other: aclTensor) -> tuple:
    shape = broadcast_shapes(tensor.view_dims, other.view_dims)
    if shape is None:
        fail("%s: expected a shape that broadcasts with %s %s, found %s"
             % (name, other_name, list(other.view_dims), list(tensor.view_dims)))
    return shape


def broadcasts_to(name: str, tensor: aclTensor, shape: Sequence[int], target: str) -> None:
    """broadcast(tensor, shape) exists and equals `shape`: the tensor may be smaller, never larger."""
    if broadcast_shapes(tensor.view_dims, shape) != tuple(shape):
        fail("%s: expected a shape that broadcasts to %s %s, found %s"
             % (name, target, list(shape), list(tensor.view_dims)))


def same_format(name: str, tensor: aclTensor, other_name: str, other: aclTensor) -> None:
    if tensor.format != other.format:
        fail("%s: expected the format of %s (%s), found %s"
             % (name, other_name, format_name(other.format), format_name(tensor.format)))


# The attributes of the first phases. Python can pass anything where C has an int64_t, a bool or a
# double: a value no C argument of that type holds (a string, an array, a bool for an int64, an
# integer past the type's range) gets 161002 naming the parameter and the C type, as in the C
# toolkit's own argument checks (emulator.cargs).

def _found(value: Any) -> str:
    if not cargs.is_integer(value):
        return cargs.shown(value)
    digits = str(int(value))
    return digits if len(digits) <= 40 else "an integer of %d digits" % len(digits.lstrip("-"))


def int_attr(name: str, value: Any) -> int:
    """An int64_t attribute: any Python or NumPy integer scalar in the int64 range (not a bool)."""
    if not cargs.is_integer(value) or not cargs.INT64[0] <= int(value) <= cargs.INT64[1]:
        fail("%s: expected an int64, found %s" % (name, _found(value)))
    return int(value)


def bool_attr(name: str, value: Any) -> bool:
    """A bool attribute: True/False (Python or NumPy), or the integers 0 and 1."""
    result = cargs.as_bool(value)
    if result is None:
        fail("%s: expected a bool, found %s" % (name, _found(value)))
    return result


def float_attr(name: str, value: Any) -> float:
    """A double attribute: any real number scalar of Python or NumPy that a double holds (not a bool)."""
    result = cargs.as_double(value)
    if result is None:
        fail("%s: expected a double, found %s" % (name, _found(value)))
    return result
