"""Callbacks: host functions that a stream calls when its work reaches them (aclrtLaunchCallback).

As on the card, a callback does not run on the stream: a host thread subscribes to the stream
(aclrtSubscribeReport) and runs the stream's callbacks when it calls aclrtProcessReport. A blocking
callback (ACL_CALLBACK_BLOCK) holds the stream until the subscribed thread has run it; a non-blocking
one lets the stream go on at once. A query, which never blocks, hands a callback over and leaves the
stream at it (HandOver.ready). On the card the stream reaches its callbacks by itself: so here
aclrtProcessReport runs the work of its thread's streams up to their callbacks, as a query would.
"""
from __future__ import annotations

import collections
import os
import sys
import threading
import time
import traceback
from typing import Any, Callable, Optional

from . import status
from .errors import AclError, calls_in_progress_restored, calls_in_progress_set_aside, raised_by_signal_handler
from .sanitizer import TRACKER
from .sites import Site
from .stream import Stream, Task, wait_unlocked, wake_waiters

# Where a callback of the program, in Python, starts and ends: the C toolkit that a Python program loaded
# keeps the frames of the calls in progress (toolkit/npuemu_toolkit/adapters.py), and the C functions
# such a callback calls have theirs below the call that runs it. Nothing elsewhere.
_program_code_starts: Callable[[], Any] = lambda: None
_program_code_ends: Callable[[Any], Any] = lambda mark: None


def watch_program_code(starts: Callable[[], Any], ends: Callable[[Any], Any]) -> None:
    """`starts()` as a callback starts, `ends(what it returned)` as it ends."""
    global _program_code_starts, _program_code_ends
    _program_code_starts, _program_code_ends = starts, ends


DRIVE_EVERY = 0.01  # seconds between two runs of a waiting aclrtProcessReport's streams up to their callbacks
UNSUBSCRIBED, DROPPED = "unsubscribed", "dropped"  # why a handed-over callback was taken back (Call.taken_back)

_lock = threading.Lock()
_changed = threading.Condition(_lock)  # notified when a callback is handed over or launched
_threads: dict[int, "Reports"] = {}    # per subscribed host thread: what it serves
_launched: dict[Stream, "collections.deque[Task]"] = {}  # per stream: its callback tasks, in stream order


class Reports:
    """What one subscribed host thread serves: its streams, and the callbacks the streams handed to it,
    waiting for its aclrtProcessReport."""

    def __init__(self):
        self.streams: set = set()
        self.calls: collections.deque[Call] = collections.deque()


class Call:
    """One callback the stream has reached, waiting for its thread's aclrtProcessReport. `seen`: the
    sanitizer's clock of the work queued before it on the stream (None when it does not track order),
    which the callback's own runtime calls come after; `lock`: the runtime's. `taken_back`: why the
    thread will never run it, if so (UNSUBSCRIBED: it unsubscribed from the stream first; DROPPED:
    aclrtDestroyStreamForce dropped the stream's work)."""

    def __init__(self, stream: Stream, fn: Callable[[Any], None], user_data: Any, seen: Optional[dict] = None,
                 lock: Optional[threading.RLock] = None, holds: Optional[int] = None):
        self.stream, self.fn, self.user_data, self.seen, self.lock = stream, fn, user_data, seen, lock
        self.holds = holds  # the stream a blocking callback holds, when the sanitizer tracks order
        self.done = threading.Event()
        self.started = False  # set by its thread's aclrtProcessReport as it starts running it
        self.ended: Optional[float] = None  # when it returned (time.perf_counter seconds): the stream's time
        self.taken_back: Optional[str] = None

    def run(self) -> None:
        self.started = True
        if self.seen is not None:
            with self.lock:
                TRACKER.host_saw_clock(self.seen)
                if self.holds is not None:
                    TRACKER.hold(self.holds, self.seen[self.holds])
                    TRACKER.callback_starts(self.holds, self.seen[self.holds])
        outer = calls_in_progress_set_aside()  # the program's code: its calls are no signal handler's
        mark = _program_code_starts()
        try:
            self.fn(self.user_data)
        except Exception as error:  # the program's own code: report it as Python reports a failing thread
            if raised_by_signal_handler(error):
                raise  # the program stops itself (a signal handler's time limit), as with Ctrl-C
            sys.stderr.write("npuemu: the callback %r raised:\n%s" % (self.fn, traceback.format_exc()))
        finally:
            _program_code_ends(mark)
            calls_in_progress_restored(outer)
            if self.holds is not None and self.seen is not None:
                TRACKER.hold(None)
                with self.lock:
                    TRACKER.callback_returned(self.holds, self.seen[self.holds])
            self.ended = time.perf_counter()
            self.done.set()
            if self.lock is not None:  # the stream's synchronisation waits for it (HandOver._wait)
                wake_waiters(self.lock)


def subscribe(thread_id: int, stream: Stream) -> None:
    """aclrtSubscribeReport: `thread_id` runs the callbacks of `stream`; a stream has one such thread."""
    if stream.subscriber is not None:
        raise AclError(status.ACL_ERROR_REPEAT_SUBSCRIBE,
                       "stream: expected a stream no thread is subscribed to, found stream %s subscribed by "
                       "thread %d" % (stream.describe(), stream.subscriber))
    stream.subscriber = thread_id
    with _lock:
        _threads.setdefault(thread_id, Reports()).streams.add(stream)
        _changed.notify_all()


def unsubscribe(thread_id: int, stream: Stream) -> None:
    """aclrtUnSubscribeReport. The stream's callbacks handed to the thread that it has not started are taken
    back: the stream's synchronisation then finds no thread to run them, at once (docs/runtime.md)."""
    if stream.subscriber != thread_id:
        raise AclError(status.ACL_ERROR_STREAM_NOT_SUBSCRIBE,
                       "stream: expected a stream subscribed by thread %d, found stream %s subscribed by %s"
                       % (thread_id, stream.describe(),
                          "no thread" if stream.subscriber is None else "thread %d" % stream.subscriber))
    stream.subscriber = None
    with _lock:
        reports = _threads[thread_id]
        reports.streams.discard(stream)
        _take_back(reports, stream, UNSUBSCRIBED)
        _forget_run_callbacks(stream)
        if not reports.streams:  # the thread serves no stream any more: aclrtProcessReport is 100035 again
            del _threads[thread_id]
        _changed.notify_all()


def drop(stream: Stream) -> None:
    """aclrtDestroyStreamForce: the stream's work is dropped, so are its callbacks handed over and not started
    (a synchronisation waiting for one returns)."""
    with _lock:
        for reports in _threads.values():
            _take_back(reports, stream, DROPPED)
        _changed.notify_all()
        _launched.pop(stream, None)


def forget(stream: Stream) -> None:
    """The stream is gone (destroyed, or released by a reset or a context destroyed): its thread serves it
    no longer, so that a thread serving stream after stream, each destroyed while subscribed, keeps none of
    them. A thread left with no stream and no callback handed to it serves nothing: aclrtProcessReport is
    100035 (its callbacks of a gone stream, if any, are taken back there, _serving)."""
    with _lock:
        _launched.pop(stream, None)
        reports = _threads.get(stream.subscriber)
        if reports is not None:
            reports.streams.discard(stream)
            if not reports.streams and not reports.calls:
                del _threads[stream.subscriber]
        _changed.notify_all()


def _take_back(reports: Reports, stream: Stream, why: str) -> None:
    """The callbacks of `stream` waiting for the thread of `reports` never run there (under _lock)."""
    kept = collections.deque()
    for call in reports.calls:
        if call.stream is stream:
            call.taken_back = why
        else:
            kept.append(call)
    reports.calls = kept


def launch(stream: Stream, fn: Callable[[Any], None], user_data: Any, block: bool, timeout: Optional[float],
           lock: threading.RLock, site: Optional[Site] = None) -> Task:
    """The task of aclrtLaunchCallback (its run: a HandOver); `launched(task)` once it is queued."""
    if stream.subscriber is None:
        raise AclError(status.ACL_ERROR_STREAM_NOT_SUBSCRIBE,
                       "stream: expected a stream a thread subscribed to with aclrtSubscribeReport, found stream %s "
                       "with none" % stream.describe())
    return Task("aclrtLaunchCallback(%s)" % getattr(fn, "__name__", repr(fn)),
                HandOver(stream, fn, user_data, block, timeout, lock), site)


def launched(task: Task) -> None:
    """The callback's task is queued on its stream: the stream's thread runs the stream up to it in
    aclrtProcessReport (a callback already run, eagerly, needs nothing)."""
    if task.done:
        return
    with _lock:
        _forget_run_callbacks(task.stream)
        _launched.setdefault(task.stream, collections.deque()).append(task)
        _changed.notify_all()


def _forget_run_callbacks(stream: Stream) -> None:
    """Forget the stream's callback tasks that have run (under _lock): all of them, usually, by the time
    it is unsubscribed, so that a stream's entry goes with its last callback."""
    pending = _launched.get(stream)
    while pending and pending[0].done:
        pending.popleft()
    if pending is not None and not pending:
        del _launched[stream]


class HandOver:
    """The run of a callback's task: the stream has reached the callback, which goes to the thread
    subscribed to the stream. A blocking one then waits until that thread has run it, with the runtime's
    `lock` released (the callback may call the runtime), for at most `timeout` seconds (the task timeout).

    `ready()` serves a call that must not wait (a query, eager execution, aclrtProcessReport,
    emulator.stream): it hands the callback over once and says whether the stream may go past it; the
    stream stays at it until it has run, and a later run() finds it done without waiting. A callback
    taken back by an unsubscribe goes to the thread subscribed when the stream is next run (none: the
    task's fault); one dropped by aclrtDestroyStreamForce never runs."""

    resumable = True  # interrupted (Ctrl-C) while it waits, it can wait again: it stays queued (Stream._execute)

    def __init__(self, stream: Stream, fn: Callable[[Any], None], user_data: Any, block: bool,
                 timeout: Optional[float], lock: threading.RLock):
        self.stream, self.fn, self.user_data, self.block = stream, fn, user_data, block
        self.timeout, self.lock = timeout, lock
        self.call: Optional[Call] = None
        self.thread_id: Optional[int] = None
        self.seen: Optional[dict] = None  # set by aclrtLaunchCallback when the sanitizer tracks order
        # when the stream reached the callback (time.perf_counter seconds; None: not yet), whichever call
        # ran the stream there: the task timeout and the task's duration count from then (see span())
        self.reached: Optional[float] = None

    def ready(self) -> bool:
        """Whether the stream can go past the callback now; never raises (run() reports what went wrong)."""
        if not self._handed():
            return True  # no thread to hand it to: run() makes that the task's fault
        return not self.block or self._over()

    def __call__(self) -> None:
        self._hand_over()
        while self.block and not self._over():
            self._wait()
            self._hand_over()  # taken back by an unsubscribe meanwhile: to the thread subscribed now, if any

    def wait_until(self, deadline: float) -> bool:
        """For a synchronisation with a timeout: wait as run() would, but only until `deadline`
        (time.perf_counter seconds); whether the stream can go past the callback now (False: the deadline
        came first, and the synchronisation times out with the callback still queued)."""
        while self._handed() and self.block and not self._over():
            if self.thread_id == threading.get_ident():
                return True  # nothing that waiting could bring: run() tells why
            if self.timeout is not None and self.reached + self.timeout <= deadline:
                return True  # the task timeout comes first: run() waits for it, and faults if it passes
            if not self._wait(until=deadline):
                return False
        return True

    def span(self, begin: float, end: float) -> tuple[float, float]:
        """When the task ran, for the stream's clock, the trace and the log, given the `begin` and `end` of
        the run that completed it: a blocking callback holds the stream from when the stream reached it
        until it returned, though its thread may have run it before this run (a query or the report
        thread's aclrtProcessReport reached it), or across timed-out synchronisations; a non-blocking
        one, only for its hand-over."""
        if not self.block or self.reached is None:
            return begin, end
        ended = self.call.ended if self.call is not None else None
        return self.reached, ended if ended is not None else end

    @property
    def holder(self) -> Optional[int]:
        """The thread this blocking callback was handed to, while it has not run: that thread waiting for the
        stream (or for work behind it) would wait for itself, whether it runs the callback now or would
        only take it at its next aclrtProcessReport (Stream._run)."""
        call = self.call
        if self.block and call is not None and call.taken_back is None and not call.done.is_set():
            return self.thread_id
        return None

    @property
    def running(self) -> bool:
        """Whether its thread has started running the callback (in aclrtProcessReport), not merely been
        handed it: which of the two a thread waiting for itself is in, for its message (Stream._run)."""
        return self.call is not None and self.call.started

    def _over(self) -> bool:
        """Whether the handed callback has run, or never will (dropped with its stream's work)."""
        return self.call.done.is_set() or self.call.taken_back == DROPPED

    def _handed(self) -> bool:
        """Hand the callback to the stream's subscribed thread, unless a thread holds it already (once only,
        but again after an unsubscribe took it back); whether one does."""
        if self.call is not None and self.call.taken_back != UNSUBSCRIBED:
            return True
        if self.reached is None:
            self.reached = time.perf_counter()
        with _lock:
            reports = _threads.get(self.stream.subscriber) if self.stream.subscriber is not None else None
            if reports is None:
                return False
            self.thread_id, self.call = self.stream.subscriber, Call(self.stream, self.fn, self.user_data, self.seen,
                                                                     self.lock, self.stream.handle if self.block else None)
            reports.calls.append(self.call)
            _changed.notify_all()
        return True

    def _hand_over(self) -> None:
        if not self._handed():
            raise TimeoutError("no thread is subscribed to the stream any more (aclrtUnSubscribeReport before the "
                               "stream reached the callback, or before its thread ran it), so nothing can ever run it")

    def _wait(self, until: Optional[float] = None) -> bool:
        """Until the callback has run or was taken back, for at most the task timeout from when the stream
        reached it (then TimeoutError: the task's fault; the synchronisations that timed out before count
        too), or until `until` if that comes first (time.perf_counter seconds: a synchronisation's
        deadline; then no fault, and False)."""
        if self.thread_id == threading.get_ident():
            raise TimeoutError("it waits for thread %d, the thread synchronising, which therefore can never call "
                               "aclrtProcessReport (a deadlock on the card)" % self.thread_id)
        call = self.call
        deadline = None if self.timeout is None else self.reached + self.timeout
        stop = deadline if until is None else until if deadline is None else min(deadline, until)
        running, TRACKER.running = TRACKER.running, None  # meanwhile other threads' calls are not this task's
        try:
            wait_unlocked(self.lock, lambda: call.done.is_set() or call.taken_back is not None, stop)
        finally:
            TRACKER.running = running
        if call.done.is_set() or call.taken_back is not None:
            return True
        if until is None or stop != until:
            raise TimeoutError("the blocking callback %r was not processed within %g s by thread %d"
                               % (self.fn, self.timeout, self.thread_id))
        return False


def process_report(thread_id: int, timeout: Optional[float]) -> None:
    """aclrtProcessReport on thread `thread_id`: run the next callback that reached it, waiting at most
    `timeout` seconds (None: forever). 100035 if the thread subscribed to no stream, 100036 on expiry.
    Meanwhile the thread's streams run up to their callbacks, as far as they can without waiting for
    another host thread (on the card a stream reaches its callbacks by itself). A `timeout` of 0 is a
    poll: the streams still run up to their callbacks, as the card's would have got there by themselves,
    and the answer comes after that without any wait."""
    deadline = None if timeout is None else time.perf_counter() + timeout
    while True:
        call = _next_call(thread_id, drive=True, deadline=deadline, poll=timeout == 0)
        if call is not None:
            break
        with _changed:
            reports = _serving(thread_id)
            if not reports.calls:  # nothing arrived since: wait for a hand-over, a launch, or the next round
                left = None if deadline is None else deadline - time.perf_counter()
                if left is not None and left <= 0:
                    raise AclError(status.ACL_ERROR_WAIT_CALLBACK_TIMEOUT,
                                   "timeout: expected a callback within %g ms, found none" % (timeout * 1000.0))
                _changed.wait(DRIVE_EVERY if left is None else min(left, DRIVE_EVERY))
    call.run()


def _next_call(thread_id: int, drive: bool, deadline: Optional[float], poll: bool = False) -> Optional[Call]:
    """The next callback handed to the thread, if any, after running its streams up to their callbacks
    (`drive`) when none is waiting. `poll`: aclrtProcessReport(0), see _drive."""
    with _lock:
        reports = _serving(thread_id)
        if reports.calls:
            return reports.calls.popleft()
        targets = _callbacks_ahead(reports)
    if not (drive and targets and _drive(targets, deadline, poll)):
        return None
    return _next_call(thread_id, drive=False, deadline=deadline)


def _serving(thread_id: int) -> Reports:
    """What the thread serves (under _lock); 100035 if it subscribed to no live stream."""
    reports = _threads.get(thread_id)
    if reports is not None and not any(stream.alive for stream in reports.streams):
        for call in reports.calls:  # its streams were destroyed meanwhile: their callbacks never run
            call.taken_back = DROPPED
        del _threads[thread_id]
        reports = None
    if reports is None:
        raise AclError(status.ACL_ERROR_THREAD_NOT_SUBSCRIBE,
                       "thread: expected a thread subscribed to a stream with aclrtSubscribeReport, found thread %d "
                       "subscribed to none" % thread_id)
    return reports


def _callbacks_ahead(reports: Reports) -> list:
    """The last callback task queued, not run yet, of each stream the thread serves (under _lock)."""
    targets = []
    for stream in reports.streams:
        pending = _launched.get(stream)
        if not pending:
            continue
        if pending[-1].done or not stream.alive:  # all of them ran (in stream order), or were dropped
            del _launched[stream]
            continue
        targets.append(pending[-1])
    return targets


def _drive(targets: list, deadline: Optional[float], poll: bool = False) -> bool:
    """Run each task's stream up to it, as far as it goes without waiting for another host thread (as a
    query does), with the runtime lock, if it can be had before `deadline` (or for DRIVE_EVERY). With a
    `poll` (aclrtProcessReport(0)) the work runs whole: its deadline, now, would stop it before its first
    task, and a loop of polls would never see a callback the card's stream reaches by itself; it still
    never waits, neither for the lock nor for another thread."""
    lock = targets[0].run.lock
    wait = DRIVE_EVERY if deadline is None else max(0.0, min(DRIVE_EVERY, deadline - time.perf_counter()))
    if not lock.acquire(timeout=wait):
        return False  # the runtime is busy (a long synchronisation): it runs these streams too
    try:
        for task in targets:
            if task.stream.alive and not task.done:  # within aclrtProcessReport's timeout, but for a poll
                task.stream.drain(upto=task, deadline=None if poll else deadline, wait=False)
    finally:
        lock.release()
    return True


def _forked() -> None:
    """In a child made by fork only the forking thread lives on. The locks are made again (a thread of the
    parent may have held one at the fork); a report thread of the parent is not in the child, so its
    subscriptions end there as if it had unsubscribed: a synchronisation that reaches one of their
    callbacks fails at once instead of waiting for a thread that will never call aclrtProcessReport."""
    global _lock, _changed
    _lock = threading.Lock()
    _changed = threading.Condition(_lock)
    here = threading.get_ident()
    for thread_id in [thread_id for thread_id in _threads if thread_id != here]:
        reports = _threads.pop(thread_id)
        for stream in reports.streams:
            stream.subscriber = None
            _take_back(reports, stream, UNSUBSCRIBED)


os.register_at_fork(after_in_child=_forked)
