"""The one channel of the sanitizer's findings (docs/sanitizer.md).

Every finding (a race, a missing synchronisation, an uninitialised read, a fault of a device access,
an overrun into padding, a leak, ...) is a `Report`: its kind, the tool that found it (as
compute-sanitizer names them: memcheck, racecheck, synccheck, initcheck, leakcheck), a message, the
sites involved (each a role and a short stack) and the resources involved. A report is printed once
to stderr, kept for `emulator.reports()` and counted; the same finding again (same kind, sites and
message but for its numbers: a bug in a loop) only counts. After PRINT_LIMIT distinct findings, one
line says that later ones are counted, not printed. With NPUEMU_SANITIZE_EXITCODE=N, a process that reported
anything exits with N.

The printed form, one finding:

    ========= npuemu: racecheck: race: <message>
    =========     <role> at <site>
    =========     ...
    =========     <resource>
    =========     ...

and at exit, when anything was reported: `========= npuemu: SUMMARY: <n> report(s) (<kinds>)`.
Leaks keep their own lines (`npuemu: leak: ...`, emulator.leaks) and count as reports.
"""
from __future__ import annotations

import atexit
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from . import hooks, sites

PREFIX = "========= "
# Set by `npuemu run --error-exitcode` to a directory: while this process holds reports, a file named by
# its pid is there, so that the launcher knows of them even when the program skips its exit work
# (os._exit, _exit), which is where NPUEMU_SANITIZE_EXITCODE ends the process.
REPORTED_VARIABLE = "NPUEMU_RUN_REPORTED"
TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck", "leakcheck")
# Every kind of finding, and the tool that makes it (docs/sanitizer.md): the names a test may expect.
KINDS = {
    "invalid device access": "memcheck", "padding overrun": "memcheck", "misaligned tensor": "memcheck",
    "destroyed tensor": "memcheck", "overlapping output": "memcheck",
    "race": "racecheck",
    "missing synchronisation": "synccheck", "host memory in flight": "synccheck",
    "pending work destroyed": "synccheck", "memory freed while in use": "synccheck",
    "uninitialised read": "initcheck",
    "leak": "leakcheck",
}


@dataclass(eq=False)
class Report:
    """One finding. `sites`: ((role, site), ...) where role says what happened there ("write by
    aclnnKlDivBackward on stream 0x...", "host call aclrtMemcpy", "allocation made"), innermost
    first; `resources`: descriptions of the allocations, tensors and streams involved. `count`: how
    many times it was found."""
    kind: str
    tool: str
    message: str
    sites: tuple = ()
    resources: tuple = ()
    count: int = 1
    serial: int = 0
    differed: bool = False  # a repeat's message differed from this first one's (other offsets, sizes)
    key: tuple = field(default=(), repr=False)

    def text(self) -> str:
        """The printed form (without the count)."""
        sites.resolve(site for _, site in self.sites)  # the C frames' lines: one addr2line run per module
        lines = ["%snpuemu: %s: %s: %s" % (PREFIX, self.tool, self.kind, self.message)]
        lines += ["%s    %s at %s" % (PREFIX, role, site) for role, site in self.sites]
        lines += ["%s    %s" % (PREFIX, resource) for resource in self.resources]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


class Described:
    """A resource whose description names sites (an allocation's `made at`), as `publish` takes it: made
    into its text only for a new finding, once the lines of all the finding's sites were looked up
    together. `sites`: the sites the description names."""

    __slots__ = ("describe", "sites")

    def __init__(self, describe: Callable[[], str], named_sites: Sequence):
        self.describe, self.sites = describe, tuple(named_sites)


_lock = threading.RLock()
_reports: list[Report] = []
_by_key: dict = {}
_total = 0
_printed = [0]  # distinct findings shown so far (leaks print their own lines)


# What differs between the rounds of a loop, in a finding of one bug: the addresses, the allocations'
# numbers, and the offsets, sizes and counts inside an allocation (a loop reading a buffer element by
# element). The same finding is found by what remains: its kind, its sites and the words of its message.
_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|#\d+|\b\d+\b")
# Distinct findings printed per process; later ones are kept and counted (the summary, reports()), not
# printed: a program with a bug on every line of a generated loop does not flood its stderr.
PRINT_LIMIT = 1000


def publish(kind: str, tool: str, message: str, sites: Sequence[tuple] = (), resources: Sequence = (),
            show: bool = True, count: int = 1) -> Report:
    """Record a finding (`count` times: the leaks a report counts without listing them); print it unless
    it was found before (or `show` is False: leaks print their own lines). `resources`: their
    descriptions, or Described ones (made into text only for a new finding). Returns the record (the
    earlier one, counted once more, for a repeated finding)."""
    global _total
    assert KINDS.get(kind) == tool, (kind, tool)
    key = _identity(kind, tool, message, sites)
    if show and key not in _by_key:  # a new finding (unless another thread's comes first): its text now
        _look_up_lines(sites, resources)
    with _lock:
        _total += count
        found = _by_key.get(key)
        if found is not None:
            found.count += count
            found.differed = found.differed or message != found.message
            return found
        resources = tuple(resource.describe() if isinstance(resource, Described) else resource
                          for resource in resources)
        report = Report(kind, tool, message, tuple(sites), resources, count, serial=len(_reports) + 1, key=key)
        _reports.append(report)
        _by_key[key] = report
        if len(_reports) == 1:  # under the lock: a clear() on another thread cannot come between
            _mark_held(True)
        printed = _printed[0] = _printed[0] + show
    if show and printed <= PRINT_LIMIT:
        write_stderr(report.text())
    elif show and printed == PRINT_LIMIT + 1:
        write_stderr("%snpuemu: %d distinct findings printed: later ones are counted (the summary at exit, "
                     "emulator.reports()), not printed" % (PREFIX, PRINT_LIMIT))
    for observer in hooks.REPORTS:
        observer.reported(report)
    return report


def _look_up_lines(sites_: Sequence[tuple], resources: Sequence) -> None:
    """Look up the lines of the C frames of all of a finding's sites, those its Described resources name
    too, together: one addr2line run per module, not one per site."""
    sites.resolve([site for _, site in sites_] +
                  [site for resource in resources if isinstance(resource, Described) for site in resource.sites])


def _identity(kind: str, tool: str, message: str, sites: Sequence[tuple]) -> tuple:
    """What makes two findings one: the kind, the sites (roles and source lines) and the message, without
    the numbers that change from one round of a loop to the next (addresses, allocation numbers,
    offsets and sizes). A leak is each resource's own (its message names it and its site: the site
    itself is not compared, which would look up its lines, or resolve a C frame, before it is shown)."""
    if kind == "leak":
        return kind, tool, message
    return (kind, tool, _NUMBERS.sub("#", message),
            tuple((_NUMBERS.sub("#", role), site) for role, site in sites))


def write_stderr(text: str) -> None:
    """`text` and a newline to stderr: the one way npuemu writes its reports and notes there (the
    sanitizer's, the leak report, the trace's and the logs' notes). A program that closed stderr, or
    whose stderr is full, loses the text, never its call: no exception, no internal-error code."""
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # closed, or None (pythonw, a C host without fd 2)
        pass


def reason(error: Exception) -> str:
    """An error as a note on stderr says it: `No space left on device`, not `[Errno 28] No space left
    on device`."""
    return error.strerror if isinstance(error, OSError) and error.strerror else str(error) or type(error).__name__


def reports() -> list[Report]:
    """Every distinct finding so far, oldest first (each with its `count`)."""
    with _lock:
        return list(_reports)


def count() -> int:
    """How many findings were made, repeats included."""
    return _total


def clear() -> None:
    """Forget the findings (a test harness that checked them)."""
    global _total
    with _lock:
        if _reports:
            _mark_held(False)
        _reports.clear()
        _by_key.clear()
        _printed[0] = _total = 0


def _mark_held(held: bool) -> None:
    """Whether this process holds reports, for `npuemu run` (REPORTED_VARIABLE); nothing without it."""
    directory = os.environ.get(REPORTED_VARIABLE)
    if not directory:
        return
    path = os.path.join(directory, str(os.getpid()))
    try:
        if held:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        else:
            os.unlink(path)
    except OSError:  # the launcher is gone (its directory with it): nobody to tell
        pass


def summary() -> Optional[str]:
    """The summary line, or None when nothing was reported."""
    with _lock:
        if not _reports:
            return None
        kinds: dict = {}
        for report in _reports:
            kinds[report.kind] = kinds.get(report.kind, 0) + report.count
        return "%snpuemu: SUMMARY: %d report(s) (%s)" % (
            PREFIX, _total, ", ".join("%d %s" % (n, kind) for kind, n in kinds.items()))


_exit_code: list = [None]  # NPUEMU_SANITIZE_EXITCODE, as read by the settings
_ends_process: list = [None]  # what ends the process with that code: None for os._exit, here


def set_exit_code(code: Optional[int]) -> None:
    _exit_code[0] = code


def exit_code() -> Optional[int]:
    """NPUEMU_SANITIZE_EXITCODE, as the settings read it: the status of a process that ends holding reports."""
    return _exit_code[0]


def end_process_with(end: Optional[Callable[[int], None]]) -> None:
    """Who ends a process that reported anything with NPUEMU_SANITIZE_EXITCODE: os._exit at the end of
    Python's exit functions (None, the default), or `end(code)`. The C toolkit gives its own for a C
    program: it ends the process once the program's own exit work is done too (its atexit functions,
    its libraries' destructors), which os._exit here would skip."""
    _ends_process[0] = end


def _at_exit() -> None:
    """Registered before the runtime's own exit work (the leak report), so it runs after it."""
    line = summary()
    if line is None:
        return
    write_stderr(line)
    code = _exit_code[0]
    if code is not None and not _ends_on_ctrl_c():
        sys.stdout.flush()
        sys.stderr.flush()
        end = _ends_process[0]
        if end is not None:
            end(code)
        else:
            os._exit(code)


def _ends_on_ctrl_c() -> bool:
    """Whether the Python program is ending on a KeyboardInterrupt it did not catch (Ctrl-C). CPython then
    ends it by SIGINT once its exit work is done (status 130 in a shell): the program was interrupted,
    and the user wants to see that, not NPUEMU_SANITIZE_EXITCODE (docs/run.md). The interpreter keeps
    the exception it printed as sys.last_value."""
    return isinstance(getattr(sys, "last_value", None), KeyboardInterrupt)


atexit.register(_at_exit)


def _forked() -> None:
    """In a child made by fork: the parent's reports are the parent's (its summary, its exit status);
    a child that reports nothing itself does nothing at exit, even with NPUEMU_SANITIZE_EXITCODE."""
    global _lock, _total
    _lock = threading.RLock()  # a thread of the parent may have held it at the fork
    _reports.clear()
    _by_key.clear()
    _printed[0] = _total = 0


os.register_at_fork(after_in_child=_forked)
