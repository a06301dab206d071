"""Contexts: each device has a default one; the current context is per host thread."""
from __future__ import annotations

import threading
from typing import Optional


class Context:
    def __init__(self, handle: int, device, is_default: bool, site: str):
        self.handle = handle
        self.device = device
        self.is_default = is_default
        self.site = site
        self.default_stream = None   # set by the runtime right after creation
        self.streams: list = []      # user streams
        self.events: list = []
        self.alive = True


_current = threading.local()


def current() -> Optional[Context]:
    context = getattr(_current, "context", None)
    return context if context is not None and context.alive else None


def set_current(context: Optional[Context]) -> None:
    _current.context = context
