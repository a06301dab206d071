"""Faults of queued work: what went wrong when a task ran on a stream, kept as records.

A task that fails does not stop its stream (later work still runs, as on the card). The stream keeps
every failure as a `Fault`; the next synchronising call (stream, event or device synchronisation,
destroying the stream, a reset, aclFinalize) takes them all and returns the first one's code with a
message that names the first `SHOWN` in full and counts the rest.

How an exception of `task.run()` becomes a fault:

    DeviceFault        an access the hardware would fault on        507015 ACL_ERROR_RT_AICORE_EXCEPTION
    TimeoutError       the task ran past NPUEMU_TASK_TIMEOUT          107020 ACL_ERROR_RT_TASK_TIMEOUT
    CodedFault         a failure with its own code (fault injection)  its code
    KeyboardInterrupt  not a fault: it propagates, the program stops (so does any exception a Python
                       signal handler raised: errors.raised_by_signal_handler)
    anything else      a broken internal contract of npuemu          507000 ACL_ERROR_RT_INTERNAL_ERROR
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from . import status
from .errors import AclError
from .sites import Site

SHOWN = 5  # faults named in full in one message; the others are counted


class DeviceFault(Exception):
    """An access that real hardware would turn into an AI Core exception (or silent corruption).

    `tensor` names what was accessed (a tensor, "dst", "workspace"), `address_range` is the
    (start, end) device range, `allocation` the allocation it was resolved against (if any)."""

    def __init__(self, message: str, tensor: Optional[str] = None,
                 address_range: Optional[tuple] = None, allocation: Optional[object] = None):
        super().__init__(message)
        self.message = message
        self.tensor = tensor
        self.address_range = address_range
        self.allocation = allocation


class CodedFault(Exception):
    """A task failure with an explicit device code and kind (emulator.injection makes a task fail so)."""

    def __init__(self, code: int, message: str, kind: str = "injected fault"):
        super().__init__(message)
        self.code = code
        self.message = message
        self.kind = kind


@dataclass
class Fault:
    """One failed task: its kind and code, the task (an operator or a runtime call) and the stream it
    ran on, what it accessed (tensor, range, allocation with where that was made and freed), where
    the program launched it, and the message."""
    kind: str
    code: int
    task: str
    stream: str
    message: str
    launch_site: Optional[Site] = None
    tensor: Optional[str] = None
    address_range: Optional[tuple] = None
    allocation: Optional[object] = None

    def __str__(self) -> str:
        launched = " launched at %s" % self.launch_site if self.launch_site is not None else ""
        return "%s in %s on %s%s: %s" % (self.kind, self.task, self.stream, launched, self.message)


def from_exception(error: BaseException, task: str, stream: str, launch_site: Optional[Site]) -> Fault:
    """The record of a task whose run raised `error` (never a KeyboardInterrupt nor a signal handler's exception)."""
    if isinstance(error, DeviceFault):
        return Fault("AI Core exception", status.ACL_ERROR_RT_AICORE_EXCEPTION, task, stream, error.message,
                     launch_site, error.tensor, error.address_range, error.allocation)
    if isinstance(error, CodedFault):
        return Fault(error.kind, error.code, task, stream, error.message, launch_site)
    if isinstance(error, TimeoutError):
        detail = str(error) or "it ran past its time limit"
        return Fault("task timeout", status.ACL_ERROR_RT_TASK_TIMEOUT, task, stream,
                     "expected the task to end within the task timeout (NPUEMU_TASK_TIMEOUT), found that %s" % detail,
                     launch_site)
    return Fault("npuemu internal error", status.ACL_ERROR_RT_INTERNAL_ERROR, task, stream,
                 "%s: %s (a bug of npuemu: please report it)" % (type(error).__name__, error), launch_site)


def summary(faults: Sequence[Fault]) -> str:
    """All the faults in one message: the first SHOWN in full, then how many more."""
    shown = "; ".join(str(fault) for fault in faults[:SHOWN])
    more = len(faults) - SHOWN
    head = ("the device raised an exception while running queued work" if len(faults) == 1 else
            "the device raised %d exceptions while running queued work" % len(faults))
    return "%s: %s%s" % (head, shown, "; and %d more" % more if more > 0 else "")


def raise_faults(faults: Sequence[Fault]) -> None:
    """AclError with the first fault's code and all of them in the message; nothing if none."""
    if faults:
        raise AclError(faults[0].code, summary(faults))
