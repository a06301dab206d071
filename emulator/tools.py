"""The tools that watch a program, set up from the settings in force each time they change: the logs
(ASCEND_GLOBAL_LOG_LEVEL, emulator.log), fault injection (NPUEMU_FAULTS, emulator.injection) and the
trace (NPUEMU_TRACE, emulator.trace). Each attaches its observers to emulator.hooks, or detaches them."""
from __future__ import annotations


def apply(config) -> None:
    from . import injection, log, trace  # not at import: they import the runtime's modules
    log.apply(config)
    injection.apply(config)
    trace.apply(config)
