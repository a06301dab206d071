"""The aclnn framework (docs/runtime.md, "aclnn framework"): aclCreateTensor and its getters, the host
arrays and scalars, single-use and repeatable executors, every rejection of the second phase, and
the dtype/format/status constants with their real values.

The executor and workspace rules are exercised with a small test operator built on the framework's
own machinery (`first_phase`, `second_phase`, `Workspace`): it copies a tensor through its workspace,
addressing elements by the documented formula, so the results also check the framework's addresses."""
import ctypes
import os
import re
import sys

import numpy as np
import pytest

import acl
import aclnn_api as nn
from aclnn_api.operator import KernelLaunch, Workspace, first_phase, second_phase, view
from aclnn_api import checks
from npuemu_toolkit import surface
from support import REPO, Npu, assert_rejected, last_error, npu

sys.path.insert(0, os.path.join(REPO, "toolkit"))
import generate  # noqa: E402  (toolkit/generate.py: parse(), as the build reads the prototypes)

FLOAT = nn.ACL_FLOAT


# ---------------------------------------------------------------------------------------------
# a test operator: out = self, copied through a workspace of exactly the tensor's size


def element_addresses(pointer, dtype, shape, strides):
    """Address of each element in C order: pointer + sum(index * stride) * itemsize (aclnn_api/tensor.py)."""
    itemsize = nn.aclDataTypeSize(dtype)
    return [pointer + sum(i * s for i, s in zip(index, strides)) * itemsize for index in np.ndindex(*shape)]


def copy_through_workspace(source, workspace, target):
    itemsize = nn.aclDataTypeSize(source[1])
    for k, address in enumerate(element_addresses(*source)):
        ctypes.memmove(workspace + k * itemsize, address, itemsize)
    for k, address in enumerate(element_addresses(*target)):
        ctypes.memmove(address, workspace + k * itemsize, itemsize)


@first_phase("aclnnTestCopy")
def aclnnTestCopyGetWorkspaceSize(self, out):
    checks.not_null(self=self, out=out)
    checks.same_dtype("out", out, "self", self)
    checks.same_shape("out", out, "self", self)
    if self.is_empty:
        return None
    nbytes = self.numel * self.itemsize
    return KernelLaunch(copy_through_workspace, (view("self", self), Workspace(0, nbytes), view("out", out)),
                        workspace_size=nbytes)


aclnnTestCopy = second_phase("aclnnTestCopy")


def plan_copy(device, values, **layout):
    source = device.tensor(np.asarray(values, dtype=np.float64), FLOAT, **layout)
    target = device.empty(np.shape(values), FLOAT)
    size, executor, ret = aclnnTestCopyGetWorkspaceSize(source.tensor, target.tensor)
    assert ret == 0 and executor is not None, last_error()
    return source, target, size, executor


def lsb_executor(device, n=4):
    t = device.empty((n,), FLOAT).tensor
    size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(t, t, t, t)
    assert ret == 0
    return executor


# ---------------------------------------------------------------------------------------------
# Every rejection names a parameter of the call's C prototype


def prototype_parameters(prototype: str) -> list:
    """[(C type, name)] of a prototype's parameters, as the toolkit's generator reads them."""
    return [(param.ctype, param.name) for param in generate.parse(prototype).params]


# The framework calls of the C toolkit's table, and those it does not export, with the real headers' names.
FRAMEWORK_CALLS = [fn for header in (surface.ACL_META, surface.ACLNN_BASE) for fn in header.blocks
                   if isinstance(fn, surface.Function)] + [
    surface.Function("aclnnStatus %s(aclOpExecutor *executor, size_t irIndex, const size_t relativeIndex, "
                     "aclTensorList *tensors, void *addr)" % name, "aclnn_api:" + name)
    for name in ("aclSetDynamicInputTensorAddr", "aclSetDynamicOutputTensorAddr", "aclSetDynamicTensorAddr")]
OBJECT_TYPES = ("aclTensor", "aclOpExecutor", "aclIntArray", "aclFloatArray", "aclBoolArray", "aclScalar",
                "aclTensorList", "aclScalarList")


def valid_argument(fn: surface.Function, ctype: str, name: str, objects: dict, device: Npu) -> object:
    """A value the call takes for the parameter, so that a bad value of a later one is what it refuses."""
    base = ctype.replace("const", "").replace("*", "").strip()
    if base in OBJECT_TYPES:
        return [objects[base]] if ctype.count("*") == 2 else objects[base]
    if ctype.endswith("*") and base in ("int64_t", "float", "bool"):
        return {"int64_t": [4], "float": [1.0], "bool": [True]}[base]
    if base == "void":
        return 1.0 if fn.name == "aclCreateScalar" else device.malloc(16)  # a scalar's value, else an address
    return {"aclDataType": FLOAT, "aclFormat": nn.ACL_FORMAT_ND, "char": None}.get(base, 0)


@pytest.mark.parametrize("fn", FRAMEWORK_CALLS, ids=lambda fn: fn.name)
def test_every_rejection_of_a_framework_call_names_a_parameter_of_its_c_prototype(fn):
    """Each input of each framework call is given a bad value (null, a string) in turn, the others good: a
    rejection's message names a parameter the C prototype has (`tensorList`, not the Python layer's `array`)."""
    parameters = [(ctype, name) for ctype, name in prototype_parameters(fn.prototype)
                  if name not in fn.outputs and name not in fn.counts.values()]
    named = {name for _, name in prototype_parameters(fn.prototype)}
    call = getattr(nn, fn.name)
    with npu() as device:
        address = device.malloc(16)
        made = {"aclTensor": nn.aclCreateTensor([4], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, address),
                "aclOpExecutor": lsb_executor(device), "aclScalar": nn.aclCreateScalar(1.0, FLOAT),
                "aclIntArray": nn.aclCreateIntArray([1]), "aclFloatArray": nn.aclCreateFloatArray([1.0]),
                "aclBoolArray": nn.aclCreateBoolArray([True]),  # the lists own their own tensor and scalar:
                "aclTensorList": nn.aclCreateTensorList([nn.aclCreateTensor([4], FLOAT, None, 0, nn.ACL_FORMAT_ND,
                                                                            None, address)]),
                "aclScalarList": nn.aclCreateScalarList([nn.aclCreateScalar(1.0, FLOAT)])}
        assert nn.aclSetAclOpExecutorRepeatable(made["aclOpExecutor"]) == 0
        good = [valid_argument(fn, ctype, name, made, device) for ctype, name in parameters]
        last_error()
        for position, (_, name) in enumerate(parameters):
            for bad in (None, "bad"):
                call(*good[:position], bad, *good[position + 1:])
                for message in last_error().splitlines():  # (an alias AclSet... reports as aclSet...)
                    found = re.search(r"\): (\w+): ([A-Za-z_]\w*)", message)
                    assert found and found.group(1).lower() == fn.name.lower(), message
                    assert found.group(2) in named, (name, bad, message, sorted(named))
        for destroy, kind in ((nn.aclDestroyTensor, "aclTensor"), (nn.aclDestroyAclOpExecutor, "aclOpExecutor"),
                              (nn.aclDestroyScalar, "aclScalar"), (nn.aclDestroyIntArray, "aclIntArray"),
                              (nn.aclDestroyFloatArray, "aclFloatArray"), (nn.aclDestroyBoolArray, "aclBoolArray"),
                              (nn.aclDestroyTensorList, "aclTensorList"), (nn.aclDestroyScalarList, "aclScalarList")):
            destroy(made[kind])


# ---------------------------------------------------------------------------------------------
# aclCreateTensor and the getters


def getters(tensor):
    values = [getter(tensor) for getter in (nn.aclGetViewShape, nn.aclGetViewStrides, nn.aclGetViewOffset,
                                            nn.aclGetFormat, nn.aclGetStorageShape, nn.aclGetDataType,
                                            nn.aclGetRawTensorAddr)]
    assert all(ret == 0 for _, ret in values)
    return [value for value, _ in values]


@pytest.mark.parametrize("dims,strides,offset,fmt,storage,expected_strides", [
    ([2, 3, 4], None, 0, nn.ACL_FORMAT_ND, None, [12, 4, 1]),
    ([2, 5, 20], [100, 20, 1], 0, nn.ACL_FORMAT_NCL, [10, 20], [100, 20, 1]),   # the documentation's example
    ([4, 2], [1, 4], 0, nn.ACL_FORMAT_ND, [2, 4], [1, 4]),                       # transposed by strides
    ([3, 1, 5], None, 7, nn.ACL_FORMAT_NCL, [22], [5, 5, 1]),
    ([], None, 3, nn.ACL_FORMAT_ND, [4], []),                                    # 0-D
    ([2, 0, 3], None, 0, nn.ACL_FORMAT_ND, None, [3, 3, 1]),                     # empty
])
def test_create_tensor_keeps_the_description_and_the_getters_return_it(dims, strides, offset, fmt, storage,
                                                                        expected_strides):
    tensor = nn.aclCreateTensor(dims, nn.ACL_FLOAT16, strides, offset, fmt, storage, 0x1000)
    assert tensor is not None, last_error()
    assert getters(tensor) == [dims, expected_strides, offset, fmt, storage if storage is not None else dims,
                               nn.ACL_FLOAT16, 0x1000]
    assert nn.aclSetRawTensorAddr(tensor, 0x2000) == 0
    assert nn.aclGetRawTensorAddr(tensor) == (0x2000, 0)
    assert nn.aclDestroyTensor(tensor) == 0


BAD_TENSORS = {  # name: (arguments of aclCreateTensor, parameter named in the message)
    "null dims": ((None, FLOAT, None, 0, 2, None, 0), "viewDims"),
    "dim beyond int64": (([1 << 63], FLOAT, None, 0, 2, None, 0), "viewDims"),
    "non-integer dim": (([2.5], FLOAT, None, 0, 2, None, 0), "viewDims"),
    "unknown dtype": (([2], 5, None, 0, 2, None, 0), "dataType"),
    "undefined dtype": (([2], nn.ACL_DT_UNDEFINED, None, 0, 2, None, 0), "dataType"),
    "unknown format": (([2], FLOAT, None, 0, 7, None, 0), "format"),
    "undefined format": (([2], FLOAT, None, 0, nn.ACL_FORMAT_UNDEFINED, None, 0), "format"),
    "stride count": (([2, 3], FLOAT, [1], 0, 2, None, 0), "stride"),
    "negative stride": (([2, 3], FLOAT, [-3, 1], 0, 2, None, 0), "stride"),
    "negative offset": (([2], FLOAT, None, -1, 2, None, 0), "offset"),
    "float offset": (([2], FLOAT, None, 1.0, 2, None, 0), "offset"),
    "bad storage": (([2], FLOAT, None, 0, 2, "2", 0), "storageDims"),
    "negative address": (([2], FLOAT, None, 0, 2, None, -64), "tensorData"),
    # shapes whose element count or contiguous strides no int64 holds (aclGetViewStrides could not return them)
    "view count beyond int64": (([2, 1 << 62, 2], FLOAT, None, 0, 2, [4], 0), "viewDims"),
    "view strides beyond int64": (([0, 1 << 62, 4], FLOAT, None, 0, 2, [4], 0), "viewDims"),
    "storage count beyond int64": (([2], FLOAT, None, 0, 2, [1 << 62, 2], 0), "storageDims"),
    "storage strides beyond int64": (([2], FLOAT, None, 0, 2, [0, 1 << 32, 1 << 31], 0), "storageDims"),
}


@pytest.mark.parametrize("case", BAD_TENSORS)
def test_create_tensor_rejects_bad_descriptions_with_null_and_a_message(case):
    args, parameter = BAD_TENSORS[case]
    assert nn.aclCreateTensor(*args) is None
    message = last_error()
    assert parameter in message and "expected" in message and "found" in message, message


@pytest.mark.parametrize("dims", [[2, 1 << 62, 2], [0, 1 << 62, 4]])
def test_a_shape_beyond_int64_is_refused_by_create_and_init_tensor_naming_it(dims):
    """The contiguous strides of [2, 2^62, 2] are [2^63, 2, 1]: no int64_t holds the first, so the tensor
    is refused (as a NULL-returning create does) rather than kept for a getter to fail on."""
    assert nn.aclCreateTensor(dims, FLOAT, None, 0, nn.ACL_FORMAT_ND, [4], 0x1000) is None
    message = last_error()
    assert ("viewDims: expected dims whose element count and contiguous strides fit in int64 (at most %d), "
            "found 3 dims %s" % ((1 << 63) - 1, dims)) in message, message
    tensor = nn.aclCreateTensor([4], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, 0x1000)
    assert_rejected(nn.aclInitTensor(tensor, dims, FLOAT, None, 0, nn.ACL_FORMAT_ND, [4], 0x1000),
                    nn.ACLNN_ERR_PARAM_INVALID, "viewDims", "fit in int64", str(dims))
    assert getters(tensor)[:2] == [[4], [1]]  # left as it was
    assert nn.aclDestroyTensor(tensor) == 0


def test_garbage_read_past_a_c_array_is_refused_at_once_naming_the_element_and_the_count():
    """A C viewDimsNum or count too large (sizeof(shape) for its length) reads garbage past the array: 100000
    dims of it made an integer of millions of digits (13 s, then the internal error of a str() too long);
    now the shape is refused at once with its first dims and the count, and a bad element is named by its
    index and the count read."""
    garbage = [2, 2] + [(7 << 59) + index for index in range(99998)]
    assert nn.aclCreateTensor(garbage, FLOAT, None, 0, nn.ACL_FORMAT_ND, None, 0x1000) is None
    message = last_error()
    assert "found 100000 dims [2, 2, %d" % (7 << 59) in message and "... (99984 more), whose element count does not" \
        in message and len(message) < 1000, message
    assert nn.aclCreateTensor([2, 2], FLOAT, [2, -(1 << 40)], 0, nn.ACL_FORMAT_ND, None, 0x1000) is None
    assert "stride[1] (of the 2 read): expected an integer in [0, %d], found %d" % ((1 << 63) - 1, -(1 << 40)) \
        in last_error()


def test_the_largest_shapes_accepted_read_back_as_int64_values():
    """Shapes at the edge of int64 are kept, and every getter returns values an int64_t holds."""
    # negative dims are accepted here (every operator refuses them): they have no element count to check
    for dims in ([1 << 62, 1], [1, (1 << 63) - 1], [3, 0, (1 << 62)], [(1 << 62), -1], [1 << 62, -3], [-3, 1 << 62],
                 [1 << 40, -(1 << 40)], [-(1 << 62), 4]):
        tensor = nn.aclCreateTensor(dims, FLOAT, None, 0, nn.ACL_FORMAT_ND, [(1 << 63) - 1], 0x1000)
        assert tensor is not None, (dims, last_error())
        for value in getters(tensor):
            for item in value if isinstance(value, list) else [value]:
                assert -(1 << 63) <= item < 1 << 63, (dims, getters(tensor))
        assert nn.aclDestroyTensor(tensor) == 0


def test_a_negative_dim_makes_a_tensor_as_the_library_does():
    """The library's aclCreateTensor does not check dims: the operators' first phases reject the shape
    (161002). The descriptor still reads back and describes itself, and covers no bytes."""
    tensor = nn.aclCreateTensor([2, -1], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, 0x1000)
    assert tensor is not None, last_error()
    assert getters(tensor)[:2] == [[2, -1], [1, 1]]
    assert tensor.view_nbytes == 0 and "[2, -1]" in tensor.describe()
    assert nn.aclDestroyTensor(tensor) == 0


HIGH_ADDRESS = 0xFFFF800000000000  # a pointer above 2^63: no int64_t, but any void * may hold it


def test_a_data_address_is_checked_as_a_pointer_by_create_init_and_set_raw_tensor_addr():
    """tensorData, tensorDataAddr and addr are `void *`: the three calls take any pointer value (one above
    2^63 too) and read it back, and refuse alike, naming their own parameter, what no pointer holds."""
    tensor = nn.aclCreateTensor([4], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, HIGH_ADDRESS)
    assert tensor is not None, last_error()
    assert nn.aclGetRawTensorAddr(tensor) == (HIGH_ADDRESS, 0)
    assert nn.aclInitTensor(tensor, [4], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, HIGH_ADDRESS + 64) == 0, last_error()
    assert nn.aclGetRawTensorAddr(tensor) == (HIGH_ADDRESS + 64, 0)
    assert nn.aclSetRawTensorAddr(tensor, HIGH_ADDRESS + 128) == 0, last_error()
    assert nn.aclGetRawTensorAddr(tensor) == (HIGH_ADDRESS + 128, 0)
    for bad in (-1, 2 ** 64):
        refusals = [(nn.aclCreateTensor([4], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, bad) is None, last_error()),
                    (nn.aclInitTensor(tensor, [4], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, bad), last_error()),
                    (nn.aclSetRawTensorAddr(tensor, bad), last_error())]
        assert [result for result, _ in refusals] == [True, nn.ACLNN_ERR_PARAM_INVALID, nn.ACLNN_ERR_PARAM_INVALID]
        for (_, message), call, parameter in zip(refusals, ("aclCreateTensor", "aclInitTensor", "aclSetRawTensorAddr"),
                                                 ("tensorData", "tensorDataAddr", "addr")):
            assert message.endswith("): %s: %s: expected an integer in [0, 18446744073709551615], found %d"
                                    % (call, parameter, bad)), message
    assert nn.aclGetRawTensorAddr(tensor) == (HIGH_ADDRESS + 128, 0), "a refusal leaves the tensor as it was"
    assert nn.aclDestroyTensor(tensor) == 0


def test_getters_and_destroy_of_null_and_destroyed_tensors():
    for getter in (nn.aclGetViewShape, nn.aclGetViewStrides, nn.aclGetViewOffset, nn.aclGetFormat,
                   nn.aclGetStorageShape, nn.aclGetDataType, nn.aclGetRawTensorAddr):
        value, ret = getter(None)
        assert value is None
        assert_rejected(ret, nn.ACLNN_ERR_PARAM_NULLPTR, "tensor", "null")
    assert nn.aclDestroyTensor(None) == 0
    tensor = nn.aclCreateTensor([2], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, 0)
    assert nn.aclDestroyTensor(tensor) == 0
    assert_rejected(nn.aclDestroyTensor(tensor), nn.ACLNN_ERR_PARAM_INVALID, "tensor", "already released at", "made at")
    assert_rejected(nn.aclGetViewShape(tensor)[1], nn.ACLNN_ERR_PARAM_INVALID, "already released at")


@pytest.mark.parametrize("layout", [{}, {"strides": (1, 3), "offset": 2}, {"strides": (8, 2), "offset": 5}])
def test_kernels_address_elements_by_data_offset_and_strides(layout):
    values = np.arange(6, dtype=np.float64).reshape(2, 3) + 0.5
    with npu() as device:
        source, target, size, executor = plan_copy(device, values, **layout)
        workspace = device.malloc(size)
        assert aclnnTestCopy(workspace, size, executor, device.stream) == 0, last_error()
        np.testing.assert_array_equal(device.read(target), values)


# ---------------------------------------------------------------------------------------------
# arrays and scalars


@pytest.mark.parametrize("create,destroy,size,values", [
    (nn.aclCreateIntArray, nn.aclDestroyIntArray, nn.aclGetIntArraySize, [1, -2, (1 << 63) - 1]),
    (nn.aclCreateFloatArray, nn.aclDestroyFloatArray, nn.aclGetFloatArraySize, [0.5, -1e30, 3]),
    (nn.aclCreateBoolArray, nn.aclDestroyBoolArray, nn.aclGetBoolArraySize, [True, False, 1, np.bool_(True)]),
])
def test_arrays_copy_their_values_and_are_destroyed_once(create, destroy, size, values):
    source = list(values)
    array = create(source)
    assert array is not None, last_error()
    source.clear()                                              # the array holds its own copy
    assert size(array) == (len(values), 0)
    assert list(array.values) == [type(array.values[0])(v) for v in values]
    empty = create(None)
    assert empty is not None and size(empty) == (0, 0), "a null input gives a valid empty array"
    assert destroy(None) == 0
    assert destroy(array) == 0 and destroy(empty) == 0
    assert_rejected(destroy(array), nn.ACLNN_ERR_PARAM_INVALID, "already released at", "made at")
    assert_rejected(size(None)[1], nn.ACLNN_ERR_PARAM_NULLPTR, "array", "null")


@pytest.mark.parametrize("create,bad", [
    (nn.aclCreateIntArray, [1, 2.5]), (nn.aclCreateIntArray, [1 << 63]), (nn.aclCreateIntArray, "12"),
    (nn.aclCreateFloatArray, ["1.5"]), (nn.aclCreateFloatArray, [None]), (nn.aclCreateBoolArray, [2]),
    (nn.aclCreateBoolArray, ["yes"]), (nn.aclCreateBoolArray, 5),
])
def test_arrays_reject_values_of_the_wrong_type(create, bad):
    assert create(bad) is None
    message = last_error()
    assert "value" in message and "expected" in message and "found" in message, message


@pytest.mark.parametrize("value,dtype,copied", [(2.5, FLOAT, 2.5), (np.float16(1.5), nn.ACL_FLOAT16, 1.5),
                                                (7, nn.ACL_INT64, 7), (np.int32(-3), nn.ACL_INT32, -3),
                                                (True, nn.ACL_BOOL, True), (3, nn.ACL_DOUBLE, 3.0)])
def test_scalars_copy_their_value(value, dtype, copied):
    scalar = nn.aclCreateScalar(value, dtype)
    assert scalar is not None, last_error()
    assert scalar.value == copied and type(scalar.value) is type(copied)
    assert nn.aclDestroyScalar(scalar) == 0
    assert_rejected(nn.aclDestroyScalar(scalar), nn.ACLNN_ERR_PARAM_INVALID, "scalar", "already released at", "made at")
    assert nn.aclDestroyScalar(None) == 0


@pytest.mark.parametrize("value,dtype,word", [(None, FLOAT, "null"), (1.5, nn.ACL_INT32, "INT32"),
                                              ("1.5", FLOAT, "value"), (1, 5, "dataType"),
                                              (2, nn.ACL_BOOL, "BOOL"), (1, nn.ACL_STRING, "STRING")])
def test_scalars_reject_bad_values_and_dtypes(value, dtype, word):
    assert nn.aclCreateScalar(value, dtype) is None
    message = last_error()
    assert word in message and "expected" in message and "found" in message, message


# ---------------------------------------------------------------------------------------------
# executors and the second phase


def test_an_executor_is_single_use():
    with npu() as device:
        _, target, size, executor = plan_copy(device, [1.0, 2.0])
        workspace = device.malloc(size)
        assert aclnnTestCopy(workspace, size, executor, device.stream) == 0
        assert_rejected(aclnnTestCopy(workspace, size, executor, device.stream), nn.ACLNN_ERR_PARAM_INVALID,
                        "executor", "already used", "repeatable")
        assert_rejected(nn.aclDestroyAclOpExecutor(executor), nn.ACLNN_ERR_PARAM_INVALID, "executor")
        np.testing.assert_array_equal(device.read(target), [1.0, 2.0])


def test_a_repeatable_executor_runs_again_on_the_current_data_until_destroyed():
    with npu() as device:
        source, target, size, executor = plan_copy(device, [1.0, 2.0, 3.0])
        workspace = device.malloc(size)
        assert nn.aclSetAclOpExecutorRepeatable(executor) == 0
        assert aclnnTestCopy(workspace, size, executor, device.stream) == 0
        np.testing.assert_array_equal(device.read(target), [1.0, 2.0, 3.0])
        new = np.array([7, 8, 9], np.float32)
        assert acl.rt.memcpy(source.address, 12, new.ctypes.data, 12, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
        assert aclnnTestCopy(workspace, size, executor, device.stream) == 0
        np.testing.assert_array_equal(device.read(target), new)
        assert nn.aclDestroyAclOpExecutor(executor) == 0
        assert_rejected(aclnnTestCopy(workspace, size, executor, device.stream), nn.ACLNN_ERR_PARAM_INVALID,
                        "executor", "already released at")


def test_null_executor_codes():
    with npu() as device:
        assert_rejected(nn.aclDestroyAclOpExecutor(None), nn.ACLNN_ERR_INNER_NULLPTR, "executor", "null")
        assert_rejected(nn.aclSetAclOpExecutorRepeatable(None), nn.ACLNN_ERR_INNER_NULLPTR, "executor", "null")
        assert_rejected(aclnnTestCopy(None, 0, None, device.stream), nn.ACLNN_ERR_PARAM_NULLPTR, "executor", "null")
        assert_rejected(nn.aclnnLogSigmoidBackward(None, 0, None, device.stream), nn.ACLNN_ERR_PARAM_NULLPTR, "executor")


def test_an_unused_executor_can_be_destroyed():
    with npu() as device:
        _, _, _, executor = plan_copy(device, [1.0])
        assert nn.aclDestroyAclOpExecutor(executor) == 0


def test_workspace_size_with_null_workspace_is_161001_and_deletes_the_executor():
    with npu() as device:
        _, _, size, executor = plan_copy(device, [1.0, 2.0])
        assert_rejected(aclnnTestCopy(None, size, executor, device.stream), nn.ACLNN_ERR_PARAM_NULLPTR,
                        "workspace", "null", str(size))
        assert_rejected(aclnnTestCopy(device.malloc(size), size, executor, device.stream),
                        nn.ACLNN_ERR_PARAM_INVALID, "executor")
        lsb = lsb_executor(device)                          # workspace 0, yet a size is given with no workspace
        assert_rejected(nn.aclnnLogSigmoidBackward(None, 64, lsb, device.stream), nn.ACLNN_ERR_PARAM_NULLPTR, "workspace")


def test_a_null_workspace_with_a_size_deletes_a_repeatable_executor_too():
    """RUNTIME's rule has no exception for repeatable executors: the library deletes it there too. A later
    launch, aclSetAclOpExecutorRepeatable or aclDestroyAclOpExecutor gets the stale-handle error naming
    the launch that released it and why."""
    with npu() as device:
        _, _, size, executor = plan_copy(device, [1.0, 2.0])
        assert nn.aclSetAclOpExecutorRepeatable(executor) == 0
        assert_rejected(aclnnTestCopy(None, size, executor, device.stream), nn.ACLNN_ERR_PARAM_NULLPTR,
                        "workspace", "null", str(size))
        for later in (lambda: aclnnTestCopy(device.malloc(size), size, executor, device.stream),
                      lambda: nn.aclSetAclOpExecutorRepeatable(executor),
                      lambda: nn.aclDestroyAclOpExecutor(executor)):
            message = assert_rejected(later(), nn.ACLNN_ERR_PARAM_INVALID, "executor", "already released at",
                                      "deleted by a second phase given workspaceSize > 0 with a null workspace")
            assert "%s:" % __file__ in message.split("already released at")[1], message
        lsb = lsb_executor(device)  # workspace 0 planned, yet a size given with no workspace
        assert nn.aclSetAclOpExecutorRepeatable(lsb) == 0
        assert_rejected(nn.aclnnLogSigmoidBackward(None, 64, lsb, device.stream), nn.ACLNN_ERR_PARAM_NULLPTR, "workspace")
        assert_rejected(nn.aclDestroyAclOpExecutor(lsb), nn.ACLNN_ERR_PARAM_INVALID, "executor", "null workspace")


def test_workspace_that_is_too_small_or_not_this_devices_memory_is_rejected():
    with npu() as device:
        _, target, size, executor = plan_copy(device, np.arange(64.0))
        assert nn.aclSetAclOpExecutorRepeatable(executor) == 0
        short = device.malloc(size - 64)                    # even with its padding, the allocation is too small
        host = np.zeros(size, np.uint8)
        assert acl.rt.set_device(1) == 0
        foreign, _ = acl.rt.malloc(size, 0)
        assert acl.rt.set_device(0) == 0
        cases = [(device.malloc(size), size - 4, "workspaceSize", str(size)),
                 (short, size, "workspace", "overruns"),
                 (host.ctypes.data, size, "workspace", "not device memory"),
                 (foreign, size, "workspace", "device 1")]
        for workspace, claimed, *words in cases:
            assert_rejected(aclnnTestCopy(workspace, claimed, executor, device.stream), nn.ACLNN_ERR_PARAM_INVALID, *words)
        assert aclnnTestCopy(device.malloc(size), size, executor, device.stream) == 0, "the executor survives rejections"
        np.testing.assert_array_equal(device.read(target), np.arange(64.0))
        assert nn.aclDestroyAclOpExecutor(executor) == 0
        assert acl.rt.free(foreign) == 0
        assert acl.rt.reset_device(1) == 0


@pytest.mark.sanitizer_reports("pending work destroyed")
def test_stream_of_another_device_or_context_is_361001():
    with npu() as device:
        assert acl.rt.set_device(1) == 0
        executor = lsb_executor(device)
        assert_rejected(nn.aclnnLogSigmoidBackward(None, 0, executor, device.stream), nn.ACLNN_ERR_RUNTIME_ERROR,
                        "stream", "device 1", "107003")
        assert acl.rt.set_device(0) == 0
        assert nn.aclnnLogSigmoidBackward(None, 0, executor, device.stream) == 0
        message = assert_rejected(nn.aclnnLogSigmoidBackward(None, 0, lsb_executor(device), 0x777),
                                  nn.ACLNN_ERR_RUNTIME_ERROR, "stream", "107017")
        assert "stream: stream:" not in message
        context, _ = acl.rt.create_context(0)
        assert_rejected(nn.aclnnLogSigmoidBackward(None, 0, lsb_executor(device), device.stream),
                        nn.ACLNN_ERR_RUNTIME_ERROR, "stream", "current context", "107003")
        assert acl.rt.destroy_context(context) == 0
        acl.rt.reset_device(1)
        acl.rt.reset_device(1)


def test_stream_destroyed_by_another_thread_while_the_launch_is_queued_is_361001(monkeypatch):
    """Another thread destroys the stream after the second phase checked it and before the work is queued
    (made deterministic here by destroying it inside that window): the runtime's 107017, as 361001."""
    from emulator import interface
    with npu() as device:
        stream, _ = acl.rt.create_stream()
        checked = interface.work_stream

        def destroyed_once_checked(handle):
            found = checked(handle)
            assert acl.rt.destroy_stream(stream) == 0
            return found
        monkeypatch.setattr(interface, "work_stream", destroyed_once_checked)
        executor = lsb_executor(device)
        message = assert_rejected(nn.aclnnLogSigmoidBackward(None, 0, executor, stream), nn.ACLNN_ERR_RUNTIME_ERROR,
                                  "stream", "destroyed", "107017")
        assert "stream: stream:" not in message
        monkeypatch.undo()
        assert nn.aclnnLogSigmoidBackward(None, 0, executor, device.stream) == 0, "the executor survives"
        assert acl.rt.synchronize_stream(device.stream) == 0


def test_an_executor_runs_its_own_operator_whichever_second_phase_is_given_it():
    """On the card every aclnnXxx is CommonOpExecutorRun(workspace, size, executor, stream): it runs the work
    the executor holds. The workspace is checked against that plan, and a single-use executor is used up."""
    with npu() as device:
        _, target, size, copy = plan_copy(device, [1.0, 2.0])
        assert_rejected(nn.aclnnLogSigmoidBackward(None, 0, copy, device.stream), nn.ACLNN_ERR_PARAM_INVALID,
                        "workspaceSize", "at least the %d bytes" % size)
        assert nn.aclnnLogSigmoidBackward(device.malloc(size), size, copy, device.stream) == 0, last_error()
        np.testing.assert_array_equal(device.read(target), [1.0, 2.0])  # the copy ran
        assert_rejected(aclnnTestCopy(device.malloc(size), size, copy, device.stream), nn.ACLNN_ERR_PARAM_INVALID,
                        "executor", "already used", "aclnnTestCopy")
        gradient = device.tensor([0.5, 1.0], FLOAT)
        x = device.tensor([0.0, 2.0], FLOAT)
        buffer, grad_input = device.empty((2,), FLOAT), device.empty((2,), FLOAT)
        _, lsb, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(gradient.tensor, x.tensor, buffer.tensor,
                                                                 grad_input.tensor)
        assert ret == 0, last_error()
        assert aclnnTestCopy(None, 0, lsb, device.stream) == 0, last_error()
        np.testing.assert_allclose(device.read(grad_input), [0.5 * 0.5, 1.0 / (1.0 + np.exp(2.0))], rtol=1e-6)
        assert_rejected(nn.aclnnLogSigmoidBackward(None, 0, "executor", device.stream), nn.ACLNN_ERR_PARAM_INVALID,
                        "executor", "found 'executor'")


def test_wrong_argument_counts_give_a_status_not_an_exception():
    with npu() as device:
        t = device.empty((2,), FLOAT).tensor
        size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(t, t)
        assert (size, executor) == (0, None)
        assert_rejected(ret, nn.ACLNN_ERR_PARAM_INVALID, "arguments", "gradOutput, self, buffer, gradInput")
        assert nn.aclnnLogSigmoidBackwardGetWorkspaceSize(t, t, t, t, t)[2] == nn.ACLNN_ERR_PARAM_INVALID
        assert "arguments" in last_error()
        assert nn.aclnnLogSigmoidBackwardGetWorkspaceSize(t, t, t, gradInput=t, bogus=1)[2] == nn.ACLNN_ERR_PARAM_INVALID
        last_error()
        assert_rejected(nn.aclnnLogSigmoidBackward(None, 0), nn.ACLNN_ERR_PARAM_INVALID, "arguments", "executor")
        assert nn.aclCreateTensor([2]) is None and "arguments" in last_error()
        assert_rejected(nn.aclDestroyTensor(), nn.ACLNN_ERR_PARAM_INVALID, "arguments")


def test_empty_tensors_plan_no_work_and_run_with_workspace_zero():
    with npu() as device:
        _, target, size, executor = plan_copy(device, np.zeros((0, 3)))
        assert size == 0
        assert aclnnTestCopy(None, 0, executor, device.stream) == 0
        assert acl.rt.synchronize_stream(device.stream) == 0


# ---------------------------------------------------------------------------------------------
# constants with their real values (those of CANN's acl/acl_base.h, acl/acl_rt.h and aclnn/opdev/op_errno.h)


DTYPES = {"ACL_DT_UNDEFINED": -1, "ACL_FLOAT": 0, "ACL_FLOAT16": 1, "ACL_INT8": 2, "ACL_INT32": 3, "ACL_UINT8": 4,
          "ACL_INT16": 6, "ACL_UINT16": 7, "ACL_UINT32": 8, "ACL_INT64": 9, "ACL_UINT64": 10, "ACL_DOUBLE": 11,
          "ACL_BOOL": 12, "ACL_STRING": 13, "ACL_COMPLEX64": 16, "ACL_COMPLEX128": 17, "ACL_BF16": 27,
          "ACL_INT4": 29, "ACL_UINT1": 30, "ACL_COMPLEX32": 33, "ACL_HIFLOAT8": 34, "ACL_FLOAT8_E5M2": 35,
          "ACL_FLOAT8_E4M3FN": 36, "ACL_FLOAT8_E8M0": 37, "ACL_FLOAT6_E3M2": 38, "ACL_FLOAT6_E2M3": 39,
          "ACL_FLOAT4_E2M1": 40, "ACL_FLOAT4_E1M2": 41}
FORMATS = {"ACL_FORMAT_UNDEFINED": -1, "ACL_FORMAT_NCHW": 0, "ACL_FORMAT_NHWC": 1, "ACL_FORMAT_ND": 2,
           "ACL_FORMAT_NC1HWC0": 3, "ACL_FORMAT_FRACTAL_Z": 4, "ACL_FORMAT_NC1HWC0_C04": 12, "ACL_FORMAT_HWCN": 16,
           "ACL_FORMAT_NDHWC": 27, "ACL_FORMAT_FRACTAL_NZ": 29, "ACL_FORMAT_NCDHW": 30, "ACL_FORMAT_NDC1HWC0": 32,
           "ACL_FRACTAL_Z_3D": 33, "ACL_FORMAT_NC": 35, "ACL_FORMAT_NCL": 47, "ACL_FORMAT_FRACTAL_NZ_C0_16": 50,
           "ACL_FORMAT_FRACTAL_NZ_C0_32": 51, "ACL_FORMAT_FRACTAL_NZ_C0_2": 52, "ACL_FORMAT_FRACTAL_NZ_C0_4": 53,
           "ACL_FORMAT_FRACTAL_NZ_C0_8": 54}
_BASE = ["INVALID_PARAM", "UNINITIALIZE", "REPEAT_INITIALIZE", "INVALID_FILE", "WRITE_FILE", "INVALID_FILE_SIZE",
         "PARSE_FILE", "FILE_MISSING_ATTR", "FILE_ATTR_INVALID", "INVALID_DUMP_CONFIG", "INVALID_PROFILING_CONFIG",
         "INVALID_MODEL_ID", "DESERIALIZE_MODEL", "PARSE_MODEL", "READ_MODEL_FAILURE", "MODEL_SIZE_INVALID",
         "MODEL_MISSING_ATTR", "MODEL_INPUT_NOT_MATCH", "MODEL_OUTPUT_NOT_MATCH", "MODEL_NOT_DYNAMIC",
         "OP_TYPE_NOT_MATCH", "OP_INPUT_NOT_MATCH", "OP_OUTPUT_NOT_MATCH", "OP_ATTR_NOT_MATCH", "OP_NOT_FOUND",
         "OP_LOAD_FAILED", "UNSUPPORTED_DATA_TYPE", "FORMAT_NOT_MATCH", "BIN_SELECTOR_NOT_REGISTERED",
         "KERNEL_NOT_FOUND", "BIN_SELECTOR_ALREADY_REGISTERED", "KERNEL_ALREADY_REGISTERED", "INVALID_QUEUE_ID",
         "REPEAT_SUBSCRIBE", "STREAM_NOT_SUBSCRIBE", "THREAD_NOT_SUBSCRIBE", "WAIT_CALLBACK_TIMEOUT",
         "REPEAT_FINALIZE", "NOT_STATIC_AIPP", "COMPILING_STUB_MODE", "GROUP_NOT_SET", "GROUP_NOT_CREATE",
         "PROF_ALREADY_RUN", "PROF_NOT_RUN", "DUMP_ALREADY_RUN", "DUMP_NOT_RUN"]
ACL_ERRORS = {"ACL_SUCCESS": 0, "ACL_ERROR_NONE": 0, **{"ACL_ERROR_" + n: 100000 + i for i, n in enumerate(_BASE)},
              "ACL_ERROR_PROF_REPEAT_SUBSCRIBE": 148046, "ACL_ERROR_PROF_API_CONFLICT": 148047,
              "ACL_ERROR_INVALID_MAX_OPQUEUE_NUM_CONFIG": 148048, "ACL_ERROR_INVALID_OPP_PATH": 148049,
              "ACL_ERROR_OP_UNSUPPORTED_DYNAMIC": 148050, "ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED": 148051,
              "ACL_ERROR_UNSUPPORTED_JPEG": 148052, "ACL_ERROR_INVALID_BUNDLE_MODEL_ID": 148053,
              "ACL_ERROR_BAD_ALLOC": 200000, "ACL_ERROR_API_NOT_SUPPORT": 200001, "ACL_ERROR_INVALID_DEVICE": 200002,
              "ACL_ERROR_MEMORY_ADDRESS_UNALIGNED": 200003, "ACL_ERROR_RESOURCE_NOT_MATCH": 200004,
              "ACL_ERROR_INVALID_RESOURCE_HANDLE": 200005, "ACL_ERROR_FEATURE_UNSUPPORTED": 200006,
              "ACL_ERROR_PROF_MODULES_UNSUPPORTED": 200007, "ACL_ERROR_STORAGE_OVER_LIMIT": 300000,
              "ACL_ERROR_INTERNAL_ERROR": 500000, "ACL_ERROR_FAILURE": 500001, "ACL_ERROR_GE_FAILURE": 500002,
              "ACL_ERROR_RT_FAILURE": 500003, "ACL_ERROR_DRV_FAILURE": 500004, "ACL_ERROR_PROFILING_FAILURE": 500005,
              "ACL_RT_SUCCESS": 0, "ACL_ERROR_RT_PARAM_INVALID": 107000, "ACL_ERROR_RT_INVALID_DEVICEID": 107001,
              "ACL_ERROR_RT_CONTEXT_NULL": 107002, "ACL_ERROR_RT_STREAM_CONTEXT": 107003,
              "ACL_ERROR_RT_MODEL_CONTEXT": 107004, "ACL_ERROR_RT_STREAM_MODEL": 107005,
              "ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID": 107006, "ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL": 107007,
              "ACL_ERROR_RT_ADDR_UNALIGNED": 107008, "ACL_ERROR_RT_INVALID_MEMORY_TYPE": 107016,
              "ACL_ERROR_RT_INVALID_HANDLE": 107017, "ACL_ERROR_RT_INVALID_MALLOC_TYPE": 107018,
              "ACL_ERROR_RT_WAIT_TIMEOUT": 107019, "ACL_ERROR_RT_TASK_TIMEOUT": 107020,
              "ACL_ERROR_RT_FEATURE_NOT_SUPPORT": 207000, "ACL_ERROR_RT_MEMORY_ALLOCATION": 207001,
              "ACL_ERROR_RT_MEMORY_FREE": 207002, "ACL_ERROR_RT_NO_DEVICE": 207004,
              "ACL_ERROR_RT_RESOURCE_ALLOC_FAIL": 207005, "ACL_ERROR_RT_NO_EVENT_RESOURCE": 207007,
              "ACL_ERROR_RT_NO_STREAM_RESOURCE": 207008, "ACL_ERROR_RT_REPEATED_INIT": 207015,
              "ACL_ERROR_RT_DEVICE_OOM": 207018, "ACL_ERROR_RT_INTERNAL_ERROR": 507000,
              "ACL_ERROR_RT_STREAM_NOT_COMPLETE": 507004, "ACL_ERROR_RT_EVENT_NOT_COMPLETE": 507006,
              "ACL_ERROR_RT_CONTEXT_RELEASE_ERROR": 507007, "ACL_ERROR_RT_AICORE_EXCEPTION": 507015,
              "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT": 507046, "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT": 507047,
              "ACL_ERROR_RT_DRV_INTERNAL_ERROR": 507899}
ENUMS = {"ACL_DEVICE": 0, "ACL_HOST": 1,
         **{"ACL_MEMCPY_" + n: i for i, n in enumerate(["HOST_TO_HOST", "HOST_TO_DEVICE", "DEVICE_TO_HOST",
                                                        "DEVICE_TO_DEVICE", "DEFAULT", "HOST_TO_BUF_TO_DEVICE",
                                                        "INNER_DEVICE_TO_DEVICE", "INTER_DEVICE_TO_DEVICE"])},
         **{"ACL_MEM_MALLOC_" + n: i for i, n in enumerate(["HUGE_FIRST", "HUGE_ONLY", "NORMAL_ONLY", "HUGE_FIRST_P2P",
                                                            "HUGE_ONLY_P2P", "NORMAL_ONLY_P2P", "HUGE1G_ONLY",
                                                            "HUGE1G_ONLY_P2P"])},
         "ACL_MEM_TYPE_LOW_BAND_WIDTH": 0x100, "ACL_MEM_TYPE_HIGH_BAND_WIDTH": 0x1000,
         "ACL_MEM_ACCESS_USER_SPACE_READONLY": 0x100000,
         **{"ACL_" + n: i for i, n in enumerate(["DDR_MEM", "HBM_MEM", "DDR_MEM_HUGE", "DDR_MEM_NORMAL", "HBM_MEM_HUGE",
                                                 "HBM_MEM_NORMAL", "DDR_MEM_P2P_HUGE", "DDR_MEM_P2P_NORMAL",
                                                 "HBM_MEM_P2P_HUGE", "HBM_MEM_P2P_NORMAL", "HBM_MEM_HUGE1G",
                                                 "HBM_MEM_P2P_HUGE1G", "MEM_NORMAL", "MEM_HUGE", "MEM_HUGE1G",
                                                 "MEM_P2P_NORMAL", "MEM_P2P_HUGE", "MEM_P2P_HUGE1G"])},
         "ACL_EVENT_STATUS_COMPLETE": 0, "ACL_EVENT_STATUS_NOT_READY": 1, "ACL_EVENT_STATUS_RESERVED": 2,
         "ACL_EVENT_RECORDED_STATUS_NOT_READY": 0, "ACL_EVENT_RECORDED_STATUS_COMPLETE": 1,
         "ACL_EVENT_WAIT_STATUS_COMPLETE": 0, "ACL_EVENT_WAIT_STATUS_NOT_READY": 1,
         "ACL_EVENT_WAIT_STATUS_RESERVED": 0xFFFF, "ACL_STREAM_STATUS_COMPLETE": 0, "ACL_STREAM_STATUS_NOT_READY": 1,
         "ACL_STREAM_STATUS_RESERVED": 0xFFFF, "ACL_CALLBACK_NO_BLOCK": 0, "ACL_CALLBACK_BLOCK": 1,
         "ACL_EVENT_SYNC": 0x1, "ACL_EVENT_CAPTURE_STREAM_PROGRESS": 0x2, "ACL_EVENT_TIME_LINE": 0x8,
         "ACL_EVENT_DEVICE_USE_ONLY": 0x10, "ACL_EVENT_EXTERNAL": 0x20, "ACL_EVENT_IPC": 0x40,
         "ACL_STREAM_FAST_LAUNCH": 0x1, "ACL_STREAM_FAST_SYNC": 0x2, "ACL_STREAM_PERSISTENT": 0x4,
         "ACL_STREAM_HUGE": 0x8, "ACL_STREAM_CPU_SCHEDULE": 0x10, "ACL_STREAM_DEVICE_USE_ONLY": 0x20}
ACLNN_STATUS = {"ACLNN_SUCCESS": 0, "ACLNN_ERR_PARAM_NULLPTR": 161001, "ACLNN_ERR_PARAM_INVALID": 161002,
                "ACLNN_ERR_RUNTIME_ERROR": 361001, "ACLNN_ERR_INNER": 561000, "ACLNN_ERR_INNER_INFERSHAPE_ERROR": 561001,
                "ACLNN_ERR_INNER_TILING_ERROR": 561002, "ACLNN_ERR_INNER_FIND_KERNEL_ERROR": 561003,
                **{"ACLNN_ERR_INNER_" + n: 561101 + i for i, n in enumerate([
                    "CREATE_EXECUTOR", "NOT_TRANS_EXECUTOR", "NULLPTR", "WRONG_ATTR_INFO_SIZE", "KEY_CONFLICT",
                    "INVALID_IMPL_MODE", "OPP_PATH_NOT_FOUND", "LOAD_JSON_FAILED", "JSON_VALUE_NOT_FOUND",
                    "JSON_FORMAT_INVALID", "JSON_DTYPE_INVALID", "OPP_KERNEL_PKG_NOT_FOUND", "OP_FILE_INVALID",
                    "ATTR_NUM_OUT_OF_BOUND", "ATTR_LEN_NOT_ENOUGH", "INPUT_NUM_IN_JSON_TOO_LARGE",
                    "INPUT_JSON_IS_NULL", "STATIC_WORKSPACE_INVALID", "STATIC_BLOCK_DIM_INVALID"])},
                "ACLNN_ERR_INNER_KEY_CONFILICT": 561105}


@pytest.mark.parametrize("module", [acl, nn], ids=["acl", "aclnn_api"])
@pytest.mark.parametrize("table", [DTYPES, FORMATS, ACL_ERRORS, ENUMS], ids=["dtypes", "formats", "aclError", "enums"])
def test_constants_have_their_real_values(module, table):
    wrong = {name: getattr(module, name, "missing") for name, value in table.items()
             if getattr(module, name, None) != value}
    assert not wrong, wrong


def test_aclnn_status_codes_have_their_real_values():
    wrong = {name: getattr(nn, name, "missing") for name, value in ACLNN_STATUS.items() if getattr(nn, name, None) != value}
    assert not wrong, wrong


def test_error_messages_carry_the_aclnn_titles():
    assert nn.aclCreateTensor(None, FLOAT, None, 0, 2, None, 0) is None
    assert "AclNN_Parameter_Error(EZ1001)" in last_error()


def test_data_type_sizes():
    sizes = {nn.ACL_STRING: 0, nn.ACL_DT_UNDEFINED: 0, nn.ACL_INT4: 1, nn.ACL_UINT1: 1, nn.ACL_BOOL: 1,
             nn.ACL_HIFLOAT8: 1, nn.ACL_FLOAT16: 2, nn.ACL_BF16: 2, nn.ACL_FLOAT: 4, nn.ACL_COMPLEX32: 4,
             nn.ACL_INT64: 8, nn.ACL_DOUBLE: 8, nn.ACL_COMPLEX64: 8, nn.ACL_COMPLEX128: 16,
             nn.ACL_FLOAT6_E3M2: 8, nn.ACL_FLOAT4_E2M1: 8}             # the real default-branch quirk
    assert {dtype: nn.aclDataTypeSize(dtype) for dtype in sizes} == sizes
    assert nn.aclDataTypeSize(np.int64(nn.ACL_FLOAT)) == 4


@pytest.mark.parametrize("value", [None, 1.5, "FLOAT", True, np.array([0]), np.array(0.0)])
def test_data_type_size_of_a_non_integer_is_zero_with_a_message(value):
    assert nn.aclDataTypeSize(value) == 0
    message = acl.get_recent_err_msg()
    assert "dataType: expected an aclDataType, found" in message, message
