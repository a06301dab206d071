"""Devices: reference-counted by aclrtSetDevice / aclrtResetDevice, each with its memory heap."""
from __future__ import annotations

from typing import Optional


class Device:
    def __init__(self, device_id: int, heap):
        self.id = device_id
        self.heap = heap
        self.ref_count = 0
        self.default_context: Optional[object] = None
        self.contexts: list = []   # every live context, the default one first

    @property
    def is_open(self) -> bool:
        return self.ref_count > 0

    def streams(self) -> list:
        """Every live stream of the device, default streams included."""
        return [s for c in self.contexts for s in [c.default_stream, *c.streams]]
