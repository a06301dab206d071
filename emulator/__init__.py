"""npuemu's emulated Ascend runtime: devices, contexts, streams, events and device memory.

Programs use it through the pyACL-compatible facade `acl` and the aclnn framework `aclnn_api`;
every runtime call is also reachable here by its C name (`emulator.runtime.aclrtMalloc`, ...).
"""
from .config import Config, ConfigError
from .runtime import configure, settings

__version__ = "0.1.0"
__all__ = ["Config", "ConfigError", "configure", "settings", "__version__"]
