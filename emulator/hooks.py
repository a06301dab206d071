"""Where the tools that watch a program attach: logs, fault injection and the trace observe the public
calls and the stream tasks here, without the runtime knowing them. With no observer attached (the
usual case) each hook costs one test of an empty tuple.

Observers are attached to one of four lists with `attach(KIND, observer)` and `detach(KIND, observer)`,
KIND being CALLS, TASKS, MESSAGES or REPORTS.

A call observer (CALLS) has

    before(name, args, kwargs) -> after or None
        called as a public call (runtime or aclnn, from Python or C) starts, on the caller's thread.
        It may raise emulator.errors.AclError: the call then fails with that code and message
        without running (fault injection). `after(code)`, if returned, is called when the call ends
        with its status (0 for success).

A task observer (TASKS) has

    enqueued(stream, task)      the task was queued (task.site is the launch site); it may replace
                                `task.run` (a task made to fail when it runs)
    executed(stream, task, begin, end)
                                the task ran, from `begin` to `end` (time.perf_counter seconds,
                                host clock); `stream.clock` is then the device time it ended at.
                                Records and waits (emulator.stream.RecordTask, WaitTask) are tasks
                                too, with begin == end.

A message observer (MESSAGES) has `recorded(code, api_name, message)`, for each failed call's message
(those the C layer records itself included); a report observer (REPORTS) has `reported(report)`, for
each new finding of the sanitizer (emulator.report.Report).
"""
from __future__ import annotations

from typing import Any

CALLS: tuple = ()     # call observers, in the order attached
TASKS: tuple = ()     # task observers
MESSAGES: tuple = ()  # message observers
REPORTS: tuple = ()   # report observers
KINDS = ("CALLS", "TASKS", "MESSAGES", "REPORTS")


def attach(kind: str, observer: Any, first: bool = False) -> None:
    """Add `observer` to the list `kind` (once), at the end, or at the start with `first`: observers that
    only watch (logs, trace) go first, so that they also see the calls a later one (fault injection)
    makes fail. The lists are tuples, replaced whole, so the hot paths read them without a lock."""
    assert kind in KINDS, kind
    if observer not in globals()[kind]:
        globals()[kind] = (observer,) + globals()[kind] if first else globals()[kind] + (observer,)


def detach(kind: str, observer: Any) -> None:
    assert kind in KINDS, kind
    globals()[kind] = tuple(o for o in globals()[kind] if o is not observer)
