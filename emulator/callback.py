"""Callbacks: host functions that a stream calls when its work reaches them (aclrtLaunchCallback).

As on the card, a callback does not run on the stream: a host thread subscribes to the stream
(aclrtSubscribeReport) and runs the stream's callbacks when it calls aclrtProcessReport. A blocking
callback (ACL_CALLBACK_BLOCK) holds the stream until the subscribed thread has run it; a non-blocking
one lets the stream go on at once.
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
from .sites import Site
from .stream import Stream, Task

POLL = 0.002  # seconds between looks at a blocking callback's completion (the runtime lock is free meanwhile)

_lock = threading.Lock()
_reports: dict[int, "queue.Queue[Call]"] = {}   # per subscribed host thread: callbacks waiting to run
_subscribed: dict[int, set] = {}                # per subscribed host thread: the streams it serves


class Call:
    """One callback the stream has reached, waiting for its thread's aclrtProcessReport."""

    def __init__(self, fn: Callable[[Any], None], user_data: Any):
        self.fn, self.user_data = fn, user_data
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.fn(self.user_data)
        except Exception:  # the program's own code: report it as Python reports a failing thread
            sys.stderr.write("npuemu: the callback %r raised:\n%s" % (self.fn, traceback.format_exc()))
        finally:
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
    """The task of aclrtLaunchCallback. A blocking callback waits for its thread with the runtime's
    `lock` released (the callback may call the runtime) for at most `timeout` seconds (the task timeout)."""
    if stream.subscriber is None:
        raise AclError(status.ACL_ERROR_STREAM_NOT_SUBSCRIBE,
                       "stream: expected a stream a thread subscribed to with aclrtSubscribeReport, found stream %s "
                       "with none" % stream.describe())

    def hand_over() -> None:
        thread_id = stream.subscriber  # the stream's thread when the stream reaches the callback
        with _lock:
            reports = _reports.get(thread_id) if thread_id is not None else None
        if reports is None:
            raise TimeoutError("no thread is subscribed to the stream any more (aclrtUnSubscribeReport before the "
                               "stream reached the callback), so nothing can ever run it")
        call = Call(fn, user_data)
        reports.put(call)
        if not block:
            return
        if thread_id == threading.get_ident():
            raise TimeoutError("it waits for thread %d, the thread synchronising, which therefore can never call "
                               "aclrtProcessReport (a deadlock on the card)" % thread_id)
        waiting = threading.Condition(lock)
        deadline = None if timeout is None else time.monotonic() + timeout
        with waiting:  # wait() releases the runtime lock however deeply it is held, and takes it back
            while not call.done.is_set() and (deadline is None or time.monotonic() < deadline):
                waiting.wait(POLL)
        if not call.done.is_set():
            raise TimeoutError("the blocking callback %r was not processed within %g s by thread %d"
                               % (fn, timeout, thread_id))

    return Task("aclrtLaunchCallback(%s)" % getattr(fn, "__name__", repr(fn)), hand_over, site)


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
