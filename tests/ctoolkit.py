"""Building and running C and C++ programs against npuemu's C toolkit, as a user does: the toolkit's
root from `npuemu toolkit path`, the environment its set_env.sh gives, the documented g++ recipe."""
from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
from typing import Optional, Sequence

import pytest

COMPILERS = {"c++": "g++", "c": "gcc"}


def require_compilers() -> None:
    """Skip (with the reason) where the machine has no C/C++ compiler: the toolkit cannot be used there."""
    for compiler in COMPILERS.values():
        if shutil.which(compiler) is None:
            pytest.skip("%s is not installed: C programs cannot be built here" % compiler)


@functools.lru_cache(maxsize=None)
def toolkit_root() -> str:
    """The installed toolkit's root; a toolkit that is not there fails the test (it is part of the install)."""
    done = subprocess.run([sys.executable, "-m", "emulator", "toolkit", "path"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@functools.lru_cache(maxsize=None)
def _sourced_environment() -> tuple:
    """What `source <root>/set_env.sh` gives, as `npuemu run` reads it for the programs it starts."""
    from emulator.launcher import toolkit_environment
    return tuple(toolkit_environment(dict(os.environ), toolkit_root()).items())


def toolkit_environment(**changes: Optional[str]) -> dict:
    """The environment after `source <root>/set_env.sh`, with `changes` (None removes a variable)."""
    return _changed(dict(_sourced_environment()), changes)


def _changed(env: dict, changes: dict) -> dict:
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def compile_program(source: str, directory, name: str = "program", language: str = "c++",
                    flags: Sequence[str] = (), libraries: Sequence[str] = ("opapi_nn", "opapi_math", "ascendcl",
                                                                            "nnopbase")) -> str:
    """Write `source` to <directory>/<name>.cpp (or .c) and build it with the documented one-line recipe;
    returns the executable's path. A compiler error fails the test with its output."""
    root = toolkit_root()
    directory = str(directory)
    path = os.path.join(directory, name + (".cpp" if language == "c++" else ".c"))
    with open(path, "w", encoding="utf-8") as file:
        file.write(source)
    executable = os.path.join(directory, name)
    command = [COMPILERS[language], *(["-std=c++11"] if language == "c++" else ["-std=c99"]), *flags, path,
               "-I", os.path.join(root, "include"), "-I", os.path.join(root, "include", "aclnnop"),
               "-I", os.path.join(root, "include", "aclnn"), "-L", os.path.join(root, "lib64"),
               *("-l" + library for library in libraries), "-o", executable]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, "%s\n%s%s" % (" ".join(command), done.stdout, done.stderr)
    return executable


def compile_embedding_program(source: str, directory, flags: Sequence[str] = ()) -> str:
    """A C program that embeds Python (`source`), built with the toolkit and this interpreter's shared
    libpython; skips where there is none."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        pytest.skip("%s has no shared libpython" % sys.executable)
    library_directory = sysconfig.get_config_var("LIBDIR")
    return compile_program(
        source, directory, language="c",
        flags=("-I" + sysconfig.get_paths()["include"], "-L" + library_directory, "-Wl,-rpath," + library_directory,
               *flags),
        libraries=("ascendcl", "python" + sysconfig.get_config_var("LDVERSION")))


def default_sigint() -> None:
    """In the child before exec: SIGINT at its default action, as a shell gives a foreground program (a
    test run in the background, `make test &`, would otherwise pass its SIG_IGN on, and a Python child
    would then not turn Ctrl-C into a KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_program(executable: str, env: Optional[dict] = None, timeout: float = 120,
                args: Sequence[str] = ()) -> subprocess.CompletedProcess:
    """Run a built program in the toolkit's environment (or `env`), from its own directory."""
    return subprocess.run([executable, *args], capture_output=True, text=True, timeout=timeout,
                          env=toolkit_environment() if env is None else env, cwd=os.path.dirname(executable))


def untouched_environment(**changes: Optional[str]) -> dict:
    """This process's environment without what set_env.sh would add: no toolkit directory in
    LD_LIBRARY_PATH (or PATH, PYTHONPATH, CMAKE_PREFIX_PATH), no ASCEND_* variables; with `changes`
    (None removes a variable). A program run with it finds the toolkit only by the paths it names."""
    root = toolkit_root()
    env = {key: value for key, value in os.environ.items() if not key.startswith("ASCEND_")}
    for key in ("LD_LIBRARY_PATH", "PATH", "PYTHONPATH", "CMAKE_PREFIX_PATH"):
        if key in env:
            kept = [entry for entry in env[key].split(":") if entry and not entry.startswith(root)]
            if kept:
                env[key] = ":".join(kept)
            else:
                del env[key]
    return _changed(env, changes)


def require_binutils() -> None:
    """Skip (with the reason) where nm or readelf is missing: the libraries cannot be inspected there."""
    for tool in ("nm", "readelf"):
        if shutil.which(tool) is None:
            pytest.skip("%s is not installed: the toolkit's libraries cannot be inspected here" % tool)


def npuemu_command() -> list:
    """The `npuemu` command of this environment (its console script, else `python -m emulator`)."""
    script = os.path.join(os.path.dirname(sys.executable), "npuemu")
    return [script] if os.access(script, os.X_OK) else [sys.executable, "-m", "emulator"]
