"""The two-phase machinery every operator shares.

An operator module writes one function, named after the first phase, that validates its arguments
in the library's order (raising AclError through `checks`) and returns a `KernelLaunch` (or None
when there is nothing to run). `first_phase` turns it into aclnnXxxGetWorkspaceSize, and
`second_phase` makes aclnnXxx, which queues the launch on a stream. The tensors' addresses are read
when the work is queued (so a repeatable executor follows aclSetRawTensorAddr); they are resolved, and
checked against their allocations, only when the stream runs the work, as on the device.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import re
from typing import Any, Callable, Optional, Sequence

from emulator import interface
from emulator.cargs import ACLNN, UINT64, is_integer, optional_pointer, size
from emulator.dtypes import ITEM_SIZES, dtype_name
from emulator.errors import AclError, api
from emulator.interface import DeviceFault
from emulator.resource import HANDLES, live
from emulator.sites import Site, user_site
from emulator.soc import SocProfile

from . import _kernels, kernel_info, status
from .arrays import aclBoolArray, aclFloatArray, aclIntArray, aclScalar
from .executor import NULL_WORKSPACE, aclOpExecutor
from .shapes import broadcast_strides
from .tensor import (aclTensor, box_runs, byte_runs, conflicting_byte, moves as tensor_moves, shared_element,
                     view_nbytes)
from .tensor_list import aclScalarList, aclTensorList

# The aclnn objects a first phase takes, by the names its parameters' annotations use.
ARGUMENT_KINDS = {cls.kind: cls for cls in (aclTensor, aclTensorList, aclIntArray, aclFloatArray, aclBoolArray,
                                            aclScalar, aclScalarList)}
_KIND_NAMES = re.compile(r"\b(%s)\b" % "|".join(sorted(ARGUMENT_KINDS, key=len, reverse=True)))


def soc() -> SocProfile:
    """The emulated chip (NPUEMU_SOC), which the operators' dtype lists (declaration.ChipDtypes) and
    limits depend on."""
    return interface.soc()


class TensorView:
    """A tensor as its kernel sees it, fixed by the first phase: dtype, the shape the kernel iterates
    and the element strides that read it (0 along broadcast dims), and the byte range [start, start +
    nbytes) that it touches (nbytes 0 when it touches nothing). The address is the aclTensor's when the
    work is queued (`at`), so an address set between two launches of a repeatable executor counts.
    `reads`: what gives the index boxes an input is read over, when its launch declared them (KernelLaunch)."""

    __slots__ = ("name", "tensor", "data", "data_type", "shape", "strides", "offset", "start", "nbytes", "gappy",
                 "runs", "reads")

    def __init__(self, name: str, tensor: aclTensor, data_type: int, shape: tuple, strides: tuple, offset: int,
                 nbytes: Optional[int] = None, data: Optional[int] = None, reads: Optional[Callable] = None):
        itemsize = ITEM_SIZES.get(data_type, 8)
        self.name, self.tensor, self.data_type = name, tensor, data_type
        self.shape, self.strides, self.offset = shape, strides, offset
        self.data = tensor.data if data is None else data
        self.start = self.data + offset * itemsize
        self.nbytes = view_nbytes(shape, strides, itemsize) if nbytes is None else nbytes
        # whether it may have gaps (byte_runs tells): not when it is its tensor's own view without any,
        # the usual case, which the sanitizer then asks nothing more (a launch writes such a view each time)
        self.gappy = tensor is None or strides is not tensor.strides or not tensor.dense
        self.runs: Optional[tuple] = None  # (runs of a view not its tensor's own, or read over boxes,) once asked
        self.reads = reads

    def at(self, data: int) -> "TensorView":
        """The same view over another address (with the runs worked out already: offsets from its start)."""
        moved = TensorView(self.name, self.tensor, self.data_type, self.shape, self.strides, self.offset, self.nbytes,
                           data, self.reads)
        moved.runs = self.runs
        return moved

    def reading(self, boxes: Callable[[], Sequence[tuple]]) -> "TensorView":
        """The same view, read over the index boxes that boxes() gives only (see KernelLaunch's `reads`)."""
        return TensorView(self.name, self.tensor, self.data_type, self.shape, self.strides, self.offset, self.nbytes,
                          self.data, boxes)

    def geometry(self) -> tuple:
        """(address of element 0, itemsize, dims, element strides), as tensor.conflicting_byte takes views."""
        return self.start, ITEM_SIZES.get(self.data_type, 8), self.shape, self.strides

    def byte_runs(self) -> Optional[tuple]:
        """(starts, ends) of the byte ranges the view covers when it has gaps (a pitched or sliced view;
        see tensor.byte_runs), or of those its boxes cover when it is read over boxes (`reads`), else
        None: what the sanitizer's initcheck takes it to read or write instead of its whole range. A
        tensor's own view without gaps nor boxes (the usual case) is told at once; the runs of others are
        worked out once, as offsets from the view's start, and kept by the tensor for its own view
        (launch after launch) or by this view."""
        if not self.gappy and self.reads is None:
            return None
        own = self.reads is None and self.tensor is not None and self.strides is self.tensor.strides
        keeper = self.tensor if own else self
        if keeper.runs is None:
            keeper.runs = (self._runs(),)
        runs = keeper.runs[0]
        return None if runs is None else (self.start + runs[0], self.start + runs[1])

    def _runs(self) -> Optional[tuple]:
        """The runs of the boxes it is read over, unless they are more than tensor.LISTED_RUNS: then, as
        without boxes, the runs of the view when it has gaps (None without: its whole range)."""
        itemsize = ITEM_SIZES.get(self.data_type, 8)
        runs = None if self.reads is None else box_runs(itemsize, self.strides, self.reads())
        if runs is None and self.gappy:
            runs = byte_runs(0, itemsize, self.shape, self.strides)
        return runs

    def describe(self) -> str:
        return "%s (%s%s, strides %s, offset %d)" % (self.name, dtype_name(self.data_type), list(self.shape),
                                                     list(self.strides), self.offset)

    def __str__(self) -> str:  # how a fault names it (the task's name says the operator)
        return "tensor " + self.describe()


def view(name: str, tensor: aclTensor, shape: Optional[Sequence[int]] = None) -> TensorView:
    """The kernel's view of `tensor`, broadcast to `shape` if given."""
    if shape is None or tuple(shape) == tensor.view_dims:
        return TensorView(name, tensor, tensor.data_type, tensor.view_dims, tensor.strides, tensor.offset,
                          tensor.view_nbytes)
    return TensorView(name, tensor, tensor.data_type, tuple(shape),
                      broadcast_strides(tensor.view_dims, tensor.strides, shape), tensor.offset)


class Workspace:
    """A slice of the executor's workspace that the kernel uses as scratch memory."""

    __slots__ = ("offset", "size")

    def __init__(self, offset: int, size: int):
        self.offset, self.size = offset, size


def _without_ones(shape: tuple) -> tuple:
    """The shape without its dims of one, which number the elements in row-major order as it does."""
    return tuple(dim for dim in shape if dim != 1)


class KernelLaunch:
    """A call of a C++ kernel: TensorView and Workspace arguments become (pointer, dtype, shape,
    strides) tuples and pointers when the work runs; other arguments pass through.

    `outputs` names the views the kernel writes; the first phase sets it to the operator's output
    parameters when the operator module leaves it None.

    `units` says how the kernel's work is split, which decides where an output may share memory with
    another view of the launch (see `overlaps`):
      "elements"  element i of every view (all of one shape) is one piece of work, read before it is
                  written: an output may be an input's very view (in place);
      "rows"      the rows of the last dim are, each read whole before any of it is written (a core's
                  row of the softmax): an output may overlap an input within a row;
      "launch"    every input is read before any output is written (a reduction to one element, summed
                  before it is stored): an output may overlap any input (not another output).
    `in_place`, when given, lists the (output, input) pairs whose pieces of work match as `units` says;
    every other pair shares none (an output over the softmax's mask, which is read as the row is
    written; any pair of a recursion along batch items but CtcLossBackward's out over logProbs). A view
    of another shape than the output's (a reduction of a broadcast, a broadcast weight; dims of one
    aside) has no unit in common with it either. Pairs that share no unit may share no byte.

    `reads`, when given, says of some inputs that the kernel reads only part of their view, as
    {input name: a function of no arguments giving its index boxes}, each box a (start, stop) index
    range per dim of the view: what the first phase knows from host values (CtcLoss's lengths: no row
    t >= L of logProbs is read); the boxes are made only if initcheck asks for them. initcheck
    then takes the input to read the byte runs of its boxes only, when they make at most
    tensor.LISTED_RUNS runs (else its whole view); racecheck and synccheck still take its whole range.
    A view merged to fit the kernels' dims (fit_kernel_dims) is read whole."""

    __slots__ = ("kernel", "args", "workspace_size", "outputs", "moves", "units", "in_place", "_overlaps")

    def __init__(self, kernel: Callable, args: tuple, workspace_size: int = 0,
                 outputs: Optional[Sequence[str]] = None, units: str = "elements",
                 in_place: Optional[tuple] = None, reads: Optional[dict] = None):
        if reads:
            args = _read_over_boxes(args, reads, outputs or ())
        if _wider_than_kernels(args) and not isinstance(kernel, OuterLoop):
            kernel, args = fit_kernel_dims(kernel, args)
        self.kernel, self.args, self.workspace_size = kernel, args, workspace_size
        self.outputs = None if outputs is None else tuple(outputs)
        self.units, self.in_place = units, in_place
        self.moves = tensor_moves()  # the views are at their tensors' addresses as of this count
        self._overlaps: Optional[tuple] = None

    def overlaps(self) -> tuple:
        """What the card would write in no fixed order, as (output view, other view, where, units): an
        output view in which two indices are one element (other None; where: the two indices), and an
        output sharing bytes with another view of the launch, an input or an output, in different units
        of work (where: the address of such a byte; units: the units the two share, None if none). Worked
        out once: a launch whose tensors moved is a new one (queued)."""
        if self._overlaps is None:
            self._overlaps = tuple(self._find_overlaps())
        return self._overlaps

    def _find_overlaps(self):
        views = [arg for arg in self.args if type(arg) is TensorView and arg.nbytes]
        written = self.outputs or ()
        for position, output in enumerate(views):
            if output.name not in written:
                continue
            shared = shared_element(output.shape, output.strides)
            if shared:
                yield output, None, shared, None
            for other in views[:position] + views[position + 1:]:
                if other.start >= output.start + output.nbytes or output.start >= other.start + other.nbytes:
                    continue  # apart: the usual case, told without the geometry
                if other.name in written and views.index(other) < position:
                    continue  # a pair of outputs is reported once
                if self.units == "launch" and other.name not in written:
                    continue  # read whole before the output is written
                units = self._shared_units(output, other)
                byte = conflicting_byte(output.geometry(), other.geometry(), units)
                if byte is not None:
                    yield output, other, byte, units

    def _shared_units(self, output: TensorView, other: TensorView) -> Optional[str]:
        """How the pieces of work of `output` and `other` match, as conflicting_byte takes it: None when
        no piece of one is a piece of the other."""
        if self.units == "launch":
            return None  # two outputs (inputs never reach here), written in no fixed order
        if self.in_place is not None and (output.name, other.name) not in self.in_place:
            return None
        same_shape = output.shape == other.shape or _without_ones(output.shape) == _without_ones(other.shape)
        return self.units if same_shape and (self.units != "rows" or output.shape[-1:] == other.shape[-1:]) else None

    def over_the_workspace(self, workspace: int) -> list:
        """(view, where) of the views that share a byte (where) with the workspace at `workspace` (a pool's
        block still in use): the kernel writes its scratch there as it goes through the view, and the
        scratch is no unit of work of any view, so no byte may be shared. Asked at each launch: the
        workspace is the second phase's argument."""
        end, found = workspace + self.workspace_size, []
        scratch = (workspace, 1, (self.workspace_size,), (1,))
        for arg in self.args:
            if type(arg) is TensorView and arg.nbytes and arg.start < end and workspace < arg.start + arg.nbytes:
                byte = conflicting_byte(scratch, arg.geometry(), None)
                if byte is not None:
                    found.append((arg, byte))
        return found

    def queued(self) -> "KernelLaunch":
        """This launch as queued now: with every view at its tensor's current address (itself when
        none has moved: a queued launch never changes afterwards)."""
        if self.moves == tensor_moves():  # no tensor anywhere was given an address since
            return self
        for arg in self.args:
            if type(arg) is TensorView and arg.data != arg.tensor.data:
                return self._moved()
        self.moves = tensor_moves()
        return self

    def ranges(self, workspace: Optional[int]) -> tuple:
        """(reads, writes): the (address, nbytes) ranges the kernel reads, and those it writes (its
        outputs and the workspace)."""
        reads, writes, written = [], [], self.outputs or ()
        for arg in self.args:
            if type(arg) is TensorView and arg.nbytes:
                (writes if arg.name in written else reads).append((arg.start, arg.nbytes, arg))
        if self.workspace_size:
            writes.append((workspace, self.workspace_size, "the workspace"))
        return reads, writes

    def details(self) -> dict:
        """Each tensor's dtype and shape and the workspace size, by parameter name (for the trace)."""
        found = {arg.name: "%s%s" % (dtype_name(arg.data_type), list(arg.shape))
                 for arg in self.args if type(arg) is TensorView}
        if self.workspace_size:
            found["workspace"] = "%d bytes" % self.workspace_size
        return found

    def _moved(self) -> "KernelLaunch":
        args = tuple(arg.at(arg.tensor.data) if type(arg) is TensorView else arg for arg in self.args)
        return KernelLaunch(self.kernel, args, self.workspace_size, self.outputs, self.units, self.in_place)


def _read_over_boxes(args: tuple, reads: dict, outputs: Sequence[str]) -> tuple:
    """`args` with the input views that `reads` names read over its boxes (KernelLaunch's `reads`). A name
    that is no view of the launch, or an output (which the kernel writes whole), is a broken contract."""
    views = {arg.name for arg in args if type(arg) is TensorView}
    wrong = sorted(name for name in reads if name not in views or name in outputs)
    if wrong:
        raise ValueError("reads: %s: not input views of the launch" % ", ".join(wrong))
    return tuple(arg.reading(reads[arg.name]) if type(arg) is TensorView and arg.name in reads else arg
                 for arg in args)


# ---- views of more dims than the kernels take

# The kernels take views of at most this many dims (kernels_cpp/common/tensor_arg.h). Operators
# with no rank limit (aclnnLogSigmoid, LogSigmoidBackward) and outputs whose rank is never checked
# (the one-element out of a reduction) can have more: the real library flattens them before its
# kernel. Here such views are merged (fit_kernel_dims), which changes no element's result.
MAX_KERNEL_DIMS = _kernels.MAX_DIMS


def _wider_than_kernels(args: tuple) -> bool:
    for arg in args:  # a loop, not any(): this runs for every plan made
        if type(arg) is TensorView and len(arg.shape) > MAX_KERNEL_DIMS:
            return True
    return False


def merged_views(views: list) -> list:
    """Views of one shape with their dims of size 1 dropped and each dim merged into the next where
    every view steps over both as over one (stride[d] == stride[d + 1] * shape[d + 1]): the same
    elements in the same order, in the fewest dims."""
    shape = views[0].shape
    if 0 in shape:
        dims, strides = [0], [[1] for _ in views]
    else:
        dims, strides = [], [[] for _ in views]
        for d in reversed(range(len(shape))):
            if shape[d] == 1:
                continue
            if dims and all(v.strides[d] == s[0] * dims[0] for v, s in zip(views, strides)):
                dims[0] *= shape[d]
                continue
            dims.insert(0, shape[d])
            for v, s in zip(views, strides):
                s.insert(0, v.strides[d])
    return [TensorView(v.name, v.tensor, v.data_type, tuple(dims), tuple(s), v.offset, v.nbytes, v.data)
            for v, s in zip(views, strides)]


def fit_kernel_dims(kernel: Callable, args: tuple) -> tuple:
    """(kernel, args) with every view of more than MAX_KERNEL_DIMS dims merged (merged_views, with the
    views of the same shape, which an element-wise kernel reads together); when views still have more,
    they must be all the views of the launch (an element-wise one), and the kernel runs over their
    leading dims (OuterLoop)."""
    by_shape: dict = {}
    for position, arg in enumerate(args):
        if type(arg) is TensorView:
            by_shape.setdefault(arg.shape, []).append(position)
    fitted = list(args)
    for shape, positions in by_shape.items():
        if len(shape) > MAX_KERNEL_DIMS:
            for position, merged in zip(positions, merged_views([args[p] for p in positions])):
                fitted[position] = merged
    views = tuple(position for position, arg in enumerate(fitted) if type(arg) is TensorView)
    shapes = {fitted[position].shape for position in views}
    rank = max(len(shape) for shape in shapes)
    if rank <= MAX_KERNEL_DIMS:
        return kernel, tuple(fitted)
    if len(shapes) > 1:
        raise RuntimeError("views of more than %d dims that are not all of one shape: %s"
                           % (MAX_KERNEL_DIMS, [fitted[position].describe() for position in views]))
    return OuterLoop(kernel, rank - MAX_KERNEL_DIMS, views), tuple(fitted)


class OuterLoop:
    """An element-wise kernel run once for each index of the views' `leading` dims, on the rest
    (views that no merging brings within MAX_KERNEL_DIMS dims: at least 2^17 elements in 17 dims or
    more that no two views step over alike)."""

    __slots__ = ("kernel", "leading", "views", "__name__")

    def __init__(self, kernel: Callable, leading: int, views: tuple):
        self.kernel, self.leading, self.views = kernel, leading, views  # views: the positions of the views
        self.__name__ = getattr(kernel, "__name__", "kernel")

    def __call__(self, *args: Any) -> None:
        dims = args[self.views[0]][2][:self.leading]  # each view arrives as (pointer, dtype, shape, strides)
        for index in itertools.product(*(range(n) for n in dims)):
            call = list(args)
            for position in self.views:
                pointer, data_type, shape, strides = args[position]
                step = sum(i * stride for i, stride in zip(index, strides)) * ITEM_SIZES[data_type]
                call[position] = (pointer + step if pointer else 0, data_type, shape[self.leading:],
                                  strides[self.leading:])
            self.kernel(*call)


class Parameters:
    """The parameters of an operator's first phase that take aclnn objects (annotated `aclTensor`,
    `Optional[aclTensor]`, `aclIntArray`, ...): they also take the object's integer handle, and its
    tensor and tensor-list parameters are the executor's inputs and outputs, in the prototype's order."""

    def __init__(self, plan: Callable, outputs: Optional[Sequence[str]]):
        self.kinds = _argument_kinds(plan)  # ((position, name, class), ...)
        self.tensors = tuple((position, name, kind) for position, name, kind in self.kinds
                             if kind is aclTensor or kind is aclTensorList)
        # By default the last tensor parameter: every aclnn prototype ends with its outputs.
        self.outputs = tuple(outputs) if outputs is not None else tuple(name for _, name, _ in self.tensors[-1:])

    def by_handle(self, args: tuple, kwargs: dict) -> tuple:
        """The arguments with integer handles of aclnn objects replaced by the objects."""
        for position, name, kind in self.kinds:
            if position < len(args):
                value = args[position]
                if type(value) is not kind and is_integer(value):
                    args = args[:position] + (_object(kind, value),) + args[position + 1:]
            elif name in kwargs and is_integer(kwargs[name]):
                kwargs = dict(kwargs, **{name: _object(kind, kwargs[name])})
        return args, kwargs

    def slots(self, args: tuple, kwargs: dict) -> tuple:
        """(input slots, output slots): (name, tensor or tensor list or None) in the prototype's order."""
        inputs, outputs = [], []
        for position, name, kind in self.tensors:
            value = args[position] if position < len(args) else kwargs.get(name)
            (outputs if name in self.outputs else inputs).append((name, value if isinstance(value, kind) else None))
        return tuple(inputs), tuple(outputs)


def _argument_kinds(plan: Callable) -> tuple:
    """(position, name, aclnn class) of each parameter of `plan` annotated with an aclnn object type."""
    found = []
    for position, parameter in enumerate(inspect.signature(plan).parameters.values()):
        annotation = parameter.annotation
        if annotation is inspect.Parameter.empty:
            continue
        match = _KIND_NAMES.search(annotation if isinstance(annotation, str) else str(annotation))
        if match:
            found.append((position, parameter.name, ARGUMENT_KINDS[match.group(1)]))
    return tuple(found)


def _object(kind: type, value: Any) -> Any:
    """The live object an integer handle names, if it is one of `kind`; else the value as it was, for
    the operator's checks to report in their order."""
    found = HANDLES.get(int(value))
    return found if isinstance(found, kind) and found.alive else value


_MISSING = object()
_IMMUTABLE = (aclIntArray, aclFloatArray, aclBoolArray, aclScalar)  # values copied at creation, never changed


class PlanCache:
    """The plans of first phases that passed every check, by the state of their arguments. A first
    phase called again with the same tensors (the same description and address: the same `version`,
    and still alive), the same arrays and scalars, equal plain values and the same settings (the chip)
    would run the same checks to the same plan: it is given the plan it made before. This is what a
    training loop does on every step, and the checks were about half of a small call's first phase.

    Only successes are kept: a rejected call runs its checks again, in order, with its message. A
    call with arguments of any other type (a tensor list, whose members can change; NumPy scalars)
    or keyword arguments is planned afresh each time. A queued launch never changes (KernelLaunch),
    so executors can share one.

    A plan made for a tensor since destroyed or described anew (or an array or scalar since destroyed,
    or settings since replaced) can never be given again: no key names it any more. Such plans are
    dropped whenever the cache has doubled since it last looked (a look per put on average), so a loop
    that makes new tensors every step (samples/training_step.py) keeps a few of them, not `size` with
    their destroyed tensors (1024 of each operator held 20 MB more and tripled the GC's pauses)."""

    def __init__(self, size: int = 1024):
        self.size = size
        self._plans: dict = {}
        self._look_at = LOOK_FOR_DEAD_PLANS  # the number of plans at which dead ones are dropped

    def key(self, args: tuple) -> Optional[tuple]:
        """What the plan of `args` depends on, or None when it cannot be told cheaply."""
        key = [id(interface.settings())]  # replaced, never modified: its identity is its content (and
                                          # hashing the frozen dataclass would cost a microsecond)
        for value in args:
            kind = type(value)
            if kind is aclTensor:
                if not value.alive:
                    return None
                key.append(value.version)  # never given twice, to any tensor
            elif kind in _IMMUTABLE:
                if not value.alive:
                    return None
                key.append(value.handle)   # handles are never reused
            elif kind is float:
                key.append(value.hex())    # 0.0 == -0.0, but a plan may keep the sign
            elif value is None or kind is int or kind is bool or kind is str:
                key.append(value)
            else:
                return None
            key.append(kind)               # True == 1 == a version: the type tells them apart
        return tuple(key)

    def get(self, key: tuple) -> Any:
        """The plan kept for `key`, or _MISSING."""
        found = self._plans.get(key)
        if found is None or found[2] is not interface.settings():  # an id reused by new settings
            return _MISSING
        return found[0]

    def put(self, key: tuple, launch: Optional[KernelLaunch], args: tuple) -> None:
        """The arguments and settings are kept with the plan: while it is kept, no object whose identity
        its key holds can be collected and its id reused."""
        if len(self._plans) >= self._look_at:
            self._drop_dead_plans()
        if len(self._plans) >= self.size:  # a program that plans that many live combinations starts again
            self._plans.clear()
            self._look_at = LOOK_FOR_DEAD_PLANS
        self._plans[key] = (launch, args, interface.settings())

    def _drop_dead_plans(self) -> None:
        """Keep the plans a call could still be given (PlanCache's doc); look again once they double."""
        self._plans = {key: plan for key, plan in self._plans.items() if self.key(plan[1]) == key}
        self._look_at = max(LOOK_FOR_DEAD_PLANS, 2 * len(self._plans))


LOOK_FOR_DEAD_PLANS = 32


_memory_plan_made = [False]


def _make_memory_plan() -> None:
    """The kernels' memory plan (docs/performance.md), made before the first plan of any operator
    rather than by the first kernel: an unusable NPUEMU_MEMORY_PLAN is then reported by this first
    phase (161002), not as a fault of work on a stream."""
    kernel_info.memory_plan()
    _memory_plan_made[0] = True


def first_phase(op: str, outputs: Optional[Sequence[str]] = None) -> Callable:
    """Decorator: fn(args...) -> KernelLaunch | None becomes aclnnXxxGetWorkspaceSize(args...) ->
    (workspace_size, executor, status).

    Parameters annotated with an aclnn type take the object or its integer handle. `outputs` names
    the output parameters (the views the kernel writes); by default the last tensor parameter, as in
    every aclnn prototype with one output."""
    def wrap(plan: Callable) -> Callable:
        parameters = Parameters(plan, outputs)
        plans = PlanCache()

        # What callers get, before `api` reads it (it adds the status): help() shows the three values.
        plan.__annotations__["return"] = "tuple[int, Optional[aclOpExecutor]]"

        # `api` turns a wrong argument count into 161002: it reads plan's signature through functools.wraps.
        @api(op + "GetWorkspaceSize", failure=(0, None), internal_code=status.ACLNN_ERR_INNER)
        @functools.wraps(plan)
        def get_workspace_size(*args: Any, **kwargs: Any):
            if not _memory_plan_made[0]:
                _make_memory_plan()
            args, kwargs = parameters.by_handle(args, kwargs)
            key = None if kwargs else plans.key(args)
            launch = _MISSING if key is None else plans.get(key)
            if launch is _MISSING:
                launch = plan(*args, **kwargs)
                if launch is not None and launch.outputs is None:
                    launch.outputs = parameters.outputs
                if key is not None:
                    plans.put(key, launch, args)
            workspace_size = 0 if launch is None else launch.workspace_size
            # The site is taken here, not deep inside the executor: fewer frames to walk to the user's.
            return workspace_size, aclOpExecutor(op, launch, workspace_size, parameters, (args, kwargs), user_site(skip=1))
        get_workspace_size.__doc__ = ((plan.__doc__ or "") + "\n\nReturns (workspace size, executor, status); "
                                      "(0, None, status) when the arguments are rejected.").strip()
        return get_workspace_size
    return wrap


# The Python contract's aclnnXxx(workspace_ptr, workspace_size, executor, stream).
_SECOND_PHASE_KEYWORDS = {"workspace_ptr": "workspace", "workspace_size": "workspaceSize"}


def second_phase(op: str) -> Callable:
    """aclnnXxx(workspace, workspaceSize, executor, stream) -> status: queue the planned work."""
    def launch(workspace: Optional[int], workspaceSize: int, executor: aclOpExecutor, stream: Optional[int]) -> int:
        plan = executor if type(executor) is aclOpExecutor and executor.alive else live(aclOpExecutor, "executor", executor)
        with plan.lock:  # the check that it is live and its release by a single use are one step
            if not plan.alive:
                live(aclOpExecutor, "executor", plan)  # used or destroyed by another thread meanwhile
            _launch(workspace, workspaceSize, plan, stream, user_site(skip=1))
    launch.__name__ = launch.__qualname__ = op
    launch.__doc__ = ("Returns the status: the work planned by %sGetWorkspaceSize is queued on the stream (null: "
                      "the current context's default stream). A single-use executor is released. As on the card "
                      "(CommonOpExecutorRun), the work is the executor's own, whichever operator planned it." % op)
    return api(op, internal_code=status.ACLNN_ERR_INNER, keywords=_SECOND_PHASE_KEYWORDS)(launch)


def _launch(workspace: Any, workspace_size: Any, plan: aclOpExecutor, stream: Any, site: Optional[Site]) -> None:
    """Queue the executor's work, which is its own operator's whichever second phase was called (the
    card's aclnnXxx are all CommonOpExecutorRun(workspace, size, executor, stream)); `site` (the
    caller's) is where it is launched and where a single-use executor is used up."""
    op = plan.op
    if workspace is not None and (type(workspace) is not int or not 0 <= workspace <= UINT64[1]):
        workspace = optional_pointer("workspace", workspace, ACLNN)  # null and plain ints in range need no converting
    if type(workspace_size) is not int or not 0 <= workspace_size <= UINT64[1]:
        workspace_size = size("workspaceSize", workspace_size, ACLNN)
    if workspace_size > 0 and not workspace:  # the library deletes the executor here, repeatable or not
        plan.consume(site, NULL_WORKSPACE)
        raise AclError(status.ACLNN_ERR_PARAM_NULLPTR,
                       "workspace: expected a device address for %d bytes, found null" % workspace_size)
    if workspace_size < plan.workspace_size:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID,
                       "workspaceSize: expected at least the %d bytes the first phase returned, found %d"
                       % (plan.workspace_size, workspace_size))
    try:
        target = interface.work_stream(stream)
    except AclError as error:  # no context, a bad handle, another device: the runtime's error, as 361001
        raise _runtime_error(error) from None
    device_id = target.device_id
    if plan.workspace_size:
        _check_workspace(workspace, plan.workspace_size, device_id)
    memcheck = plan.launch is not None and interface.checks_memory()
    if memcheck and plan.has_unfit_tensors(interface.TENSOR_ALIGNMENT):
        interface.launch_checks(op, plan.tensors(), site)
    if plan.launch is not None:
        work = plan.launch = plan.launch.queued()  # a repeatable executor moved by aclSetRawTensorAddr & co. stays moved
        for output, other, where, units in work.overlaps() if memcheck else ():
            interface.overlapping_output(op, output, other, where, site, in_place_possible=units is not None)
        for other, where in work.over_the_workspace(workspace) if memcheck and work.workspace_size else ():
            interface.overlapping_workspace(op, workspace, work.workspace_size, other, where, site)
        try:
            interface.launch(target, op, functools.partial(_execute, op, work, device_id, workspace), site=site,
                             ranges=functools.partial(work.ranges, workspace), details=work.details,
                             resolves_itself=True)
        except AclError as error:  # another thread destroyed the stream since work_stream() gave it
            raise _runtime_error(error) from None
    if not plan.repeatable:
        plan.consume(site)


def _runtime_error(error: AclError) -> AclError:
    """A stream the runtime rejected (`error`, with the runtime's code), as aclnn reports it: 361001."""
    message = error.message if error.message.startswith("stream: ") else "stream: " + error.message
    return AclError(status.ACLNN_ERR_RUNTIME_ERROR, "%s (runtime error %d)" % (message, error.code))


def _check_workspace(workspace: int, size: int, device_id: int) -> None:
    try:
        interface.resolve(workspace, size, device_id, "workspace")
    except DeviceFault as fault:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID,
                       "workspace: expected %d bytes of device memory of device %d, found: %s" % (size, device_id, fault)) from None


_kernel_settings_in_force = [None]  # the settings (an immutable emulator.config.Config) last handed over


def _apply_kernel_settings() -> None:
    """Hand the kernels the threads, vector ISA and task timeout in force, when they changed (settings
    are replaced, never modified, so one identity check per launch suffices)."""
    settings = interface.settings()
    if settings is not _kernel_settings_in_force[0]:
        kernel_info.set_threads(settings.threads)
        _kernels.set_vector_isa(settings.vector_isa)
        _kernels.set_task_timeout(settings.task_timeout)
        _kernel_settings_in_force[0] = settings


def _execute(op: str, launch: KernelLaunch, device_id: int, workspace: Optional[int]) -> None:
    """Runs on the stream: resolve every address now (faults name the tensor and the allocation)."""
    _apply_kernel_settings()
    resolve = interface.resolver()
    args, outputs, scratch = [], launch.outputs or (), None
    touched = []  # the (host address, nbytes) the kernel reads and writes
    for arg in launch.args:
        if type(arg) is TensorView:
            pointer = 0
            if arg.nbytes:  # str(arg) only for a fault
                pointer = resolve(arg.start, arg.nbytes, device_id, arg, arg.data, arg.name in outputs)
                touched.append((pointer, arg.nbytes))
            args.append((pointer, arg.data_type, arg.shape, arg.strides))
        elif type(arg) is Workspace:  # slices of one workspace (all written): resolved once, as a whole
            if scratch is None:
                scratch = resolve(workspace, launch.workspace_size, device_id, "%s workspace" % op, workspace, True)
                touched.append((scratch, launch.workspace_size))
            args.append(scratch + arg.offset)
        else:
            args.append(arg)
    # Only the data at fault is the AI core's exception (e.g. a label out of range). TimeoutError
    # (the task timeout), KeyboardInterrupt and any other error (a broken contract of npuemu's
    # own: internal) go to the stream as they are. The compute runs with the runtime lock released.
    try:
        interface.compute(launch.kernel, args, touched)
    except _kernels.KernelDataError as error:
        raise DeviceFault("%s: %s" % (op, error)) from None

