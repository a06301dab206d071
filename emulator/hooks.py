"""Where the tools that watch a program attach: logs, fault injection and the trace observe the public
calls and the stream tasks here, without the runtime knowing them. With no observer attached (the
usual case) each hook costs one test of an empty tuple.

A call observer has

    before(name, args, kwargs) -> after or None
        called as a public call (runtime or aclnn, from Python or C) starts, on the caller's thread.
        It may raise emulator.errors.AclError: the call then fails with that code and message
        without running (fault injection). `after(code)`, if returned, is called when the call ends
        with its status (0 for success).

A task observer has

    enqueued(stream, task)      the task was queued (task.site is the launch site); it may replace
                                `task.run` (a task made to fail when it runs)
    executed(stream, task, begin, end)
                                the task ran, from `begin` to `end` (time.perf_counter seconds,
                                host clock); `stream.clock` is then the device time it ended at.
                                Records and waits (emulator.stream.RecordTask, WaitTask) are tasks
                                too, with begin == end.
"""
from __future__ import annotations

from typing import Any

CALLS: tuple = ()  # call observers, in the order attached
TASKS: tuple = ()  # task observers


def attach_calls(observer: Any) -> None:
    global CALLS
    if observer not in CALLS:
        CALLS = CALLS + (observer,)


def detach_calls(observer: Any) -> None:
    global CALLS
    CALLS = tuple(o for o in CALLS if o is not observer)


def attach_tasks(observer: Any) -> None:
    global TASKS
    if observer not in TASKS:
        TASKS = TASKS + (observer,)


def detach_tasks(observer: Any) -> None:
    global TASKS
    TASKS = tuple(o for o in TASKS if o is not observer)


MESSAGES: tuple = ()  # message observers: recorded(code, api_name, message) for each failed call's message


def attach_messages(observer: Any) -> None:
    global MESSAGES
    if observer not in MESSAGES:
        MESSAGES = MESSAGES + (observer,)


def detach_messages(observer: Any) -> None:
    global MESSAGES
    MESSAGES = tuple(o for o in MESSAGES if o is not observer)


REPORTS: tuple = ()  # report observers: reported(report) for each new finding (emulator.report.Report)


def attach_reports(observer: Any) -> None:
    global REPORTS
    if observer not in REPORTS:
        REPORTS = REPORTS + (observer,)


def detach_reports(observer: Any) -> None:
    global REPORTS
    REPORTS = tuple(o for o in REPORTS if o is not observer)
