"""Streams: queues of device work that runs when the program synchronises, in stream order.

Nothing runs at enqueue time (unless NPUEMU_EXECUTION=eager). A synchronisation point drains a
stream; a wait on an event first drains the stream that recorded it, up to that record. Each
stream keeps a device clock: a task starts when both the stream is free and the host has issued
it, and lasts as long as it really took, so event timings are measured, never made up.
"""
from __future__ import annotations

import collections
import time
from typing import Callable, Optional

from .memory import DeviceFault


class Task:
    """One unit of stream work. `run()` raises DeviceFault when the hardware would fault."""

    __slots__ = ("name", "run", "issued_at", "done", "stream")

    def __init__(self, name: str, run: Optional[Callable[[], None]]):
        self.name = name
        self.run = run
        self.issued_at = time.perf_counter()
        self.done = False
        self.stream: Optional["Stream"] = None


class RecordTask(Task):
    """aclrtRecordEvent: completes the event and stamps it with the stream's device time."""

    __slots__ = ("timestamp",)

    def __init__(self, event_handle: int):
        super().__init__("aclrtRecordEvent(0x%x)" % event_handle, None)
        self.timestamp = 0.0


class WaitTask(Task):
    """aclrtStreamWaitEvent: the stream does not go past this point before `record` has run."""

    __slots__ = ("record",)

    def __init__(self, event_handle: int, record: Optional[RecordTask]):
        super().__init__("aclrtStreamWaitEvent(0x%x)" % event_handle, None)
        self.record = record


class Stream:
    def __init__(self, handle: int, context, is_default: bool, site: str):
        self.handle = handle
        self.context = context
        self.is_default = is_default
        self.site = site
        self.queue: collections.deque[Task] = collections.deque()
        self.clock = 0.0                  # device time (perf_counter seconds) at which the stream is free
        self.fault: Optional[str] = None  # first fault not yet reported by a synchronising call
        self.alive = True

    @property
    def device_id(self) -> int:
        return self.context.device.id

    def describe(self) -> str:
        kind = "default stream" if self.is_default else "stream 0x%x" % self.handle
        return "%s of device %d" % (kind, self.device_id)

    def enqueue(self, task: Task) -> None:
        task.stream = self
        self.queue.append(task)

    def drain(self, upto: Optional[Task] = None) -> None:
        """Run queued work in order, up to and including `upto` (everything if None)."""
        while self.queue:
            task = self.queue.popleft()
            self._execute(task)
            if task is upto:
                return

    def _execute(self, task: Task) -> None:
        start = max(self.clock, task.issued_at)
        if isinstance(task, WaitTask):
            record = task.record
            if record is not None and not record.done:
                record.stream.drain(upto=record)
            if record is not None:
                start = max(start, record.timestamp)
        elif isinstance(task, RecordTask):
            task.timestamp = start
        elif task.run is not None:
            begin = time.perf_counter()
            try:
                task.run()
            except DeviceFault as fault:
                if self.fault is None:
                    self.fault = "%s on %s: %s" % (task.name, self.describe(), fault)
            start += time.perf_counter() - begin
        self.clock = start
        task.done = True

    def take_fault(self) -> Optional[str]:
        fault, self.fault = self.fault, None
        return fault
