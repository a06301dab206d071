"""npuemu's emulated Ascend runtime: devices, contexts, streams, events and device memory.

Programs use it through the pyACL-compatible facade `acl` and the aclnn framework `aclnn_api`;
every runtime call is also reachable here by its C name (`emulator.runtime.aclrtMalloc`, ...).
"""
from . import report  # first: its exit work (NPUEMU_SANITIZE_EXITCODE) must run after the runtime's
from .config import Config, ConfigError
from .report import Report, reports
from .runtime import configure, settings

__version__ = "0.1.0"
__all__ = ["Config", "ConfigError", "Report", "configure", "reports", "settings", "__version__"]
