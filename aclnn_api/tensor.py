"""aclTensor: a view (shape, strides, offset in elements) over a device address (docs/runtime.md,
"aclnn framework").

element address = tensor_data + (offset + sum(index[i] * strides[i])) * itemsize

A tensor is a `Resource`: an integer handle from the process-wide table, the user's site where it
was made, destroyed once. Every call that takes a tensor takes the object or its handle.
"""
from __future__ import annotations

import itertools
import math

from typing import Any, Optional, Sequence

import numpy as np

from emulator import cargs, sites
from emulator.cargs import ACLNN, INT64
from emulator.dtypes import ACL_DT_UNDEFINED, ACL_FORMAT_UNDEFINED, DTYPE_NAMES, FORMAT_NAMES, item_size, dtype_name, format_name
from emulator.errors import AclError, api
from emulator.resource import Resource, live
from emulator.sanitizer import merged_ranges

from . import status

NON_NEGATIVE = (0, INT64[1])


class aclTensor(Resource):
    """An aclTensor descriptor. Create it with aclCreateTensor, release it with aclDestroyTensor."""

    kind = "aclTensor"
    layer = ACLNN

    __slots__ = ("view_dims", "data_type", "strides", "offset", "format", "storage_dims", "data", "view_nbytes",
                 "dense", "runs", "valid_dims", "version")

    def __init__(self, view_dims: tuple, data_type: int, strides: tuple, offset: int, fmt: int,
                 storage_dims: tuple, data: int, site: Optional[sites.Site] = None):
        self.describe_as(view_dims, data_type, strides, offset, fmt, storage_dims, data)
        super().__init__(site)

    def describe_as(self, view_dims: tuple, data_type: int, strides: tuple, offset: int, fmt: int,
                    storage_dims: tuple, data: int) -> None:
        """Set the whole description (aclCreateTensor, aclInitTensor)."""
        self.view_dims: tuple = view_dims
        self.data_type: int = data_type
        self.strides: tuple = strides
        self.offset: int = offset
        self.format: int = fmt
        self.storage_dims: tuple = storage_dims
        self.data: int = data
        self.view_nbytes: int = view_nbytes(view_dims, strides, item_size(data_type))
        self.dense: bool = gapless(view_dims, strides)  # its elements cover its byte range whole
        self.runs: Optional[tuple] = None  # (byte_runs of its view,) once a launch asked (TensorView.byte_runs)
        self.valid_dims: Optional[tuple] = None  # the view_dims that operators' shape checks accepted
        self.version: int = moved()

    def move_to(self, data: int) -> None:
        """A new device address for the same view (aclSetRawTensorAddr and the executor's setters)."""
        self.data = data
        self.version = moved()

    @property
    def itemsize(self) -> int:
        return item_size(self.data_type)

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
        """Empty when any view dim is 0; a 0-D tensor holds one element (docs/ops)."""
        return 0 in self.view_dims

    def describe(self) -> str:
        return ("%s%s at 0x%x (strides %s, offset %d, %s)"
                % (dtype_name(self.data_type), list(self.view_dims), self.data, list(self.strides),
                   self.offset, format_name(self.format)))


_move_numbers = itertools.count(1)
_last_move = 0  # the number of the latest change of any tensor's description or address


def moved() -> int:
    """A tensor has been described anew or changed its address (called after the change): launches
    planned before look at their tensors again. Returns a fresh number, never given before, which is
    also the tensor's `version`: so no interleaving of threads can bring back a value a launch has
    seen, and a version names one state of one tensor (the first phases' plan cache keys on it)."""
    global _last_move
    _last_move = number = next(_move_numbers)
    return number


def moves() -> int:
    """A value that changes whenever any tensor's address does (see KernelLaunch.queued)."""
    return _last_move


def view_nbytes(dims: Sequence[int], strides: Sequence[int], itemsize: int) -> int:
    """Bytes from a view's first element to the end of its last one; 0 for a view with no element
    (a dim of 0, or a negative dim, which the operators reject)."""
    last = 0  # element index of the last element, relative to the first
    for dim, stride in zip(dims, strides):
        if dim <= 0:
            return 0
        last += (dim - 1) * stride
    return (last + 1) * itemsize


def gapless(dims: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether a view's elements cover its byte range whole, elements repeated or not. Its dims of more
    than one element and a stride above 0, smallest stride first, must each step at most one element
    past all that the smaller ones span (the first by 1): the smaller ones then cover [0, spanned] whole,
    and so do all of them. Else the element after that span is not in the view, below its last one.
    (Comparing the range with the element count is not enough: [3, 3] strides [2, 2] repeats 4 of its 9
    elements and misses 4 others in a range of 9.)"""
    if dims and min(dims) <= 0:
        return True  # no element: nothing to miss
    spanned = 0
    for stride, dim in sorted(zip(strides, dims)):  # (every tensor made asks: no generator, no filtered copy)
        if dim > 1 and stride > 0:
            if stride > spanned + 1:
                return False
            spanned += stride * (dim - 1)
    return True


# A view with gaps is told to the sanitizer as its runs of bytes when it has at most this many (else as
# its whole byte range).
LISTED_RUNS = 1 << 16


def byte_runs(start: int, itemsize: int, dims: Sequence[int], strides: Sequence[int]) -> Optional[tuple]:
    """(starts, ends): numpy arrays of the disjoint [start, end) byte ranges a view covers, in address
    order, when there are gaps between them (a pitched or sliced view) and at most LISTED_RUNS of them;
    None for a view that covers its byte range whole (repeats aside), or has more runs. Dims of one
    element or of stride 0 add no bytes; dims whose elements follow on from the inner ones' merge into
    longer runs, and runs that meet or overlap (a view folded onto itself) into one."""
    if any(dim <= 0 for dim in dims):
        return None
    run, outer, steps = _run_layout(dims, strides)
    if not outer or math.prod(outer) > LISTED_RUNS:
        return None
    starts = np.sort(start + _offsets(outer, steps) * itemsize)
    starts, ends = merged_ranges(starts, starts + run * itemsize)
    return None if len(starts) == 1 else (starts, ends)


def _run_layout(dims: Sequence[int], strides: Sequence[int]) -> tuple:
    """(elements in one run, outer dims, their strides) of a view with elements: its dims of more than
    one element and a stride above 0, largest stride first, less the innermost ones that step by what
    the inner ones span, which make up the run. A run starts at each offset of the outer dims."""
    kept = sorted(((stride, dim) for dim, stride in zip(dims, strides) if dim > 1 and stride > 0), reverse=True)
    run = 1
    while kept and kept[-1][0] == run:
        run *= kept.pop()[1]
    return run, tuple(dim for _, dim in kept), tuple(stride for stride, _ in kept)


def box_runs(itemsize: int, strides: Sequence[int], boxes: Sequence[tuple]) -> Optional[tuple]:
    """(starts, ends): numpy arrays of the disjoint [start, end) byte ranges, as offsets from element 0
    of a view with these element strides, that its index boxes cover, in address order (runs that meet
    or overlap merged); None when the boxes make more than LISTED_RUNS runs. A box is a (start, stop)
    index range per dim of the view; an empty one covers nothing."""
    layouts, count = [], 0
    for box in boxes:
        dims = tuple(stop - start for start, stop in box)
        if min(dims, default=1) <= 0:
            continue
        run, outer, steps = _run_layout(dims, strides)
        count += math.prod(outer)
        if count > LISTED_RUNS:  # counted before any array is made: a large batch stops here, cheaply
            return None
        layouts.append((sum(start * stride for (start, _), stride in zip(box, strides)), run, outer, steps))
    if not layouts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.concatenate([base + _offsets(outer, steps) for base, _, outer, steps in layouts]) * itemsize
    lengths = np.repeat([run for _, run, _, _ in layouts], [math.prod(outer) for _, _, outer, _ in layouts]) * itemsize
    order = np.argsort(starts, kind="stable")
    return merged_ranges(starts[order], starts[order] + lengths[order])


# Views up to this many elements that neither rule of shared_element decides are decided by listing
# their offsets; larger ones are taken to give every index an element of its own.
LISTED_ELEMENTS = 1 << 20


def shared_element(dims: Sequence[int], strides: Sequence[int]) -> Optional[tuple]:
    """Two different indices of the view (dims, non-negative element strides) at one element, or None
    when every index has an element of its own. Rules first, then a listing: a dim of more than one
    element with stride 0 shares; dims whose strides, smallest first, each step over all that the
    smaller ones span share nothing; a view that is neither (e.g. [3, 2] with strides [2, 3]) is
    decided by listing its offsets, when it has at most LISTED_ELEMENTS elements. Never a false
    finding: a larger undecided view counts as sharing nothing."""
    dims, strides = tuple(dims), tuple(strides)
    if any(dim <= 0 for dim in dims) or _each_steps_over_the_smaller(zip(reversed(strides), reversed(dims))):
        return None  # no element, or the usual row-major order, padded or not
    spanning = [(stride, dim, axis) for axis, (dim, stride) in enumerate(zip(dims, strides)) if dim > 1]
    for stride, _, axis in spanning:
        if stride == 0:
            return _index(dims, {}), _index(dims, {axis: 1})
    if _each_steps_over_the_smaller(sorted((stride, dim) for stride, dim, _ in spanning)):
        return None
    return _listed_sharing(dims, strides)


def _each_steps_over_the_smaller(strides_and_dims) -> bool:
    """Whether each stride (taken in the given order, dims of one element left out) is larger than all
    that the strides before it span: then no two indices are one element."""
    spanned = 0
    for stride, dim in strides_and_dims:
        if dim > 1:
            if stride <= spanned:
                return False
            spanned += stride * (dim - 1)
    return True


def _index(dims: tuple, at: dict) -> tuple:
    return tuple(at.get(axis, 0) for axis in range(len(dims)))


def _listed_sharing(dims: tuple, strides: tuple) -> Optional[tuple]:
    if math.prod(dims) > LISTED_ELEMENTS:
        return None
    offsets = _offsets(dims, strides)
    order = np.argsort(offsets, kind="stable")
    repeats = np.flatnonzero(offsets[order][1:] == offsets[order][:-1])
    if not repeats.size:
        return None
    first, second = sorted((int(order[repeats[0]]), int(order[repeats[0] + 1])))
    return (tuple(int(i) for i in np.unravel_index(first, dims)), tuple(int(i) for i in np.unravel_index(second, dims)))


def _offsets(dims: tuple, strides: tuple) -> np.ndarray:
    """The element offset of every index of the view, in row-major order of the indices."""
    offsets = np.zeros(1, dtype=np.int64)
    for dim, stride in zip(dims, strides):
        offsets = (offsets[:, None] + np.arange(dim, dtype=np.int64)[None, :] * stride).reshape(-1)
    return offsets


# Two views that share bytes, one of them with gaps, are compared byte by byte when each covers at
# most this many bytes; larger ones are taken to conflict nowhere.
LISTED_BYTES = 1 << 20


def conflicting_byte(a: tuple, b: tuple, units: Optional[str] = "elements") -> Optional[int]:
    """The address of a byte that views a and b both cover in different units of work, or None. A view
    is (address of its element 0, itemsize, dims, element strides); its units are its elements in
    row-major order ("elements"), or the rows of its last dim ("rows"), the same unit index in both
    being one piece of a core's work, read whole before it is written; so the very same view twice (an
    in-place call) never conflicts. With `units` None no unit of a is one of b: any byte both cover
    conflicts.

    Views of at most LISTED_BYTES bytes each are compared byte by byte. Larger ones conflict where
    their ranges meet if each covers its range whole (broadcast repeats aside) and they are not one
    view; larger views with gaps conflict nowhere (never a false finding)."""
    (start_a, size_a, dims_a, strides_a), (start_b, size_b, dims_b, strides_b) = a, b
    low = max(start_a, start_b)
    if low >= min(start_a + view_nbytes(dims_a, strides_a, size_a), start_b + view_nbytes(dims_b, strides_b, size_b)):
        return None  # disjoint ranges (or a view without elements)
    rows = units == "rows"
    if units is not None and _canonical(a, rows) == _canonical(b, rows):
        return None
    bytes_a, bytes_b = _bytes_and_units(a, rows), _bytes_and_units(b, rows)
    if bytes_a is None or bytes_b is None:
        covering = _covers_its_range(dims_a, strides_a) and _covers_its_range(dims_b, strides_b)
        return low if covering else None
    (addresses_a, units_a), (addresses_b, units_b) = bytes_a, bytes_b
    if units is None:  # a's units and b's told apart
        units_a, units_b = np.zeros_like(units_a), np.ones_like(units_b)
    order = np.argsort(addresses_b, kind="stable")
    addresses_b, units_b = addresses_b[order], units_b[order]
    distinct, first = np.unique(addresses_b, return_index=True)
    lowest, highest = np.minimum.reduceat(units_b, first), np.maximum.reduceat(units_b, first)
    at = np.minimum(np.searchsorted(distinct, addresses_a), distinct.size - 1)
    conflicts = (distinct[at] == addresses_a) & ((lowest[at] != units_a) | (highest[at] != units_a))
    return int(addresses_a[np.flatnonzero(conflicts)[0]]) if conflicts.any() else None


def _canonical(view: tuple, rows: bool) -> tuple:
    """The view with dims of one element left out and neighbours that step as one dim merged (the last
    dim kept apart with rows): two views with one canonical form are the same view."""
    start, itemsize, dims, strides = view
    merged: list = []
    for position, (dim, stride) in enumerate(zip(dims, strides)):
        if dim == 1:
            continue
        last_of_row = rows and position == len(dims) - 1
        if merged and not last_of_row and merged[-1][1] == dim * stride:
            merged[-1] = (merged[-1][0] * dim, stride)
        else:
            merged.append((dim, stride))
    return start, itemsize, tuple(merged)


def _covers_its_range(dims: tuple, strides: tuple) -> bool:
    """Whether the view's elements, repeats aside (dims of stride 0), tile its byte range without gaps."""
    kept = [(dim, stride) for dim, stride in zip(dims, strides) if dim > 1 and stride > 0]
    extent = 1 + sum((dim - 1) * stride for dim, stride in kept)
    return extent == math.prod(dim for dim, _ in kept) and shared_element([d for d, _ in kept], [s for _, s in kept]) is None


def _bytes_and_units(view: tuple, rows: bool) -> Optional[tuple]:
    """(address, unit index) of every byte of every element of the view, repeats included (None above
    LISTED_BYTES bytes)."""
    start, itemsize, dims, strides = view
    count = math.prod(dims)
    if count * itemsize > LISTED_BYTES:
        return None
    per_unit = dims[-1] if rows and dims else 1
    units = np.arange(count, dtype=np.int64) // max(per_unit, 1)
    addresses = start + _offsets(dims, strides)[:, None] * itemsize + np.arange(itemsize, dtype=np.int64)[None, :]
    return addresses.reshape(-1), np.repeat(units, itemsize)


def contiguous_strides(dims: Sequence[int]) -> tuple:
    strides, step = [], 1
    for dim in reversed(dims):
        strides.append(step)
        step *= max(dim, 1)
    return tuple(reversed(strides))


def _fitting_shape(name: str, dims: tuple) -> tuple:
    """The dims, if their element count and their contiguous strides are int64 values: the getters
    (aclGetViewStrides hands the strides to C as int64_t) and every size worked out from the shape
    need them to be. Dims of 0 or below count as 1 in the strides, as contiguous_strides takes them."""
    # a negative dim (accepted here, refused by every operator) has no element count to check
    count = 0 if 0 in dims or any(dim < 0 for dim in dims) else _int64_product(dims)
    stride = _int64_product([max(dim, 1) for dim in dims[1:]])
    if count is None or stride is None:
        shown = list(dims) if len(dims) <= 16 else "%s ... (%d more)" % (str(list(dims[:16]))[:-1], len(dims) - 16)
        raise AclError(status.ACLNN_ERR_PARAM_INVALID,
                       "%s: expected dims whose element count and contiguous strides fit in int64 (at most %d), "
                       "found %d dims %s, whose %s does not" % (name, INT64[1], len(dims), shown,
                                                                "element count" if count is None else "outermost stride"))
    return dims


def _int64_product(values: Sequence[int]) -> Optional[int]:
    """The product, or None once it leaves int64: stopping there keeps garbage dims (a C count too large
    reads past the array) from making an integer of millions of digits."""
    product = 1
    for value in values:
        product *= value
        if not INT64[0] <= product <= INT64[1]:
            return None
    return product


def _description(view_dims: Any, data_type: Any, strides: Any, offset: Any, format: Any, storage_dims: Any,
                 tensor_data: Any, data_parameter: str) -> tuple:
    """The checked arguments of aclCreateTensor / aclInitTensor, in their order; `data_parameter`: what the
    call's C prototype names the address (tensorData, tensorDataAddr). Dims may be negative, as the library
    accepts them (every operator's first phase rejects such a shape); strides and offset may not. The
    address is a pointer, checked as aclSetRawTensorAddr checks its own (None: null)."""
    if view_dims is None:
        raise AclError(status.ACLNN_ERR_PARAM_NULLPTR, "viewDims: expected a list of dims, found null")
    dims = _fitting_shape("viewDims", cargs.integer_list("viewDims", view_dims, INT64, ACLNN))
    data_type = cargs.enum("dataType", data_type, DTYPE_NAMES, "aclDataType", ACLNN, excluded=(ACL_DT_UNDEFINED,))
    steps = contiguous_strides(dims) if strides is None else cargs.integer_list("stride", strides, NON_NEGATIVE, ACLNN)
    if len(steps) != len(dims):
        raise AclError(status.ACLNN_ERR_PARAM_INVALID,
                       "stride: expected %d strides (one per view dim), found %d" % (len(dims), len(steps)))
    offset = cargs.integer("offset", offset, NON_NEGATIVE, ACLNN)
    format = cargs.enum("format", format, FORMAT_NAMES, "aclFormat", ACLNN, excluded=(ACL_FORMAT_UNDEFINED,))
    if storage_dims is cargs.C_NULL:
        raise AclError(status.ACLNN_ERR_PARAM_NULLPTR, "storageDims: expected a list of dims, found null")
    storage = dims if storage_dims is None else _fitting_shape(
        "storageDims", cargs.integer_list("storageDims", storage_dims, NON_NEGATIVE, ACLNN))
    data = cargs.optional_pointer(data_parameter, tensor_data, ACLNN)
    return dims, data_type, steps, offset, format, storage, data


@api("aclCreateTensor", failure=(None,), internal_code=status.ACLNN_ERR_INNER, returns_status=False)
def aclCreateTensor(view_dims: Sequence[int], data_type: int, strides: Optional[Sequence[int]], offset: int,
                    format: int, storage_dims: Optional[Sequence[int]], tensor_data: Optional[int]) -> Optional[aclTensor]:
    """The new aclTensor, or None (with a message) where the real call would return NULL or the
    descriptor is unusable: missing dims, an unknown dtype or format, negative strides or offset."""
    return aclTensor(*_description(view_dims, data_type, strides, offset, format, storage_dims, tensor_data,
                                   "tensorData"))


@api("aclInitTensor", internal_code=status.ACLNN_ERR_INNER)
def aclInitTensor(tensor: aclTensor, view_dims: Sequence[int], data_type: int, strides: Optional[Sequence[int]],
                  offset: int, format: int, storage_dims: Optional[Sequence[int]],
                  tensor_data: Optional[int]) -> int:
    """Returns the status: re-describe an existing tensor with aclCreateTensor's arguments (0), or
    leave it unchanged (161001 for a null tensor or dims, 161002 for anything else aclCreateTensor
    refuses)."""
    target = live(aclTensor, "tensor", tensor)
    target.describe_as(*_description(view_dims, data_type, strides, offset, format, storage_dims, tensor_data,
                                     "tensorDataAddr"))


@api("aclDestroyTensor", internal_code=status.ACLNN_ERR_INNER)
def aclDestroyTensor(tensor: Optional[aclTensor]) -> int:
    """Returns the status: 0, also for null as the real call; a second destroy is 161002 naming where
    the tensor was made and destroyed (the real library would double free)."""
    if cargs.is_null(tensor):
        return
    live(aclTensor, "tensor", tensor).release()


def _getter(name: str, read, doc: str):
    @api(name, failure=(None,), internal_code=status.ACLNN_ERR_INNER)
    def get(tensor: aclTensor):
        return read(live(aclTensor, "tensor", tensor))
    get.__name__ = get.__qualname__ = name
    get.__doc__ = "Returns (%s, status); (None, 161001) for a null tensor, 161002 for a destroyed one." % doc
    return get


aclGetViewShape = _getter("aclGetViewShape", lambda t: list(t.view_dims), "the view dims as a list")
aclGetStorageShape = _getter("aclGetStorageShape", lambda t: list(t.storage_dims), "the storage dims as a list")
aclGetViewStrides = _getter("aclGetViewStrides", lambda t: list(t.strides), "the strides in elements as a list")
aclGetViewOffset = _getter("aclGetViewOffset", lambda t: t.offset, "the view offset in elements")
aclGetFormat = _getter("aclGetFormat", lambda t: t.format, "the aclFormat")
aclGetDataType = _getter("aclGetDataType", lambda t: t.data_type, "the aclDataType")
aclGetRawTensorAddr = _getter("aclGetRawTensorAddr", lambda t: t.data, "the device address")


@api("aclSetRawTensorAddr", internal_code=status.ACLNN_ERR_INNER)
def aclSetRawTensorAddr(tensor: aclTensor, addr: Optional[int]) -> int:
    """Returns the status. The new address is the one every later launch uses, also the launches of a
    repeatable executor planned before (each launch reads its tensors' addresses when it is queued)."""
    target = live(aclTensor, "tensor", tensor)
    target.move_to(cargs.optional_pointer("addr", addr, ACLNN))
