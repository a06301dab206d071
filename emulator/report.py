"""The one channel of the sanitizer's findings (docs/sanitizer.md).

Every finding (a race, a missing synchronisation, an uninitialised read, a fault of a device access,
an overrun into padding, a leak, ...) is a `Report`: its kind, the tool that found it (as
compute-sanitizer names them: memcheck, racecheck, synccheck, initcheck, leakcheck), a message, the
sites involved (each a role and a short stack) and the resources involved. A report is printed once
to stderr, kept for `emulator.reports()` and counted; the same finding again (same kind, message and
sites: a bug in a loop) only counts. With NPUEMU_SANITIZE_EXITCODE=N, a process that reported
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

from . import hooks

PREFIX = "========= "
TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck", "leakcheck")


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
    key: tuple = field(default=(), repr=False)

    def text(self) -> str:
        """The printed form (without the count)."""
        lines = ["%snpuemu: %s: %s: %s" % (PREFIX, self.tool, self.kind, self.message)]
        lines += ["%s    %s at %s" % (PREFIX, role, site) for role, site in self.sites]
        lines += ["%s    %s" % (PREFIX, resource) for resource in self.resources]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


_lock = threading.RLock()
_reports: list[Report] = []
_by_key: dict = {}
_total = 0


# What differs between the rounds of a loop that allocates as it goes, in a finding of one bug: the
# addresses and the allocations' numbers. The same finding is found by what remains.
_ADDRESSES = re.compile(r"0x[0-9a-f]+|#\d+")


def publish(kind: str, tool: str, message: str, sites: Sequence[tuple] = (), resources: Sequence[str] = (),
            show: bool = True) -> Report:
    """Record a finding; print it unless it was found before (or `show` is False: leaks print their own
    lines). Returns the record (the earlier one, counted once more, for a repeated finding)."""
    global _total
    assert tool in TOOLS, tool
    shown = message if kind == "leak" else _ADDRESSES.sub("#", message)  # each leaked resource is one
    key = (kind, tool, shown, tuple((role, site) for role, site in sites))
    with _lock:
        _total += 1
        found = _by_key.get(key)
        if found is not None:
            found.count += 1
            return found
        report = Report(kind, tool, message, tuple(sites), tuple(resources), 1, len(_reports) + 1, key)
        _reports.append(report)
        _by_key[key] = report
    if show:
        _write(report.text())
    for observer in hooks.REPORTS:
        observer.reported(report)
    return report


def _write(text: str) -> None:
    """To stderr; a program that closed it loses the text, never its call."""
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # closed, or None (pythonw, a C host without fd 2)
        pass


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
        _reports.clear()
        _by_key.clear()
        _total = 0


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
    _write(line)
    code = _exit_code[0]
    if code is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        end = _ends_process[0]
        if end is not None:
            end(code)
        else:
            os._exit(code)


atexit.register(_at_exit)
