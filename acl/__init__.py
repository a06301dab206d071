"""pyACL-compatible facade over npuemu's emulated runtime: `import acl` as on a real CANN host.

On a machine with the real CANN toolkit its `acl` module comes first on PYTHONPATH and wins.
Calls return their outputs first and the status last; pointers and handles are plain ints.
"""
from typing import Optional

from emulator import runtime as _runtime
from emulator.status import *  # noqa: F401,F403  the constants, as a convenience (pyACL itself has none)

from . import rt, util  # noqa: F401
from emulator import errors as _errors
_errors.register_package_dir(__file__)
from emulator.dtypes import *  # noqa: F401,F403  ACL_FLOAT, ACL_FORMAT_ND, ...


def init(config_path: Optional[str] = None) -> int:
    return _runtime.aclInit(config_path)


def finalize() -> int:
    return _runtime.aclFinalize()


def finalize_reference() -> tuple:
    return _runtime.aclFinalizeReference()


def get_recent_err_msg() -> Optional[str]:
    return _runtime.aclGetRecentErrMsg()


def get_soc_name() -> str:
    return _runtime.aclrtGetSocName()
