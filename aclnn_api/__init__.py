"""npuemu's aclnn: the framework (aclTensor, arrays, scalars, tensor and scalar lists, executors,
status codes, aclnnInit/aclnnFinalize) and the operators' two-phase functions, by their C names.

    ws, executor, ret = aclnnLogSigmoidBackwardGetWorkspaceSize(gradOutput, self, buffer, gradInput)
    ret = aclnnLogSigmoidBackward(workspace_ptr, ws, executor, stream)

Every framework object is returned as a Python object; every call that takes one also takes its
integer handle (`.handle`), as a C caller passes it.
"""
from emulator import sites as _sites
from emulator.status import *  # noqa: F401,F403  ACL_SUCCESS, ACL_MEMCPY_*, ACL_MEM_MALLOC_* ...

_sites.register_package_dir(__file__)  # resources made here carry the site of the user's call

try:  # first, so that a missing build is named as such, not as a circular import of the operators
    from . import _kernels  # noqa: F401,E402
except ImportError:
    raise ImportError("npuemu kernels not built: run `make install` (or `pip install .`) in the npuemu checkout; "
                      "no extension aclnn_api._kernels is installed for %s" % __path__[0]) from None

from .arrays import (aclBoolArray, aclCreateBoolArray, aclCreateFloatArray, aclCreateIntArray,  # noqa: E402
                     aclCreateScalar, aclDestroyBoolArray, aclDestroyFloatArray, aclDestroyIntArray,
                     aclDestroyScalar, aclFloatArray, aclGetBoolArraySize, aclGetFloatArraySize,
                     aclGetIntArraySize, aclIntArray, aclScalar)
from .base import aclnnFinalize, aclnnInit  # noqa: E402
from emulator.dtypes import *  # noqa: F401,F403,E402
from .executor import (AclSetDynamicInputTensorAddr, AclSetDynamicOutputTensorAddr,  # noqa: E402
                       AclSetDynamicTensorAddr, AclSetInputTensorAddr, AclSetOutputTensorAddr, AclSetTensorAddr,
                       aclDestroyAclOpExecutor, aclOpExecutor, aclSetAclOpExecutorRepeatable,
                       aclSetDynamicInputTensorAddr, aclSetDynamicOutputTensorAddr, aclSetDynamicTensorAddr,
                       aclSetInputTensorAddr, aclSetOutputTensorAddr, aclSetTensorAddr)
from .status import *  # noqa: F401,F403,E402
from .tensor import (aclCreateTensor, aclDestroyTensor, aclGetDataType, aclGetFormat,  # noqa: E402
                     aclGetRawTensorAddr, aclGetStorageShape, aclGetViewOffset, aclGetViewShape,
                     aclGetViewStrides, aclInitTensor, aclSetRawTensorAddr, aclTensor)
from .tensor_list import (aclCreateScalarList, aclCreateTensorList, aclDestroyScalarList,  # noqa: E402
                          aclDestroyTensorList, aclGetScalarListSize, aclGetTensorListSize, aclScalarList,
                          aclTensorList)

from .declaration import all_declarations  # noqa: E402
for _declaration in all_declarations():  # every operator module that declares itself
    globals().update(_declaration.functions())
