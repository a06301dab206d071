"""The first phases' plan cache (aclnn_api/operator.py, PlanCache): a first phase called again with the
same arguments gives the plan it made before without checking them again, and anything its checks
depend on (a tensor's description, address or life, a value, the chip) makes it check afresh."""
import ctypes
import struct

import numpy as np
import pytest

import acl
import aclnn_api as nn
import emulator
from aclnn_api.operator import KernelLaunch, PlanCache, first_phase, second_phase, view
from aclnn_api import checks
from support import Npu, assert_rejected, last_error, npu

FLOAT = nn.ACL_FLOAT
planned = []  # the arguments each run of the test operator's checks saw


def fill(value, target):
    pointer, _, shape, _ = target
    for k in range(int(np.prod(shape))):
        ctypes.memmove(pointer + 4 * k, struct.pack("<f", value), 4)


@first_phase("aclnnTestFill")
def aclnnTestFillGetWorkspaceSize(value: float, out: nn.aclTensor):
    """out[...] = value: the plan keeps the value, so a cached plan shows which value it was made for."""
    planned.append(value)
    checks.not_null(out=out)
    checks.dtype_in("out", out, (FLOAT,))
    return KernelLaunch(fill, (value, view("out", out)))


aclnnTestFill = second_phase("aclnnTestFill")


def run_fill(device, value, out) -> int:
    size, executor, ret = aclnnTestFillGetWorkspaceSize(value, out.tensor)
    if ret:
        return ret
    assert aclnnTestFill(None, size, executor, device.stream) == 0, last_error()
    return acl.rt.synchronize_stream(device.stream)


def raw_bits(device, out) -> np.ndarray:
    raw = np.zeros(out.storage_elements, dtype=np.uint32)
    assert acl.rt.synchronize_stream(device.stream) == 0
    assert acl.rt.memcpy(raw.ctypes.data, raw.nbytes, out.address, raw.nbytes, 2) == 0
    return raw


@pytest.fixture
def device():
    planned.clear()
    with npu() as opened:
        yield opened


def test_the_same_call_again_is_not_checked_again(device):
    out = device.empty((2, 3), FLOAT)
    for _ in range(3):
        assert run_fill(device, 1.5, out) == 0, last_error()
    assert planned == [1.5]
    assert device.read(out).tolist() == [[1.5] * 3] * 2


def test_each_value_has_its_own_plan_and_zero_keeps_its_sign(device):
    out = device.empty((4,), FLOAT)
    for value, bits in ((0.0, 0x00000000), (-0.0, 0x80000000), (0.0, 0x00000000), (2, 0x40000000)):
        assert run_fill(device, value, out) == 0, last_error()
        assert raw_bits(device, out).tolist() == [bits] * 4, value
    assert [repr(v) for v in planned] == ["0.0", "-0.0", "2"]  # 2 (an int) is not 2.0's plan either


def test_a_tensor_described_anew_is_checked_again(device):
    out = device.empty((4,), FLOAT)
    assert run_fill(device, 1.0, out) == 0
    assert nn.aclInitTensor(out.tensor, [4], nn.ACL_DOUBLE, [1], 0, nn.ACL_FORMAT_ND, [4], out.address) == 0
    assert_rejected(run_fill(device, 1.0, out), nn.ACLNN_ERR_PARAM_INVALID, "out", "DOUBLE")
    assert len(planned) == 2


def test_a_destroyed_tensor_is_rejected_as_if_never_planned(device):
    out = device.empty((4,), FLOAT)
    assert run_fill(device, 1.0, out) == 0
    assert nn.aclDestroyTensor(out.tensor) == 0
    device.tensors.remove(out)
    size, executor, ret = aclnnTestFillGetWorkspaceSize(1.0, out.tensor)
    assert (size, executor) == (0, None)
    assert_rejected(ret, nn.ACLNN_ERR_PARAM_INVALID, "out", "released")


def test_a_tensor_given_another_address_is_written_there(device):
    out, other = device.empty((4,), FLOAT), device.empty((4,), FLOAT)
    assert run_fill(device, 3.0, out) == 0
    assert run_fill(device, 0.0, out) == 0
    assert nn.aclSetRawTensorAddr(out.tensor, other.address) == 0
    assert run_fill(device, 3.0, out) == 0
    assert device.read(other).tolist() == [3.0] * 4
    assert nn.aclSetRawTensorAddr(out.tensor, out.address) == 0
    assert device.read(out).tolist() == [0.0] * 4


def test_another_chip_is_checked_again():
    """The same descriptors on a chip without bfloat16: the plan made on Ascend910B is not reused."""
    shape, strides = [2, 2], [2, 1]
    emulator.configure(soc="Ascend910B")
    device = Npu()
    grad, x, out = (nn.aclCreateTensor(shape, nn.ACL_BF16, strides, 0, nn.ACL_FORMAT_ND, shape,
                                       device.tensor(np.ones(shape), nn.ACL_BF16).address) for _ in range(3))
    args = (grad, x, x, out)
    _, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(*args)
    assert ret == 0 and nn.aclDestroyAclOpExecutor(executor) == 0
    device.release()  # the device goes, the descriptors stay: the first phase reads no memory
    emulator.configure(soc="Ascend910")
    device = Npu()
    try:
        _, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(*args)
        assert executor is None
        assert_rejected(ret, nn.ACLNN_ERR_PARAM_INVALID, "gradOutput", "BF16", "Ascend910")
    finally:
        for tensor in (grad, x, out):
            nn.aclDestroyTensor(tensor)
        device.close()


def test_a_full_cache_starts_again():
    cache = PlanCache(size=2)
    with npu():
        keys = [cache.key((value,)) for value in (1, 2, 3)]
        for value, key in zip((1, 2, 3), keys):
            cache.put(key, None, (value,))
        assert cache.get(keys[2]) is None
        assert cache.get(keys[0]) is not None and cache.get(keys[1]) is not None  # _MISSING: planned afresh
        assert len(cache._plans) <= 2


def test_plans_of_destroyed_tensors_are_dropped_and_those_of_live_ones_kept(device):
    """A loop that makes a new tensor every step and destroys it (samples/training_step.py) leaves plans
    no call can be given again: the cache drops them rather than keep up to its size of them with their
    destroyed tensors; the plan of a tensor the loop reuses stays and is still given."""
    cache, storage = PlanCache(), device.empty((4,), FLOAT)
    reused = nn.aclCreateTensor([4], FLOAT, None, 0, nn.ACL_FORMAT_ND, [4], storage.address)
    try:
        cache.put(cache.key((1.0, reused)), "reused plan", (1.0, reused))
        for _ in range(200):
            fresh = nn.aclCreateTensor([4], FLOAT, None, 0, nn.ACL_FORMAT_ND, [4], storage.address)
            cache.put(cache.key((1.0, fresh)), "fresh plan", (1.0, fresh))
            assert nn.aclDestroyTensor(fresh) == 0
        destroyed = [value for _, args, _ in cache._plans.values() for value in args
                     if isinstance(value, nn.aclTensor) and not value.alive]
        assert len(destroyed) < 40, len(destroyed)
        assert cache.get(cache.key((1.0, reused))) == "reused plan"
    finally:
        nn.aclDestroyTensor(reused)


def test_arguments_it_cannot_key_are_planned_each_time():
    cache = PlanCache()
    with npu():
        assert cache.key((np.float32(1.0),)) is None
        assert cache.key(([1, 2],)) is None
        assert cache.key((1.0, None, True, "x")) is not None
