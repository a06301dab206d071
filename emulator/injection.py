"""Fault injection: make the N-th call of a named API, or the N-th task of a name, fail (docs/faults.md).

A spec is a comma-separated list of entries (whitespace is ignored around every part):

    NAME#N=CODE          the N-th call of NAME fails with CODE
    NAME#N+=CODE         every call of NAME from the N-th on fails
    NAME#N-M=CODE        calls N to M of NAME fail
    NAME=CODE            every call of NAME fails (NAME#1+=CODE)
    task:NAME#N=CODE     the N-th task named NAME (an operator's second phase, aclrtMemcpyAsync,
                         aclrtMemcpy2dAsync, aclrtMemsetAsync, aclrtLaunchCallback), counted when it
                         is queued, does not run: the synchronisation that reaches it returns CODE
                         with a message naming the injection and the task's launch site.
                         The same #N, #N+, #N-M forms apply.

NAME is a public call's C name, or `*` for any (calls, or tasks with `task:*`). CODE is a non-zero
integer (decimal or 0x...) or a status name (ACL_ERROR_RT_MEMORY_ALLOCATION, ACLNN_ERR_INNER_NULLPTR).
Calls are counted from 1 when the spec is applied, across every thread of the process, whatever
their outcome. A failing call does not run; it returns CODE (a call whose C form returns a pointer
returns null) and leaves for aclGetRecentErrMsg:

    injected fault: call #3 of aclrtMalloc fails with 207001 ACL_ERROR_RT_MEMORY_ALLOCATION
    (NPUEMU_FAULTS: aclrtMalloc#3=207001)

Specs come from NPUEMU_FAULTS (emulator.configure(faults=...)) and from `inject_faults(spec)`, a
context manager whose spec is in force inside its block, on top of the others (innermost first when
several entries match one call; each spec counts every call by itself). With no spec, nothing is
attached to the hooks: injection costs nothing.
"""
from __future__ import annotations

import contextlib
import difflib
import os
import re
import threading
from dataclasses import dataclass
from typing import Iterator, Optional

from . import calls, hooks
from .config import ConfigError
from .errors import AclError

SETTING = "NPUEMU_FAULTS"
INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True)
class Entry:
    """One entry of a spec: the calls (or tasks) `first` to `last` (None: no end) of `name` fail with `code`."""
    text: str
    name: str
    first: int
    last: Optional[int]
    code: int
    task: bool = False

    def covers(self, ordinal: int) -> bool:
        return self.first <= ordinal and (self.last is None or ordinal <= self.last)


@dataclass(frozen=True)
class Injection:
    """A failure that was injected: the entry that made it, the call's (or task's) name, its ordinal, the code."""
    entry: str
    name: str
    ordinal: int
    code: int
    task: bool = False


_ENTRY = re.compile(r"""^(?P<task>(?i:task)\s*:\s*)?
                         (?P<name>[A-Za-z_]\w*|\*)
                         (?:\s*\#\s*(?P<first>\d+)\s*(?:(?P<plus>\+)|-\s*(?P<last>\d+))?)?
                         \s*=\s*(?P<code>\S+)$""", re.X)
_RANGE_HINT = "NAME#N=CODE, NAME#N+=CODE, NAME#N-M=CODE, NAME=CODE, or task:NAME#N=CODE"


def parse(spec: str, source: str = SETTING) -> tuple:
    """The entries of `spec`; ConfigError naming `source`, the entry, what was expected and what was found."""
    entries = []
    for number, raw in enumerate(str(spec).split(","), 1):
        text = raw.strip()
        if not text:
            continue  # "a, b," and an all-blank spec: nothing there
        entries.append(_entry(text, number, source))
    return tuple(entries)


def _entry(text: str, number: int, source: str) -> Entry:
    where = "%s: entry %d %r" % (source, number, text)
    match = _ENTRY.match(text)
    if match is None:
        raise ConfigError("%s: expected %s, found %s" % (where, _RANGE_HINT, _what_is_wrong(text)))
    task = match.group("task") is not None
    name = match.group("name")
    first = int(match.group("first") or 1)
    last: Optional[int]
    if match.group("first") is None or match.group("plus"):
        last = None                              # NAME=CODE, NAME#N+=CODE: no end
    elif match.group("last") is not None:
        last = int(match.group("last"))          # NAME#N-M=CODE
    else:
        last = first                             # NAME#N=CODE
    if first < 1:
        raise ConfigError("%s: expected a call number N >= 1 (calls count from 1), found %d" % (where, first))
    if last is not None and last < first:
        raise ConfigError("%s: expected a range N-M with M >= N, found %d-%d" % (where, first, last))
    _check_name(name, task, where)
    code = _code(match.group("code"), where)
    return Entry(text, name, first, last, code, task)


def _what_is_wrong(text: str) -> str:
    if "=" not in text:
        return "no '=CODE' in %r" % text
    head, code = (part.strip() for part in text.split("=", 1))
    if not code:
        return "no CODE after '=' in %r" % text
    if re.search(r"\s", code):
        return "%r after '=' (one CODE per entry: entries are separated by commas)" % code
    if "#" in head:
        count = head.split("#", 1)[1].strip()
        if not re.match(r"^\d+\s*(\+|-\s*\d+)?$", count):
            return "%r after '#' (expected a call number N, N+ or N-M)" % count
    return "%r" % text


def _check_name(name: str, task: bool, where: str) -> None:
    if name == "*":
        return
    if task:
        known = calls.task_names()
        if name not in known:
            raise ConfigError("%s: expected a task name (%s), found %r%s"
                              % (where, ", ".join(known), name, suggestion(name, known)))
        return
    if calls.find(name) is None:
        known = calls.all_names()
        raise ConfigError("%s: expected the C name of a public call that returns a status or a pointer (%d of "
                          "them, e.g. aclrtMalloc, aclnnKlDivBackward), found %r%s"
                          % (where, len(known), name, suggestion(name, known)))


def suggestion(name: str, known, otherwise: str = ": no such call") -> str:
    """`: did you mean X?` with the known name closest to a misspelt `name`, else `otherwise`."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return ": did you mean %s?" % close[0] if close else otherwise


def _code(text: str, where: str) -> int:
    value: Optional[int]
    try:
        value = int(text, 0)
    except ValueError:
        value = calls.code_values().get(text.upper())
        if value is None:
            raise ConfigError("%s: expected CODE, a non-zero status (e.g. 207001 or ACL_ERROR_RT_MEMORY_ALLOCATION), "
                              "found %r" % (where, text)) from None
    if not 0 < value <= INT32_MAX:
        raise ConfigError("%s: expected CODE, a non-zero status in [1, %d] (0 is success), found %d"
                          % (where, INT32_MAX, value))
    return value


def describe(code: int) -> str:
    """`207001 ACL_ERROR_RT_MEMORY_ALLOCATION`."""
    return "%d %s" % (code, calls.code_name(code))


# ------------------------------------------------------------------------------------------------
# Plans: parsed specs in force, each with its own counts


class inject_faults:
    """A spec in force inside a `with` block (or between `start()` and `stop()`), counting from entry:

        with emulator.inject_faults("aclrtMalloc#2=207001") as plan:
            ...                  # the 2nd aclrtMalloc of any thread, from here, returns 207001
        plan.injected            # [Injection(entry='aclrtMalloc#2=207001', name='aclrtMalloc', ordinal=2, ...)]

    A malformed spec raises ConfigError here, before the block. On exit the previous specs are in force
    again (NPUEMU_FAULTS', the enclosing blocks'); they counted the calls made inside the block too."""

    def __init__(self, spec: str, source: str = "inject_faults"):
        self.spec = spec
        self.source = source
        self.entries = parse(spec, source)
        self._watched = {(entry.task, entry.name) for entry in self.entries}
        self._lock = threading.Lock()
        self._counts: dict = {}
        self.injected: list = []

    # -- counting -----------------------------------------------------------------------------------

    def count(self, name: str, task: bool = False) -> int:
        """How many calls (tasks with `task`) of `name` ("*": all) this plan counted, for the names its entries watch."""
        with self._lock:
            return self._counts.get((task, name), 0)

    def _hit(self, name: str, task: bool) -> Optional[tuple]:
        """Count one call (or task) of `name`: (entry, ordinal) of the first entry that makes it fail, or None."""
        with self._lock:
            ordinals = {}
            for watched in (name, "*"):
                key = (task, watched)
                if key in self._watched and watched not in ordinals:
                    ordinals[watched] = self._counts[key] = self._counts.get(key, 0) + 1
            for entry in self.entries:
                if entry.task == task and entry.name in ordinals and entry.covers(ordinals[entry.name]):
                    return entry, ordinals[entry.name]
        return None

    def _record(self, entry: Entry, name: str, ordinal: int) -> None:
        with self._lock:
            self.injected.append(Injection(entry.text, name, ordinal, entry.code, entry.task))

    # -- in force ----------------------------------------------------------------------------------

    def start(self) -> "inject_faults":
        self.start_counting()
        _push(self)
        return self

    def start_counting(self) -> None:
        """Count from 0 again, with nothing injected yet."""
        with self._lock:
            self._counts.clear()
            self.injected = []

    def stop(self) -> None:
        _remove(self)

    def __enter__(self) -> "inject_faults":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return "<inject_faults %r>" % self.spec


_lock = threading.RLock()
_plans: tuple = ()              # the context managers' plans in force, innermost last
_setting: Optional[inject_faults] = None   # NPUEMU_FAULTS's plan
_call_index: dict = {}          # name -> plans (innermost first) that watch calls of that name ("*": all)
_task_index: dict = {}
_thread = threading.local()     # .exempt: this thread's calls are a harness's own (not_counted)


def _push(plan: inject_faults) -> None:
    global _plans
    with _lock:
        if plan in _plans:
            raise ValueError("inject_faults(%r) is already in force" % plan.spec)
        _plans = _plans + (plan,)
        _reindex()


def _remove(plan: inject_faults) -> None:
    global _plans
    with _lock:
        _plans = tuple(p for p in _plans if p is not plan)  # by identity: blocks of two threads may end in any order
        _reindex()


def blocks() -> tuple:
    """The specs of `inject_faults` in force (started and not stopped), outermost first."""
    return _plans


def stop_blocks_since(before: tuple) -> list:
    """Stop every `inject_faults` spec in force that is not in `before` (what `blocks()` gave earlier);
    returns them. The pytest fixture clears so the specs a test started and never stopped (it failed
    before its `stop()`): they would make the next tests' calls fail."""
    left = [plan for plan in _plans if plan not in before]
    for plan in left:
        plan.stop()
    return left


def restart_setting() -> None:
    """NPUEMU_FAULTS' spec (that of the settings in force) counts from now, as a new one does: each test
    of the pytest fixture counts its own calls from 1, whatever the tests before it did."""
    with _lock:
        if _setting is not None:
            _setting.start_counting()


def _forked() -> None:
    """In a child made by fork, counts are per process as documented (docs/faults.md): every spec in force
    counts the child's calls from 1, with nothing injected yet. The locks are made again: a thread of the
    parent may have held one at the fork, and it is not in the child."""
    global _lock
    _lock = threading.RLock()
    for plan in _plans + ((_setting,) if _setting is not None else ()):
        plan._lock = threading.Lock()
        plan.start_counting()


os.register_at_fork(after_in_child=_forked)


@contextlib.contextmanager
def not_counted() -> Iterator[None]:
    """Inside the block, this thread's calls and the tasks it queues are not counted by any spec and
    never fail by one: the pytest fixture's own setup and teardown calls are not the test's (a spec
    of the marker applies to the test's calls only). Other threads are counted as usual."""
    outer = getattr(_thread, "exempt", False)
    _thread.exempt = True
    try:
        yield
    finally:
        _thread.exempt = outer


def _exempt() -> bool:
    return getattr(_thread, "exempt", False)


def _in_force() -> list:
    """Plans, innermost first: the blocks', then NPUEMU_FAULTS'."""
    plans = list(reversed(_plans))
    if _setting is not None:
        plans.append(_setting)
    return plans


def _reindex() -> None:
    """Rebuild the name indexes and attach or detach the observers (nothing attached when nothing watches)."""
    global _call_index, _task_index
    calls_index: dict = {}
    tasks_index: dict = {}
    for plan in _in_force():
        for entry in plan.entries:
            index = tasks_index if entry.task else calls_index
            holders = index.setdefault(entry.name, [])
            if plan not in holders:
                holders.append(plan)
    _call_index, _task_index = calls_index, tasks_index
    if calls_index or _awaiting_settings:
        hooks.attach("CALLS", OBSERVER)
    else:
        hooks.detach("CALLS", OBSERVER)
    if tasks_index:
        hooks.attach("TASKS", OBSERVER)
    else:
        hooks.detach("TASKS", OBSERVER)


def _matching(index: dict, name: str) -> Optional[list]:
    named, anything = index.get(name), index.get("*")
    if named is None:
        return anything
    if anything is None:
        return named
    return [plan for plan in _in_force() if plan in named or plan in anything]


def _fire(index: dict, name: str, task: bool) -> Optional[tuple]:
    """Count `name` in every plan watching it: (plan, entry, ordinal) of the innermost that makes it fail."""
    plans = _matching(index, name)
    if not plans:
        return None
    fired = None
    for plan in plans:  # every plan counts the call, the innermost hit wins
        hit = plan._hit(name, task)
        if hit is not None and fired is None:
            fired = (plan, hit[0], hit[1])
    if fired is not None:
        fired[0]._record(fired[1], name, fired[2])
    return fired


class _Observer:
    """The call and task observer (emulator.hooks) of every plan in force."""

    def before(self, name: str, args: tuple, kwargs: dict):
        if _awaiting_settings:
            _read_settings()  # a malformed NPUEMU_FAULTS: ConfigError, the call fails as with any bad setting
        if _exempt():
            return None
        fired = _fire(_call_index, name, task=False)
        if fired is not None:
            plan, entry, ordinal = fired
            what = ("call #%d of %s" % (ordinal, name) if entry.name != "*"
                    else "public call #%d (%s)" % (ordinal, name))
            raise AclError(entry.code, "injected fault: %s fails with %s (%s: %s)"
                           % (what, describe(entry.code), plan.source, entry.text))
        return None

    def enqueued(self, stream, task) -> None:
        if task.run is None or _exempt():  # event records and waits: not work that can fail
            return
        name = calls.task_kind(task.name)
        fired = _fire(_task_index, name, task=True)
        if fired is not None:
            plan, entry, ordinal = fired
            what = ("task #%d of %s" % (ordinal, name) if entry.name != "*"
                    else "task #%d (%s)" % (ordinal, name))
            message = "%s fails with %s (%s: %s); it did not run" % (what, describe(entry.code), plan.source, entry.text)
            task.run = _failing(entry.code, message)

    def executed(self, stream, task, begin, end) -> None:
        pass


def _failing(code: int, message: str):
    def run() -> None:
        from .faults import CodedFault  # not at import: faults imports the runtime's modules' dependencies
        raise CodedFault(code, message)
    return run


OBSERVER = _Observer()


# ------------------------------------------------------------------------------------------------
# NPUEMU_FAULTS


def apply(config) -> None:
    """Put `config.faults` in force (called each time the settings change). The same spec as before
    keeps its counts; a new one counts from now. (A malformed one never gets here: the settings are
    validated, emulator.config, with parse() below, so the calls that read them fail instead.)"""
    global _setting, _awaiting_settings
    spec = config.faults or ""
    with _lock:
        _awaiting_settings = False
        if _setting is None or _setting.spec != spec:
            _setting = inject_faults(spec, SETTING) if spec.strip() else None
        _reindex()


def _read_settings() -> None:
    """The first public call reads the settings, so that NPUEMU_FAULTS counts that very call."""
    from .state import PROCESS
    config = PROCESS.config  # the first read applies the settings: apply() above
    if _awaiting_settings:  # they were read before this module was imported
        apply(config)


# NPUEMU_FAULTS is read with the other settings, when the first call needs them; the observer is
# attached now, so that the first call of the process is counted too (it reads the settings first).
_awaiting_settings = bool(os.environ.get(SETTING, "").strip())
if _awaiting_settings:
    _reindex()
