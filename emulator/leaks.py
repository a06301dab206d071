"""Leak tracking: every resource a program must release is tracked with the user's site (short call
stack) that made it; what is left at aclFinalize (or interpreter exit) is reported on stderr.
`emulator.resource.Resource` tracks itself; device and host allocations are tracked by the runtime."""
from __future__ import annotations

import os
import threading
from typing import Callable, Union

from . import report as report_channel

Description = Union[str, Callable[[], str]]

_lock = threading.Lock()
_live: dict[int, tuple[str, object, Description, object]] = {}
_orphans: list[str] = []   # released by a reset, never by the program
_sources: list = []        # (unreleased, forget) of other trackers: the handle table of Resources
enabled = True
SHOWN = 100                # leak lines printed at most; the count says how many more


def add_source(unreleased: Callable[[], list], forget: Callable[[], None]) -> None:
    """Another tracker: `unreleased()` gives (kind, description, site) of what is unreleased now;
    `forget()` drops them once reported."""
    _sources.append((unreleased, forget))


def track(kind: str, obj: object, description: Description, site: object) -> None:
    """`site`: an emulator.sites.Site (or any object whose str() says where)."""
    with _lock:
        _live[id(obj)] = (kind, obj, description, site)


def untrack(obj: object) -> None:
    with _lock:
        _live.pop(id(obj), None)


def _line(kind: str, description: Description, site: object) -> str:
    text = description() if callable(description) else description
    return "%s %s, made at %s" % (kind, text, site)


def orphaned(kind: str, description: Description, site: object, how: str) -> None:
    """A resource of another tracker was released by the runtime (`how`), not by the program."""
    with _lock:
        _orphans.append(_line(kind, description, site) + " (released only by %s)" % how)


def orphan(obj: object, how: str) -> None:
    """`obj` was released by the runtime (`how`), not by the program: still a leak."""
    with _lock:
        entry = _live.pop(id(obj), None)
        if entry is not None:
            _orphans.append(_line(entry[0], entry[2], entry[3]) + " (released only by %s)" % how)


def outstanding() -> list[str]:
    """Everything unreleased so far, without reporting it."""
    with _lock:
        return list(_orphans) + [_line(kind, d, site) for kind, _, d, site in _live.values()] + _from_sources()


def _from_sources() -> list[str]:
    return [_line(kind, d, site) for unreleased, _ in _sources for kind, d, site in unreleased()]


def report(when: str) -> list[str]:
    """Print and forget everything unreleased; returns the lines."""
    with _lock:
        lines = list(_orphans) + [_line(kind, d, site) for kind, _, d, site in _live.values()] + _from_sources()
        _orphans.clear()
        _live.clear()
        for _, forget_source in _sources:
            forget_source()
    if lines and enabled:
        for line in lines:
            report_channel.publish("leak", "leakcheck", line, show=False)
        report_channel.write_stderr(_report_text(lines, when))
    return lines


def _report_text(lines: list, when: str) -> str:
    text = ["npuemu: %d resource(s) never released at %s:" % (len(lines), when)]
    text += ["npuemu: leak: %s" % line for line in lines[:SHOWN]]
    if len(lines) > SHOWN:  # a leak in a loop: the first ones say where
        text.append("npuemu: ... and %d more" % (len(lines) - SHOWN))
    return "\n".join(text)


def forget() -> None:
    """Drop all tracking without reporting (test harnesses that check `outstanding()` themselves)."""
    with _lock:
        _live.clear()
        _orphans.clear()
        for _, forget_source in _sources:
            forget_source()


def _forked() -> None:
    """In a child made by fork: what the parent made is the parent's to release, not a leak of the
    child (whose exit reported the parent's allocations as its own)."""
    global _lock
    _lock = threading.Lock()  # a thread of the parent may have held it at the fork
    forget()


os.register_at_fork(after_in_child=_forked)
