"""The runtime as the layers above it see it: the one doorway from `aclnn_api` and `acl.util` into
the runtime. They never touch the process state or its lock; everything they need is here.

    settings()                      the settings in force (emulator.config.Config)
    soc()                           the emulated chip's profile
    work_stream(handle)             the stream a launch goes to (null: the current context's default)
    current_stream()                the current context's default stream
    launch(stream, name, run, ...)  queue work on it, recording the user's launch site
    resolve(address, nbytes, ...)   the host pointer backing a device range, or DeviceFault
    resolver()                      resolve, bound once for a launch of several tensors
    compute(kernel, args, touched)  a running kernel's native compute, with the runtime lock released
    is_device_address(address)      whether an address is in the emulated device address space
    host_problem(a, n, write)       what keeps the host from reading (writing) there, or None
    host_read(call, a, n)           a call reads host memory now: synccheck's missing synchronisation
    checks_memory()                 whether memcheck's reports are on (NPUEMU_SANITIZE)
    TENSOR_ALIGNMENT                what a tensor's data address must be a multiple of
    launch_checks(op, tensors, ..)  a launch's tensors: destroyed since the first phase, misaligned
    overlapping_output(op, ..)      a launch's output view that overlaps itself or another view
    overlapping_workspace(op, ..)   a launch's workspace that shares memory with one of its views
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from . import runtime as _runtime, status
from .context import current as current_context
from .errors import AclError
from .resource import HANDLES
from .sanitizer import ALIGNMENT as TENSOR_ALIGNMENT  # noqa: F401  (for the layers above)
from .sanitizer import TRACKER as _TRACKER
from .config import Config
from .faults import DeviceFault  # noqa: F401  (re-exported for the layers above)
from .memory import host_memory_problem
from .sites import Site, user_site
from .soc import SocProfile
from .state import PROCESS as _P
from .stream import Stream, Task


def settings() -> Config:
    """The settings in force; ConfigError if the NPUEMU_* environment holds an unusable value."""
    return _P._config or _P.config  # the property reads the environment only the first time


def soc() -> SocProfile:
    """The emulated chip (NPUEMU_SOC)."""
    return (_P._config or _P.config).profile


def work_stream(handle: Optional[int]) -> Stream:
    """The stream a launch on `handle` runs on: null means the current context's default stream.
    AclError with the runtime's code if there is no context, the handle is stale, or the stream
    belongs to another context."""
    stream = HANDLES.get(handle) if type(handle) is int else None
    if type(stream) is Stream and stream.alive and stream.context is current_context():
        return stream  # a live stream of this thread's context: nothing more to check (launch re-checks)
    with _P.lock:
        return _runtime.stream_of(handle, for_work=True)


def launch(stream: Stream, name: str, run: Callable[[], None],
           reads: Sequence[tuple] = (), writes: Sequence[tuple] = (), site: Optional[Site] = None,
           ranges: Optional[Callable[[], tuple]] = None, details: Optional[Callable[[], dict]] = None,
           resolves_itself: bool = False) -> None:
    """Queue `run` on `stream` under `name`, with the user's launch site (named by its faults).
    `reads`/`writes` are the (address, nbytes) device ranges it touches. `run` raises DeviceFault where
    the hardware would fault, TimeoutError past the task timeout; anything else it raises is an
    internal error (507000) reported by the next synchronisation. `site`: the user's, if the caller
    has already taken it. `ranges`, instead of reads and writes: what makes (reads, writes) when a
    checker first asks for them. `details`: what makes a dict of what the task works on (for the trace).
    `resolves_itself`: `run` resolves every range it touches through `resolve` with its `write` flag (a
    kernel launch), so the sanitizer checks them there rather than in a pass over its ranges."""
    task = Task(name, run, site or user_site(), reads, writes, ranges, details)
    task.resolves_itself = resolves_itself
    with _P.lock:
        if not stream.alive:  # destroyed by another thread since work_stream() gave it
            raise AclError(status.ACL_ERROR_RT_INVALID_HANDLE,
                           "stream: expected a live stream, found stream %s destroyed while %s was being queued"
                           % (stream.describe(), name))
        stream.enqueue(task, _runtime.eager())


def checks_memory() -> bool:
    """Whether memcheck's reports are on (NPUEMU_SANITIZE memcheck or full)."""
    return _TRACKER.memory


def launch_checks(op: str, tensors: Sequence[tuple], site: Site) -> None:
    """The second phase of `op` with its (parameter name, aclTensor) pairs: a tensor destroyed since the
    first phase, or one whose data address is misaligned, is reported (memcheck); the launch goes on."""
    _TRACKER.launch_checks(op, tensors, site)


def overlapping_output(op: str, output, other, where, site: Site, in_place_possible: bool = True) -> None:
    """The second phase of `op` writes `output` (a TensorView) in which the two indices `where` are one
    element (other None), or which shares the byte at `where` with the view `other` without being it
    (`in_place_possible`: the operator may write `output` over that very view; else over none of it):
    reported (memcheck), the launch goes on."""
    _TRACKER.overlapping_output(op, output, other, where, site, in_place_possible)


def overlapping_workspace(op: str, workspace: int, nbytes: int, other, where: int, site: Site) -> None:
    """The second phase of `op` writes its workspace [workspace, workspace + nbytes) over the byte `where` of
    the view `other` (a TensorView): reported (memcheck), the launch goes on."""
    _TRACKER.overlapping_workspace(op, workspace, nbytes, other, where, site)


def current_stream() -> Stream:
    """The default stream of the calling thread's current context (AclError 107002 if none)."""
    with _P.lock:
        return _runtime.current_context().default_stream


def resolve(address: int, nbytes: int, device_id: int, what, base: Optional[int] = None,
            write: Optional[bool] = None) -> int:
    """The host address backing device range [address, address + nbytes) of device `device_id`, which
    must lie inside the live allocation holding `base` (default: `address`). If not: DeviceFault whose
    message names `what` (a string, or a callable that makes one only when needed) and the allocation,
    with `.tensor` = what, `.address_range` = (address, address + nbytes) and `.allocation` (if any),
    which the stream keeps in its fault record. `write`: the task writes (True) or reads (False) the range;
    None (a check, no access) for a caller that only validates it."""
    return (_P.space or _P.address_space()).pointer(address, nbytes, device_id, what, base, write)


def resolver() -> Callable[..., int]:
    """`resolve` itself, bound to the address space: for a launch that resolves several tensors."""
    return (_P.space or _P.address_space()).pointer


# compute(kernel, args, touched), from a task's `run`: `kernel(*args)`, its native compute, which touches
# the host memory `touched` ((address, nbytes) pairs that `resolve` gave) and nothing of the runtime, runs
# with the runtime lock released, as the runtime runs its queued copies (emulator.runtime.run_unlocked
# itself: no call of its own on every launch).
compute: Callable[[Callable[..., None], Sequence, Sequence[tuple]], None] = _runtime.run_unlocked


def host_problem(address: int, nbytes: int, write: bool = False) -> Optional[str]:
    """What keeps the host from reading (writing) [address, address+nbytes), as "expected ..., found
    ...", or None: the check of a copy's host memory, so that a range past the end of an aclrtMallocHost
    allocation is refused too (its mapping's neighbour would be read or overwritten)."""
    space = _P.space
    if space is None:  # not reserved yet: no aclrtMallocHost memory either
        return host_memory_problem(address, nbytes, write)
    return space.host_problem(address, nbytes, write)


def host_read(call: str, address: int, nbytes: int) -> None:
    """`call` reads [address, address+nbytes) of host memory now (acl.util.ptr_to_bytes copies it): synccheck
    reports a read of what an unsynchronised download or memset is still to write, as for the read of a
    synchronous copy."""
    if _TRACKER.hazards and nbytes > 0:
        with _P.lock:
            _TRACKER.host_access(call, user_site(), (), (), ((address, nbytes, "reads"),))


def is_device_address(address: int) -> bool:
    """Whether `address` lies in the emulated device address space (reserved or not yet)."""
    space = _P.space
    return space is not None and space.is_device(address)
