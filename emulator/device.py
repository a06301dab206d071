"""Devices: opened by aclrtSetDevice (reference-counted with aclrtResetDevice, the references holding the
default context) or by a context of aclrtCreateContext, each with its memory heap. A device closes when
neither holds it: its contexts, streams, events and memory are released, and what the program never
released is a leak. The caller runs the queued work of what goes first (runtime._settled), so that a
call that fails there has changed nothing."""
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
        self.set_count = 0  # aclrtSetDevice's references: the default context lives while there are any
        self.default_context: Optional[Context] = None
        self.contexts: dict[Context, None] = {}  # every live context, the default one first (a dict: O(1) destroy)

    @property
    def is_open(self) -> bool:
        """Set by aclrtSetDevice, or held by a context of aclrtCreateContext."""
        return bool(self.contexts)

    @property
    def ref_count(self) -> int:
        """aclrtSetDevice's references and the contexts of aclrtCreateContext."""
        return self.set_count + len(self.contexts) - (self.default_context is not None)

    def streams(self) -> list:
        """Every live stream of the device, default streams included."""
        return [s for c in self.contexts for s in c.all_streams]

    def set(self) -> Context:
        """aclrtSetDevice: one more reference; the first one makes the default context (with its default
        stream), and returns it."""
        if self.default_context is None:
            self.default_context = Context(self, is_default=True)
            self.contexts = {self.default_context: None, **self.contexts}  # first
        self.set_count += 1
        return self.default_context

    def reset(self, how: str) -> list[Fault]:
        """aclrtResetDevice (`how`), its checks passed: one reference less. The last one releases the default
        context with its streams and events (returns the faults of their work), and closes the device
        unless a context of aclrtCreateContext still holds it. The device's memory stays until it closes:
        it belongs to the device, not to a context."""
        if self.set_count > 1:
            self.set_count -= 1
            return []
        context = self.default_context
        released = Released(how, user_site())
        found = context.run_work(how.split("(")[0], released.site)
        context.close(released)
        self.set_count, self.default_context = 0, None
        self.forget(context, released)
        return found

    def create_context(self, site: Optional[Site] = None) -> Context:
        """aclrtCreateContext: the context holds the device open until it is destroyed."""
        context = Context(self, is_default=False, site=site)
        self.contexts[context] = None
        return context

    def forget(self, context: Context, released: Released) -> None:
        """`context` is gone (`released`: by which call): the last one closes the device, releasing its memory."""
        del self.contexts[context]
        if not self.contexts:
            for allocation in self.heap.release_all(released):
                leaks.orphan(allocation, released.how)

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
        """Release everything of the device (`how`: the forced reset or finalize): queued work runs first
        (a failure there changes nothing), and its faults are returned for the closing call to report."""
        self.drain()
        released = Released(how, user_site())  # the program's call that closes the device, for stale handles
        found = [fault for context in self.contexts for fault in context.run_work(how.split("(")[0], released.site)]
        for context in list(self.contexts):
            context.close(released)
            self.forget(context, released)
        self.default_context, self.set_count = None, 0
        return found
