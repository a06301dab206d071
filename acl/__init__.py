"""pyACL-compatible facade over npuemu's emulated runtime: `import acl` as on a real CANN host.

On a machine with the real CANN toolkit its `acl` module comes first on PYTHONPATH and wins.
Calls return their outputs first and the status last; pointers and handles are plain ints.
"""
from typing import Optional

from emulator import runtime as _runtime
from emulator import sites as _sites
from emulator.status import *  # noqa: F401,F403  the constants, as a convenience (pyACL itself has none)

_sites.register_package_dir(__file__)
from . import rt, util  # noqa: E402,F401
from emulator.dtypes import *  # noqa: E402,F401,F403  ACL_FLOAT, ACL_FORMAT_ND, ...

float16_to_float = _runtime.aclFloat16ToFloat
float_to_float16 = _runtime.aclFloatToFloat16


def init(config_path: Optional[str] = None) -> int:
    """-> ret. aclInit: `config_path` None, "" or a JSON file."""
    return _runtime.aclInit(config_path)


def finalize() -> int:
    """-> ret. aclFinalize."""
    return _runtime.aclFinalize()


def finalize_reference() -> tuple:
    """-> (ref_count, ret). aclFinalizeReference."""
    return _runtime.aclFinalizeReference()


def get_recent_err_msg() -> Optional[str]:
    """-> str or None: this thread's messages, newest first; reading clears them."""
    return _runtime.aclGetRecentErrMsg()


def get_soc_name() -> str:
    """-> str: the emulated chip's name."""
    return _runtime.aclrtGetSocName()
