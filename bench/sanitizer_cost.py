"""What the sanitizer costs: the same whole two-phase call (GetWorkspaceSize, launch, synchronise) timed
at each NPUEMU_SANITIZE level in interleaved rounds of one run, as ratios to `off`.

The level is switched between rounds on the one tracker the settings drive (emulator.sanitizer.TRACKER),
exactly what `emulator.configure(sanitize=...)` sets, so that one device and one set of tensors serve
every level and the rounds interleave."""
from __future__ import annotations

import dataclasses
from typing import Callable

import emulator
from emulator.config import SANITIZE_LEVELS
from emulator.sanitizer import TRACKER

SIZES = ("4x4", "1e5", "large")


class AtLevel:
    """A call made with the sanitizer at `level` (the settings in force with that level, made once)."""

    def __init__(self, call: Callable[[], None], level: str):
        self.call, self.settings = call, dataclasses.replace(emulator.settings(), sanitize=level)

    def __call__(self) -> None:
        TRACKER.configure(self.settings)
        self.call()


def contenders(call: Callable[[], None]) -> dict:
    return {level: AtLevel(call, level) for level in SANITIZE_LEVELS}


def restore(settings) -> None:
    """The tracker as the settings in force have it."""
    TRACKER.configure(settings)


def table_lines(rows: list) -> list:
    """rows: (operator, shape, dtype, {level: seconds}) -> Markdown lines."""
    lines = ["| operator | size | dtype | off µs | memcheck µs | full µs | memcheck / off | full / off |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for op, shape, dtype, medians in rows:
        off = medians["off"]
        lines.append("| %s | %s | %s | %.1f | %.1f | %.1f | %.2f | %.2f |" % (
            op, shape, dtype, off * 1e6, medians["memcheck"] * 1e6, medians["full"] * 1e6,
            medians["memcheck"] / off, medians["full"] / off))
    return lines
