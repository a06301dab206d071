"""Events: markers recorded into a stream, complete once the stream's work before them has run."""
from __future__ import annotations

import ctypes
import time
from typing import Optional

from . import faults, status
from .errors import AclError
from .resource import Resource
from .sanitizer import TRACKER
from .sites import Released, Site
from .stream import RecordTask, Stream, WaitTask

NO_TIMING = status.ACL_EVENT_EXTERNAL | status.ACL_EVENT_IPC   # events with these flags cannot time
_CLOCK_ORIGIN = time.perf_counter()  # device timestamps count microseconds from here


NEVER_RECORDED = "one never passed to aclrtRecordEvent"


class Event(Resource):
    kind = "event"

    def __init__(self, context, flags: int, site: Optional[Site] = None):
        self.context = context
        self.flags = flags
        self.last_record: Optional[RecordTask] = None  # the latest aclrtRecordEvent
        self.unrecorded = NEVER_RECORDED  # why it has no record, while it has none (messages say)
        super().__init__(site)

    def describe(self) -> str:
        return "0x%x on device %d" % (self.handle, self.context.device.id)

    @property
    def complete(self) -> bool:
        """A never-recorded event counts as complete, as on the real runtime."""
        return self.last_record is None or self.last_record.done

    def record(self, stream: Stream, eager: bool = False) -> None:
        record = RecordTask(self, self.last_record)
        self.last_record = record
        stream.enqueue(record, eager)
        if TRACKER.hazards:
            TRACKER.recorded(self, stream, record)

    def reset(self, site: Site) -> None:
        """aclrtResetEvent at `site`: the event is as never recorded."""
        if self.last_record is not None or self.unrecorded is not NEVER_RECORDED:  # recorded before
            self.unrecorded = "one reset by aclrtResetEvent at %s since its last aclrtRecordEvent" % site
        self.last_record = None
        TRACKER.reset_event(self)

    def record_dropped(self, record: RecordTask) -> None:
        """aclrtDestroyStreamForce dropped `record` (marked dropped): if it was the latest, the event is as
        it was before it. Otherwise the event would be neither complete (the record never runs) nor
        pending (nothing will run it), and a polling loop would never end."""
        if not self.alive or self.last_record is not record:
            return
        self.last_record = record.standing()
        if self.last_record is None:
            self.unrecorded = "one whose record was dropped with its stream by aclrtDestroyStreamForce"
        TRACKER.fell_back(self, self.last_record)

    def make_wait(self, stream: Stream, eager: bool = False) -> None:
        """aclrtStreamWaitEvent: `stream` does not go past this point before the latest record ran."""
        stream.enqueue(WaitTask(self.handle, self.last_record), eager)
        if TRACKER.hazards:
            TRACKER.waited(stream, self)

    def query(self) -> bool:
        """Whether complete. As with aclrtStreamQuery, the device makes progress while polled: the work
        before the record runs after a "not yet" answer, as far as it can without waiting for another
        host thread (a query never blocks)."""
        if self.complete:
            if TRACKER.hazards:
                TRACKER.host_saw_event(self)
            return True
        self.last_record.stream.drain(upto=self.last_record, wait=False)
        return False

    def synchronize(self, deadline: Optional[float] = None) -> None:
        """Run the recording stream's work up to the record; its faults, or 507047 if the deadline passes."""
        record = self.last_record
        if record is None:
            return
        if record.done:
            if TRACKER.hazards:
                TRACKER.host_saw_event(self)
            return
        stream = record.stream
        if not stream.drain(upto=record, deadline=deadline):
            raise AclError(status.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
                           "timeout: expected event %s to complete in time, found work before its record still "
                           "queued on stream %s" % (self.describe(), stream.describe()))
        if TRACKER.hazards:
            TRACKER.host_saw_event(self)
        faults.raise_faults(stream.take_faults())

    def _completed_record(self, name: str) -> RecordTask:
        if self.last_record is None:
            raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                           "%s: expected a recorded event, found %s" % (name, self.unrecorded))
        if not self.last_record.done:
            raise AclError(status.ACL_ERROR_RT_EVENT_NOT_COMPLETE,
                           "%s: expected a completed event, found its record still queued (synchronise first)" % name)
        return self.last_record

    def elapsed_since(self, start: "Event") -> float:
        """Milliseconds of device time from `start`'s record to this one's: the measured run time of the
        work between them, plus any time the stream sat idle waiting for the host to issue work, rounded
        to a C float as aclrtEventElapsedTime's `float *ms` and pyACL's value are. Two
        devices' clocks are unrelated: events of two devices are 107000."""
        if start.context.device.id != self.context.device.id:
            raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                           "endEvent: expected an event of startEvent's device %d (%s), found event %s: the clocks "
                           "of two devices are unrelated" % (start.context.device.id, start.describe(), self.describe()))
        for name, marker in (("startEvent", start), ("endEvent", self)):
            if marker.flags & NO_TIMING:
                raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                               "%s: expected an event that can time, found flags 0x%x (EXTERNAL/IPC)" % (name, marker.flags))
            marker._completed_record(name)
        begin, end = start.last_record.timestamp, self.last_record.timestamp
        if end < begin:
            raise AclError(status.ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL,
                           "endEvent: expected a record that completed after startEvent's, found one %.3f ms earlier"
                           % ((begin - end) * 1000.0))
        return ctypes.c_float((end - begin) * 1000.0).value  # the C float the C call stores in *ms

    def timestamp(self) -> int:
        """aclrtEventGetTimestamp: the device time of the completed record, in microseconds."""
        return int(round((self._completed_record("event").timestamp - _CLOCK_ORIGIN) * 1e6))

    def destroy(self, site: Optional[Site] = None) -> None:
        TRACKER.reset_event(self)
        self.release(site)
        del self.context.events[self]

    def orphan(self, released: Released) -> None:
        """Released by a reset or a context destroyed: the sanitizer forgets its record's clock too (kept,
        every stream destroyed afterwards walked the clocks of all such events, _forget)."""
        TRACKER.reset_event(self)
        super().orphan(released)
