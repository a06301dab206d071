"""npuemu's aclnn: the framework (aclTensor, arrays, executors, status codes) and the operators'
two-phase functions, by their C names.

    ws, executor, ret = aclnnLogSigmoidBackwardGetWorkspaceSize(gradOutput, self, buffer, gradInput)
    ret = aclnnLogSigmoidBackward(workspace_ptr, ws, executor, stream)
"""
from emulator import errors as _errors
from emulator.status import *  # noqa: F401,F403  ACL_SUCCESS, ACL_MEMCPY_*, ACL_MEM_MALLOC_* ...

_errors.register_package_dir(__file__)

try:  # first, so that a missing build is named as such, not as a circular import of the operators
    from . import _kernels  # noqa: F401,E402
except ImportError:
    raise ImportError("npuemu kernels not built: run `make install` (or `pip install .`) in the npuemu checkout; "
                      "no extension aclnn_api._kernels is installed for %s" % __path__[0]) from None

from .arrays import (aclBoolArray, aclCreateBoolArray, aclCreateFloatArray, aclCreateIntArray,  # noqa: E402
                     aclCreateScalar, aclDestroyBoolArray, aclDestroyFloatArray, aclDestroyIntArray,
                     aclDestroyScalar, aclFloatArray, aclGetBoolArraySize, aclGetFloatArraySize,
                     aclGetIntArraySize, aclIntArray, aclScalar)
from emulator.dtypes import *  # noqa: F401,F403,E402
from .executor import aclDestroyAclOpExecutor, aclOpExecutor, aclSetAclOpExecutorRepeatable  # noqa: E402
from .status import *  # noqa: F401,F403,E402
from .tensor import (aclCreateTensor, aclDestroyTensor, aclGetDataType, aclGetFormat,  # noqa: E402
                     aclGetRawTensorAddr, aclGetStorageShape, aclGetViewOffset, aclGetViewShape,
                     aclGetViewStrides, aclSetRawTensorAddr, aclTensor)

from .declaration import all_declarations  # noqa: E402
for _declaration in all_declarations():  # every operator module that declares itself
    globals().update(_declaration.functions())
