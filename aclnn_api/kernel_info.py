"""What `npuemu info` says of the compiled kernels: the command finds this function through the
`npuemu.kernels` entry point, so the runtime package never imports the operator layer."""
from __future__ import annotations

import os

from emulator.config import Config, ConfigError
from emulator.report import write_stderr

_threads_noted: set = set()  # (asked, started) pairs already noted on stderr


def set_threads(count: int) -> None:
    """Hand the kernels' pool `count` (NPUEMU_THREADS). When the system starts fewer threads (a limit
    of processes per user, or of memory for their stacks), kernels run on those, with the same
    results, and a note on stderr says so, once per count and outcome, naming the limits in force."""
    from . import _kernels
    why_short = _kernels.set_threads(count)
    started = _kernels.threads()
    if why_short and (count, started) not in _threads_noted:
        _threads_noted.add((count, started))
        write_stderr("npuemu: note: NPUEMU_THREADS=%d: the system would not start more than %d kernel thread(s) "
                     "(%s; %s): kernels run on %d, with the same results, more slowly"
                     % (count, started, why_short, _thread_limits(), started))


def _thread_limits() -> str:
    """The limits on this process's threads that are in force: `ulimit -u 60, ulimit -v 250000`."""
    import resource
    limits = []
    for name, option, unit in (("RLIMIT_NPROC", "-u", 1), ("RLIMIT_AS", "-v", 1024)):
        soft = resource.getrlimit(getattr(resource, name))[0]
        if soft != resource.RLIM_INFINITY:
            limits.append("ulimit %s %d" % (option, soft // unit))
    return ", ".join(limits) or "no ulimit -u or -v in force: the system's limit of threads"


def describe(config: Config) -> str:
    """The kernels' build and dispatch with `config`'s threads and vector ISA in force, then the
    memory plan (kernels_cpp/common/memory_plan.h) and how each of its choices was obtained."""
    from . import _kernels  # ImportError (kernels not built) is the caller's to report
    set_threads(config.threads)
    _kernels.set_vector_isa(config.vector_isa)
    return _kernels.build_info() + "; " + describe_plan(memory_plan())


def memory_plan() -> dict:
    """The kernels' memory plan, made on first use (a few milliseconds of measurement). An unusable
    NPUEMU_MEMORY_PLAN is the program's setting, a ConfigError naming the entry, as for every NPUEMU_*
    value: `npuemu` exits 2 with it, the first aclnn call returns 161002 with it."""
    from . import _kernels
    try:
        return _kernels.memory_plan()
    except UnicodeDecodeError:  # the kernels' message quotes the entry, whose bytes Python cannot read as UTF-8
        raise ConfigError("NPUEMU_MEMORY_PLAN: expected name=value entries separated by commas, the names among "
                          "streaming, threshold, prefetch, hint, block, the values in ASCII, found %r"
                          % os.environ.get("NPUEMU_MEMORY_PLAN")) from None
    except ValueError as error:
        raise ConfigError(str(error)) from None


def _size(count: int) -> str:
    for shift, suffix in ((30, "G"), (20, "M"), (10, "K")):
        if count >= 1 << shift and count % (1 << shift) == 0:
            return "%d%s" % (count >> shift, suffix)
    return str(count)


def describe_plan(plan: dict) -> str:
    """One line: the choices in NPUEMU_MEMORY_PLAN's own syntax, then where they came from, e.g.
    `memory plan streaming=on,threshold=8M,prefetch=1024,hint=t0,block=32768 (measured in 3.5 ms:
    streaming, prefetch, hint; from the caches: threshold, block; LLC 480M reported, 8M counted)`."""
    choices = "streaming=%s,threshold=%s,prefetch=%d,hint=%s,block=%d" % (
        "on" if plan["streaming"] else "off", _size(plan["threshold"]), plan["prefetch"], plan["hint"], plan["block"])
    by_source: dict = {}
    for name, source in plan["source"].items():
        by_source.setdefault(source, []).append(name)
    labels = {"measured": "measured in %.1f ms" % plan["measure_ms"], "caches": "from the caches",
              "environment": "forced by NPUEMU_MEMORY_PLAN", "forced": "forced by set_memory_plan",
              "default": "default"}
    origin = "; ".join("%s: %s" % (labels.get(source, source), ", ".join(names))
                       for source, names in by_source.items())
    if plan["fallback"]:
        origin += "; measurement discarded (%s)" % plan["fallback"]
    caches = plan["caches"]
    llc = "LLC %s reported, %s counted" % (_size(caches["llc_reported"]), _size(caches["llc_effective"]))
    return "memory plan %s (%s; %s)" % (choices, origin, llc)
