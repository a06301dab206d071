"""pyACL-compatible facade over npuemu's emulated runtime: `import acl` as on a real CANN host.

On a machine with the real CANN toolkit its `acl` module comes first on PYTHONPATH and wins.
Calls return their outputs first and the status last; pointers and handles are plain ints.
"""
from emulator import runtime as _runtime
from emulator import sites as _sites
from emulator.status import *  # noqa: F401,F403  the constants, as a convenience (pyACL itself has none)

_sites.register_package_dir(__file__)
from . import rt, util  # noqa: E402,F401
from emulator.dtypes import *  # noqa: E402,F401,F403  ACL_FLOAT, ACL_FORMAT_ND, ...

float16_to_float = _runtime.aclFloat16ToFloat
float_to_float16 = _runtime.aclFloatToFloat16


# The runtime's own calls, so that a wrong argument count is a status and a message, as everywhere.
init = _runtime.aclInit                         # -> ret; config_path None, "" or a JSON file
finalize = _runtime.aclFinalize                 # -> ret
finalize_reference = _runtime.aclFinalizeReference  # -> (ref_count, ret)
get_recent_err_msg = _runtime.aclGetRecentErrMsg    # -> this thread's messages, newest first; cleared
get_soc_name = _runtime.aclrtGetSocName         # -> the emulated chip's name
create_data_buffer = _runtime.aclCreateDataBuffer          # -> the buffer (0 on failure)
destroy_data_buffer = _runtime.aclDestroyDataBuffer        # -> ret
get_data_buffer_addr = _runtime.aclGetDataBufferAddr       # -> the address
get_data_buffer_size = _runtime.aclGetDataBufferSize       # -> the size's low 32 bits (deprecated)
get_data_buffer_size_v2 = _runtime.aclGetDataBufferSizeV2  # -> the size
