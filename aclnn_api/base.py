"""aclnnInit and aclnnFinalize (aclnn/aclnn_base.h): the operator library's own initialisation, a
lighter alternative to aclInit/aclFinalize.

Calling them together with aclInit/aclFinalize never fails, and neither does calling either twice.
aclnnInit checks its configuration file the way aclInit checks one (an existing file holding a JSON
object; none is needed) and makes sure the NPUEMU_* settings are usable; the emulated operators need
nothing else. **Choice:** a config file that cannot be used is 161002 with a message naming it.
"""
from __future__ import annotations

import json
from typing import Optional

from emulator import cargs, interface
from emulator.cargs import ACLNN
from emulator.errors import AclError, api
from emulator.resource import article

from . import status


def _check_config(path: str) -> None:
    try:
        with open(path, "rb") as file:
            content = json.loads(file.read().decode("utf-8") or "{}")
    except OSError as error:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "configPath: expected a readable file, found %r (%s)"
                       % (path, error.strerror or error)) from None
    except (UnicodeDecodeError, ValueError) as error:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "configPath: expected a JSON file, found %r, which is not "
                       "(%s)" % (path, error)) from None
    if not isinstance(content, dict):
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "configPath: expected a JSON object in %r, found %s %s"
                       % (path, article(type(content).__name__), type(content).__name__))


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
