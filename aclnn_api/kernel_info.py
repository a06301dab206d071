"""What `npuemu info` says of the compiled kernels: the command finds this function through the
`npuemu.kernels` entry point, so the runtime package never imports the operator layer."""
from __future__ import annotations

from emulator.config import Config


def describe(config: Config) -> str:
    """The kernels' build and dispatch with `config`'s threads and vector ISA in force."""
    from . import _kernels  # ImportError (kernels not built) is the caller's to report
    _kernels.set_threads(config.threads)
    _kernels.set_vector_isa(config.vector_isa)
    return _kernels.build_info()
