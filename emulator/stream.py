"""Streams: queues of device work that runs when the program synchronises, in stream order.

Nothing runs at enqueue time (unless NPUEMU_EXECUTION=eager). A synchronisation point drains a
stream; a wait on an event first drains the stream that recorded it, up to that record (and so on down
a chain of streams, kept as a list: a pipeline of thousands of streams does not recurse). A query
drains only as far as it can without waiting for another host thread (a blocking callback its thread
has not run yet): on the card a query never blocks. A report thread in aclrtProcessReport drains its
streams so, up to their callbacks (emulator.callback). Each
stream keeps a device clock: a task starts when both the stream is free and the host has issued
it, and lasts as long as it really took, so event timings are measured, never made up. A task that
fails leaves a `Fault` record on its stream (see emulator.faults) and the stream goes on.
"""
from __future__ import annotations

import collections
import os
import threading
import time
from typing import Callable, Optional, Sequence

from . import faults as faults_module
from . import hooks, memory, status
from .errors import AclError, raised_by_signal_handler
from .faults import Fault
from .resource import HANDLES, Resource
from .sanitizer import TRACKER
from .sites import Released, Site, user_site

_clock = time.perf_counter  # read three times per task: bound once
POLL = 0.002  # seconds between looks at what another thread is to do (the runtime lock is free meanwhile)
_STOPPED = object()  # what Stream._run answers when it stops with work left (deadline, or a task that would wait)


class Task:
    """One unit of stream work, with the user's site that launched it and the (address, nbytes)
    device ranges it reads and writes (for a checker of races). `run()` raises DeviceFault where
    the hardware would fault and TimeoutError when it runs past the task timeout."""

    __slots__ = ("name", "run", "issued_at", "done", "stream", "site", "_ranges", "_details", "resolves_itself")

    def __init__(self, name: str, run: Optional[Callable[[], None]], site: Optional[Site] = None,
                 reads: Sequence[tuple] = (), writes: Sequence[tuple] = (),
                 ranges: Optional[Callable[[], tuple]] = None, details: Optional[Callable[[], dict]] = None):
        self.name = name
        self._details = details
        self.resolves_itself = False  # whether run() tells the sanitizer what it reads and writes itself
        self.run = run
        self.site = site if site is not None else user_site()
        # (reads, writes), or what makes them when first asked: most launches are never asked
        self._ranges = ranges if ranges is not None else (reads, writes)
        self.issued_at = _clock()
        self.done = False
        self.stream: Optional["Stream"] = None

    def ranges(self) -> tuple:
        """(reads, writes): the (address, nbytes) device ranges the task reads and writes."""
        if callable(self._ranges):
            self._ranges = self._ranges()
        return self._ranges

    def details(self) -> dict:
        """What the task works on, for tools (the trace): e.g. each tensor's dtype and shape."""
        return self._details() if self._details is not None else {}

    @property
    def reads(self) -> Sequence[tuple]:
        return self.ranges()[0]

    @property
    def writes(self) -> Sequence[tuple]:
        return self.ranges()[1]


class RecordTask(Task):
    """aclrtRecordEvent: completes the event and stamps it with the stream's device time. `previous` is the
    record the event had before this one (kept while this one is pending): if aclrtDestroyStreamForce
    drops this one, the event is as it was before it (docs/runtime.md)."""

    __slots__ = ("timestamp", "event", "previous", "dropped", "order")

    def __init__(self, event, previous: Optional["RecordTask"]):
        super().__init__("aclrtRecordEvent(0x%x)" % event.handle, None)
        self.timestamp = 0.0
        self.event = event
        self.previous = previous
        self.dropped = False
        self.order: Optional[dict] = None  # the sanitizer's vector clock of the record (emulator.sanitizer)

    def standing(self) -> Optional["RecordTask"]:
        """The record that stands for this one: itself, or if it was dropped, the latest record before it
        that was not (None: the event had none)."""
        record = self
        while record is not None and record.dropped:
            record = record.previous
        return record


class WaitTask(Task):
    """aclrtStreamWaitEvent: the stream does not go past this point before `record` has run."""

    __slots__ = ("record",)

    def __init__(self, event_handle: int, record: Optional[RecordTask]):
        super().__init__("aclrtStreamWaitEvent(0x%x)" % event_handle, None)
        self.record = record

    def standing(self) -> Optional[RecordTask]:
        """The record the wait is for: a dropped record stands for the event as it was before it."""
        return self.record.standing() if self.record is not None else None

    def awaited(self) -> Optional[RecordTask]:
        """The record that must run before the wait can, if it has not yet."""
        record = self.standing()
        return record if record is not None and not record.done else None


def _waits_for_itself(stream: "Stream", task: Task) -> AclError:
    """107020 for a thread that would wait for `task`, a blocking callback handed to it: it is running it,
    or is to run it at its next aclrtProcessReport, which it cannot call while it waits; either way the
    stream never gets past it. The message says which of the two (HandOver.running)."""
    if getattr(task.run, "running", False):
        why = ("whose callback this thread is running: waiting for the stream from inside its own blocking "
               "callback never ends")
    else:
        why = ("whose callback the stream handed to this thread, which has not run it yet: the stream waits for "
               "this thread's aclrtProcessReport, which it cannot call while it waits for the stream")
    return AclError(status.ACL_ERROR_RT_TASK_TIMEOUT,
                    "stream: expected a stream this thread does not hold, found stream %s held by %s, %s (the card "
                    "would hang)" % (stream.describe(), task.name, why))


_waiting: dict = {}  # a runtime lock -> the Condition on it that wait_unlocked waits on (one lock, in practice)


def _waiting_on(lock) -> threading.Condition:
    waiting = _waiting.get(lock)
    return waiting if waiting is not None else _waiting.setdefault(lock, threading.Condition(lock))


def wait_unlocked(lock, done: Callable[[], bool], stop: Optional[float]) -> None:
    """Until done() (another thread's doing) or time.perf_counter() passes `stop` (None: no end), with the
    runtime `lock` released meanwhile however deeply this thread holds it (the other thread may need the
    runtime), and taken back. It looks again when woken (`wake_waiters`, once what it waits for is done),
    and every POLL seconds for what nobody wakes it for."""
    waiting = _waiting_on(lock)
    with waiting:
        while not done() and (stop is None or _clock() < stop):
            waiting.wait(POLL)


def wake_waiters(lock) -> None:
    """The threads in wait_unlocked on `lock` look at what they wait for now, not at their next poll (a
    blocking callback ended: each poll cost its synchronisation up to 2 ms). Takes `lock`, re-entrantly."""
    waiting = _waiting_on(lock)
    with waiting:
        waiting.notify_all()


def compute_unlocked(lock, kernel: Callable[..., None], args: Sequence, touched: Sequence[tuple]) -> None:
    """Run `kernel(*args)`, the native compute of the task this thread is running (a kernel's, or the moving
    of a queued copy's or memset's bytes: it touches the host memory `touched`, (address, nbytes) pairs
    resolved before, and no runtime state), with the runtime `lock` released however deeply this thread
    holds it, so that the other threads' calls go on meanwhile (docs/runtime.md, "Host threads"). The
    task's stream stays busy: another drain of it waits for the task, a query stops before it
    (Stream._wait_while_busy). A free of the memory meanwhile unmaps it only once the task has ended
    (memory.in_use). The running task's sanitizer state is set aside (another thread's
    task may run meanwhile) and put back with the lock taken back; all but the kernel runs under the lock.
    (The kernel and its arguments come apart, not as one functools.partial: this runs for every kernel,
    and each object made here is a cost of every launch.)"""
    task = TRACKER.running
    stream = task.stream if task is not None else None
    if stream is None or stream.busy is not task or not lock._is_owned():
        kernel(*args)  # not a stream's task (nothing else waits for it)
        return
    memory.in_use(touched)
    written = TRACKER.written_by_running
    TRACKER.running, TRACKER.written_by_running = None, []
    stream.released = lock
    state = lock._release_save()
    try:
        kernel(*args)
    finally:
        try:
            lock._acquire_restore(state)
        finally:  # a Ctrl-C that came while this waited for the lock is raised as it returns: still done
            TRACKER.running, TRACKER.written_by_running = task, written
            memory.no_longer_in_use(touched)


def _ready(task: Task) -> bool:
    """Whether `task` can run without waiting for another host thread. A run that may wait says so by a
    `ready()` of its own (a blocking callback's, emulator.callback, which hands the callback over), and
    waits for at most a synchronisation's deadline with `wait_until(deadline)`."""
    ready = getattr(task.run, "ready", None)
    return ready is None or ready()


class Stream(Resource):
    """A stream of a context; the default stream of each context comes with it and goes with it."""

    kind = "stream"

    def __init__(self, context, is_default: bool = False, priority: int = 0, flags: int = 0,
                 site: Optional[Site] = None):
        self.context = context
        self.device_id: int = context.device.id  # a stream never changes device; read on every launch
        self.is_default = is_default
        self.priority, self.flags = priority, flags
        self.queue: collections.deque[Task] = collections.deque()
        self.clock = 0.0                 # device time (perf_counter seconds) at which the stream is free
        self.faults: list[Fault] = []    # not yet reported by a synchronising call
        self.subscriber: Optional[int] = None  # the host thread that runs its callbacks (aclrtSubscribeReport)
        self.busy: Optional[Task] = None  # the task a thread is running (see _wait_while_busy)
        self.released = None  # the runtime lock, while the busy task runs with it released (compute_unlocked)
        self.waiting = 0      # the threads waiting for the busy task to end (_wait_while_busy)
        super().__init__(site)
        if is_default:
            self.leak_checked = False  # released with its context, never by the program

    def describe(self) -> str:
        if self.is_default:
            return "0x%x (the default stream of device %d)" % (self.handle, self.device_id)
        return "0x%x of device %d" % (self.handle, self.device_id)

    # -- work ---------------------------------------------------------------------------------

    def enqueue(self, task: Task, eager: bool = False) -> None:
        """Queue work; `eager` (NPUEMU_EXECUTION=eager) runs it at once, as far as the stream can go without
        waiting for another host thread (faults surface at the next sync)."""
        task.stream = self
        if TRACKER.hazards:
            TRACKER.enqueued(self, task)
        for observer in hooks.TASKS:
            observer.enqueued(self, task)
        self.queue.append(task)
        if eager:
            self.drain(wait=False)

    def drain(self, upto: Optional[Task] = None, deadline: Optional[float] = None, wait: bool = True) -> bool:
        """Run queued work in order, up to and including `upto` (everything if None). A wait on an event
        first runs the stream that recorded it up to the record: the streams being run are a list, the
        innermost last, never a recursion (a pipeline of streams chained by events may be thousands
        long). With a `deadline` (perf_counter seconds), stop before a task that would start after it;
        without `wait` (a query, eager execution), stop before a task that would wait for another host
        thread. False if it stopped with work left."""
        chain: list[tuple] = [(self, upto)]
        while chain:
            stream, target = chain[-1]
            needed = stream._run(target, deadline, wait)
            if needed is None:
                chain.pop()
            elif needed is _STOPPED:
                return False
            else:
                chain.append((needed.stream, needed))
        return True

    def _run(self, upto: Optional[Task], deadline: Optional[float], wait: bool):
        """The tasks of this stream alone, as `drain` runs them: None once `upto` (or everything) has
        run, the record a wait at the head needs run first, or _STOPPED."""
        if upto is not None and upto.done:
            return None
        queue = self.queue
        while queue or self.busy is not None:  # a task another thread is inside is work left too
            if deadline is not None and _clock() > deadline:
                return _STOPPED
            if self.busy is not None:
                if not self._wait_while_busy(deadline, wait):
                    return _STOPPED
                if upto is not None and upto.done:
                    return None  # the other thread ran it meanwhile
                continue  # and perhaps more: look at the queue again
            task = queue[0]  # left in the queue until it runs: a wait stays at the head while its record runs
            holder = getattr(task.run, "holder", None)  # a blocking callback's thread, while it holds the stream
            if holder is not None and wait and holder == threading.get_ident():
                raise _waits_for_itself(self, task)  # it stays queued: the work behind it still waits
            if task.run is None:
                if task.__class__ is WaitTask:
                    record = task.awaited()
                    if record is not None:
                        return record
            elif (not wait or deadline is not None) and not _ready(task):
                # a synchronisation with a timeout waits for the other thread only until its deadline
                if not wait or not task.run.wait_until(deadline):
                    return _STOPPED
                if not queue or queue[0] is not task:  # meanwhile another thread took it (a report thread's
                    if upto is not None and upto.done:  # aclrtProcessReport): popping now would drop the next
                        return None
                    continue
            queue.popleft()
            self._execute(task)
            if task is upto:
                return None
        return None

    def _wait_while_busy(self, deadline: Optional[float], wait: bool) -> bool:
        """Whether the stream is free: another thread is inside one of its tasks with the runtime lock
        released (a kernel's native compute, a queued copy's bytes, or a blocking callback's wait), and
        nothing behind that task may run before it ends (another thread's query or synchronisation ran
        them early). A query does not wait; a synchronisation waits, the lock released, until the task
        ends or the deadline passes. The callback's own thread waiting here would wait for itself: an
        error, as the card would hang."""
        busy = self.busy
        if not wait:
            return False
        if getattr(busy.run, "holder", None) == threading.get_ident():
            raise _waits_for_itself(self, busy)
        self.waiting += 1
        try:
            wait_unlocked(self.released or busy.run.lock, lambda: self.busy is not busy, deadline)
        finally:
            self.waiting -= 1
        return self.busy is not busy

    def _execute(self, task: Task) -> None:
        start = max(self.clock, task.issued_at)
        run = task.run
        begin, end = _clock(), None
        if run is not None:  # work (the common case: records and waits have no run)
            checked = TRACKER.hazards
            if checked:
                TRACKER.task_running(task)
            TRACKER.running = task
            self.busy = task
            try:
                run()
                if checked:
                    TRACKER.task_ran(task)
            except BaseException as error:
                if isinstance(error, Exception) and not raised_by_signal_handler(error):
                    self._record_fault(task, error)  # a fault of the work, never of the stream: it goes on
                else:  # Ctrl-C, or another exception of a signal handler: the program stops itself
                    self._interrupted(task)
                    raise
            finally:
                TRACKER.running = None
                self.busy = None
                if self.released is not None:  # a task that let the lock go: another thread may wait for it
                    if self.waiting:
                        wake_waiters(self.released)
                    self.released = None
                elif getattr(run, "resumable", False):  # a blocking callback: the same
                    wake_waiters(run.lock)
            # When the task held its stream: from `begin` to now, but a blocking callback's, from when the
            # stream reached it until it returned (HandOver.span: its thread may have run it before, or
            # across synchronisations that timed out). Inline: a function here is a cost of every task.
            end = _clock()
            span = getattr(run, "span", None)
            if span is not None:
                begin, end = span(begin, end)
            start += end - begin
        elif isinstance(task, WaitTask):
            task.record = task.standing()  # the record it waited for: the trace draws its arrow from it
            if task.record is not None:  # it has run: drain ran it first
                start = max(start, task.record.timestamp)
        elif isinstance(task, RecordTask):
            task.timestamp = start
            task.previous = None  # a record that ran is never dropped: the chain behind it is not needed
        self.clock = start
        task.done = True
        for observer in hooks.TASKS:
            observer.executed(self, task, begin, _clock() if end is None else end)

    def _interrupted(self, task: Task) -> None:
        """A signal stopped `task` (Ctrl-C, or a signal handler that raised). Stopped while it waited for
        another host thread (a blocking callback), it still holds the stream: it goes back to the head, and
        the next call that runs the stream waits again. Any other task stays off the stream: it may have
        done part of its work, and running it again could apply an in-place update twice."""
        if getattr(task.run, "resumable", False) and self.alive:
            self.queue.appendleft(task)

    def _record_fault(self, task: Task, error: Exception) -> None:
        fault = faults_module.from_exception(error, task.name, "stream " + self.describe(), task.site)
        self.faults.append(fault)
        if TRACKER.memory:
            TRACKER.fault(fault)

    def forget_order(self, call: str, site: Optional[Site]) -> None:
        """The stream goes: work on it that the host never synchronised is reported (synccheck)."""
        if TRACKER.hazards:
            TRACKER.destroying_stream(self, call, site or user_site())

    def take_faults(self) -> list[Fault]:
        """The faults not reported yet; they are reported once."""
        taken, self.faults = self.faults, []
        return taken

    def synchronize(self, deadline: Optional[float] = None) -> None:
        """Run everything queued; AclError with the faults, or 507046 if the deadline passes first."""
        if not self.drain(deadline=deadline):
            raise AclError(status.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                           "timeout: expected stream %s to finish in time, found %d task(s) still queued"
                           % (self.describe(), len(self.queue)))
        if TRACKER.hazards:
            TRACKER.host_saw_stream(self)
        if self.faults:
            faults_module.raise_faults(self.take_faults())

    # -- lifecycle ------------------------------------------------------------------------------

    def destroy(self, site: Optional[Site] = None, force: bool = False) -> None:
        """aclrtDestroyStream: queued work runs first (its faults are reported here; a failure there, 107020
        for a thread holding the stream, changes nothing); with `force` (aclrtDestroyStreamForce) it is
        dropped instead. Then work the host never synchronised is reported (synccheck)."""
        if not force:
            self.drain()
        self.forget_order("aclrtDestroyStream%s" % ("Force" if force else ""), site)
        if force:
            self._drop_queue()
        self.release(site)
        del self.context.streams[self]
        self._leave_subscriber()
        faults_module.raise_faults(self.take_faults())

    def orphan(self, released: Released) -> None:
        """Released by a reset or a context destroyed (a leak): gone for its report thread too."""
        super().orphan(released)
        self._leave_subscriber()

    def _leave_subscriber(self) -> None:
        """The stream is gone: the thread subscribed to it serves it no longer (docs/runtime.md)."""
        if self.subscriber is not None:
            from . import callback  # which imports this module
            callback.forget(self)

    def _drop_queue(self) -> None:
        """aclrtDestroyStreamForce: the queued work never runs. An event whose latest record is among it
        is as it was before that record, so that every event call agrees on it (docs/runtime.md)."""
        records = [task for task in self.queue if isinstance(task, RecordTask)]
        self.queue.clear()
        for record in records:  # all marked first: an event falls back past every record dropped here
            record.dropped = True
        for record in records:
            record.event.record_dropped(record)


def _forked() -> None:
    """In a child made by fork, only the forking thread lives on. A task another thread of the parent was
    running at the fork (a kernel mid-way, a blocking callback waited for) never ends in the child: it is
    off its stream already, its output as it was at the fork, and the stream goes on with the work queued
    behind it (docs/runtime.md). The waits on the runtime lock are the parent's threads' (state.py frees
    the lock itself)."""
    for waiting in _waiting.values():
        waiting._at_fork_reinit()  # no waiter is in the child; the same objects stay in use (Python 3.9+)
    for resource in HANDLES.live_resources():
        if isinstance(resource, Stream):
            resource.busy = resource.released = None
    TRACKER.running = None


os.register_at_fork(after_in_child=_forked)
