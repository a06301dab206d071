"""Logs as the real stack writes them (docs/logs.md): plog lines, the CANN variables.

    ASCEND_GLOBAL_LOG_LEVEL      0 DEBUG, 1 INFO, 2 WARNING, 3 ERROR, 4 NULL (nothing)
    ASCEND_SLOG_PRINT_TO_STDOUT  1: lines go to stdout (and no file is written)
    ASCEND_PROCESS_LOG_PATH      the root of the plog files (default ~/ascend/log)

Where lines go: to stdout with ASCEND_SLOG_PRINT_TO_STDOUT=1; otherwise, when the level or
ASCEND_PROCESS_LOG_PATH is set, to <root>/debug/plog/plog-<pid>_<YYYYmmddHHMMSSfff>.log (made at the
first line); when none of the three is set, nowhere (nothing attached: logs cost nothing). A level
that is set but unusable is the default, ERROR (one note on stderr), as the card's slog ignores it.

What is logged, as one line each:

    ERROR    every failed call's message (what aclGetRecentErrMsg returns), whichever layer recorded it;
             sanitizer findings
    WARNING  leak reports
    INFO     the settings in force, each time they are applied; the acl.json sections aclInit ignores
    DEBUG    every public call as it starts, with its arguments (pointers and handles in hex, None as
             nullptr), and as it ends, with its status (not the value calls: aclGetRecentErrMsg...);
             every stream task that ran, with its duration

The line format is plog's:

    [ERROR] ASCENDCL(4242,python3):2026-11-24-10:11:12.123.456 [runtime.py:575]4242 aclrtMalloc: ErrCode=207001(ACL_ERROR_RT_MEMORY_ALLOCATION), <message>

level, module (ASCENDCL: the runtime's calls; OP: aclnn's; RUNTIME: stream tasks; NPUEMU: findings),
pid and process name, local time to the microsecond, [file:line] of the npuemu function that
implements the call, the thread id (the kernel's), the call, the text.
"""
from __future__ import annotations

import datetime
import numbers
import os
import re
import sys
import threading
from dataclasses import dataclass
from typing import Any, Optional

from . import calls, hooks
from .report import reason, write_stderr

LEVEL_VARIABLE = "ASCEND_GLOBAL_LOG_LEVEL"
STDOUT_VARIABLE = "ASCEND_SLOG_PRINT_TO_STDOUT"
PATH_VARIABLE = "ASCEND_PROCESS_LOG_PATH"

DEBUG, INFO, WARNING, ERROR, NULL = 0, 1, 2, 3, 4
LEVEL_NAMES = ("DEBUG", "INFO", "WARNING", "ERROR", "NULL")
DEFAULT_LEVEL = ERROR  # the card's default

LIST_SHOWN = 16  # values of a list shown; the count says how many more


@dataclass(frozen=True)
class Settings:
    """What the environment asks for: `level` (None: off), `stdout`, `directory` of the plog files."""
    level: Optional[int]
    stdout: bool
    directory: str


_noted: set = set()


def from_environment(environ: Optional[dict] = None) -> Settings:
    env = os.environ if environ is None else environ
    text = (env.get(LEVEL_VARIABLE) or "").strip()
    stdout = (env.get(STDOUT_VARIABLE) or "").strip() == "1"
    path = (env.get(PATH_VARIABLE) or "").strip()
    directory = path or os.path.join(os.path.expanduser("~"), "ascend", "log")
    if not text and not stdout and not path:
        return Settings(None, False, directory)
    level = DEFAULT_LEVEL
    if text:
        if text in ("0", "1", "2", "3", "4"):
            level = int(text)
        elif text not in _noted:
            _noted.add(text)
            write_stderr("npuemu: %s: expected 0 (debug), 1 (info), 2 (warning), 3 (error) or 4 (null), "
                         "found %r: logging at 3 (error)" % (LEVEL_VARIABLE, text))
    return Settings(None if level == NULL else level, stdout, directory)


# ------------------------------------------------------------------------------------------------
# Lines


def _process_name() -> str:
    try:
        with open("/proc/self/comm", encoding="utf-8", errors="replace") as file:
            return file.read().strip() or "unknown"
    except OSError:
        return os.path.basename(sys.argv[0] if sys.argv and sys.argv[0] else sys.executable) or "unknown"


def _timestamp() -> str:
    now = datetime.datetime.now()
    return now.strftime("%Y-%m-%d-%H:%M:%S.") + "%03d.%03d" % (now.microsecond // 1000, now.microsecond % 1000)


_origins: dict = {}  # call name -> "file:line" of the function that implements it


def _origin(name: str) -> str:
    origin = _origins.get(name)
    if origin is None:
        fn = calls.find(name, load=False)
        code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
        origin = "%s:%d" % (os.path.basename(code.co_filename), code.co_firstlineno) if code else "toolkit:1"
        _origins[name] = origin
    return origin


def module_of(name: str) -> str:
    """ASCENDCL for the runtime's calls, OP for aclnn's (the framework's and the operators')."""
    return "OP" if calls.is_aclnn(name) else "ASCENDCL"


class Sink:
    """Where lines go: stdout, or this process's plog file (opened at the first line, again after a fork)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.lock = threading.Lock()
        self.file = None
        self.pid = 0
        self.path: Optional[str] = None
        self.failed = False  # the file could not be made or written (stdout: written): not tried again

    def write(self, level: int, module: str, origin: str, function: str, text: str) -> None:
        pid = os.getpid()
        line = "[%s] %s(%d,%s):%s [%s]%d %s: %s\n" % (
            LEVEL_NAMES[level], module, pid, _process_name_cached(), _timestamp(), origin,
            threading.get_native_id(), function, text.replace("\n", " | "))
        with self.lock:
            if self.settings.stdout:
                if not self.failed:
                    self._to_stdout(line)
                return
            if self.pid != pid or (self.file is None and not self.failed):
                self._open(pid)
            if self.file is not None:
                self._to_file(line)

    def _to_stdout(self, line: str) -> None:
        """A closed pipe (`| head`), a full or closed stdout: one line on stderr, and nothing more is
        logged; the call that logged goes on (a log never makes a public call fail)."""
        try:
            stream = sys.stdout
            if stream is None:
                os.write(1, line.encode("utf-8", "replace"))
            else:
                stream.write(line)
                stream.flush()
        except (OSError, ValueError) as error:  # ValueError: a closed sys.stdout
            self.failed = True
            write_stderr("npuemu: cannot write the log to stdout (%s): nothing more is logged" % reason(error))

    def _to_file(self, line: str) -> None:
        """A full disk: one line on stderr, and nothing more is logged in this process."""
        try:
            self.file.write(line)
            self.file.flush()
        except (OSError, ValueError) as error:
            file, self.file, self.failed = self.file, None, True
            try:
                file.close()  # flushes the rest again, which fails again: nothing to keep
            except (OSError, ValueError):
                pass
            write_stderr("npuemu: cannot write the plog file %s (%s): nothing more is logged" % (self.path, reason(error)))

    def _open(self, pid: int) -> None:
        directory = os.path.join(self.settings.directory, "debug", "plog")
        stamp = datetime.datetime.now()
        self.path = os.path.join(directory, "plog-%d_%s%03d.log" % (pid, stamp.strftime("%Y%m%d%H%M%S"),
                                                                     stamp.microsecond // 1000))
        self.pid = pid
        if self.file is not None:  # the parent's, after a fork
            self.file.close()
        try:
            os.makedirs(directory, exist_ok=True)
            self.file = open(self.path, "a", encoding="utf-8", errors="replace")
            self.failed = False
        except OSError as error:
            self.file, self.failed = None, True
            write_stderr("npuemu: cannot write the plog file %s (%s): no log is written" % (self.path, reason(error)))

    def close(self) -> None:
        with self.lock:
            if self.file is not None:
                self.file.close()
                self.file = None


_names: dict = {}


def _process_name_cached() -> str:
    pid = os.getpid()
    name = _names.get(pid)
    if name is None:
        name = _names[pid] = _process_name()
    return name


# ------------------------------------------------------------------------------------------------
# Arguments


def _argument(name: Optional[str], value: Any) -> str:
    if value is None:
        return "nullptr"
    if isinstance(value, bool):
        return "true" if value else "false"
    handle = getattr(value, "handle", None)
    if isinstance(handle, int) and not isinstance(value, int):
        return "0x%x" % handle  # an aclnn object: its handle, as a C caller passes it
    if isinstance(value, numbers.Integral):
        number = int(value)
        if number > 0 and (name in calls.POINTER_PARAMETERS or _is_handle(number)):
            return "0x%x" % number
        return str(number)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (list, tuple)):
        shown = ", ".join(_argument(None, item) for item in value[:LIST_SHOWN])
        more = len(value) - LIST_SHOWN
        return "[%s%s]" % (shown, ", ... (%d more)" % more if more > 0 else "")
    if callable(value):
        return getattr(value, "__qualname__", None) or getattr(value, "__name__", None) or type(value).__name__
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return "<%s %s %s>" % (type(value).__name__, value.dtype, list(value.shape))
    return "<%s>" % type(value).__name__


def _is_handle(number: int) -> bool:
    from .resource import HANDLES, HANDLE_BASE
    return number >= HANDLE_BASE and (HANDLES.get(number) is not None or HANDLES.retired(number) is not None)


def arguments(name: str, args: tuple, kwargs: dict) -> str:
    """`size=64, policy=0`: the call's arguments by their parameter names."""
    names = calls.parameter_names(name)
    shown = ["%s=%s" % (names[i] if i < len(names) else "arg%d" % i,
                        _argument(names[i] if i < len(names) else None, value)) for i, value in enumerate(args)]
    shown += ["%s=%s" % (key, _argument(key, value)) for key, value in kwargs.items()]
    return ", ".join(shown)


def _status(code: int) -> str:
    return "%d (%s)" % (code, "ACL_SUCCESS" if code == 0 else calls.code_name(code))


# ------------------------------------------------------------------------------------------------
# Observers


class Logger:
    """The observer of calls, messages, tasks and findings (emulator.hooks) at one level, into one sink."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.level = settings.level
        self.sink = Sink(settings)

    # calls (DEBUG only)
    def before(self, name: str, args: tuple, kwargs: dict):
        module, origin = module_of(name), _origin(name)
        self.sink.write(DEBUG, module, origin, name, "start to execute %s(%s)" % (name, arguments(name, args, kwargs)))

        def after(code: int) -> None:
            self.sink.write(DEBUG, module, origin, name, "%s returned %s" % (name, _status(code)))
        return after

    # failure messages (ERROR)
    def recorded(self, code: int, api_name: str, message: str) -> None:
        self.sink.write(ERROR, module_of(api_name), _origin(api_name), api_name,
                        "ErrCode=%d(%s), %s" % (code, calls.code_name(code), message))

    # findings (WARNING for leaks, ERROR for the rest)
    def reported(self, report) -> None:
        level = WARNING if report.tool == "leakcheck" else ERROR
        if level < self.level:
            return
        origin = "report.py:1"
        for _, site in report.sites:
            location = getattr(site, "location", None)
            if location and re.search(r":\d+$", location):  # file:line (a C frame without -g has none)
                origin = os.path.basename(location)
                break
        parts = ["%s: %s" % (report.kind, report.message)]
        parts += ["%s at %s" % (role, site) for role, site in report.sites]
        parts += [str(resource) for resource in report.resources]
        self.sink.write(level, "NPUEMU", origin, report.tool, "; ".join(parts))

    # tasks (DEBUG only)
    def enqueued(self, stream, task) -> None:
        pass

    def executed(self, stream, task, begin: float, end: float) -> None:
        self.sink.write(DEBUG, "RUNTIME", "stream.py:1", calls.task_kind(task.name),
                        "task %s ran on stream %s in %.1f us" % (task.name, stream.describe(), (end - begin) * 1e6))

    def info(self, function: str, text: str, where: str = "config.py:1") -> None:
        if self.level <= INFO:
            self.sink.write(INFO, "ASCENDCL", where, function, text)


_lock = threading.Lock()
LOGGER: Optional[Logger] = None


def _attach(logger: Optional[Logger]) -> None:
    """Put `logger` in force, detaching the one before; each hook only at the levels that use it."""
    global LOGGER
    old = LOGGER
    if old is not None:
        hooks.detach("CALLS", old)
        hooks.detach("MESSAGES", old)
        hooks.detach("REPORTS", old)
        hooks.detach("TASKS", old)
        if logger is None or old.sink is not logger.sink:
            old.sink.close()
    LOGGER = logger
    if logger is None:
        return
    hooks.attach("MESSAGES", logger)
    hooks.attach("REPORTS", logger)  # at ERROR, leaks (WARNING) are left out in reported()
    if logger.level <= DEBUG:
        hooks.attach("CALLS", logger, first=True)
        hooks.attach("TASKS", logger)


def apply(config=None) -> None:
    """Read the ASCEND_* variables again (called each time the settings change, and at import) and
    attach or detach the observers; the same variables keep the same logger (and plog file)."""
    with _lock:
        settings = from_environment()
        if LOGGER is not None and LOGGER.settings == settings:
            logger = LOGGER
        else:
            logger = Logger(settings) if settings.level is not None else None
            if LOGGER is not None and logger is not None and LOGGER.settings.directory == settings.directory \
                    and not settings.stdout and not LOGGER.settings.stdout:
                logger.sink = LOGGER.sink  # same file, another level
                logger.sink.settings = settings
            _attach(logger)
    if logger is not None and config is not None:
        logger.info("npuemu", "settings in force: %s" % ", ".join(
            "%s=%s" % (key, config.soc_name if key == "soc" else getattr(config, key))  # the name calls report
            for key in config.__dataclass_fields__))


def current() -> Optional[Logger]:
    """The logger in force (None: logs are off)."""
    return LOGGER


def _forked() -> None:
    """In a child made by fork: a thread of the parent may have held a lock (writing a line) at the fork,
    and it is not in the child."""
    global _lock
    _lock = threading.Lock()
    if LOGGER is not None:
        LOGGER.sink.lock = threading.Lock()


os.register_at_fork(after_in_child=_forked)
apply()  # at import: the process's first call is logged too
