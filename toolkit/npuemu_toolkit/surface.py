"""The C surface of npuemu's toolkit, declared once.

Every exported C function is one `Function`: its exact prototype (as the real headers declare it),
the header that declares it, the libraries that export it, the Python callable it forwards to, and
which of its parameters are outputs or the counts of arrays. Every header is one `Header`: the
headers it includes and its blocks (typedefs, enums, constants, functions). `toolkit/generate.py`
writes from this table the headers, the forwarders of each library, their export lists and the
bridge's table of signatures; the tests read it too.

Enum and constant values are not written here: they are read from the Python runtime's own modules
(emulator/status.py, emulator/dtypes.py, aclnn_api/status.py), so C and Python cannot disagree.
`Values("path", first, last)` is the run of `NAME = number` assignments of that module from `first`
to `last`, in file order.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

# --------------------------------------------------------------------------------------------------
# The libraries (lib64/<name>.so). The bridge holds the embedded interpreter; the others forward to it.

RUNTIME_LIBRARIES = ("libascendcl", "libacl_rt")   # the same exports: the docs link either
FRAMEWORK_LIBRARIES = ("libnnopbase",)
# An operator is exported by libopapi (every operator) and by the library of the CANN repository it
# comes from: libopapi_nn (ops-nn) or libopapi_math (ops-math). `operator(...)` takes one of these.
NN_LIBRARIES = ("libopapi", "libopapi_nn")
MATH_LIBRARIES = ("libopapi", "libopapi_math")
OPERATOR_LIBRARIES = ("libopapi", "libopapi_nn", "libopapi_math")   # every library that exports operators
# Empty libraries some build recipes link or load by name (no symbol of npuemu's lives there yet).
EMPTY_LIBRARIES = ("libaclnn_ops_infer", "libaclnn_math", "libacl_op_compiler", "libhccl")
LIBRARIES = RUNTIME_LIBRARIES + FRAMEWORK_LIBRARIES + OPERATOR_LIBRARIES + EMPTY_LIBRARIES  # every public one
# A library's own dependencies besides the bridge, so that dlopen("libopapi.so") + dlsym("aclCreateTensor")
# finds the framework, as it does on the card's toolkit.
LIBRARY_NEEDS = {"libopapi": ("libnnopbase",), "libopapi_nn": ("libnnopbase",), "libopapi_math": ("libnnopbase",)}


@dataclass(frozen=True)
class Values:
    """A run of `NAME = number` assignments of a Python module of the runtime, `first` to `last`."""
    module: str
    first: str
    last: str
    skip: tuple = ()


@dataclass(frozen=True)
class Enum:
    """`typedef enum [tag] { ... } name;` with the values of `values`."""
    name: str
    values: Values
    tagged: bool = False          # `typedef enum name {...} name;`, as the real header writes some


@dataclass(frozen=True)
class Constants:
    """`static const int NAME = value;` (style "static") or `#define NAME value` (style "define")."""
    values: Values
    style: str = "static"


@dataclass(frozen=True)
class Text:
    """Declarations written as they are (typedefs, macros)."""
    text: str


@dataclass(frozen=True)
class Function:
    """One exported C function.

    prototype: the exact declaration, return type first, without the visibility macro.
    target:    "module:attribute" of the Python callable it forwards to (pyACL conventions: the
               outputs first, the status last).
    outputs:   the out-parameters, in the order the Python callable returns them.
    counts:    {array parameter: its count parameter} for `const T *` + count pairs (input or output).
    strings:   "static" (one copy per distinct value, valid forever) or "thread" (valid until the
               thread's next call) for a `const char *` return.
    """
    prototype: str
    target: str
    outputs: tuple = ()
    counts: dict = field(default_factory=dict)
    strings: str = "static"

    @property
    def name(self) -> str:
        return self.prototype.split("(", 1)[0].split()[-1].lstrip("*")


@dataclass(frozen=True)
class Header:
    """include/<path>: `includes` first (system ones in <>), then the blocks in order. `cpp_only`
    headers use C++ (constexpr, <cstdint>), as the real aclnn headers do."""
    path: str
    includes: tuple = ()
    blocks: tuple = ()
    libraries: tuple = ()           # where its functions are exported
    cpp_only: bool = False
    visibility: str = "ACL_FUNC_VISIBILITY"
    aliases: tuple = ()             # other paths with the same content (include/aclnnop/level2/...)


STATUS = "emulator/status.py"
DTYPES = "emulator/dtypes.py"
ACLNN_STATUS = "aclnn_api/status.py"
RT = "emulator.runtime"
NN = "aclnn_api"
ADAPT = "npuemu_toolkit.adapters"

# --------------------------------------------------------------------------------------------------
# acl/: the runtime (C99-clean)

ACL_BASE_RT = Header("acl/acl_base_rt.h", includes=("<stdint.h>", "<stddef.h>"), libraries=RUNTIME_LIBRARIES, blocks=(
    Text("""#ifdef FUNC_VISIBILITY
#define ACL_FUNC_VISIBILITY __attribute__((visibility("default")))
#else
#define ACL_FUNC_VISIBILITY
#endif

#ifdef __GNUC__
#define ACL_DEPRECATED __attribute__((deprecated))
#define ACL_DEPRECATED_MESSAGE(message) __attribute__((deprecated(message)))
#else
#define ACL_DEPRECATED
#define ACL_DEPRECATED_MESSAGE(message)
#endif

typedef void *aclrtStream;
typedef void *aclrtEvent;
typedef void *aclrtContext;
typedef void *aclrtNotify;
typedef int aclError;
typedef uint16_t aclFloat16;"""),
    Constants(Values(STATUS, "ACL_SUCCESS", "ACL_ERROR_NONE")),
    Constants(Values(STATUS, "ACL_ERROR_INVALID_PARAM", "ACL_ERROR_PROFILING_FAILURE")),
    Enum("aclDataType", Values(DTYPES, "ACL_DT_UNDEFINED", "ACL_FLOAT4_E1M2")),
    Enum("aclFormat", Values(DTYPES, "ACL_FORMAT_UNDEFINED", "ACL_FORMAT_FRACTAL_NZ_C0_8")),
    Function("size_t aclDataTypeSize(aclDataType dataType)", "emulator.dtypes:aclDataTypeSize"),
    Function("float aclFloat16ToFloat(aclFloat16 value)", RT + ":aclFloat16ToFloat"),
    Function("aclFloat16 aclFloatToFloat16(float value)", RT + ":aclFloatToFloat16"),
    Function("const char *aclrtGetSocName()", RT + ":aclrtGetSocName"),
))

RT_ERROR_CODES = Header("acl/error_codes/rt_error_codes.h", includes=("<stddef.h>",), blocks=(
    Constants(Values(STATUS, "ACL_RT_SUCCESS", "ACL_RT_SUCCESS"), style="define"),  # the runtime's own 0
    Constants(Values(STATUS, "ACL_ERROR_RT_PARAM_INVALID", "ACL_ERROR_RT_DRV_INTERNAL_ERROR"), style="define"),
))
GE_ERROR_CODES = Header("acl/error_codes/ge_error_codes.h", includes=("<stddef.h>", "<stdint.h>"))
ACL_BASE_MDL = Header("acl/acl_base_mdl.h", includes=('"acl_base_rt.h"',))
ACL_BASE = Header("acl/acl_base.h", includes=('"acl_base_rt.h"', '"acl_base_mdl.h"', '"error_codes/rt_error_codes.h"',
                                              '"error_codes/ge_error_codes.h"'))
ACL_RT_ALLOCATOR = Header("acl/acl_rt_allocator.h", includes=('"acl_base.h"',))

ACL_RT = Header("acl/acl_rt.h", includes=("<stdint.h>", "<stddef.h>", "<stdbool.h>", '"acl_base.h"', '"acl_rt_allocator.h"'),
                libraries=RUNTIME_LIBRARIES, blocks=(
    Constants(Values(STATUS, "ACL_MAJOR_VERSION", "ACL_PATCH_VERSION"), style="define"),
    Enum("aclrtRunMode", Values(STATUS, "ACL_DEVICE", "ACL_HOST"), tagged=True),
    Enum("aclrtMemcpyKind", Values(STATUS, "ACL_MEMCPY_HOST_TO_HOST", "ACL_MEMCPY_INTER_DEVICE_TO_DEVICE"), tagged=True),
    Enum("aclrtMemMallocPolicy", Values(STATUS, "ACL_MEM_MALLOC_HUGE_FIRST", "ACL_MEM_ACCESS_USER_SPACE_READONLY"), tagged=True),
    Enum("aclrtMemAttr", Values(STATUS, "ACL_DDR_MEM", "ACL_MEM_P2P_HUGE1G"), tagged=True),
    Enum("aclrtEventRecordedStatus", Values(STATUS, "ACL_EVENT_RECORDED_STATUS_NOT_READY", "ACL_EVENT_RECORDED_STATUS_COMPLETE"), tagged=True),
    Enum("aclrtEventStatus", Values(STATUS, "ACL_EVENT_STATUS_COMPLETE", "ACL_EVENT_STATUS_RESERVED"), tagged=True),
    Enum("aclrtEventWaitStatus", Values(STATUS, "ACL_EVENT_WAIT_STATUS_COMPLETE", "ACL_EVENT_WAIT_STATUS_RESERVED"), tagged=True),
    Enum("aclrtStreamStatus", Values(STATUS, "ACL_STREAM_STATUS_COMPLETE", "ACL_STREAM_STATUS_RESERVED"), tagged=True),
    Enum("aclrtCallbackBlockType", Values(STATUS, "ACL_CALLBACK_NO_BLOCK", "ACL_CALLBACK_BLOCK"), tagged=True),
    Enum("aclrtTsId", Values(STATUS, "ACL_TS_ID_AICORE", "ACL_TS_ID_AIVECTOR"), tagged=True),
    Enum("aclrtFloatOverflowMode", Values(STATUS, "ACL_RT_OVERFLOW_MODE_SATURATION", "ACL_RT_OVERFLOW_MODE_INFNAN"), tagged=True),
    Enum("aclrtLastErrLevel", Values(STATUS, "ACL_RT_THREAD_LEVEL", "ACL_RT_THREAD_LEVEL"), tagged=True),
    Constants(Values(STATUS, "ACL_EVENT_SYNC", "ACL_EVENT_IPC"), style="define"),
    Constants(Values(STATUS, "ACL_STREAM_FAST_LAUNCH", "ACL_STREAM_DEVICE_USE_ONLY"), style="define"),
    Text("typedef void (*aclrtCallback)(void *userData);"),
    # initialisation
    Function("aclError aclInit(const char *configPath)", RT + ":aclInit"),
    Function("aclError aclFinalize()", RT + ":aclFinalize"),
    Function("aclError aclFinalizeReference(uint64_t *refCount)", RT + ":aclFinalizeReference", outputs=("refCount",)),
    Function("const char *aclGetRecentErrMsg()", RT + ":aclGetRecentErrMsg", strings="thread"),
    Function("aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t *patchVersion)",
             RT + ":aclrtGetVersion", outputs=("majorVersion", "minorVersion", "patchVersion")),
    # devices
    Function("aclError aclrtSetDevice(int32_t deviceId)", RT + ":aclrtSetDevice"),
    Function("aclError aclrtResetDevice(int32_t deviceId)", RT + ":aclrtResetDevice"),
    Function("aclError aclrtResetDeviceForce(int32_t deviceId)", RT + ":aclrtResetDeviceForce"),
    Function("aclError aclrtGetDevice(int32_t *deviceId)", RT + ":aclrtGetDevice", outputs=("deviceId",)),
    Function("aclError aclrtGetDeviceCount(uint32_t *count)", RT + ":aclrtGetDeviceCount", outputs=("count",)),
    Function("aclError aclrtGetRunMode(aclrtRunMode *runMode)", RT + ":aclrtGetRunMode", outputs=("runMode",)),
    Function("aclError aclrtSynchronizeDevice(void)", RT + ":aclrtSynchronizeDevice"),
    Function("aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout)", RT + ":aclrtSynchronizeDeviceWithTimeout"),
    # contexts
    Function("aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId)", RT + ":aclrtCreateContext",
             outputs=("context",)),
    Function("aclError aclrtDestroyContext(aclrtContext context)", RT + ":aclrtDestroyContext"),
    Function("aclError aclrtSetCurrentContext(aclrtContext context)", RT + ":aclrtSetCurrentContext"),
    Function("aclError aclrtGetCurrentContext(aclrtContext *context)", RT + ":aclrtGetCurrentContext", outputs=("context",)),
    # streams
    Function("aclError aclrtCreateStream(aclrtStream *stream)", RT + ":aclrtCreateStream", outputs=("stream",)),
    Function("aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag)",
             RT + ":aclrtCreateStreamWithConfig", outputs=("stream",)),
    Function("aclError aclrtDestroyStream(aclrtStream stream)", RT + ":aclrtDestroyStream"),
    Function("aclError aclrtDestroyStreamForce(aclrtStream stream)", RT + ":aclrtDestroyStreamForce"),
    Function("aclError aclrtSynchronizeStream(aclrtStream stream)", RT + ":aclrtSynchronizeStream"),
    Function("aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout)",
             RT + ":aclrtSynchronizeStreamWithTimeout"),
    Function("aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status)", RT + ":aclrtStreamQuery",
             outputs=("status",)),
    Function("aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)", RT + ":aclrtStreamWaitEvent"),
    # events
    Function("aclError aclrtCreateEvent(aclrtEvent *event)", RT + ":aclrtCreateEvent", outputs=("event",)),
    Function("aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag)", RT + ":aclrtCreateEventWithFlag",
             outputs=("event",)),
    Function("aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag)", RT + ":aclrtCreateEventExWithFlag",
             outputs=("event",)),
    Function("aclError aclrtDestroyEvent(aclrtEvent event)", RT + ":aclrtDestroyEvent"),
    Function("aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)", RT + ":aclrtRecordEvent"),
    Function("aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream)", RT + ":aclrtResetEvent"),
    Function("aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus *status)", RT + ":aclrtQueryEvent",
             outputs=("status",)),
    Function("aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status)",
             RT + ":aclrtQueryEventStatus", outputs=("status",)),
    Function("aclError aclrtQueryEventWaitStatus(aclrtEvent event, aclrtEventWaitStatus *status)",
             RT + ":aclrtQueryEventWaitStatus", outputs=("status",)),
    Function("aclError aclrtSynchronizeEvent(aclrtEvent event)", RT + ":aclrtSynchronizeEvent"),
    Function("aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout)",
             RT + ":aclrtSynchronizeEventWithTimeout"),
    Function("aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent)",
             RT + ":aclrtEventElapsedTime", outputs=("ms",)),
    Function("aclError aclrtEventGetTimestamp(aclrtEvent event, uint64_t *timestamp)", RT + ":aclrtEventGetTimestamp",
             outputs=("timestamp",)),
    # memory
    Function("aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)", RT + ":aclrtMalloc",
             outputs=("devPtr",)),
    Function("aclError aclrtMallocAlign32(void **devPtr, size_t size, aclrtMemMallocPolicy policy)",
             RT + ":aclrtMallocAlign32", outputs=("devPtr",)),
    Function("aclError aclrtMallocCached(void **devPtr, size_t size, aclrtMemMallocPolicy policy)",
             RT + ":aclrtMallocCached", outputs=("devPtr",)),
    Function("aclError aclrtFree(void *devPtr)", RT + ":aclrtFree"),
    Function("aclError aclrtMallocHost(void **hostPtr, size_t size)", RT + ":aclrtMallocHost", outputs=("hostPtr",)),
    Function("aclError aclrtFreeHost(void *hostPtr)", RT + ":aclrtFreeHost"),
    Function("aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total)", RT + ":aclrtGetMemInfo",
             outputs=("free", "total")),
    Function("aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind)",
             RT + ":aclrtMemcpy"),
    Function("aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, "
             "aclrtMemcpyKind kind, aclrtStream stream)", RT + ":aclrtMemcpyAsync"),
    Function("aclError aclrtMemcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, "
             "size_t height, aclrtMemcpyKind kind)", RT + ":aclrtMemcpy2d"),
    Function("aclError aclrtMemcpy2dAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, "
             "size_t height, aclrtMemcpyKind kind, aclrtStream stream)", RT + ":aclrtMemcpy2dAsync"),
    Function("aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)", RT + ":aclrtMemset"),
    Function("aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream)",
             RT + ":aclrtMemsetAsync"),
    # callbacks
    Function("aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream)", RT + ":aclrtSubscribeReport"),
    Function("aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream)", RT + ":aclrtUnSubscribeReport"),
    Function("aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType blockType, "
             "aclrtStream stream)", ADAPT + ":aclrtLaunchCallback"),
    Function("aclError aclrtProcessReport(int32_t timeout)", RT + ":aclrtProcessReport"),
    # errors
    Function("aclError aclrtGetLastError(aclrtLastErrLevel level)", RT + ":aclrtGetLastError"),
    Function("aclError aclrtPeekAtLastError(aclrtLastErrLevel level)", RT + ":aclrtPeekAtLastError"),
))

ACL_OP = Header("acl/acl_op.h", includes=('"acl_base.h"',))
ACL_MDL = Header("acl/acl_mdl.h", includes=('"acl_base.h"',))
ACL = Header("acl/acl.h", includes=('"acl_rt.h"', '"acl_op.h"', '"acl_mdl.h"'))

# --------------------------------------------------------------------------------------------------
# aclnn/: the framework (C++ only, as the real headers)

ACL_META = Header("aclnn/acl_meta.h", includes=("<cstdint>", "<cstdlib>", '"acl/acl_base.h"'),
                  libraries=FRAMEWORK_LIBRARIES, cpp_only=True, blocks=(
    Text("""#ifndef ACLNN_META
#define ACLNN_META
typedef struct aclOpExecutor aclOpExecutor;
typedef struct aclTensor aclTensor;
typedef struct aclScalar aclScalar;
typedef struct aclIntArray aclIntArray;
typedef struct aclFloatArray aclFloatArray;
typedef struct aclBoolArray aclBoolArray;
typedef struct aclTensorList aclTensorList;
typedef struct aclScalarList aclScalarList;
#endif

typedef int32_t aclnnStatus;
constexpr aclnnStatus OK = 0;"""),
    Function("aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType, "
             "const int64_t *stride, int64_t offset, aclFormat format, const int64_t *storageDims, "
             "uint64_t storageDimsNum, void *tensorData)", ADAPT + ":aclCreateTensor",
             counts={"viewDims": "viewDimsNum", "stride": "viewDimsNum", "storageDims": "storageDimsNum"}),
    Function("aclScalar *aclCreateScalar(void *value, aclDataType dataType)", ADAPT + ":aclCreateScalar"),
    Function("aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size)", NN + ":aclCreateIntArray",
             counts={"value": "size"}),
    Function("aclFloatArray *aclCreateFloatArray(const float *value, uint64_t size)", NN + ":aclCreateFloatArray",
             counts={"value": "size"}),
    Function("aclBoolArray *aclCreateBoolArray(const bool *value, uint64_t size)", NN + ":aclCreateBoolArray",
             counts={"value": "size"}),
    Function("aclTensorList *aclCreateTensorList(const aclTensor *const *value, uint64_t size)",
             ADAPT + ":aclCreateTensorList", counts={"value": "size"}),
    Function("aclScalarList *aclCreateScalarList(const aclScalar *const *value, uint64_t size)",
             ADAPT + ":aclCreateScalarList", counts={"value": "size"}),
    Function("aclnnStatus aclDestroyTensor(const aclTensor *tensor)", NN + ":aclDestroyTensor"),
    Function("aclnnStatus aclDestroyScalar(const aclScalar *scalar)", NN + ":aclDestroyScalar"),
    Function("aclnnStatus aclDestroyIntArray(const aclIntArray *array)", NN + ":aclDestroyIntArray"),
    Function("aclnnStatus aclDestroyFloatArray(const aclFloatArray *array)", NN + ":aclDestroyFloatArray"),
    Function("aclnnStatus aclDestroyBoolArray(const aclBoolArray *array)", NN + ":aclDestroyBoolArray"),
    Function("aclnnStatus aclDestroyTensorList(const aclTensorList *array)", NN + ":aclDestroyTensorList"),
    Function("aclnnStatus aclDestroyScalarList(const aclScalarList *array)", NN + ":aclDestroyScalarList"),
    Function("aclnnStatus aclGetIntArraySize(const aclIntArray *array, uint64_t *size)", NN + ":aclGetIntArraySize",
             outputs=("size",)),
    Function("aclnnStatus aclGetFloatArraySize(const aclFloatArray *array, uint64_t *size)",
             NN + ":aclGetFloatArraySize", outputs=("size",)),
    Function("aclnnStatus aclGetBoolArraySize(const aclBoolArray *array, uint64_t *size)", NN + ":aclGetBoolArraySize",
             outputs=("size",)),
    Function("aclnnStatus aclGetTensorListSize(const aclTensorList *tensorList, uint64_t *size)",
             NN + ":aclGetTensorListSize", outputs=("size",)),
    Function("aclnnStatus aclGetScalarListSize(const aclScalarList *scalarList, uint64_t *size)",
             NN + ":aclGetScalarListSize", outputs=("size",)),
    Function("aclnnStatus aclGetViewShape(const aclTensor *tensor, int64_t **viewDims, uint64_t *viewDimsNum)",
             NN + ":aclGetViewShape", outputs=("viewDims",), counts={"viewDims": "viewDimsNum"}),
    Function("aclnnStatus aclGetStorageShape(const aclTensor *tensor, int64_t **storageDims, uint64_t *storageDimsNum)",
             NN + ":aclGetStorageShape", outputs=("storageDims",), counts={"storageDims": "storageDimsNum"}),
    Function("aclnnStatus aclGetViewStrides(const aclTensor *tensor, int64_t **stridesValue, uint64_t *stridesNum)",
             NN + ":aclGetViewStrides", outputs=("stridesValue",), counts={"stridesValue": "stridesNum"}),
    Function("aclnnStatus aclGetViewOffset(const aclTensor *tensor, int64_t *offset)", NN + ":aclGetViewOffset",
             outputs=("offset",)),
    Function("aclnnStatus aclGetFormat(const aclTensor *tensor, aclFormat *format)", NN + ":aclGetFormat",
             outputs=("format",)),
    Function("aclnnStatus aclGetDataType(const aclTensor *tensor, aclDataType *dataType)", NN + ":aclGetDataType",
             outputs=("dataType",)),
    Function("aclnnStatus aclInitTensor(aclTensor *tensor, const int64_t *viewDims, uint64_t viewDimsNum, "
             "aclDataType dataType, const int64_t *stride, int64_t offset, aclFormat format, "
             "const int64_t *storageDims, uint64_t storageDimsNum, void *tensorDataAddr)", ADAPT + ":aclInitTensor",
             counts={"viewDims": "viewDimsNum", "stride": "viewDimsNum", "storageDims": "storageDimsNum"}),
    Function("aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor)",
             NN + ":aclSetAclOpExecutorRepeatable"),
    Function("aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor)", NN + ":aclDestroyAclOpExecutor"),
    Function("aclnnStatus aclSetInputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, "
             "void *addr)", NN + ":aclSetInputTensorAddr"),
    Function("aclnnStatus aclSetOutputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, "
             "void *addr)", NN + ":aclSetOutputTensorAddr"),
    Function("aclnnStatus aclSetTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, "
             "void *addr)", NN + ":aclSetTensorAddr"),
    Function("aclnnStatus AclSetInputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, "
             "void *addr)", NN + ":AclSetInputTensorAddr"),
    Function("aclnnStatus AclSetOutputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, "
             "void *addr)", NN + ":AclSetOutputTensorAddr"),
    Function("aclnnStatus AclSetTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, "
             "void *addr)", NN + ":AclSetTensorAddr"),
    Function("aclnnStatus aclSetRawTensorAddr(aclTensor *tensor, void *addr)", NN + ":aclSetRawTensorAddr"),
    Function("aclnnStatus aclGetRawTensorAddr(const aclTensor *tensor, void **addr)", NN + ":aclGetRawTensorAddr",
             outputs=("addr",)),
))

ACLNN_BASE = Header("aclnn/aclnn_base.h", includes=('"aclnn/acl_meta.h"',), libraries=FRAMEWORK_LIBRARIES,
                    cpp_only=True, blocks=(
    Function("aclnnStatus aclnnInit(const char *configPath)", NN + ":aclnnInit"),
    Function("aclnnStatus aclnnFinalize()", NN + ":aclnnFinalize"),
))

OP_ERRNO = Header("aclnn/opdev/op_errno.h", includes=("<cstdint>",), cpp_only=True, blocks=(
    Constants(Values(ACLNN_STATUS, "ACLNN_SUCCESS", "ACLNN_ERR_INNER_STATIC_BLOCK_DIM_INVALID"), style="define"),
))

# --------------------------------------------------------------------------------------------------
# aclnnop/: the operators, one header each (also under level2/, the older include path)

ACLNN_UTIL = Header("aclnnop/aclnn_util.h", aliases=("aclnnop/level2/aclnn_util.h",), blocks=(
    Text("""#if defined(_MSC_VER)
#define ACLNN_API __declspec(dllexport)
#else
#define ACLNN_API __attribute__((visibility("default")))
#endif"""),
))


def operator(header: str, *prototypes: str, libraries: tuple = NN_LIBRARIES, extra_includes: tuple = ()) -> Header:
    """An operator's header: the prototypes of its two phases, in the header's order, forwarded to
    aclnn_api's functions of the same names, exported by `libraries` (NN_LIBRARIES for an operator of
    ops-nn, MATH_LIBRARIES for one of ops-math). A header that declares several operators (as
    aclnn_logsigmoid.h declares aclnnLogSigmoid and aclnnLogSigmoidForward) lists both phases of
    each, one operator after the other."""
    return Header("aclnnop/" + header, includes=extra_includes + ('"aclnn/aclnn_base.h"', '"aclnn_util.h"'),
                  libraries=libraries, cpp_only=True, visibility="ACLNN_API",
                  aliases=("aclnnop/level2/" + header,), blocks=tuple(
                      Function(prototype, NN + ":" + prototype.split("(")[0].split()[-1],
                               outputs=("workspaceSize", "executor") if "GetWorkspaceSize" in prototype else ())
                      for prototype in prototypes))


OPERATORS = (
    operator("aclnn_binary_cross_entropy_with_logits.h",
             "aclnnStatus aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize(const aclTensor *self, "
             "const aclTensor *target, const aclTensor *weightOptional, const aclTensor *posWeightOptional, "
             "int64_t reduction, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor)",
             "aclnnStatus aclnnBinaryCrossEntropyWithLogits(void *workspace, uint64_t workspaceSize, "
             "aclOpExecutor *executor, const aclrtStream stream)"),
    operator("aclnn_binary_cross_entropy_with_logits_backward.h",
             "aclnnStatus aclnnBinaryCrossEntropyWithLogitsBackwardGetWorkspaceSize(const aclTensor *gradOutput, "
             "const aclTensor *self, const aclTensor *target, const aclTensor *weightOptional, "
             "const aclTensor *posWeightOptional, int64_t reduction, aclTensor *out, uint64_t *workspaceSize, "
             "aclOpExecutor **executor)",
             "aclnnStatus aclnnBinaryCrossEntropyWithLogitsBackward(void *workspace, uint64_t workspaceSize, "
             "aclOpExecutor *executor, const aclrtStream stream)"),
    operator("aclnn_ctc_loss.h",
             "aclnnStatus aclnnCtcLossGetWorkspaceSize(const aclTensor *logProbs, const aclTensor *targets, "
             "const aclIntArray *inputLengths, const aclIntArray *targetLengths, int64_t blank, bool zeroInfinity, "
             "aclTensor *negLogLikelihoodOut, aclTensor *logAlphaOut, uint64_t *workspaceSize, "
             "aclOpExecutor **executor)",
             "aclnnStatus aclnnCtcLoss(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, "
             "aclrtStream stream)"),
    operator("aclnn_ctc_loss_backward.h",
             "aclnnStatus aclnnCtcLossBackwardGetWorkspaceSize(const aclTensor *gradOut, const aclTensor *logProbs, "
             "const aclTensor *targets, const aclIntArray *inputLengths, const aclIntArray *targetLengths, "
             "const aclTensor *negLogLikelihood, const aclTensor *logAlpha, int64_t blank, bool zeroInfinity, "
             "aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor)",
             "aclnnStatus aclnnCtcLossBackward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, "
             "aclrtStream stream)"),
    operator("aclnn_kl_div.h",
             "aclnnStatus aclnnKlDivGetWorkspaceSize(const aclTensor *self, const aclTensor *target, int64_t reduction, "
             "bool logTarget, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor)",
             "aclnnStatus aclnnKlDiv(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, "
             "aclrtStream stream)", libraries=MATH_LIBRARIES),
    operator("aclnn_kl_div_backward.h",
             "aclnnStatus aclnnKlDivBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, "
             "const aclTensor *target, int64_t reduction, bool logTarget, aclTensor *out, uint64_t *workspaceSize, "
             "aclOpExecutor **executor)",
             "aclnnStatus aclnnKlDivBackward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, "
             "aclrtStream stream)"),
    operator("aclnn_logsigmoid.h",
             "aclnnStatus aclnnLogSigmoidGetWorkspaceSize(const aclTensor *self, aclTensor *out, "
             "uint64_t *workspaceSize, aclOpExecutor **executor)",
             "aclnnStatus aclnnLogSigmoid(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, "
             "aclrtStream stream)",
             "aclnnStatus aclnnLogSigmoidForwardGetWorkspaceSize(const aclTensor *self, aclTensor *out, "
             "aclTensor *buffer, uint64_t *workspaceSize, aclOpExecutor **executor)",
             "aclnnStatus aclnnLogSigmoidForward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, "
             "aclrtStream stream)"),
    operator("aclnn_logsigmoid_backward.h",
             "aclnnStatus aclnnLogSigmoidBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, "
             "const aclTensor *buffer, aclTensor *gradInput, uint64_t *workspaceSize, aclOpExecutor **executor)",
             "aclnnStatus aclnnLogSigmoidBackward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, "
             "aclrtStream stream)", extra_includes=("<array>",)),
    operator("aclnn_scaled_masked_softmax.h",
             "aclnnStatus aclnnScaledMaskedSoftmaxGetWorkspaceSize(const aclTensor *x, const aclTensor *mask, "
             "double scale, bool fixTriuMask, aclTensor *y, uint64_t *workspaceSize, aclOpExecutor **executor)",
             "aclnnStatus aclnnScaledMaskedSoftmax(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, "
             "aclrtStream stream)"),
    operator("aclnn_scaled_masked_softmax_backward.h",
             "aclnnStatus aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize(const aclTensor *gradOutput, "
             "const aclTensor *y, const aclTensor *mask, double scale, bool fixTriuMask, aclTensor *out, "
             "uint64_t *workspaceSize, aclOpExecutor **executor)",
             "aclnnStatus aclnnScaledMaskedSoftmaxBackward(void *workspace, uint64_t workspaceSize, "
             "aclOpExecutor *executor, const aclrtStream stream)"),
)

HEADERS = (ACL_BASE_RT, RT_ERROR_CODES, GE_ERROR_CODES, ACL_BASE_MDL, ACL_BASE, ACL_RT_ALLOCATOR, ACL_RT, ACL_OP,
           ACL_MDL, ACL, ACL_META, ACLNN_BASE, OP_ERRNO, ACLNN_UTIL) + OPERATORS


def functions() -> list:
    """(header, function) of every exported function, in table order."""
    return [(header, block) for header in HEADERS for block in header.blocks if isinstance(block, Function)]


def function(name: str) -> Optional[Function]:
    return next((fn for _, fn in functions() if fn.name == name), None)
