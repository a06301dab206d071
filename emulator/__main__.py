"""`python -m emulator` / `npuemu`: what the emulator is set up to emulate, and its settings."""
from __future__ import annotations

import argparse
import os
import signal
import sys
from .entry_points import entry_points

from . import __version__, trace
from .config import ConfigError, from_environment
from .soc import PROFILES


def main(argv: list[str] | None = None) -> int:
    trace.discard()  # NPUEMU_TRACE is the program's: this command's own empty trace would overwrite it
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except BrokenPipeError:  # `npuemu | head -1`: the reader has gone, as for any command in a pipe
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        return 128 + signal.SIGPIPE


def _main(argv: list[str]) -> int:
    if argv and argv[0] == "run":  # `npuemu run [OPTIONS] [--] PROGRAM [ARGS...]` (emulator/launcher.py)
        from .launcher import main as run
        return run(argv[1:])
    commands = {entry.name: entry for entry in entry_points("npuemu.commands")}
    if argv and argv[0] in commands:  # a command of a package built on the runtime (`npuemu toolkit ...`)
        return commands[argv[0]].load()(argv[1:])
    parser = argparse.ArgumentParser(prog="npuemu", description="npuemu, a simulated Ascend NPU runtime")
    parser.add_argument("command", nargs="?", default="info", choices=["info", "socs", "run"] + sorted(commands),
                        help="info: the settings in force (default); socs: the chips it can emulate; run: run a "
                        "program under npuemu's settings (see `npuemu run --help`); %s"
                        % "; ".join("%s: see `npuemu %s --help`" % (name, name) for name in sorted(commands)))
    args = parser.parse_args(argv)
    if args.command == "socs":
        for family, profile in PROFILES.items():
            print("%-14s reports %-16s %3d GiB %s" % (family, profile.default_name, profile.memory_bytes >> 30,
                                                       "HBM" if profile.memory_is_hbm else "DDR"))
        return 0
    try:
        config = from_environment()
    except ConfigError as error:
        print("npuemu: %s" % error, file=sys.stderr)
        return 2
    print("npuemu %s" % __version__)
    print("soc            %s (family %s)" % (config.soc_name, config.profile.family))
    print("device_count   %d" % config.device_count)
    print("device_memory  %d bytes (%.1f GiB)" % (config.device_memory, config.device_memory / (1 << 30)))
    print("threads        %d" % config.threads)
    print("execution      %s" % config.execution)
    print("leak_check     %s" % ("on" if config.leak_check else "off"))
    print("vector_isa     %s" % config.vector_isa)
    print("task_timeout   %s" % ("%g s" % config.task_timeout if config.task_timeout else "none"))
    print("sanitize       %s%s" % (config.sanitize, ", exit code %d if anything is reported" % config.sanitize_exitcode
                                   if config.sanitize_exitcode is not None else ""))
    print("trace          %s" % (config.trace or "none"))
    print("faults         %s" % (config.faults or "none"))
    try:
        kernels = kernels_line(config)
    except ConfigError as error:  # a setting of a kernel package (NPUEMU_MEMORY_PLAN) it cannot use
        print("npuemu: %s" % error, file=sys.stderr)
        return 2
    print("kernels        %s" % kernels)
    return 0


def kernels_line(config) -> str:
    """What the installed kernel packages say of themselves (entry point group `npuemu.kernels`):
    the runtime does not import the layers built on it."""
    lines = []
    for entry in entry_points("npuemu.kernels"):
        try:
            lines.append(entry.load()(config))
        except ImportError as error:
            lines.append("not built (%s)" % error)
    return "; ".join(lines) or "none installed (run `make install`)"


if __name__ == "__main__":
    sys.exit(main())
