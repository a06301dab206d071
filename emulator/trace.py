"""The trace (NPUEMU_TRACE=FILE.json, docs/trace.md): a Chrome / Perfetto trace of what the program did.

While a path is set, the trace observes (emulator.hooks) every public call, every stream task and
every sanitizer report, and keeps them in memory; the file is written when tracing stops or its path
changes (`emulator.configure(trace=...)`) and at the process's exit (C programs included: the toolkit
runs Python's exit functions). With no path nothing is attached and nothing is paid.

The file is Chrome's Trace Event JSON, which ui.perfetto.dev and chrome://tracing open:

    pid 1              "host": one thread track per host thread ("MainThread (tid 4242)"), an "X"
                       event per public call (args: arguments, return code, message of a failure)
    pid 2 + N          "NPU N (Ascend910B)": one thread track per stream ("stream 0x40 (default)"),
                       an "X" event per task on the device's timeline (args: operands' dtypes and
                       shapes, bytes read and written, launch site, measured duration, fault)
    flows "s"/"f"      aclrtRecordEvent task -> each aclrtStreamWaitEvent task waiting on it
                       (cat "sync"); the host call that queued a task -> the task (cat "launch")
    instants "i"       the sanitizer's reports (global scope), with kind, tool, message, sites

Timestamps are microseconds from the first event, with nanosecond resolution. A task's slice is
where the emulated device ran it: it starts when its stream is free and the host has issued it and
lasts as long as it really took (the device clock of emulator.stream, that aclrtEventElapsedTime
reads); `host_begin_us` says when it actually ran on the host (at a synchronisation, in async mode).
"""
from __future__ import annotations

import atexit
import datetime
import itertools
import json
import math
import os
import secrets
import sys
import threading
import time
from typing import Any, Optional

from . import calls, hooks
from .report import reason, write_stderr

LIMIT = 1_000_000       # events kept (calls, tasks, flow ends); later ones are dropped and counted
REPORT_LIMIT = 10_000   # sanitizer reports kept, besides LIMIT (they are few: repeats only count)
HOST_PID = 1
DEVICE_PID = 2          # + the device id
ARGUMENTS_SHOWN = 200   # characters of a call's arguments kept

# Event kinds, as stored (compact tuples; the JSON objects are made when the file is written)
_CALL, _TASK, _FLOW_OUT, _FLOW_IN, _REPORT, _MARK = range(6)
_TIME = {_CALL: 3, _TASK: 5, _FLOW_OUT: 3, _FLOW_IN: 3, _REPORT: 2, _MARK: 1}  # where each keeps its time


def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


def _us(ns: int) -> float:
    """Nanoseconds as the microseconds of the file. Written 0.4 ns late, so that a reader that
    truncates (Perfetto's ts * 1000) and one that rounds both get the same whole nanosecond: a task
    that starts where the one before ended never seems to start inside it."""
    return round((ns + 0.4) / 1000.0, 4) if ns else 0


def _span(begin: int, end: int) -> tuple:
    """A slice's ts and dur in the file's microseconds, from its begin and end in nanoseconds. Both ends
    are converted as every time is (_us), and dur is what lies between them: a slice that ends where
    the next one begins ends at that ts, not 0.4 ns past it. Added in binary floating point (as
    chrome://tracing adds ts and dur), the decimal dur can land one unit past the end: then it is
    the difference of the two floats instead (exact but for the first microseconds, where a unit or two
    less puts the sum at or before the end), never past the next slice's start."""
    ts, end_us = _us(begin), _us(end)
    dur = round(end_us - ts, 4)
    if ts + dur > end_us:
        dur = end_us - ts
        while dur > 0 and ts + dur > end_us:
            dur = max(0.0, dur - math.ulp(end_us))
    return ts, dur


def _category(task, record_class, wait_class) -> str:
    if isinstance(task, (record_class, wait_class)):
        return "event"
    name = task.name
    if name.startswith("aclrtMemcpy"):
        return "copy"
    if name.startswith("aclrtMemset"):
        return "memset"
    if name.startswith("aclrtLaunchCallback"):
        return "callback"
    return "kernel"


class _Opaque(str):
    """A call argument kept by its type's name only (a NumPy array, an aclnn object, a callback)."""


_OPAQUE: dict = {}  # type -> its _Opaque: made once per type
_PLAIN = frozenset((int, type(None), bool, float))  # arguments kept as they are (cheap, immutable)


def _kept(value: Any) -> Any:
    """A call argument as the trace keeps it: never a reference to something that may be large."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    opaque = _OPAQUE.get(kind)
    if opaque is not None:  # a type seen before (an aclTensor, ...)
        return opaque
    if kind is str:
        return value if len(value) <= 40 else value[:37] + "..."
    if kind in (list, tuple) and len(value) <= 8 and all(type(v) is int for v in value):
        return tuple(value)
    if isinstance(value, int):  # an IntEnum
        return int(value)
    if hasattr(value, "__index__") and not hasattr(value, "__len__"):  # a NumPy integer
        try:
            return int(value.__index__())
        except Exception:
            pass
    opaque = _Opaque("<%s>" % kind.__name__)
    if kind not in (list, tuple):  # a list is kept whole when it is short: its type says nothing
        _OPAQUE[kind] = opaque
    return opaque


def _shown(parameter: str, value: Any) -> str:
    """A kept argument as the file shows it: pointers and handles in hex (by their parameter, as the call
    declares it), other integers as given, null for None."""
    if value is None:
        return "null"
    kind = type(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        if value > 0 and parameter in calls.POINTER_PARAMETERS:
            return hex(value)
        return str(value)
    if kind is float:
        return repr(value)
    if kind is _Opaque:
        return str(value)
    if kind is str:
        return repr(value)
    if kind is tuple:
        return "[%s]" % ", ".join(map(str, value))
    return "<%s>" % kind.__name__


def _valid_text(text: str) -> str:
    """`text` as valid Unicode: the bytes of a name that were not UTF-8, which Python keeps as lone
    surrogates (a file name, a command line), written as `\\xe9` text, readable and still distinct."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that no undecodable byte made
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _valid(value: Any) -> Any:
    """A JSON value with every string in it valid Unicode (_valid_text), objects by their str()."""
    kind = type(value)
    if kind is str:
        return _valid_text(value)
    if kind is dict:
        return {_valid(key): _valid(item) for key, item in value.items()}
    if kind in (list, tuple):
        return [_valid(item) for item in value]
    if kind in _PLAIN:
        return value
    return _valid_text(str(value))


def _dumped(value: Any, **options: Any) -> str:
    """`value` as JSON text that holds valid Unicode only (a strict reader may refuse a lone surrogate)."""
    text = json.dumps(value, default=str, **options)
    if "\\ud" in text:  # a surrogate, escaped: a lone one, or half of a character outside the BMP
        text = json.dumps(_valid(value), **options)
    return text


class _Thread:
    """What the trace knows of one host thread (kept in a threading.local: a new thread is a new
    track even when it reuses an ended one's identifier)."""

    __slots__ = ("tid", "calls")

    def __init__(self, tid: int):
        self.tid = tid
        self.calls: list = []  # the calls in progress, innermost last: [name, begin, message]


class _Stream:
    __slots__ = ("pid", "tid", "name", "sort", "last_end", "last_fault")

    def __init__(self, pid: int, tid: int, name: str, sort: int):
        self.pid, self.tid, self.name, self.sort = pid, tid, name, sort
        self.last_end = 0.0     # device time its last traced task ended: slices never overlap
        self.last_fault = None  # the newest fault record seen on it (a new one belongs to the task that ran)


class Trace:
    """One trace: what is collected for one path, from the moment it is set until it is written.
    Times are kept as time.perf_counter() seconds, and become the file's microseconds when written."""

    def __init__(self, path: str, setting: str, soc: Optional[str] = None, execution: Optional[str] = None) -> None:
        self.path = path          # absolute, as it was when tracing started
        self.setting = setting    # as given (NPUEMU_TRACE, configure(trace=...))
        self.soc, self.execution = soc, execution  # from the settings, once they are read
        self._record_class = self._wait_class = None  # emulator.stream's, when the first task runs
        self.lock = threading.Lock()
        self.local = threading.local()
        self.events: list = []            # compact tuples; None: the place of a flow start never used
        self.reports = 0
        self.dropped = 0
        self.dropped_reports = 0
        self.closed = False
        self.threads: list = []           # (tid, name) of the host threads, in order of their first call
        self.streams: dict = {}           # stream handle -> _Stream
        self.devices: dict = {}           # device id -> soc name
        self.device_tids: dict = {}       # device id -> tracks made so far
        self.launches: dict = {}          # id(task) -> (host tid, issued_at): the call that queued it
        self.pending: dict = {}           # id(record task) -> (place of its flow start in events, name, time)
        self.flows = 0
        self.broken = False               # an internal error was reported once
        self.started = time.time()
        self.started_at = time.perf_counter()

    # -- collecting --------------------------------------------------------------------------------

    def _add(self, *events: tuple, fill: Optional[tuple] = None) -> bool:
        """Keep `events`, and `fill`'s (place, event) in the place kept for it: all of them or, at the
        limit, none (a flow's start is never kept without its end)."""
        with self.lock:
            if self.closed:
                return False
            if len(self.events) + len(events) > LIMIT:
                if not self.dropped:
                    self.events.append((_MARK, time.perf_counter()))  # where the trace stops
                self.dropped += len(events) + (fill is not None)
                return False
            if fill is not None:
                self.events[fill[0]] = fill[1]
            self.events.extend(events)
            return True

    def _thread(self) -> _Thread:
        try:
            return self.local.thread
        except AttributeError:
            pass
        current = threading.current_thread()
        name = "host thread" if isinstance(current, threading._DummyThread) else current.name  # a C thread
        with self.lock:
            tid = len(self.threads) + 1
            self.threads.append((tid, "%s (tid %d)" % (name, threading.get_native_id())))
        thread = self.local.thread = _Thread(tid)
        return thread

    def _internal_error(self, where: str, error: BaseException) -> None:
        if not self.broken:
            self.broken = True
            write_stderr("npuemu: trace: internal error in %s (please report): %s: %s"
                         % (where, type(error).__name__, error))

    # call observer ---------------------------------------------------------------------------------

    def before(self, name: str, args: tuple, kwargs: dict):
        try:
            try:
                thread = self.local.thread
            except AttributeError:
                thread = self._thread()
            for value in args:
                if type(value) not in _PLAIN:
                    args = tuple(map(_kept, args))
                    break
            if kwargs:
                args = args + tuple((key, _kept(value)) for key, value in kwargs.items())
            call = [name, time.perf_counter(), None]
            thread.calls.append(call)
        except Exception as error:
            self._internal_error("a call's start", error)
            return None

        def after(code: int) -> None:
            end = time.perf_counter()
            calls = thread.calls
            if calls and calls[-1] is call:
                calls.pop()
            elif call in calls:
                calls.remove(call)
            self._add((_CALL, thread.tid, name, call[1], end, args, len(args) - len(kwargs), code, call[2]))
        return after

    def _arguments(self, name: str, values: tuple, positional: int) -> str:
        names = calls.parameter_names(name)
        shown = [_shown(names[position] if position < len(names) else "", value)
                 for position, value in enumerate(values[:positional])]
        shown += ["%s=%s" % (key, _shown(key, value)) for key, value in values[positional:]]
        text = ", ".join(shown)
        return text if len(text) <= ARGUMENTS_SHOWN else text[:ARGUMENTS_SHOWN - 3] + "..."

    # message observer ------------------------------------------------------------------------------

    def recorded(self, code: int, api_name: str, message: str) -> None:
        thread = getattr(self.local, "thread", None)
        if thread is not None and thread.calls and thread.calls[-1][0] == api_name:
            thread.calls[-1][2] = message

    # task observer ---------------------------------------------------------------------------------

    def _stream(self, stream) -> _Stream:
        found = self.streams.get(stream.handle)
        if found is not None:
            return found
        with self.lock:
            found = self.streams.get(stream.handle)
            if found is None:
                device = stream.device_id
                self.devices.setdefault(device, self.soc)
                tid = self.device_tids[device] = self.device_tids.get(device, 0) + 1
                name = "stream 0x%x%s" % (stream.handle, " (default)" if stream.is_default else "")
                found = self.streams[stream.handle] = _Stream(DEVICE_PID + device, tid, name, stream.handle)
        return found

    def enqueued(self, stream, task) -> None:
        try:
            self._stream(stream)
            thread = getattr(self.local, "thread", None)
            if thread is not None and thread.calls and len(self.launches) < LIMIT:
                self.launches[id(task)] = (thread.tid, task.issued_at)
        except Exception as error:
            self._internal_error("a task's launch", error)

    def executed(self, stream, task, begin: float, end: float) -> None:
        try:
            self._executed(stream, task, begin)
        except Exception as error:
            self._internal_error("a task's run", error)

    def _executed(self, stream, task, begin: float) -> None:
        if self._record_class is None:
            from .stream import RecordTask, WaitTask  # not at import: emulator imports this module first
            self._record_class, self._wait_class = RecordTask, WaitTask
        track = self._stream(stream)
        finish = stream.clock  # the device time the task ended at
        after = []  # events that follow the task's slice in the file: a flow end at its start binds to it
        before, fill = [], None  # a sync flow's start: before the slice, or in the place kept for it
        is_record = isinstance(task, self._record_class)
        marker = is_record or isinstance(task, self._wait_class)
        if marker:  # records and waits take no time
            start = finish
            reads = written = 0
            args = {}
            record = getattr(task, "record", None)
            if record is not None and record.stream is not None:
                source = self._stream(record.stream)
                args["waits_for"] = "%s on %s" % (record.name, source.name)
                flow, flow_start, place = self._flow_from(record, source)
                if place is None:
                    before.append(flow_start)
                else:
                    fill = (place, flow_start)
                after.append((_FLOW_IN, track.pid, track.tid, start, None, flow, "sync", "event"))
        else:
            # the device's model (emulator.stream): a task starts when its stream is free and the host
            # has issued it, and ends at the stream's clock
            start = min(finish, max(track.last_end, task.issued_at))
            reads_list, writes_list = task.ranges()
            reads = sum(entry[1] for entry in reads_list)
            written = sum(entry[1] for entry in writes_list)
            args = task.details()
        track.last_end = finish
        fault = None
        faults = stream.faults
        if faults and faults[-1] is not track.last_fault:
            track.last_fault = faults[-1]
            fault = "%s (%d): %s" % (faults[-1].kind, faults[-1].code, faults[-1].message)
        launch = self.launches.pop(id(task), None)
        if launch is not None and launch[1] == task.issued_at:
            flow = self._next_flow()
            after.append((_FLOW_OUT, HOST_PID, launch[0], launch[1], None, flow, "launch", "launch"))
            after.append((_FLOW_IN, track.pid, track.tid, start, finish, flow, "launch", "launch"))
        slice_ = (_TASK, track.pid, track.tid, task.name, _category(task, self._record_class, self._wait_class),
                  start, finish, args, reads, written, task.site, begin, fault, marker)
        if is_record:
            # a place for the start of the flow to the first wait on it, right after its slice: a slice
            # that starts at the same time on the same stream would otherwise take the arrow
            with self.lock:
                if not self.closed and len(self.events) + 2 + len(after) <= LIMIT:
                    self.events.append(slice_)
                    self.pending[id(task)] = (len(self.events), task.name, start)
                    self.events.append(None)
                    slice_ = None
            if slice_ is None:
                if after:
                    self._add(*after)
                return
        self._add(*before, slice_, *after, fill=fill)

    def _next_flow(self) -> int:
        with self.lock:
            self.flows += 1
            return self.flows

    def _flow_from(self, record, source: _Stream) -> tuple:
        """A flow from `record`'s slice (to a wait on it): (its id, its start, the place kept for the start
        after the record's slice or None). The first wait's start takes that place, a later wait on the
        same record starts its own. The caller keeps the start with the wait's end, or neither."""
        at = record.timestamp
        flow = self._next_flow()
        start = (_FLOW_OUT, source.pid, source.tid, at, None, flow, "sync", "event")
        with self.lock:
            place = self.pending.pop(id(record), None)
        if place is not None and place[1] == record.name and place[2] == at:
            return flow, start, place[0]
        return flow, start, None

    # report observer -------------------------------------------------------------------------------

    def reported(self, report) -> None:
        try:
            tid = self._thread().tid
            with self.lock:
                if self.closed:
                    return
                if self.reports >= REPORT_LIMIT:
                    self.dropped_reports += 1
                    return
                self.reports += 1
                self.events.append((_REPORT, tid, time.perf_counter(), report))
        except Exception as error:
            self._internal_error("a report", error)

    # -- writing -----------------------------------------------------------------------------------

    def close(self) -> None:
        with self.lock:
            self.closed = True

    def is_empty(self) -> bool:
        """Whether nothing happened: no call, no task, no report (kept or dropped)."""
        with self.lock:
            return not self.events and not self.dropped and not self.dropped_reports

    def write(self) -> None:
        """Write the file (atomically: a temporary file beside it, then renamed); a path that cannot be
        written is one line on stderr."""
        if not os.path.isabs(self.path):  # see _absolute: not the current directory of now, which may be another
            write_stderr("npuemu: trace: cannot write %s: a relative path, and the current directory was deleted "
                         "when tracing started" % self.path)
            return
        temporary = None
        try:
            temporary, file = _new_file_beside(self.path)
            with file:
                self._write_to(file)
            os.replace(temporary, self.path)
        except Exception as error:  # an unwritable path, a full disk: never a crash of the program
            try:
                if temporary is not None:
                    os.unlink(temporary)
            except OSError:
                pass
            write_stderr("npuemu: trace: cannot write %s: %s" % (self.path, reason(error)))

    def _write_to(self, file) -> None:
        with self.lock:
            events = [event for event in self.events if event is not None]
        first_time = min((event[_TIME[event[0]]] for event in events), default=self.started_at)
        origin = _ns(first_time)
        file.write('{"traceEvents": [\n')
        first = True
        for event in itertools.chain(self._metadata(), (self._json(event, origin) for event in events)):
            file.write(("" if first else ",\n") + _dumped(event, separators=(",", ":")))
            first = False
        file.write('\n],\n"displayTimeUnit": "ms",\n"otherData": ')
        file.write(_dumped(self._other_data(len(events), first_time), indent=1))
        file.write("}\n")

    def _metadata(self) -> list:
        found = [
            {"ph": "M", "name": "process_name", "pid": HOST_PID, "tid": 0, "args": {"name": "host"}},
            {"ph": "M", "name": "process_sort_index", "pid": HOST_PID, "tid": 0, "args": {"sort_index": 0}},
        ]
        for tid, name in self.threads:
            found.append({"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": tid, "args": {"name": name}})
            found.append({"ph": "M", "name": "thread_sort_index", "pid": HOST_PID, "tid": tid,
                          "args": {"sort_index": tid}})
        for device, soc in sorted(self.devices.items()):
            pid = DEVICE_PID + device
            found.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                          "args": {"name": "NPU %d (%s)" % (device, soc or self.soc)}})
            found.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                          "args": {"sort_index": 1 + device}})
        for rank, track in enumerate(sorted(self.streams.values(), key=lambda track: track.sort)):
            found.append({"ph": "M", "name": "thread_name", "pid": track.pid, "tid": track.tid,
                          "args": {"name": track.name}})
            found.append({"ph": "M", "name": "thread_sort_index", "pid": track.pid, "tid": track.tid,
                          "args": {"sort_index": rank}})  # streams in the order they were made
        return found

    def _json(self, event: tuple, origin: int) -> dict:
        kind = event[0]
        if kind == _CALL:
            _, tid, name, begin, end, values, positional, code, message = event
            args = {"arguments": self._arguments(name, values, positional), "return": code}
            if code:
                from .status import CODE_NAMES
                if code in CODE_NAMES:
                    args["status"] = CODE_NAMES[code]
                if message:
                    args["message"] = message
            ts, dur = _span(_ns(begin) - origin, _ns(end) - origin)
            return {"ph": "X", "cat": "api", "name": name, "pid": HOST_PID, "tid": tid,
                    "ts": ts, "dur": dur, "args": args}
        if kind == _TASK:
            _, pid, tid, name, category, start, finish, details, reads, written, site, host_begin, fault, marker = event
            start, duration = _ns(start), _ns(finish) - _ns(start)
            args = dict(details)
            if not marker:
                args["bytes_read"] = reads
                args["bytes_written"] = written
                args["measured_us"] = round(duration / 1000.0, 3)
            args["launch_site"] = str(site) if site is not None else "<unknown>"
            args["host_begin_us"] = _us(_ns(host_begin) - origin)
            if fault is not None:
                args["fault"] = fault
            ts, dur = _span(start - origin, start + duration - origin)
            return {"ph": "X", "cat": category, "name": name, "pid": pid, "tid": tid,
                    "ts": ts, "dur": dur, "args": args}
        if kind in (_FLOW_OUT, _FLOW_IN):
            _, pid, tid, at, slice_end, flow, category, name = event
            at = _ns(at)
            if slice_end is not None and _ns(slice_end) - at >= 2:
                at += 1  # just inside the slice it ends in, which begins at the same time
            found = {"ph": "s" if kind == _FLOW_OUT else "f", "cat": category, "name": name, "id": flow,
                     "pid": pid, "tid": tid, "ts": _us(at - origin)}
            if kind == _FLOW_IN:
                found["bp"] = "e"
            return found
        if kind == _REPORT:
            _, tid, at, report = event
            return {"ph": "i", "s": "g", "cat": "sanitizer", "name": "%s: %s" % (report.tool, report.kind),
                    "pid": HOST_PID, "tid": tid, "ts": _us(_ns(at) - origin),
                    "args": {"kind": report.kind, "tool": report.tool, "message": report.message,
                             "sites": ["%s at %s" % (role, site) for role, site in report.sites],
                             "resources": [str(resource) for resource in report.resources],
                             "count": report.count}}
        return {"ph": "i", "s": "g", "cat": "npuemu", "name": "trace limit reached: later events dropped",
                "pid": HOST_PID, "tid": 0, "ts": _us(_ns(event[1]) - origin), "args": {"limit": LIMIT}}

    def _other_data(self, count: int, first_time: float) -> dict:
        from . import __version__
        return {
            "generator": "npuemu %s" % __version__,
            "pid": os.getpid(),
            "argv": " ".join(sys.argv),
            "soc": self.soc,
            "execution": self.execution,
            "started": datetime.datetime.fromtimestamp(self.started).isoformat(timespec="milliseconds"),
            "time_origin_perf_counter_s": first_time,
            "events": count,
            "event_limit": LIMIT,
            "dropped_events": self.dropped,
            "report_limit": REPORT_LIMIT,
            "dropped_reports": self.dropped_reports,
        }


_trace: Optional[Trace] = None
_discarded = False  # discard(): this process traces nothing
_lock = threading.Lock()


def _new_file_beside(path: str) -> tuple:
    """(name, file open for writing) of a new file beside `path`, to be renamed onto it. Its name is
    unique by chance, not by the process id: processes in different PID namespaces (containers sharing a
    volume) have the same one, and two writers of one file must not write into one temporary file. It is
    made as open(path, "w") makes a file (0o666 less the umask), so the trace's mode is what it was."""
    while True:
        name = "%s.%s.tmp" % (path, secrets.token_hex(6))
        try:
            descriptor = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        return name, os.fdopen(descriptor, "w", encoding="utf-8")


def apply(config) -> None:
    """Follow the settings: start a trace for a new path, write the one in progress when its path
    changes or tracing stops. The same path again changes nothing."""
    with _lock:
        _follow(config.trace, config.soc, config.execution)


def _absolute(setting: str) -> str:
    """The file a setting names: `~` expanded, `%p` replaced by the process id, made absolute (a
    program that changes directory still writes where the setting said). A relative path while the
    current directory is deleted names no file: it stays relative, and Trace.write says so."""
    path = os.path.expanduser(setting.replace("%p", str(os.getpid())))
    try:
        return os.path.abspath(path)
    except OSError:  # os.getcwd(): the current directory was deleted
        return path


def _follow(setting: str, soc: Optional[str], execution: Optional[str]) -> None:
    global _trace
    if _discarded:
        return
    current = _trace
    if current is not None and setting and (setting == current.setting or _absolute(setting) == current.path):
        current.soc, current.execution = soc or current.soc, execution or current.execution
        return
    if current is not None:
        _stop(current)
        _trace = None
    if setting:
        _trace = Trace(_absolute(setting), setting, soc, execution)
        _attach(_trace)


def _attach(trace: Trace) -> None:
    hooks.attach("CALLS", trace, first=True)
    hooks.attach("MESSAGES", trace)
    hooks.attach("TASKS", trace)
    hooks.attach("REPORTS", trace)


def _stop(trace: Trace) -> None:
    _detach(trace)
    trace.close()
    trace.write()


def _detach(trace: Trace) -> None:
    for hook in ("CALLS", "MESSAGES", "TASKS", "REPORTS"):
        hooks.detach(hook, trace)


def discard() -> None:
    """This process is npuemu's own command (`npuemu`, the parent of `npuemu run`): it traces nothing and
    writes no file. It imports emulator, which follows NPUEMU_TRACE, and its empty trace, written at its
    exit, replaced the trace of the program it ran."""
    global _trace, _discarded
    with _lock:
        trace, _trace, _discarded = _trace, None, True  # and the settings, applied later, start none
    if trace is not None:
        _detach(trace)


def current() -> Optional[Trace]:
    """The trace being collected, or None."""
    return _trace


def _at_exit() -> None:
    """Registered when emulator is imported, after emulator.report's exit work and before the
    runtime's: so it runs after the leak report (whose findings it records) and before the summary
    (which may end the process with NPUEMU_SANITIZE_EXITCODE). A trace that recorded nothing is not
    written: the process never used npuemu (pytest, which imports it to load the plugin, a forked
    child that does not call it), and its empty file would replace the trace of the program it ran."""
    global _trace
    with _lock:
        trace, _trace = _trace, None
    if trace is None:
        return
    if trace.is_empty():
        _detach(trace)
    else:
        _stop(trace)


def _forked() -> None:
    """In a child made by fork: the parent's trace (its events, its file) is the parent's. The child
    records its own, for the same setting (`%p`: its own file), written at its exit if it recorded
    anything: the child's exit wrote the parent's events to the parent's file, which the parent then
    overwrote."""
    global _trace, _lock
    _lock = threading.Lock()  # a thread of the parent may have held it at the fork: it never releases it here
    parent = _trace
    if parent is None:
        return
    _detach(parent)
    path = _absolute(parent.setting) if "%p" in parent.setting else parent.path
    _trace = Trace(path, parent.setting, parent.soc, parent.execution)
    _attach(_trace)


atexit.register(_at_exit)
os.register_at_fork(after_in_child=_forked)

# NPUEMU_TRACE is followed from the start, before the settings are first read (when a device is
# first set): aclInit and the first calls are in the trace too. The settings confirm it (or, with
# emulator.configure(trace=...), change it) when they are applied.
if os.environ.get("NPUEMU_TRACE"):
    _follow(os.environ["NPUEMU_TRACE"], None, None)
