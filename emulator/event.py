"""Events: markers recorded into a stream, complete once the stream's work before them has run."""
from __future__ import annotations

from typing import Optional

from .stream import RecordTask


class Event:
    def __init__(self, handle: int, context, flags: int, site: str):
        self.handle = handle
        self.context = context
        self.flags = flags
        self.site = site
        self.record: Optional[RecordTask] = None  # the latest aclrtRecordEvent
        self.alive = True

    @property
    def complete(self) -> bool:
        """A never-recorded event counts as complete, as on the real runtime."""
        return self.record is None or self.record.done
