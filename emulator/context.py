"""Contexts: each device has a default one; the current context is per host thread. A context holds
its streams (the default one first) and its events."""
from __future__ import annotations

import threading
from typing import Optional

from .event import Event
from .resource import Resource
from .sites import Released, Site, user_site
from .stream import Stream


class Context(Resource):
    kind = "context"

    def __init__(self, device, is_default: bool, site: Optional[Site] = None):
        self.device = device
        self.is_default = is_default
        self.streams: dict[Stream, None] = {}  # created streams, in order (a dict: a destroy is O(1))
        self.events: dict[Event, None] = {}
        super().__init__(site)
        if is_default:
            self.leak_checked = False  # released by aclrtResetDevice, never by the program
        self.default_stream = Stream(self, is_default=True, site=self.site)

    def describe(self) -> str:
        if self.is_default:
            return "0x%x (the default context of device %d)" % (self.handle, self.device.id)
        return "0x%x on device %d" % (self.handle, self.device.id)

    @property
    def all_streams(self) -> list[Stream]:
        return [self.default_stream, *self.streams]

    def create_stream(self, priority: int = 0, flags: int = 0, site: Optional[Site] = None) -> Stream:
        stream = Stream(self, priority=priority, flags=flags, site=site)
        self.streams[stream] = None
        return stream

    def create_event(self, flags: int, site: Optional[Site] = None) -> Event:
        event = Event(self, flags, site)
        self.events[event] = None
        return event

    def destroy(self, site: Optional[Site] = None) -> list:
        """aclrtDestroyContext, its queued work run (runtime._settled): its streams and events go with it,
        and the device closes if nothing else holds it. Returns the faults of the work, for the call to report."""
        released = Released("aclrtDestroyContext(0x%x)" % self.handle, site if site is not None else user_site())
        found = self.run_work("aclrtDestroyContext", released.site)
        self.release(site)
        self.close(released)
        self.device.forget(self, released)
        return found

    def run_work(self, call: str, site: Site) -> list:
        """The context goes by `call` at `site`: its queued work runs first (a failure there, 107020 for a
        thread holding one of its streams, changes nothing), then work the host never synchronised is
        reported (synccheck). Returns the faults of the work."""
        for stream in self.all_streams:
            stream.drain()
        for stream in self.all_streams:
            stream.forget_order(call, site)
        return [fault for stream in self.all_streams for fault in stream.take_faults()]

    def released_by(self) -> str:
        """The call, and the program's line, that released the context (for a thread it was current on)."""
        released = self.released_site
        if isinstance(released, Released):  # by a reset, or with its device
            return str(released)
        return "aclrtDestroyContext(0x%x) at %s" % (self.handle, released)

    def close(self, released: Released) -> None:
        """The runtime releases the context and what it holds (`released`: a reset, a destroy, where the
        program called it): what the program never released is a leak."""
        for resource in [*self.all_streams, *self.events]:
            resource.orphan(released)
        self.streams, self.events = {}, {}
        self.orphan(released)


_current = threading.local()


def current() -> Optional[Context]:
    context = getattr(_current, "context", None)
    return context if context is not None and context.alive else None


def released_current() -> Optional[Context]:
    """The thread's current context if it was released since it was made current (by a reset, or by
    aclrtDestroyContext on another thread), else None."""
    context = getattr(_current, "context", None)
    return context if context is not None and not context.alive else None


def set_current(context: Optional[Context]) -> None:
    _current.context = context
