"""`npuemu run [OPTIONS] [--] PROGRAM [ARGS...]`: run a Python script or a C/C++ executable under npuemu's
settings (docs/run.md).

The options become the program's NPUEMU_* environment (checked first, by the settings' own
validation: a bad value is a message and exit status 2, before anything starts). A Python script (a
`.py` file, or a file whose first line is a python shebang) runs with this interpreter; anything else
is executed directly in the C toolkit's environment, the one `source <toolkit root>/set_env.sh` gives
(LD_LIBRARY_PATH with <root>/lib64 first, ASCEND_*, ...), so that a program built against the toolkit
runs without sourcing it first. `npuemu run` exits with the program's status (the sanitizer's
NPUEMU_SANITIZE_EXITCODE when the program reported anything: the program itself exits with it), 128+N
when the program died of signal N, 127 when the program does not exist, 126 when it cannot be executed
(not executable, or the toolkit it needs is not installed).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Optional

from .config import ConfigError, from_environment
from .report import REPORTED_VARIABLE, reason

USAGE_ERROR, CANNOT_EXECUTE, NOT_FOUND = 2, 126, 127

# option -> (environment variable, help)
SETTINGS = {
    "soc": ("NPUEMU_SOC", "the emulated chip (Ascend910B, Ascend910_93, Ascend910, Ascend310P, Ascend950, ...)"),
    "devices": ("NPUEMU_DEVICE_COUNT", "number of devices"),
    "execution": ("NPUEMU_EXECUTION", "async (queued work runs at synchronisation points) or eager"),
    "sanitize": ("NPUEMU_SANITIZE", "off, memcheck or full"),
    "error_exitcode": ("NPUEMU_SANITIZE_EXITCODE", "exit with N when the program reported anything (leaks included)"),
    "trace": ("NPUEMU_TRACE", "write a Chrome/Perfetto trace of the run to FILE"),
    "faults": ("NPUEMU_FAULTS", "make named calls or tasks fail, e.g. aclrtMalloc#3=207001"),
}
METAVARS = {"devices": "N", "error_exitcode": "N", "trace": "FILE", "faults": "SPEC", "sanitize": "LEVEL"}


class LaunchError(Exception):
    """The program cannot be started: the message, and the exit status of `npuemu run`."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def parser() -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(
        prog="npuemu run", usage="npuemu run [OPTIONS] [--] PROGRAM [ARGS...]",
        description="Run a Python script (with this interpreter) or a C/C++ executable (in the C toolkit's "
                    "environment, as after `source <root>/set_env.sh`) under npuemu's settings; exits with "
                    "the program's status (128+N if it died of signal N; 127: no such program).")
    for name, (variable, text) in SETTINGS.items():
        result.add_argument("--" + name.replace("_", "-"), dest=name, metavar=METAVARS.get(name, name.upper()),
                            help="%s (%s)" % (text, variable))
    result.add_argument("command", nargs=argparse.REMAINDER, metavar="PROGRAM [ARGS...]",
                        help="a .py script or a python-shebang file, or an executable")
    return result


def settings_environment(args: argparse.Namespace, base: dict) -> tuple[dict, Optional[int]]:
    """`base` with the options' NPUEMU_* variables, and the NPUEMU_SANITIZE_EXITCODE they give; ConfigError
    if the settings they make are not usable."""
    env = dict(base)
    for name, (variable, _) in SETTINGS.items():
        value = getattr(args, name)
        if value is None:
            continue
        if name == "trace" and value:
            value = _trace_path(value)
            if not os.path.isdir(os.path.dirname(value)):
                raise ConfigError("NPUEMU_TRACE: expected a file in an existing directory, found %r" % value)
            if os.path.isdir(value):  # else the program runs, and its trace is lost at its exit
                raise ConfigError("NPUEMU_TRACE: expected a file in an existing directory, found %r, a directory"
                                  % value)
        env[variable] = value
    settings = from_environment(env)  # the settings' own reading and validation (NPUEMU_FAULTS' parser included)
    return env, settings.sanitize_exitcode


def _trace_path(value: str) -> str:
    """--trace's file, absolute as NPUEMU_TRACE's own (the program may change directory); ConfigError
    when it is relative and the current directory was deleted."""
    try:
        return os.path.abspath(os.path.expanduser(value))
    except OSError as error:  # os.getcwd()
        raise ConfigError("NPUEMU_TRACE: expected a file in an existing directory, found %r, relative to a current "
                          "directory that cannot be found (%s: deleted?): give an absolute path"
                          % (value, reason(error))) from None


def is_python_script(path: str) -> bool:
    if path.endswith((".py", ".pyw")):
        return True
    try:
        with open(path, "rb") as file:
            first = file.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def toolkit_environment(env: dict, toolkit: Optional[str] = None) -> dict:
    """`env` as `source <toolkit>/set_env.sh` leaves it (the toolkit's own script, run by bash); `toolkit`:
    the installed toolkit's root by default."""
    if toolkit is None:
        toolkit = _toolkit_root()
    bash = shutil.which("bash", path=env.get("PATH"))
    if bash is None:
        raise LaunchError("bash is needed to read the toolkit's environment (%s/set_env.sh), and is not on PATH"
                          % toolkit, CANNOT_EXECUTE)
    done = subprocess.run([bash, "-c", 'source "$1/set_env.sh" && env -0', "bash", toolkit], env=env,
                          capture_output=True)
    if done.returncode != 0:
        raise LaunchError("%s/set_env.sh failed (status %d): %s" % (toolkit, done.returncode,
                          done.stderr.decode(errors="replace").strip()), CANNOT_EXECUTE)
    pairs = (entry.split(b"=", 1) for entry in done.stdout.split(b"\0") if b"=" in entry)
    result = {key.decode(errors="surrogateescape"): value.decode(errors="surrogateescape") for key, value in pairs}
    for key in ("_", "SHLVL", "OLDPWD"):  # bash's own, not the script's
        if key in env:
            result[key] = env[key]
        else:
            result.pop(key, None)
    return result


def _toolkit_root() -> str:
    try:
        from npuemu_toolkit import ToolkitMissing, root
    except ImportError:
        raise LaunchError("npuemu's C toolkit (package npuemu_toolkit) is not installed: C and C++ programs "
                          "cannot run; install npuemu with its toolkit (`make install` or `pip install .`)",
                          CANNOT_EXECUTE) from None
    try:
        return root()
    except ToolkitMissing as error:
        raise LaunchError(str(error), CANNOT_EXECUTE) from None


def program_path(program: str, env: dict) -> Optional[str]:
    """The file `program` names, or None: a path (with a `/`) as given; a bare name, a file of the
    current directory first, else PATH's."""
    if os.sep in program:
        return program if os.path.exists(program) else None
    if os.path.isfile(program):
        return program
    return shutil.which(program, path=env.get("PATH"))


def another_python(path: str) -> bool:
    """True if `path` is a Python interpreter of another environment than npuemu's: `npuemu run -- python3
    x.py`, the habit of `valgrind python x.py`, runs whatever python3 PATH has, which may lack npuemu.
    Environments are told apart by the directory (a venv's python links to its base interpreter)."""
    if re.fullmatch(r"python[0-9.]*", os.path.basename(path)) is None:
        return False
    return os.path.realpath(os.path.dirname(os.path.abspath(path))) != \
        os.path.realpath(os.path.dirname(os.path.abspath(sys.executable)))


def command_line(program: str, args: list, env: dict) -> tuple[list, dict]:
    """(argv, environment) that run `program`; LaunchError if it cannot run."""
    path = program_path(program, env)
    if path is None:
        raise LaunchError("%s: no such file or program" % program, NOT_FOUND)
    if os.path.isdir(path):
        raise LaunchError("%s: is a directory" % program, CANNOT_EXECUTE)
    if is_python_script(path):
        return [sys.executable, path, *args], env
    if not os.access(path, os.X_OK):
        raise LaunchError("%s: not executable (and not a Python script)" % program, CANNOT_EXECUTE)
    if another_python(path):
        print("npuemu run: note: %s (%s) is not the Python npuemu is installed in (%s): if it cannot import npuemu, "
              "name the script itself (npuemu run -- script.py), which runs it with npuemu's" %
              (program, path, sys.executable), file=sys.stderr)
    # executed by a bare name, PATH is searched again: `npuemu run test` ran /usr/bin/test, not ./test
    executable = path if os.sep in path else os.path.join(os.curdir, path)
    return [executable, *args], toolkit_environment(env)


def run(argv: list, env: dict, error_exitcode: Optional[int] = None) -> int:
    """Start the program and wait for it; its exit status (128+N for signal N), or `error_exitcode` when
    it exited holding reports. The program exits with it itself, in its exit work; the launcher also
    sees the reports of a program that skipped that work (os._exit, _exit): while the program holds
    reports, a file named by its pid is in a directory that REPORTED_VARIABLE names (emulator.report)."""
    directory = None if error_exitcode is None else _reports_directory()
    if directory is None:
        return _exit_status(_wait(argv, env)[1])
    try:
        pid, code = _wait(argv, {**env, REPORTED_VARIABLE: directory})
        if code >= 0 and os.path.exists(os.path.join(directory, str(pid))):
            return error_exitcode  # a program killed by a signal keeps 128+N: that says more
        return _exit_status(code)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _reports_directory() -> Optional[str]:
    """The directory that tells `run` which program exited holding reports; None, with a note, when no
    temporary directory is usable (TMPDIR, /tmp, /var/tmp and the current directory all missing, full
    or read-only): the program still runs, and exits with N itself unless it skips its exit work."""
    try:
        return tempfile.mkdtemp(prefix="npuemu-run-")
    except OSError as error:
        print("npuemu run: note: --error-exitcode: no temporary directory is usable (%s): a program that ends "
              "without its exit work (os._exit, _exit) holding reports is not given the exit code" % reason(error),
              file=sys.stderr)
        return None


def _exit_status(code: int) -> int:
    """A child's return code as a shell gives it: 128+N for signal N."""
    return 128 - code if code < 0 else code


def _wait(argv: list, env: dict) -> tuple[int, int]:
    """Start the program and wait for it: (its pid, its return code: -N for signal N)."""
    try:
        child = subprocess.Popen(argv, env=env)
    except OSError as error:
        raise LaunchError("%s: %s" % (argv[0], error.strerror or error), CANNOT_EXECUTE) from None
    forwarded = {}

    def forward(signum, _frame):
        child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGHUP):  # SIGINT (Ctrl-C) reaches the program from the terminal
        forwarded[signum] = signal.signal(signum, forward)
    interrupt = signal.signal(signal.SIGINT, lambda *_: None)  # and this process waits for it to end
    try:
        status = child.wait()
    finally:
        signal.signal(signal.SIGINT, interrupt)
        for signum, previous in forwarded.items():
            signal.signal(signum, previous)
    return child.pid, status


def main(argv: Optional[list] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("npuemu run: expected a program to run: npuemu run [OPTIONS] [--] PROGRAM [ARGS...]", file=sys.stderr)
        return USAGE_ERROR
    try:
        env, error_exitcode = settings_environment(args, dict(os.environ))
    except ConfigError as error:
        print("npuemu run: %s" % error, file=sys.stderr)
        return USAGE_ERROR
    try:
        program, env = command_line(command[0], command[1:], env)
        sys.stdout.flush()
        sys.stderr.flush()
        return run(program, env, error_exitcode)
    except LaunchError as error:
        print("npuemu run: %s" % error, file=sys.stderr)
        return error.status


if __name__ == "__main__":
    sys.exit(main())
