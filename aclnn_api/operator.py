"""The two-phase machinery every operator shares.

An operator module writes one function, named after the first phase, that validates its arguments
in the library's order (raising AclError through `checks`) and returns a `KernelLaunch` (or None
when there is nothing to run). `first_phase` turns it into aclnnXxxGetWorkspaceSize, and
`second_phase` makes aclnnXxx, which queues the launch on a stream. Addresses are resolved, and
checked against their allocations, only when the stream runs the work, as on the device.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence

from emulator import errors, leaks, runtime
from emulator.errors import AclError, api, user_site
from emulator.memory import DeviceFault
from emulator.soc import RANK_910E, SocProfile
from emulator.stream import Task

from . import _kernels, status
from emulator.dtypes import ITEM_SIZES, dtype_name
from .executor import aclOpExecutor, live_executor
from .shapes import broadcast_strides
from .tensor import aclTensor, view_nbytes


def soc() -> SocProfile:
    """The emulated chip (NPUEMU_SOC), which the operators' dtype lists and limits depend on."""
    return runtime.settings().profile


def chip_dtypes(base: tuple, from_910b: tuple) -> tuple[tuple, str]:
    """(dtypes accepted on the emulated chip, its family): `base` everywhere, plus `from_910b` on the
    SoCs from 910B to 910E (A2, A3, 950), the range the library's op_api code tests."""
    chip = soc()
    if chip.version_rank in range(1, RANK_910E + 1):
        return base + from_910b, chip.family
    return base, chip.family


class TensorView:
    """A tensor as its kernel sees it, fixed by the first phase: base address, dtype, the shape the
    kernel iterates and the element strides that read it (0 along broadcast dims), and the byte
    range [start, start + nbytes) that it touches (nbytes 0 when it touches nothing)."""

    __slots__ = ("name", "data", "data_type", "shape", "strides", "offset", "start", "nbytes")

    def __init__(self, name: str, data: int, data_type: int, shape: tuple, strides: tuple, offset: int,
                 nbytes: Optional[int] = None):
        itemsize = ITEM_SIZES.get(data_type, 8)
        self.name, self.data, self.data_type = name, data, data_type
        self.shape, self.strides, self.offset = shape, strides, offset
        self.start = data + offset * itemsize
        self.nbytes = view_nbytes(shape, strides, itemsize) if nbytes is None else nbytes

    def describe(self) -> str:
        return "%s (%s%s, strides %s, offset %d)" % (self.name, dtype_name(self.data_type), list(self.shape),
                                                     list(self.strides), self.offset)


def view(name: str, tensor: aclTensor, shape: Optional[Sequence[int]] = None) -> TensorView:
    """The kernel's view of `tensor`, broadcast to `shape` if given."""
    if shape is None or tuple(shape) == tensor.view_dims:
        return TensorView(name, tensor.data, tensor.data_type, tensor.view_dims, tensor.strides, tensor.offset,
                          tensor.view_nbytes)
    return TensorView(name, tensor.data, tensor.data_type, tuple(shape),
                      broadcast_strides(tensor.view_dims, tensor.strides, shape), tensor.offset)


class Workspace:
    """A slice of the executor's workspace that the kernel uses as scratch memory."""

    __slots__ = ("offset", "size")

    def __init__(self, offset: int, size: int):
        self.offset, self.size = offset, size


class KernelLaunch:
    """A call of a C++ kernel: TensorView and Workspace arguments become (pointer, dtype, shape,
    strides) tuples and pointers when the work runs; other arguments pass through."""

    __slots__ = ("kernel", "args", "workspace_size")

    def __init__(self, kernel: Callable, args: tuple, workspace_size: int = 0):
        self.kernel, self.args, self.workspace_size = kernel, args, workspace_size


def first_phase(op: str) -> Callable:
    """Decorator: fn(args...) -> KernelLaunch | None becomes aclnnXxxGetWorkspaceSize(args...) ->
    (workspace_size, executor, status)."""
    def wrap(plan: Callable) -> Callable:
        # `api` turns a wrong argument count into 161002: it reads plan's signature through functools.wraps.
        @api(op + "GetWorkspaceSize", failure=(0, None), internal_code=status.ACLNN_ERR_INNER)
        @functools.wraps(plan)
        def get_workspace_size(*args: Any, **kwargs: Any):
            launch = plan(*args, **kwargs)
            workspace_size = launch.workspace_size if launch is not None else 0
            executor = aclOpExecutor(op, launch, workspace_size, user_site())
            leaks.track("aclOpExecutor", executor, executor.describe, executor.site)
            return workspace_size, executor
        return get_workspace_size
    return wrap


def second_phase(op: str) -> Callable:
    """aclnnXxx(workspace, workspaceSize, executor, stream) -> status: queue the planned work."""
    @api(op, internal_code=status.ACLNN_ERR_INNER)
    def launch(workspace: Optional[int], workspaceSize: int, executor: aclOpExecutor, stream: Optional[int]) -> None:
        plan = live_executor(executor)
        if plan.op != op:
            raise AclError(status.ACLNN_ERR_PARAM_INVALID,
                           "executor: expected an executor of %sGetWorkspaceSize, found one of %s" % (op, plan.op))
        if workspace is not None and (isinstance(workspace, bool) or not isinstance(workspace, int)
                                      or not 0 <= workspace < 1 << 64):
            raise AclError(status.ACLNN_ERR_PARAM_INVALID, "workspace: expected a device address or null, found %r"
                           % (workspace,))
        if isinstance(workspaceSize, bool) or not isinstance(workspaceSize, int) or not 0 <= workspaceSize < 1 << 64:
            raise AclError(status.ACLNN_ERR_PARAM_INVALID, "workspaceSize: expected a size, found %r" % (workspaceSize,))
        if workspaceSize > 0 and not workspace:
            if not plan.repeatable:
                plan.release()
            raise AclError(status.ACLNN_ERR_PARAM_NULLPTR,
                           "workspace: expected a device address for %d bytes, found null" % workspaceSize)
        if workspaceSize < plan.workspace_size:
            raise AclError(status.ACLNN_ERR_PARAM_INVALID,
                           "workspaceSize: expected at least the %d bytes the first phase returned, found %d"
                           % (plan.workspace_size, workspaceSize))
        with runtime.PROCESS.lock:
            target = _stream(stream)
            device_id = target.device_id
            if plan.workspace_size:
                _check_workspace(workspace, plan.workspace_size, device_id)
            if plan.launch is not None:
                runtime.enqueue(target, Task(op, functools.partial(_execute, op, plan.launch, device_id, workspace)))
        if not plan.repeatable:
            plan.release()
    launch.__name__ = op
    return launch


def _stream(stream: Optional[int]):
    """The stream to run on; a runtime rejection (no context, bad handle, other device) is 361001."""
    try:
        return runtime.stream_of(stream, for_work=True)
    except AclError as error:
        raise AclError(status.ACLNN_ERR_RUNTIME_ERROR, "stream: %s (runtime error %d)" % (error.message, error.code)) from None


def _check_workspace(workspace: int, size: int, device_id: int) -> None:
    if isinstance(workspace, bool) or not isinstance(workspace, int):
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "workspace: expected a device address, found %r" % (workspace,))
    try:
        runtime.resolve_device_range(workspace, size, device_id, "workspace")
    except DeviceFault as fault:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID,
                       "workspace: expected %d bytes of device memory of device %d, found: %s" % (size, device_id, fault)) from None


_kernel_settings_in_force = [(0, "", -1.0)]  # (threads, vector_isa, task_timeout) last handed to the kernels


def _apply_kernel_settings() -> None:
    settings = runtime.settings()
    wanted = (settings.threads, settings.vector_isa, settings.task_timeout)
    if wanted != _kernel_settings_in_force[0]:
        _kernels.set_threads(settings.threads)
        _kernels.set_vector_isa(settings.vector_isa)
        _kernels.set_task_timeout(settings.task_timeout)
        _kernel_settings_in_force[0] = wanted


def _execute(op: str, launch: KernelLaunch, device_id: int, workspace: Optional[int]) -> None:
    """Runs on the stream: resolve every address now (faults name the tensor and the allocation)."""
    _apply_kernel_settings()
    resolve = runtime.PROCESS.address_space().resolve
    args = []
    for arg in launch.args:
        if type(arg) is TensorView:
            pointer = 0
            if arg.nbytes:
                what = lambda arg=arg: "%s tensor %s" % (op, arg.describe())  # built only for a fault
                pointer = resolve(arg.start, arg.nbytes, device_id, what, arg.data)[1]
            args.append((pointer, arg.data_type, arg.shape, arg.strides))
        elif isinstance(arg, Workspace):
            args.append(resolve(workspace + arg.offset, arg.size, device_id, "%s workspace" % op, workspace)[1])
        else:
            args.append(arg)
    # Only the data at fault is the AI core's exception (e.g. a label out of range). TimeoutError
    # (the task timeout), KeyboardInterrupt and any other error (a broken contract of npuemu's
    # own: internal) go to the stream as they are.
    try:
        launch.kernel(*args)
    except _kernels.KernelDataError as error:
        raise DeviceFault("%s: %s" % (op, error)) from None


errors.register_package_dir(__file__)
