"""Leak tracking: every resource a program must release is tracked with the user's site (short call
stack) that made it; what is left at aclFinalize (or interpreter exit) is reported on stderr.
`emulator.resource.Resource` tracks itself; device and host allocations are tracked by the runtime."""
from __future__ import annotations

import collections
import contextlib
import gc
import os
import threading
from typing import Callable, Optional, Union

from . import report as report_channel
from . import sites

Description = Union[str, Callable[[], str]]

_lock = threading.Lock()
_live: dict[int, tuple[str, object, Description, object]] = {}
_orphans: list[tuple] = []  # (kind, description, site, how) released by a reset, never by the program
_sources: list = []         # (unreleased, forget) of other trackers: the handle table of Resources
enabled = True
SHOWN = 100                 # leak lines printed at most; the last line counts the rest, by kind


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


def _line(kind: str, description: Description, site: object, how: Optional[str] = None) -> str:
    """A leak's line: made only when it is reported (a site's text costs a look-up of its lines)."""
    line = "%s, made at %s" % (_Resource(kind, description), site)
    return line if how is None else line + " (released only by %s)" % how


class _Resource:
    """A leaked resource as its report's `resources` name it (`stream 0x5e0000c0 of device 0`): described
    when shown (the trace, the logs), not when reported."""

    __slots__ = ("kind", "description")

    def __init__(self, kind: str, description: Description):
        self.kind, self.description = kind, description

    def __str__(self) -> str:
        description = self.description
        return "%s %s" % (self.kind, description() if callable(description) else description)


def orphaned(kind: str, description: Description, site: object, how: str) -> None:
    """A resource of another tracker was released by the runtime (`how`), not by the program."""
    with _lock:
        _orphans.append((kind, description, site, how))


def orphan(obj: object, how: str) -> None:
    """`obj` was released by the runtime (`how`), not by the program: still a leak."""
    with _lock:
        entry = _live.pop(id(obj), None)
        if entry is not None:
            _orphans.append((entry[0], entry[2], entry[3], how))


def _unreleased() -> list[tuple]:
    """(kind, description, site, how) of everything unreleased so far (under _lock): released by a reset
    first, then what is live, then the other trackers'."""
    return (list(_orphans) + [(kind, d, site, None) for kind, _, d, site in _live.values()]
            + [(kind, d, site, None) for unreleased, _ in _sources for kind, d, site in unreleased()])


def outstanding() -> list[str]:
    """Everything unreleased so far, without reporting it."""
    with _lock:
        found = _unreleased()
    return _lines(found)


def pending() -> bool:
    """Whether anything is unreleased, without making the lines (which look up the sites' lines)."""
    with _lock:
        return bool(_orphans or _live or any(unreleased() for unreleased, _ in _sources))


def _lines(found: list) -> list[str]:
    sites.resolve(site for _, _, site, _ in found)  # the C sites' lines in one look-up per module
    return [_line(*leak) for leak in found]


def report(when: str) -> list[str]:
    """Print and forget everything unreleased; returns the lines printed (none when the leak check is off:
    then nothing is formatted either). Only the leaks printed are formatted, each a record of its own
    (emulator.reports()); the rest are counted, one record of each kind counting them (formatting and
    publishing 400 000 lines that were never printed made aclFinalize take 26 s)."""
    with _collector_paused():
        with _lock:
            found = _unreleased()
            _orphans.clear()
            _live.clear()
            for _, forget_source in _sources:
                forget_source()
        if not (found and enabled):
            return []
        total, shown = len(found), _shown(found)
        rest = collections.Counter(kind for kind, *_ in found)
        rest.subtract(kind for kind, *_ in shown)
        del found  # (freed with the collector paused: it is most of what the report made)
    lines = _lines(shown)
    for (kind, description, site, _), line in zip(shown, lines):  # each a record: its site, its resource
        report_channel.publish("leak", "leakcheck", line, (("made", site),), (_Resource(kind, description),),
                               show=False)
    for kind, count in rest.items():
        if count:
            report_channel.publish("leak", "leakcheck", "%d more %s never released at %s (counted, not listed)"
                                   % (count, kind, when), show=False, count=count)
    report_channel.write_stderr(_report_text(total, lines, rest, when))
    return lines


@contextlib.contextmanager
def _collector_paused():
    """Python's cyclic garbage collector paused meanwhile: listing N leaks makes O(N) short-lived tuples,
    and the full collections they set off each walked every object of the program (400 000 leaks: 1.8 s
    of a 2.2 s report). Nothing made here is cyclic: it is freed as it goes, collector or not."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _shares(counts: dict, room: int) -> dict:
    """How many lines each kind gets of `room`: an equal share each, what a kind does not need going to
    the others (a leak of 19 000 tensors does not hide the one stream leaked beside them)."""
    shares, left = {}, room
    by_count = sorted(counts, key=counts.get)
    for place, kind in enumerate(by_count):
        shares[kind] = min(counts[kind], left // (len(by_count) - place))
        left -= shares[kind]
    return shares


def _shown(found: list) -> list:
    """The leaks of `found` the report prints: the first ones of each kind, in the order found."""
    shares = _shares(collections.Counter(kind for kind, *_ in found), SHOWN)
    shown = []
    for leak in found:
        if shares[leak[0]]:
            shares[leak[0]] -= 1
            shown.append(leak)
    return shown


def _report_text(total: int, lines: list, rest: collections.Counter, when: str) -> str:
    text = ["npuemu: %d resource(s) never released at %s:" % (total, when)]
    text.extend("npuemu: leak: %s" % line for line in lines)
    if total > SHOWN:  # a leak in a loop: the first ones say where
        counted = ", ".join("%d %s" % (count, kind) for kind, count in rest.most_common() if count)
        text.append("npuemu: ... and %d more: %s" % (total - len(lines), counted))
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
