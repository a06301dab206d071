"""aclnn objects as resources (docs/runtime.md, "aclnn framework"): integer handles from the one table
accepted wherever the object is, stale and foreign handles named, tensor and scalar lists that own
their elements, aclInitTensor, the executor's address setters, aclnnInit/aclnnFinalize, the second
phase's launch (addresses read when queued, the byte ranges handed to the runtime, one launch per
single-use executor however many threads try) and the one doorway into the runtime."""
import ast
import ctypes
import glob
import json
import os
import threading
import time

import numpy as np
import pytest

import acl
import aclnn_api as nn
from aclnn_api import checks
from aclnn_api.operator import KernelLaunch, first_phase, second_phase, view
from aclnn_api.tensor_list import aclTensorList
from emulator import interface
from support import REPO, assert_rejected, last_error, npu

FLOAT = nn.ACL_FLOAT


def lsb_reference(grad, x):
    return grad / (1.0 + np.exp(x))


def plan_lsb(device, grad, x):
    """Device tensors for LogSigmoidBackward and its executor."""
    g = device.tensor(np.asarray(grad, np.float64), FLOAT)
    s = device.tensor(np.asarray(x, np.float64), FLOAT)
    out = device.empty(np.shape(grad), FLOAT)
    size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(g.tensor, s.tensor, g.tensor, out.tensor)
    assert ret == 0, last_error()
    return g, s, out, executor


# ---------------------------------------------------------------------------------------------
# handles


def test_every_aclnn_object_has_an_integer_handle_that_calls_accept():
    tensor = nn.aclCreateTensor([2, 3], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, 0x1000)
    array = nn.aclCreateIntArray([1, 2, 3])
    scalar = nn.aclCreateScalar(1.5, FLOAT)
    handles = [obj.handle for obj in (tensor, array, scalar)]
    assert all(type(h) is int and h > 0 for h in handles) and len(set(handles)) == 3
    assert nn.aclGetViewShape(tensor.handle) == ([2, 3], 0)
    assert nn.aclGetViewStrides(np.uint64(tensor.handle)) == ([3, 1], 0), "NumPy integers are handles too"
    assert nn.aclGetIntArraySize(np.int64(array.handle)) == (3, 0)
    assert nn.aclSetRawTensorAddr(tensor.handle, np.uint64(0x2000)) == 0 and tensor.data == 0x2000
    assert nn.aclDestroyTensor(tensor.handle) == 0
    assert nn.aclDestroyIntArray(array.handle) == 0
    assert nn.aclDestroyScalar(scalar.handle) == 0


def test_a_stale_handle_names_where_the_object_was_made_and_destroyed():
    tensor = nn.aclCreateTensor([2], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, 0)
    assert nn.aclDestroyTensor(tensor.handle) == 0
    for call in (lambda: nn.aclGetViewShape(tensor.handle)[1], lambda: nn.aclDestroyTensor(tensor.handle),
                 lambda: nn.aclDestroyTensor(tensor)):
        message = assert_rejected(call(), nn.ACLNN_ERR_PARAM_INVALID, "tensor", "already released at", "made at")
        assert message.count("test_aclnn_resources.py") >= 2, message


@pytest.mark.parametrize("value,words", [
    (0x7777, ("no call made",)),                                     # garbage
    (np.array([1, 2]), ("numpy.ndarray",)),                          # not a scalar at all
    ("tensor", ("'tensor'",)),
    (2.5, ("2.5",)),
])
def test_a_garbage_value_is_161002_never_an_internal_error(value, words):
    assert_rejected(nn.aclGetViewShape(value)[1], nn.ACLNN_ERR_PARAM_INVALID, "tensor", *words)
    assert_rejected(nn.aclDestroyScalar(value), nn.ACLNN_ERR_PARAM_INVALID, "scalar", *words)


def test_a_handle_of_another_kind_is_named():
    array = nn.aclCreateIntArray([1])
    assert_rejected(nn.aclGetViewShape(array.handle)[1], nn.ACLNN_ERR_PARAM_INVALID, "expected an aclTensor",
                    "found an aclIntArray")
    with npu() as device:
        assert_rejected(nn.aclDestroyTensor(device.stream), nn.ACLNN_ERR_PARAM_INVALID, "expected an aclTensor")
    assert nn.aclDestroyIntArray(array) == 0


def test_both_phases_take_handles_and_compute_the_same():
    grad, x = np.linspace(-2, 2, 6).reshape(2, 3), np.linspace(-3, 1, 6).reshape(2, 3)
    with npu() as device:
        g = device.tensor(grad, FLOAT)
        s = device.tensor(x, FLOAT)
        out = device.empty((2, 3), FLOAT)
        size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(
            g.tensor.handle, np.int64(s.tensor.handle), gradInput=out.tensor.handle, buffer=g.tensor.handle)
        assert ret == 0, last_error()
        assert nn.aclnnLogSigmoidBackward(None, size, executor.handle, device.stream) == 0, last_error()
        np.testing.assert_allclose(device.read(out), lsb_reference(grad, x), rtol=1e-6)


def test_a_stale_tensor_handle_in_a_first_phase_is_reported_in_the_operators_order():
    with npu() as device:
        g = device.empty((2,), FLOAT)
        gone = nn.aclCreateTensor([2], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, g.address)
        assert nn.aclDestroyTensor(gone) == 0
        _, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(g.tensor, gone.handle, None, g.tensor)
        assert executor is None
        assert_rejected(ret, nn.ACLNN_ERR_PARAM_INVALID, "self", "already released at")
        _, _, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(g.tensor, g.tensor, 0, g.tensor)
        assert_rejected(ret, nn.ACLNN_ERR_PARAM_NULLPTR, "buffer", "null")


# ---------------------------------------------------------------------------------------------
# launches read the tensors' addresses when they are queued


def test_set_raw_tensor_addr_moves_the_next_launch_of_a_repeatable_executor():
    grad, x = np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.5, -1.0, 2.0, 0.0])
    with npu() as device:
        g, s, out, executor = plan_lsb(device, grad, x)
        assert nn.aclSetAclOpExecutorRepeatable(executor) == 0
        assert nn.aclnnLogSigmoidBackward(None, 0, executor, device.stream) == 0
        np.testing.assert_allclose(device.read(out), lsb_reference(grad, x), rtol=1e-6)
        new_x = device.tensor(-x, FLOAT)
        new_out = device.empty((4,), FLOAT)
        assert nn.aclSetRawTensorAddr(s.tensor, new_x.address) == 0
        assert nn.aclSetRawTensorAddr(out.tensor, new_out.address) == 0
        assert nn.aclnnLogSigmoidBackward(None, 0, executor, device.stream) == 0
        np.testing.assert_allclose(device.read(new_out), lsb_reference(grad, -x), rtol=1e-6)
        np.testing.assert_allclose(device.read(out), lsb_reference(grad, x), rtol=1e-6)   # not written again
        assert nn.aclSetRawTensorAddr(out.tensor, out.address) == 0
        assert nn.aclSetRawTensorAddr(s.tensor, s.address) == 0
        assert nn.aclDestroyAclOpExecutor(executor) == 0


def test_a_queued_launch_keeps_the_addresses_it_was_queued_with():
    grad, x = np.array([1.0, -2.0]), np.array([0.25, 3.0])
    with npu() as device:
        g, s, out, executor = plan_lsb(device, grad, x)
        assert nn.aclSetAclOpExecutorRepeatable(executor) == 0
        other = device.empty((2,), FLOAT)
        assert nn.aclnnLogSigmoidBackward(None, 0, executor, device.stream) == 0
        assert nn.aclSetRawTensorAddr(out.tensor, other.address) == 0      # before the queued work ran
        np.testing.assert_allclose(device.read(out), lsb_reference(grad, x), rtol=1e-6)
        np.testing.assert_array_equal(device.read(other), [0.0, 0.0])
        assert nn.aclSetRawTensorAddr(out.tensor, out.address) == 0
        assert nn.aclDestroyAclOpExecutor(executor) == 0


def test_two_threads_cannot_both_launch_one_single_use_executor(monkeypatch):
    """The check that the executor is live and its release are one step: of two threads that launch
    it at the same moment exactly one succeeds, round after round. Queueing is slowed down, so that a
    gap between the check and the release cannot hide."""
    real_launch = interface.launch

    def slow_launch(*args, **kwargs):
        time.sleep(0.002)
        return real_launch(*args, **kwargs)
    monkeypatch.setattr(interface, "launch", slow_launch)
    with npu() as device:
        t = device.empty((4,), FLOAT).tensor
        context, ret = acl.rt.get_context()
        assert ret == 0
        for _ in range(25):
            executor = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(t, t, t, t)[1]
            barrier, results = threading.Barrier(2), []

            def launch():
                assert acl.rt.set_context(context) == 0
                barrier.wait()
                results.append(nn.aclnnLogSigmoidBackward(None, 0, executor, device.stream))
                last_error()
            threads = [threading.Thread(target=launch) for _ in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert sorted(results) == [0, nn.ACLNN_ERR_PARAM_INVALID], results
        assert acl.rt.synchronize_stream(device.stream) == 0


def test_the_launch_hands_the_runtime_the_ranges_it_reads_and_writes(monkeypatch):
    seen = []
    real_launch = interface.launch

    def spy(stream, name, run, reads=(), writes=(), site=None, ranges=None, details=None, resolves_itself=False):
        if ranges is not None:
            reads, writes = ranges()
        seen.append((name, [r[:2] for r in reads], [w[:2] for w in writes]))
        return real_launch(stream, name, run, reads, writes, site)
    monkeypatch.setattr(interface, "launch", spy)
    with npu() as device:
        g, s, out, executor = plan_lsb(device, [1.0, 2.0], [3.0, 4.0])
        assert nn.aclnnLogSigmoidBackward(None, 0, executor, device.stream) == 0
        assert seen == [("aclnnLogSigmoidBackward", [(g.address, 8), (s.address, 8)], [(out.address, 8)])]
        assert acl.rt.synchronize_stream(device.stream) == 0


# ---------------------------------------------------------------------------------------------
# scalars

INTEGER_DTYPES = [(nn.ACL_INT8, np.int8), (nn.ACL_UINT8, np.uint8), (nn.ACL_INT16, np.int16),
                  (nn.ACL_UINT16, np.uint16), (nn.ACL_INT32, np.int32), (nn.ACL_UINT32, np.uint32),
                  (nn.ACL_INT64, np.int64), (nn.ACL_UINT64, np.uint64)]


@pytest.mark.parametrize("data_type,numpy_type", INTEGER_DTYPES, ids=[t.__name__ for _, t in INTEGER_DTYPES])
def test_an_integer_scalar_holds_what_a_c_variable_of_its_dtype_holds(data_type, numpy_type):
    """Every value of the dtype's range (a UINT64 above 2^63 too), and nothing outside it."""
    info = np.iinfo(numpy_type)
    for value in (int(info.min), int(info.max), numpy_type(info.max)):
        scalar = nn.aclCreateScalar(value, data_type)
        assert scalar is not None and scalar.value == int(value), last_error()
        assert nn.aclDestroyScalar(scalar) == 0
    for value in (int(info.min) - 1, int(info.max) + 1):
        assert nn.aclCreateScalar(value, data_type) is None
        message = last_error()
        assert "value: expected an integer in [%d, %d], found %d" % (info.min, info.max, value) in message, message


LOW_BIT_INTEGER_DTYPES = [(nn.ACL_INT4, -8, 7), (nn.ACL_UINT1, 0, 1)]  # every integer dtype narrower than a byte


@pytest.mark.parametrize("data_type,least,most", LOW_BIT_INTEGER_DTYPES, ids=["INT4", "UINT1"])
def test_a_low_bit_integer_scalar_holds_the_range_of_its_bits_and_nothing_outside(data_type, least, most):
    for value in range(least, most + 1):
        scalar = nn.aclCreateScalar(value, data_type)
        assert scalar is not None and scalar.value == value, last_error()
        assert nn.aclDestroyScalar(scalar) == 0
    for value in (least - 1, most + 1, 300, -(1 << 40), 1 << 40):
        assert nn.aclCreateScalar(value, data_type) is None
        message = last_error()
        assert "value: expected an integer in [%d, %d], found %d (for a scalar of dtype %s)" % (
            least, most, value, nn.tensor.dtype_name(data_type)) in message, message


LOW_BIT_FLOATING_DTYPES = ["ACL_HIFLOAT8", "ACL_FLOAT8_E5M2", "ACL_FLOAT8_E4M3FN", "ACL_FLOAT8_E8M0", "ACL_FLOAT6_E3M2",
                           "ACL_FLOAT6_E2M3", "ACL_FLOAT4_E2M1", "ACL_FLOAT4_E1M2"]


@pytest.mark.parametrize("name", LOW_BIT_FLOATING_DTYPES)
def test_a_low_bit_floating_scalar_takes_any_real_number(name):
    """As the wider floating dtypes: a real number, fractional or not, and no string or complex."""
    for value in (1.5, -0.375, 3, np.float32(0.25)):
        scalar = nn.aclCreateScalar(value, getattr(nn, name))
        assert scalar is not None and scalar.value == float(value) and type(scalar.value) is float, last_error()
        assert nn.aclDestroyScalar(scalar) == 0
    for value in ("1.5", 1 + 2j):
        assert nn.aclCreateScalar(value, getattr(nn, name)) is None
        message = last_error()
        assert "value: expected a number" in message and name[len("ACL_"):] in message, message


def test_every_numeric_dtype_makes_a_scalar_of_a_value_it_holds():
    """No dtype falls through to a catch-all: each numeric one takes 1 (True for BOOL) and refuses a string."""
    numeric = sorted(set(nn.tensor.DTYPE_NAMES) - {nn.ACL_DT_UNDEFINED, nn.ACL_STRING})
    for data_type in numeric:
        value = True if data_type == nn.ACL_BOOL else 1
        scalar = nn.aclCreateScalar(value, data_type)
        assert scalar is not None and scalar.value == value, (data_type, last_error())
        assert nn.aclDestroyScalar(scalar) == 0
        assert nn.aclCreateScalar("1", data_type) is None and "value: expected" in last_error()


# ---------------------------------------------------------------------------------------------
# tensor and scalar lists


def test_a_tensor_list_holds_its_tensors_and_destroys_them():
    tensors = [nn.aclCreateTensor([k + 1], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, 0) for k in range(3)]
    tensor_list = nn.aclCreateTensorList([tensors[0], tensors[1].handle, np.uint64(tensors[2].handle)])
    assert tensor_list is not None, last_error()
    assert nn.aclGetTensorListSize(tensor_list) == (3, 0)
    assert nn.aclGetTensorListSize(tensor_list.handle) == (3, 0)
    assert list(tensor_list.values) == tensors
    assert nn.aclDestroyTensorList(tensor_list) == 0
    assert not any(t.alive for t in tensors)
    message = assert_rejected(nn.aclDestroyTensor(tensors[1]), nn.ACLNN_ERR_PARAM_INVALID, "already released at")
    assert "test_aclnn_resources.py" in message.split("already released at")[1]
    assert_rejected(nn.aclDestroyTensorList(tensor_list), nn.ACLNN_ERR_PARAM_INVALID, "array", "already released at")
    assert nn.aclDestroyTensorList(None) == 0


def test_a_scalar_list_holds_its_scalars_and_destroys_them():
    scalars = [nn.aclCreateScalar(v, FLOAT) for v in (1.0, 2.0)]
    scalar_list = nn.aclCreateScalarList(scalars)
    assert nn.aclGetScalarListSize(scalar_list) == (2, 0)
    assert nn.aclDestroyScalarList(scalar_list.handle) == 0
    assert not any(s.alive for s in scalars)
    assert_rejected(nn.aclGetScalarListSize(None)[1], nn.ACLNN_ERR_PARAM_NULLPTR, "scalarList", "null")


def test_lists_of_nothing_and_lists_that_cannot_be():
    empty = nn.aclCreateTensorList(None)
    assert empty is not None and nn.aclGetTensorListSize(empty) == (0, 0)
    assert nn.aclDestroyTensorList(empty) == 0
    tensor = nn.aclCreateTensor([1], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, 0)
    scalar = nn.aclCreateScalar(1, nn.ACL_INT32)
    cases = [([tensor, None], ("value[1]", "null")),
             ([tensor, tensor], ("value[1]", "expected an aclTensor not already in the list", "value[0]")),
             ([tensor, scalar], ("value[1]", "aclScalar")), (5, ("value", "5"))]
    for value, words in cases:
        assert nn.aclCreateTensorList(value) is None
        message = last_error()
        assert all(word in message for word in ("expected", "found") + words), message
    assert nn.aclCreateScalarList([tensor]) is None and "expected an aclScalar" in last_error()
    assert nn.aclDestroyTensor(tensor) == 0
    assert nn.aclCreateTensorList([tensor]) is None and "already released at" in last_error()
    assert nn.aclDestroyScalar(scalar) == 0


def test_destroying_a_list_whose_element_was_destroyed_is_reported():
    tensors = [nn.aclCreateTensor([1], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, 0) for _ in range(2)]
    tensor_list = nn.aclCreateTensorList(tensors)
    assert nn.aclDestroyTensor(tensors[0]) == 0                     # the program should not have
    assert_rejected(nn.aclDestroyTensorList(tensor_list), nn.ACLNN_ERR_PARAM_INVALID, "value[0]",
                    "already destroyed at")
    assert not tensor_list.alive and not tensors[1].alive, "the list and its other tensors are destroyed"


# ---------------------------------------------------------------------------------------------
# aclInitTensor


def test_init_tensor_redescribes_a_tensor():
    tensor = nn.aclCreateTensor([6], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, 0x1000)
    assert nn.aclInitTensor(tensor.handle, [2, 3], nn.ACL_FLOAT16, [1, 2], 4, nn.ACL_FORMAT_NCL, [10], 0x2000) == 0
    assert [nn.aclGetViewShape(tensor)[0], nn.aclGetViewStrides(tensor)[0], nn.aclGetViewOffset(tensor)[0],
            nn.aclGetDataType(tensor)[0], nn.aclGetFormat(tensor)[0], nn.aclGetStorageShape(tensor)[0],
            nn.aclGetRawTensorAddr(tensor)[0]] == [[2, 3], [1, 2], 4, nn.ACL_FLOAT16, nn.ACL_FORMAT_NCL, [10], 0x2000]
    assert tensor.view_nbytes == (1 * 1 + 2 * 2 + 1) * 2
    before = tensor.describe()
    assert_rejected(nn.aclInitTensor(tensor, [2], FLOAT, [-1], 0, nn.ACL_FORMAT_ND, None, 0),
                    nn.ACLNN_ERR_PARAM_INVALID, "stride")
    assert_rejected(nn.aclInitTensor(tensor, None, FLOAT, None, 0, nn.ACL_FORMAT_ND, None, 0),
                    nn.ACLNN_ERR_PARAM_NULLPTR, "viewDims", "null")
    assert tensor.describe() == before, "a rejected aclInitTensor leaves the tensor as it was"
    assert_rejected(nn.aclInitTensor(None, [2], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, 0),
                    nn.ACLNN_ERR_PARAM_NULLPTR, "tensor", "null")
    assert nn.aclDestroyTensor(tensor) == 0
    assert_rejected(nn.aclInitTensor(tensor, [2], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, 0),
                    nn.ACLNN_ERR_PARAM_INVALID, "tensor", "already released at")


# ---------------------------------------------------------------------------------------------
# the executor's address setters


def test_set_input_and_output_tensor_addr_move_the_next_launch():
    grad, x = np.array([1.0, 2.0, 3.0]), np.array([-1.0, 0.0, 1.0])
    with npu() as device:
        g, s, out, executor = plan_lsb(device, grad, x)
        assert nn.aclSetAclOpExecutorRepeatable(executor) == 0
        new_x, new_out, third_out = device.tensor(2 * x, FLOAT), device.empty((3,), FLOAT), device.empty((3,), FLOAT)
        assert nn.aclSetInputTensorAddr(executor, 1, s.tensor, new_x.address) == 0, last_error()   # self
        assert nn.aclSetOutputTensorAddr(executor.handle, 0, out.tensor.handle, new_out.address) == 0
        assert nn.aclGetRawTensorAddr(s.tensor) == (new_x.address, 0)
        assert nn.aclnnLogSigmoidBackward(None, 0, executor, device.stream) == 0
        np.testing.assert_allclose(device.read(new_out), lsb_reference(grad, 2 * x), rtol=1e-6)
        assert nn.AclSetTensorAddr(executor, 3, out.tensor, third_out.address) == 0    # inputs, then outputs
        assert nn.aclnnLogSigmoidBackward(None, 0, executor, device.stream) == 0
        np.testing.assert_allclose(device.read(third_out), lsb_reference(grad, 2 * x), rtol=1e-6)
        for tensor in (s, out):
            assert nn.aclSetRawTensorAddr(tensor.tensor, tensor.address) == 0
        assert nn.aclDestroyAclOpExecutor(executor) == 0


def test_the_setters_name_what_they_cannot_use():
    with npu() as device:
        g, s, out, executor = plan_lsb(device, [1.0], [1.0])
        stranger = device.empty((1,), FLOAT).tensor
        cases = [
            (lambda: nn.aclSetInputTensorAddr(executor, 3, g.tensor, 64), nn.ACLNN_ERR_PARAM_INVALID,
             ("index", "expected an input index below 3", "gradOutput, self, buffer")),
            (lambda: nn.AclSetTensorAddr(executor, 4, g.tensor, 64), nn.ACLNN_ERR_PARAM_INVALID,
             ("index", "expected a tensor index below 4", "gradOutput, self, buffer, gradInput")),
            (lambda: nn.aclSetOutputTensorAddr(executor, 1, out.tensor, 64), nn.ACLNN_ERR_PARAM_INVALID, ("index", "gradInput")),
            (lambda: nn.aclSetInputTensorAddr(executor, 1, stranger, 64), nn.ACLNN_ERR_PARAM_INVALID,
             ("tensor", "aclnnLogSigmoidBackward self (input 1)", "another one")),
            (lambda: nn.aclSetInputTensorAddr(executor, -1, g.tensor, 64), nn.ACLNN_ERR_PARAM_INVALID, ("index",)),
            (lambda: nn.aclSetInputTensorAddr(executor, np.array([0]), g.tensor, 64), nn.ACLNN_ERR_PARAM_INVALID,
             ("index", "numpy.ndarray")),
            (lambda: nn.aclSetInputTensorAddr(None, 0, g.tensor, 64), nn.ACLNN_ERR_PARAM_NULLPTR, ("executor", "null")),
            (lambda: nn.aclSetInputTensorAddr(executor, 0, None, 64), nn.ACLNN_ERR_PARAM_NULLPTR, ("tensor", "null")),
            (lambda: nn.aclSetDynamicInputTensorAddr(executor, 0, 0, None, 64), nn.ACLNN_ERR_PARAM_INVALID,
             ("index", "expected the index of an aclTensorList input", "gradOutput, which is an aclTensor")),
        ]
        for call, code, words in cases:
            assert_rejected(call(), code, *words)
        assert g.tensor.data == g.address, "no rejected call moved a tensor"
        assert nn.aclDestroyAclOpExecutor(executor) == 0


@first_phase("aclnnTestSum")
def aclnnTestSumGetWorkspaceSize(tensors: aclTensorList, out: nn.aclTensor):
    """out = the sum of the float32 tensors of the list (a test operator with a dynamic input)."""
    checks.not_null(out=out)
    for k, tensor in enumerate(tensors.values):
        checks.same_shape("tensors[%d]" % k, tensor, "out", out)
    return KernelLaunch(sum_float32, (out.numel, view("out", out), *(view("tensors", t) for t in tensors.values)))


def sum_float32(count, out, *inputs):
    total = np.zeros(count, np.float32)
    for pointer, *_ in inputs:
        total += np.ctypeslib.as_array((ctypes.c_float * count).from_address(pointer))
    ctypes.memmove(out[0], total.ctypes.data, total.nbytes)


aclnnTestSum = second_phase("aclnnTestSum")


def test_dynamic_setters_move_one_tensor_of_a_list():
    with npu() as device:
        a, b, c = (device.tensor(np.full(3, v), FLOAT) for v in (1.0, 2.0, 40.0))
        out = device.empty((3,), FLOAT)
        items = [nn.aclCreateTensor([3], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, t.address) for t in (a, b)]
        tensors = nn.aclCreateTensorList(items)
        size, executor, ret = aclnnTestSumGetWorkspaceSize(tensors.handle, out.tensor)
        assert ret == 0, last_error()
        assert nn.aclSetAclOpExecutorRepeatable(executor) == 0
        assert aclnnTestSum(None, 0, executor, device.stream) == 0
        np.testing.assert_array_equal(device.read(out), [3.0] * 3)
        assert nn.aclSetDynamicInputTensorAddr(executor, 0, 1, tensors, c.address) == 0, last_error()
        assert aclnnTestSum(None, 0, executor, device.stream) == 0
        np.testing.assert_array_equal(device.read(out), [41.0] * 3)
        assert nn.AclSetDynamicTensorAddr(executor, 0, 0, tensors.handle, c.address) == 0
        assert aclnnTestSum(None, 0, executor, device.stream) == 0
        np.testing.assert_array_equal(device.read(out), [80.0] * 3)
        assert_rejected(nn.aclSetDynamicInputTensorAddr(executor, 0, 2, tensors, c.address),
                        nn.ACLNN_ERR_PARAM_INVALID, "relativeIndex", "2 tensor(s)")
        assert_rejected(nn.aclSetDynamicOutputTensorAddr(executor, 0, 0, tensors, c.address),
                        nn.ACLNN_ERR_PARAM_INVALID, "index", "aclTensorList", "out")
        assert nn.aclDestroyAclOpExecutor(executor) == 0
        assert nn.aclDestroyTensorList(tensors) == 0


# ---------------------------------------------------------------------------------------------
# aclnnInit / aclnnFinalize


def test_aclnn_init_and_finalize_never_fail_together_with_acl_init(tmp_path):
    assert nn.aclnnInit(None) == 0 and nn.aclnnInit() == 0
    assert acl.init() == 0
    config = tmp_path / "aclnn.json"
    config.write_text(json.dumps({"dump": {}}))
    assert nn.aclnnInit(str(config)) == 0
    assert nn.aclnnFinalize() == 0 and nn.aclnnFinalize() == 0
    assert acl.finalize() == 0


@pytest.mark.parametrize("content,words", [(None, ("readable",)), (b"{not json", ("JSON",)),
                                           (b"\xff\xfe\x00", ("JSON",)), (b"[1, 2]", ("JSON object", "found a list")),
                                           (b"7", ("JSON object", "found an int"))])
def test_aclnn_init_rejects_a_config_it_cannot_use(tmp_path, content, words):
    path = tmp_path / "config.json"
    if content is not None:
        path.write_bytes(content)
    assert_rejected(nn.aclnnInit(str(path)), nn.ACLNN_ERR_PARAM_INVALID, "configPath", *words)
    assert_rejected(nn.aclnnInit(7), nn.ACLNN_ERR_PARAM_INVALID, "configPath")


def test_aclnn_init_refuses_what_is_no_regular_file_at_once_and_bad_content_or_paths_without_internal_errors(tmp_path):
    """A FIFO blocked aclnnInit for ever, /dev/zero was read without bound; JSON nested 2000 deep was 561000, and
    a path with a NUL byte 161002 with a message about the content. Each is now 161002 saying what was found."""
    fifo = str(tmp_path / "fifo.json")
    os.mkfifo(fifo)
    assert_rejected(nn.aclnnInit(fifo), nn.ACLNN_ERR_PARAM_INVALID, "configPath", "fifo.json", "a FIFO")
    assert_rejected(nn.aclnnInit("/dev/zero"), nn.ACLNN_ERR_PARAM_INVALID, "configPath", "a character device")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 2000 + "]" * 2000)
    assert_rejected(nn.aclnnInit(str(deep)), nn.ACLNN_ERR_PARAM_INVALID, "configPath", "nested too deeply")
    message = assert_rejected(nn.aclnnInit(str(deep) + "\x00"), nn.ACLNN_ERR_PARAM_INVALID, "configPath",
                              "expected a file path", "null byte")
    assert "JSON" not in message


# ---------------------------------------------------------------------------------------------
# one doorway into the runtime


FORBIDDEN = {"emulator.runtime", "emulator.state", "emulator.memory", "emulator.stream", "emulator.device",
             "emulator.context", "emulator.event"}


def test_aclnn_api_reaches_the_runtime_only_through_the_interface():
    offenders = []
    for path in sorted(glob.glob(os.path.join(REPO, "aclnn_api", "*.py"))):
        tree = ast.parse(open(path, encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = {node.module} | {"%s.%s" % (node.module, alias.name) for alias in node.names}
            elif isinstance(node, ast.Import):
                names = {alias.name for alias in node.names}
            elif isinstance(node, ast.Name) and node.id == "PROCESS":
                names = {"PROCESS"}
            else:
                continue
            bad = names & (FORBIDDEN | {"PROCESS", "emulator.state.PROCESS"})
            if bad:
                offenders.append("%s:%d %s" % (os.path.basename(path), node.lineno, sorted(bad)))
    assert not offenders, offenders


# ---------------------------------------------------------------------------------------------
# no value of any argument gets an internal error


ODD_VALUES = [None, 0, -1, 1 << 64, 2.5, float("nan"), "x", b"x", np.array([1, 2]), np.array(3), np.int8(1),
              np.uint64(7), np.bool_(True), True, [], [1, -2], [[1]], object(), {}, 1 << 63]


def framework_calls(tensor, executor):
    """(call, valid arguments) of the framework's calls that take arguments."""
    return [(nn.aclCreateTensor, [[4], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, 0]),
            (nn.aclInitTensor, [tensor, [4], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, 0]),
            (nn.aclGetViewShape, [tensor]), (nn.aclGetRawTensorAddr, [tensor]),
            (nn.aclSetRawTensorAddr, [tensor, 0]),
            (nn.aclCreateIntArray, [[1]]), (nn.aclCreateFloatArray, [[1.0]]), (nn.aclCreateBoolArray, [[True]]),
            (nn.aclCreateScalar, [1.0, FLOAT]), (nn.aclCreateTensorList, [[]]), (nn.aclCreateScalarList, [[]]),
            (nn.aclSetInputTensorAddr, [executor, 0, tensor, 0]),
            (nn.aclSetDynamicTensorAddr, [executor, 0, 0, None, 0]),
            (nn.aclnnLogSigmoidBackwardGetWorkspaceSize, [tensor, tensor, tensor, tensor]),
            (nn.aclnnLogSigmoidBackward, [None, 0, executor, None]),
            (nn.aclnnInit, [None])]


@pytest.mark.sanitizer_reports("memory freed while in use", "pending work destroyed")
def test_no_argument_value_gets_an_internal_error_or_an_exception():
    made = []
    with npu() as device:
        tensor = device.empty((4,), FLOAT).tensor
        executor = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(tensor, tensor, tensor, tensor)[1]
        assert nn.aclSetAclOpExecutorRepeatable(executor) == 0
        wrong = []
        for call, arguments in framework_calls(tensor, executor):
            positions = range(len(arguments) - (1 if call is nn.aclnnLogSigmoidBackward else 0))  # stream: the runtime's
            for position in positions:
                for value in ODD_VALUES:
                    result = call(*arguments[:position], value, *arguments[position + 1:])
                    message = last_error()
                    made.extend(r for r in (result if isinstance(result, tuple) else (result,))
                                if isinstance(r, (nn.aclTensor, nn.aclOpExecutor)) or hasattr(r, "handle"))
                    if "internal error" in message:
                        wrong.append("%s argument %d = %r: %s" % (call.__name__, position, value, message))
            nn.aclSetRawTensorAddr(tensor, device.tensors[0].address)
        assert acl.rt.synchronize_stream(device.stream) == 0, last_error()
        for resource in made + [executor]:
            if resource.alive and resource is not tensor:
                resource.release()
        assert not wrong, "\n".join(wrong)
