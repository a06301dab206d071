"""Callbacks: host functions that a stream calls when its work reaches them (aclrtLaunchCallback).

As on the card, a callback does not run on the stream: a host thread subscribes to the stream
(aclrtSubscribeReport) and runs the stream's callbacks when it calls aclrtProcessReport. A blocking
callback (ACL_CALLBACK_BLOCK) holds the stream until the subscribed thread has run it; a non-blocking
one lets the stream go on at once. A query, which never blocks, hands a callback over and leaves the
stream at it (HandOver.ready).
"""
from __future__ import annotations

import queue
import sys
import threading
import time
import traceback
from typing import Any, Callable, Optional

from . import status
from .errors import AclError
from .sanitizer import TRACKER
from .sites import Site
from .stream import Stream, Task, wait_unlocked


_lock = threading.Lock()
_reports: dict[int, "queue.Queue[Call]"] = {}   # per subscribed host thread: callbacks waiting to run
_subscribed: dict[int, set] = {}                # per subscribed host thread: the streams it serves


class Call:
    """One callback the stream has reached, waiting for its thread's aclrtProcessReport. `seen`: the
    sanitizer's clock of the work queued before it on the stream (None when it does not track order),
    which the callback's own runtime calls come after; `lock`: the runtime's."""

    def __init__(self, fn: Callable[[Any], None], user_data: Any, seen: Optional[dict] = None,
                 lock: Optional[threading.RLock] = None, holds: Optional[int] = None):
        self.fn, self.user_data, self.seen, self.lock = fn, user_data, seen, lock
        self.holds = holds  # the stream a blocking callback holds, when the sanitizer tracks order
        self.done = threading.Event()

    def run(self) -> None:
        if self.seen is not None:
            with self.lock:
                TRACKER.host_saw_clock(self.seen)
                if self.holds is not None:
                    TRACKER.hold(self.holds, self.seen[self.holds])
                    TRACKER.callback_starts(self.holds, self.seen[self.holds])
        try:
            self.fn(self.user_data)
        except Exception:  # the program's own code: report it as Python reports a failing thread
            sys.stderr.write("npuemu: the callback %r raised:\n%s" % (self.fn, traceback.format_exc()))
        finally:
            if self.holds is not None and self.seen is not None:
                TRACKER.hold(None)
                with self.lock:
                    TRACKER.callback_returned(self.holds, self.seen[self.holds])
            self.done.set()


def subscribe(thread_id: int, stream: Stream) -> None:
    """aclrtSubscribeReport: `thread_id` runs the callbacks of `stream`; a stream has one such thread."""
    if stream.subscriber is not None:
        raise AclError(status.ACL_ERROR_REPEAT_SUBSCRIBE,
                       "stream: expected a stream no thread is subscribed to, found stream %s subscribed by "
                       "thread %d" % (stream.describe(), stream.subscriber))
    stream.subscriber = thread_id
    with _lock:
        _reports.setdefault(thread_id, queue.Queue())
        _subscribed.setdefault(thread_id, set()).add(stream)


def unsubscribe(thread_id: int, stream: Stream) -> None:
    """aclrtUnSubscribeReport."""
    if stream.subscriber != thread_id:
        raise AclError(status.ACL_ERROR_STREAM_NOT_SUBSCRIBE,
                       "stream: expected a stream subscribed by thread %d, found stream %s subscribed by %s"
                       % (thread_id, stream.describe(),
                          "no thread" if stream.subscriber is None else "thread %d" % stream.subscriber))
    stream.subscriber = None
    with _lock:
        streams = _subscribed[thread_id]
        streams.discard(stream)
        if not streams:  # the thread serves no stream any more: aclrtProcessReport is 100035 again
            del _subscribed[thread_id], _reports[thread_id]


def launch(stream: Stream, fn: Callable[[Any], None], user_data: Any, block: bool, timeout: Optional[float],
           lock: threading.RLock, site: Optional[Site] = None) -> Task:
    """The task of aclrtLaunchCallback (its run: a HandOver)."""
    if stream.subscriber is None:
        raise AclError(status.ACL_ERROR_STREAM_NOT_SUBSCRIBE,
                       "stream: expected a stream a thread subscribed to with aclrtSubscribeReport, found stream %s "
                       "with none" % stream.describe())
    return Task("aclrtLaunchCallback(%s)" % getattr(fn, "__name__", repr(fn)),
                HandOver(stream, fn, user_data, block, timeout, lock), site)


class HandOver:
    """The run of a callback's task: the stream has reached the callback, which goes to the thread
    subscribed to the stream. A blocking one then waits until that thread has run it, with the runtime's
    `lock` released (the callback may call the runtime), for at most `timeout` seconds (the task timeout).

    `ready()` serves a call that must not wait (a query, eager execution, emulator.stream): it hands the
    callback over once and says whether the stream may go past it; the stream stays at it until it has
    run, and a later run() finds it done without waiting."""

    resumable = True  # interrupted (Ctrl-C) while it waits, it can wait again: it stays queued (Stream._execute)

    def __init__(self, stream: Stream, fn: Callable[[Any], None], user_data: Any, block: bool,
                 timeout: Optional[float], lock: threading.RLock):
        self.stream, self.fn, self.user_data, self.block = stream, fn, user_data, block
        self.timeout, self.lock = timeout, lock
        self.call: Optional[Call] = None
        self.thread_id: Optional[int] = None
        self.seen: Optional[dict] = None  # set by aclrtLaunchCallback when the sanitizer tracks order

    def ready(self) -> bool:
        """Whether the stream can go past the callback now; never raises (run() reports what went wrong)."""
        if self.call is None and self._reports() is None:
            return True  # no thread to hand it to: run() makes that the task's fault
        self._hand_over()
        return not self.block or self.call.done.is_set()

    def __call__(self) -> None:
        self._hand_over()
        if self.block and not self.call.done.is_set():
            self._wait()

    def wait_until(self, deadline: float) -> bool:
        """For a synchronisation with a timeout: wait as run() would, but only until `deadline`
        (time.perf_counter seconds); whether the stream can go past the callback now (False: the deadline
        came first, and the synchronisation times out with the callback still queued)."""
        self._hand_over()
        if not self.block or self.call.done.is_set() or self.thread_id == threading.get_ident():
            return True  # nothing to wait for, or nothing that waiting could bring: run() tells which
        if self.timeout is not None and time.perf_counter() + self.timeout <= deadline:
            return True  # the task timeout comes first: run() waits for it, and faults if it passes
        self._wait(until=deadline)
        return self.call.done.is_set()

    def _reports(self) -> "Optional[queue.Queue[Call]]":
        """The callbacks waiting for the stream's subscribed thread now (None: no thread serves it)."""
        thread_id = self.stream.subscriber
        with _lock:
            return _reports.get(thread_id) if thread_id is not None else None

    def _hand_over(self) -> None:
        if self.call is not None:
            return  # handed over already (by a query): once only
        reports = self._reports()
        if reports is None:
            raise TimeoutError("no thread is subscribed to the stream any more (aclrtUnSubscribeReport before the "
                               "stream reached the callback), so nothing can ever run it")
        self.thread_id, self.call = self.stream.subscriber, Call(self.fn, self.user_data, self.seen, self.lock,
                                                                 self.stream.handle if self.block else None)
        reports.put(self.call)

    def _wait(self, until: Optional[float] = None) -> None:
        """Until the callback has run, for at most the task timeout (then TimeoutError: the task's fault),
        or until `until` if that comes first (time.perf_counter seconds: a synchronisation's deadline;
        then no fault)."""
        if self.thread_id == threading.get_ident():
            raise TimeoutError("it waits for thread %d, the thread synchronising, which therefore can never call "
                               "aclrtProcessReport (a deadlock on the card)" % self.thread_id)
        deadline = None if self.timeout is None else time.perf_counter() + self.timeout
        stop = deadline if until is None else until if deadline is None else min(deadline, until)
        running, TRACKER.running = TRACKER.running, None  # meanwhile other threads' calls are not this task's
        try:
            wait_unlocked(self.lock, self.call.done.is_set, stop)
        finally:
            TRACKER.running = running
        if not self.call.done.is_set() and (until is None or stop != until):
            raise TimeoutError("the blocking callback %r was not processed within %g s by thread %d"
                               % (self.fn, self.timeout, self.thread_id))


def process_report(thread_id: int, timeout: Optional[float]) -> None:
    """aclrtProcessReport on thread `thread_id`: run the next callback that reached it, waiting at most
    `timeout` seconds (None: forever). 100035 if the thread subscribed to no stream, 100036 on expiry."""
    with _lock:
        reports = _reports.get(thread_id)
        if reports is not None and not any(stream.alive for stream in _subscribed[thread_id]):
            del _subscribed[thread_id], _reports[thread_id]   # its streams were destroyed meanwhile
            reports = None
    if reports is None:
        raise AclError(status.ACL_ERROR_THREAD_NOT_SUBSCRIBE,
                       "thread: expected a thread subscribed to a stream with aclrtSubscribeReport, found thread %d "
                       "subscribed to none" % thread_id)
    try:
        call = reports.get(timeout=timeout)
    except queue.Empty:
        raise AclError(status.ACL_ERROR_WAIT_CALLBACK_TIMEOUT,
                       "timeout: expected a callback within %g ms, found none" % (timeout * 1000.0)) from None
    call.run()
