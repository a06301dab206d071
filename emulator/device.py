"""Devices: reference-counted by aclrtSetDevice / aclrtResetDevice (and by the contexts made on them),
each with its memory heap. Closing a device runs its queued work, then releases its contexts,
streams, events and memory; what the program never released is a leak."""
from __future__ import annotations

from typing import Optional

from . import leaks
from .context import Context
from .faults import Fault
from .sanitizer import TRACKER
from .sites import Released, Site, user_site


class Device:
    def __init__(self, device_id: int, heap):
        self.id = device_id
        self.heap = heap
        self.ref_count = 0  # aclrtSetDevice's references and the contexts of aclrtCreateContext
        self.set_count = 0  # aclrtSetDevice's alone: what aclrtResetDevice may release
        self.default_context: Optional[Context] = None
        self.contexts: list[Context] = []   # every live context, the default one first

    @property
    def is_open(self) -> bool:
        return self.ref_count > 0

    def streams(self) -> list:
        """Every live stream of the device, default streams included."""
        return [s for c in self.contexts for s in c.all_streams]

    def retain(self, site: Optional[Site] = None) -> "Device":
        """One more reference (aclrtSetDevice, or a context made by aclrtCreateContext); the first one
        opens the device with its default context and default stream."""
        if self.ref_count == 0:
            self.default_context = Context(self, is_default=True, site=site)
            self.contexts.append(self.default_context)
        self.ref_count += 1
        return self

    def release(self, how: str) -> list[Fault]:
        """One reference less; the last one closes the device (returns the faults of its queued work)."""
        self.ref_count -= 1
        return self.close(how) if self.ref_count == 0 else []

    def create_context(self, site: Optional[Site] = None) -> Context:
        """aclrtCreateContext: the context holds a reference to the device until it is destroyed."""
        self.retain(site)
        context = Context(self, is_default=False, site=site)
        self.contexts.append(context)
        return context

    def drain(self, deadline: Optional[float] = None) -> bool:
        """Run the queued work of every stream; False if the deadline passed with work left."""
        return all([stream.drain(deadline=deadline) for stream in self.streams()])

    def synchronize(self, deadline: Optional[float] = None) -> bool:
        """aclrtSynchronizeDevice: `drain`, and the host has seen every stream's work complete."""
        if not self.drain(deadline):
            return False
        if TRACKER.hazards:
            for stream in self.streams():
                TRACKER.host_saw_stream(stream)
        return True

    def take_faults(self) -> list[Fault]:
        return [fault for stream in self.streams() for fault in stream.take_faults()]

    def close(self, how: str) -> list[Fault]:
        """Release everything of the device (`how`: the reset or finalize): queued work runs first (a
        failure there, 107020 for a thread holding one of its streams, changes nothing), then work the host
        never synchronised is reported (synccheck); the faults of the work are returned for the closing
        call to report."""
        self.drain()
        for stream in self.streams():
            stream.forget_order(how.split("(")[0], None)
        found = self.take_faults()
        released = Released(how, user_site())  # the program's call that closes the device, for stale handles
        for context in self.contexts:
            context.close(released)
        for allocation in self.heap.release_all(released):
            leaks.orphan(allocation, how)
        self.contexts, self.default_context, self.ref_count, self.set_count = [], None, 0, 0
        return found
