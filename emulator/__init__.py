"""npuemu's emulated Ascend runtime: devices, contexts, streams, events and device memory.

Programs use it through the pyACL-compatible facade `acl` and the aclnn framework `aclnn_api`;
every runtime call is also reachable here by its C name (`emulator.runtime.aclrtMalloc`, ...).
"""
from . import report  # first: its exit work (NPUEMU_SANITIZE_EXITCODE) must run after the runtime's
from . import trace  # next: the trace is written at exit after the leak report, before the summary
from .config import Config, ConfigError
from .report import Report, reports
from .runtime import configure, settings
from . import log as _log  # noqa: E402,F401  ASCEND_GLOBAL_LOG_LEVEL & co. read now: the first call is logged too
from .injection import inject_faults  # noqa: E402  (NPUEMU_FAULTS: docs/faults.md)

__version__ = "0.1.0"
__all__ = ["Config", "ConfigError", "Report", "configure", "inject_faults", "reports", "settings", "__version__"]
