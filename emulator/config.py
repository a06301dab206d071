"""Settings of the emulator: each one an NPUEMU_* environment variable and a `configure()` keyword.

| variable             | keyword        | meaning                                         | default              |
|----------------------|----------------|-------------------------------------------------|----------------------|
| NPUEMU_SOC           | soc            | the emulated chip                               | Ascend910B           |
| NPUEMU_DEVICE_COUNT  | device_count   | number of devices                               | 8                    |
| NPUEMU_DEVICE_MEMORY | device_memory  | memory per device (bytes, or 16G, 512M, ...)    | the chip's capacity  |
| NPUEMU_THREADS       | threads        | host threads a kernel may use (1..1024)         | the cores this       |
|                      |                |                                                 | process may run on   |
| NPUEMU_EXECUTION     | execution      | `async` (queued until a sync point) or `eager`  | async                |
| NPUEMU_LEAK_CHECK    | leak_check     | report unreleased resources at finalize/exit:   | 1                    |
|                      |                | 1/true/on/yes or 0/false/off/no                 |                      |
| NPUEMU_TASK_TIMEOUT  | task_timeout   | seconds one queued task (a kernel) may run      | 60 (0: no limit)     |
|                      |                | before it fails with the card's task-timeout    |                      |
|                      |                | error, as the card's AI Core watchdog does      |                      |
| NPUEMU_VECTOR_ISA    | vector_isa     | widest vector instructions the kernels may use: | auto (the machine's  |
|                      |                | `auto`, `avx512_bf16`, `avx512`, `avx2`,        | widest)              |
|                      |                | `baseline`                                      |                      |
| NPUEMU_SANITIZE      | sanitize       | `off`, `memcheck` (faults of device accesses,   | full                 |
|                      |                | padding, alignment, stale tensors) or `full`    |                      |
|                      |                | (also races, missing synchronisation and        |                      |
|                      |                | uninitialised reads; docs/sanitizer.md)         |                      |
| NPUEMU_SANITIZE_EXITCODE | sanitize_exitcode | exit code of a process that reported    | none (the program's  |
|                      |                | anything (leaks included), as               | own)                 |
|                      |                | compute-sanitizer's --error-exitcode        |                      |
| NPUEMU_TRACE         | trace          | write a Chrome/Perfetto trace to this file      | none                 |
| NPUEMU_FAULTS        | faults         | make named calls or tasks fail (docs/faults.md) | none                 |

Values are read without regard to case. Every vector_isa gives bit-identical results; a narrower one only runs slower (it is there to
reproduce another machine's path and to test them all on one machine).
"""
from __future__ import annotations

import functools
import os
import re
import typing
from dataclasses import dataclass, replace
from typing import Mapping, Optional

from . import soc as soc_profiles


VECTOR_ISAS = ("auto", "avx512_bf16", "avx512", "avx2", "baseline")
SANITIZE_LEVELS = ("off", "memcheck", "full")  # each level checks everything the one before does
DEFAULT_SANITIZE = "full"
DEFAULT_TASK_TIMEOUT = 60.0  # seconds: far beyond any kernel of a size a device could hold
_TRUE, _FALSE = ("1", "true", "on", "yes"), ("0", "false", "off", "no")


class ConfigError(ValueError):
    """An NPUEMU_* setting has a value the emulator cannot use."""


@dataclass(frozen=True)
class Config:
    soc: str
    device_count: int
    device_memory: int
    threads: int
    execution: str
    leak_check: bool
    vector_isa: str = "auto"
    task_timeout: float = DEFAULT_TASK_TIMEOUT
    sanitize: str = DEFAULT_SANITIZE
    sanitize_exitcode: Optional[int] = None
    trace: str = ""
    faults: str = ""

    @property
    def checks_hazards(self) -> bool:
        """Whether races, missing synchronisation and uninitialised reads are tracked (`full`)."""
        return self.sanitize == "full"

    @property
    def checks_memory(self) -> bool:
        """Whether memcheck's reports are made (`memcheck` and `full`)."""
        return self.sanitize != "off"

    @functools.cached_property
    def profile(self) -> soc_profiles.SocProfile:
        return soc_profiles.resolve(self.soc)[0]  # cached: operators ask on every first phase

    @functools.cached_property
    def soc_name(self) -> str:
        return soc_profiles.resolve(self.soc)[1]


_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)


def parse_size(text: str, name: str = "NPUEMU_DEVICE_MEMORY") -> int:
    match = _SIZE.match(str(text))
    if not match:
        raise ConfigError("%s: expected bytes or a size such as 16G or 512M, found %r" % (name, text))
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[match.group(2).upper()]
    return int(match.group(1)) * scale


def shown_size(nbytes: int) -> str:
    """A size as parse_size reads it: in the largest unit that divides it (1000T, 512M, 100)."""
    for unit, scale in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes and nbytes % scale == 0:
            return "%d%s" % (nbytes // scale, unit)
    return str(nbytes)


def _typed(config: Config) -> None:
    """Each setting of the type its field declares (configure() takes any Python value): ConfigError
    naming its variable otherwise. A bool is no number here, a number is a float."""
    for name, hint in typing.get_type_hints(Config).items():
        allowed = typing.get_args(hint) or (hint,)  # Optional[int] -> (int, NoneType)
        if float in allowed:
            allowed += (int,)
        value = getattr(config, name)
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise ConfigError("NPUEMU_%s: expected %s, found %r" % (
                name.upper(), " or ".join("None" if kind is type(None) else kind.__name__ for kind in allowed), value))


# Device memory is a range of host address space reserved at start-up (docs/runtime.md): x86-64 gives
# a process 128 TiB, so the devices together get at most half of it (64 × 1 TiB, a thousand times the
# largest card).
MAX_TOTAL_DEVICE_MEMORY = 1 << 46

# Host threads one kernel may use: far beyond the cores of any host (each thread beyond them only
# takes turns with another), and within the C int the kernels' pool takes its count in.
MAX_THREADS = 1024


def _validated(config: Config) -> Config:
    _typed(config)
    try:
        soc_profiles.resolve(config.soc)
    except ValueError as error:
        raise ConfigError("NPUEMU_SOC: %s" % error) from None
    if not 1 <= config.device_count <= 64:
        raise ConfigError("NPUEMU_DEVICE_COUNT: expected 1..64, found %d" % config.device_count)
    if config.device_memory < (1 << 20):
        raise ConfigError("NPUEMU_DEVICE_MEMORY: expected at least 1M, found %d bytes" % config.device_memory)
    if config.device_memory * config.device_count > MAX_TOTAL_DEVICE_MEMORY:
        raise ConfigError("NPUEMU_DEVICE_MEMORY: expected at most 64T for all NPUEMU_DEVICE_COUNT=%d devices "
                          "together (the address space npuemu reserves for them), found %s each"
                          % (config.device_count, shown_size(config.device_memory)))
    if config.threads < 1:
        raise ConfigError("NPUEMU_THREADS: expected a positive count, found %d" % config.threads)
    if config.threads > MAX_THREADS:
        raise ConfigError("NPUEMU_THREADS: expected at most %d threads, found %d" % (MAX_THREADS, config.threads))
    if config.execution not in ("async", "eager"):
        raise ConfigError("NPUEMU_EXECUTION: expected 'async' or 'eager', found %r" % config.execution)
    if config.vector_isa not in VECTOR_ISAS:
        raise ConfigError("NPUEMU_VECTOR_ISA: expected one of %s, found %r" % (", ".join(VECTOR_ISAS), config.vector_isa))
    if config.sanitize not in SANITIZE_LEVELS:
        raise ConfigError("NPUEMU_SANITIZE: expected one of %s, found %r" % (", ".join(SANITIZE_LEVELS), config.sanitize))
    if config.sanitize_exitcode is not None and not 0 <= config.sanitize_exitcode <= 255:
        raise ConfigError("NPUEMU_SANITIZE_EXITCODE: expected an exit code in [0, 255], found %d" % config.sanitize_exitcode)
    if config.faults:
        from . import injection  # not at import: it names the public calls of the runtime's modules
        injection.parse(config.faults)  # ConfigError naming NPUEMU_FAULTS
    if not 0 <= config.task_timeout < float("inf"):
        raise ConfigError("NPUEMU_TASK_TIMEOUT: expected seconds >= 0 (0: no limit), found %r" % config.task_timeout)
    return config


def _env(environ: Mapping[str, str], name: str, default, parse, expected: str):
    """NPUEMU_<name> read with `parse` (int, float, ...), or `default` when unset or empty."""
    text = environ.get(name)
    if text is None or text == "":
        return default
    try:
        return parse(text)
    except ValueError:
        raise ConfigError("%s: expected %s, found %r" % (name, expected, text)) from None


def _int_env(environ: Mapping[str, str], name: str, default: Optional[int]) -> Optional[int]:
    return _env(environ, name, default, int, "an integer")


def _float_env(environ: Mapping[str, str], name: str, default: float) -> float:
    return _env(environ, name, default, float, "a number")


def _bool_env(environ: Mapping[str, str], name: str, default: bool) -> bool:
    text = environ.get(name)
    if text is None or text == "":
        return default
    if text.strip().lower() in _TRUE:
        return True
    if text.strip().lower() in _FALSE:
        return False
    raise ConfigError("%s: expected one of %s, found %r" % (name, "/".join(_TRUE + _FALSE), text))


def from_environment(environ: Optional[Mapping[str, str]] = None) -> Config:
    """The settings of `environ` (default: this process's environment), validated."""
    return _validated(_read(os.environ if environ is None else environ))


def _read(env: Mapping[str, str]) -> Config:
    """The settings of `env`, each value parsed but the whole not validated yet."""
    soc = env.get("NPUEMU_SOC") or "Ascend910B"
    try:
        capacity = soc_profiles.resolve(soc)[0].memory_bytes
    except ValueError as error:
        raise ConfigError("NPUEMU_SOC: %s" % error) from None
    memory = env.get("NPUEMU_DEVICE_MEMORY")
    return Config(
        soc=soc,
        device_count=_int_env(env, "NPUEMU_DEVICE_COUNT", 8),
        device_memory=parse_size(memory) if memory else capacity,
        threads=_int_env(env, "NPUEMU_THREADS", usable_cores()),
        execution=(env.get("NPUEMU_EXECUTION") or "async").lower(),
        leak_check=_bool_env(env, "NPUEMU_LEAK_CHECK", True),
        vector_isa=(env.get("NPUEMU_VECTOR_ISA") or "auto").lower(),
        task_timeout=_float_env(env, "NPUEMU_TASK_TIMEOUT", DEFAULT_TASK_TIMEOUT),
        sanitize=(env.get("NPUEMU_SANITIZE") or DEFAULT_SANITIZE).strip().lower(),
        sanitize_exitcode=_int_env(env, "NPUEMU_SANITIZE_EXITCODE", None),
        trace=env.get("NPUEMU_TRACE") or "",
        faults=env.get("NPUEMU_FAULTS") or "",
    )


def variable(setting: str) -> str:
    """The environment variable of a setting (a Config field): device_count -> NPUEMU_DEVICE_COUNT."""
    return "NPUEMU_" + setting.upper()


def from_sources(changes: Mapping[str, object], environ: Optional[Mapping[str, str]] = None) -> Config:
    """The settings of `environ` (default: this process's environment) with `changes` (configure()
    keywords) in place of the variables they name, validated: what `npuemu run`'s options give a
    program, and what the pytest plugin's marker and options give a test. A variable a change
    replaces is not read at all, so a bad NPUEMU_SOC does not stop `soc="Ascend910B"`; and
    NPUEMU_DEVICE_MEMORY stays in force when only the chip changes (without it the memory is the
    chosen chip's capacity), as it does for `npuemu run --soc`, where the options are variables too.
    Only the result is validated: a device count that is too large for NPUEMU_DEVICE_MEMORY alone
    may be fine with the memory the changes set."""
    env = dict(os.environ if environ is None else environ)
    changes = dict(changes)
    for setting in changes:
        env.pop(variable(setting), None)
    base = _read(env)
    if "soc" in changes and "device_memory" not in changes and env.get("NPUEMU_DEVICE_MEMORY"):
        # with_changes would give the new chip's capacity: that is configure()'s rule, for a program
        # that changes chips itself; here the environment's choice of memory outranks that default
        changes["device_memory"] = base.device_memory
    return with_changes(base, **changes)


def usable_cores() -> int:
    """The cores this process may run on: fewer than the machine's under `taskset`, a cpuset or a
    container's CPU list, where a thread per machine core would share cores with the others."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity call on this platform
        return os.cpu_count() or 1


def with_changes(config: Config, **changes) -> Config:
    """A copy of `config` with keyword changes (the `configure()` path), validated."""
    if "device_memory" in changes and isinstance(changes["device_memory"], str):
        changes["device_memory"] = parse_size(changes["device_memory"], "device_memory")
    if "soc" in changes and "device_memory" not in changes:
        if not isinstance(changes["soc"], str):  # resolve() matches it against patterns: a TypeError otherwise
            raise ConfigError("NPUEMU_SOC: expected str, found %r" % (changes["soc"],))
        try:
            changes["device_memory"] = soc_profiles.resolve(changes["soc"])[0].memory_bytes
        except ValueError as error:
            raise ConfigError("soc: %s" % error) from None
    unknown = set(changes) - set(Config.__dataclass_fields__)
    if unknown:
        raise ConfigError("unknown setting(s) %s: expected %s" % (sorted(unknown), sorted(Config.__dataclass_fields__)))
    return _validated(replace(config, **changes))
