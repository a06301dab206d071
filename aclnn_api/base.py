"""aclnnInit and aclnnFinalize (aclnn/aclnn_base.h): the operator library's own initialisation, a
lighter alternative to aclInit/aclFinalize.

Calling them together with aclInit/aclFinalize never fails, and neither does calling either twice.
aclnnInit checks its configuration file the way aclInit checks one (an existing file holding a JSON
object; none is needed) and makes sure the NPUEMU_* settings are usable; the emulated operators need
nothing else. **Choice:** a config file that cannot be used is 161002 with a message naming it.
"""
from __future__ import annotations

from typing import Optional

from emulator import cargs, config_file, interface
from emulator.cargs import ACLNN
from emulator.errors import AclError, api

from . import status


def _check_config(path: str) -> None:
    try:
        config_file.read_json_object(path)
    except config_file.ConfigFileError as error:  # whatever the kind: aclnn has one code for a bad argument
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "configPath: " + error.message) from None


@api("aclnnInit", internal_code=status.ACLNN_ERR_INNER)
def aclnnInit(configPath: Optional[str] = None) -> int:
    """Returns the status: 0 (also when called again, or with aclInit); 161002 for a config file that
    is missing, unreadable or no JSON object, or an unusable NPUEMU_* setting."""
    path = cargs.optional_string("configPath", configPath, ACLNN)
    if path:
        _check_config(path)
    interface.settings()  # an unusable NPUEMU_* value is reported here, not by the first operator


@api("aclnnFinalize", internal_code=status.ACLNN_ERR_INNER)
def aclnnFinalize() -> int:
    """Returns the status: 0, also without aclnnInit (the emulated operators hold nothing to release)."""
