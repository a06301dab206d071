"""Execution faults never silently corrupt (DESIGN.md "strictness"): a kernel whose tensor view leaves
its allocation (too large a shape, an offset or strides that carry it into a neighbour), or whose
memory was freed, another device's or null, fails without touching any memory; the synchronising
call returns 507015 (ACL_ERROR_RT_AICORE_EXCEPTION) and names the operator, the tensor, its address
range and the allocation."""
import os
import re

import numpy as np
import pytest

import acl
import aclnn_api as nn
from support import assert_rejected, last_error, npu

FLOAT = nn.ACL_FLOAT
PATTERN = 0xAB
THIS_FILE = os.path.basename(__file__)


def launch(device, grad, x, out, stream=None):
    size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(grad, x, grad, out)
    assert ret == 0, last_error()
    assert nn.aclnnLogSigmoidBackward(None, size, executor, stream or device.stream) == 0, last_error()


def filled(device, nbytes):
    """A device buffer full of PATTERN: a neighbour that must come out of the fault untouched."""
    address = device.malloc(nbytes)
    assert acl.rt.memset(address, nbytes, PATTERN, nbytes) == 0
    return address


def unchanged(address, nbytes):
    host = np.zeros(nbytes, np.uint8)
    assert acl.rt.memcpy(host.ctypes.data, nbytes, address, nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    return bool((host == PATTERN).all())


def synchronize(kind, device, event):
    if kind == "stream":
        return acl.rt.synchronize_stream(device.stream)
    if kind == "device":
        return acl.rt.synchronize_device()
    assert acl.rt.record_event(event, device.stream) == 0
    return acl.rt.synchronize_event(event)


# name: (which tensor is bad, view dims, strides, offset in elements: None = into the neighbour)
BAD_VIEWS = {
    "shape beyond the allocation": ("gradInput", [100], None, 0),
    "offset into the neighbour": ("gradInput", [4], None, None),
    "strides beyond the allocation": ("self", [2, 2], [100, 1], 0),
    "offset past the padding": ("self", [4], None, 14),
}


@pytest.mark.parametrize("case", BAD_VIEWS)
@pytest.mark.parametrize("sync", ["stream", "device", "event"])
def test_view_outside_its_allocation_faults_without_writing(case, sync):
    which, dims, strides, offset = BAD_VIEWS[case]
    with npu() as device:
        small, _ = acl.rt.malloc(16, 0)               # 4 floats, 64 bytes with the padding; made here
        device.buffers.append(small)
        neighbour = filled(device, 4096)
        if offset is None:
            offset = (neighbour - small) // 4
        bad = nn.aclCreateTensor(dims, FLOAT, strides, offset, nn.ACL_FORMAT_ND, None, small)
        good = {name: device.tensor(np.ones(dims), FLOAT).tensor for name in ("gradOutput", "self", "gradInput")}
        args = {**good, which: bad}
        launch(device, args["gradOutput"], args["self"], args["gradInput"])
        event, _ = acl.rt.create_event()
        message = assert_rejected(synchronize(sync, device, event), acl.ACL_ERROR_RT_AICORE_EXCEPTION,
                                  "aclnnLogSigmoidBackward", which, "allocation #", hex(small), "made at", THIS_FILE)
        start = small + offset * 4
        assert hex(start) in message, "the message should give the view's address range"
        assert unchanged(neighbour, 4096), "the faulting kernel wrote into a neighbouring allocation"
        assert acl.rt.synchronize_stream(device.stream) == 0, "a fault is reported once"
        assert acl.rt.destroy_event(event) == 0
        assert nn.aclDestroyTensor(bad) == 0


def test_memory_freed_before_the_work_ran_faults_and_names_where_it_was_freed():
    with npu() as device:
        grad = device.tensor(np.ones(8), FLOAT)
        x = device.tensor(np.zeros(8), FLOAT)
        out = device.empty((8,), FLOAT)
        launch(device, grad.tensor, x.tensor, out.tensor)
        assert acl.rt.free(out.address) == 0
        device.buffers.remove(out.address)
        neighbour = filled(device, 256)
        message = assert_rejected(acl.rt.synchronize_stream(device.stream), acl.ACL_ERROR_RT_AICORE_EXCEPTION,
                                  "aclnnLogSigmoidBackward", "gradInput", hex(out.address), "freed at")
        assert re.search(r"freed at \S*%s:\d+" % THIS_FILE, message), "the message should name the line of the free"
        assert unchanged(neighbour, 256)


def test_memory_of_another_device_faults():
    with npu() as device:
        assert acl.rt.set_device(1) == 0
        foreign, _ = acl.rt.malloc(64, 0)
        assert acl.rt.set_device(0) == 0
        x = device.tensor(np.zeros(4), FLOAT)
        out = nn.aclCreateTensor([4], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, foreign)
        launch(device, x.tensor, x.tensor, out)
        assert_rejected(acl.rt.synchronize_stream(device.stream), acl.ACL_ERROR_RT_AICORE_EXCEPTION,
                        "gradInput", "device 1", "device 0")
        assert nn.aclDestroyTensor(out) == 0
        assert acl.rt.free(foreign) == 0
        assert acl.rt.reset_device(1) == 0


def test_null_tensor_data_faults_when_the_work_runs():
    with npu() as device:
        x = device.tensor(np.zeros(4), FLOAT)
        out = nn.aclCreateTensor([4], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, None)
        assert out is not None, "a null address is legal at creation (set later with aclSetRawTensorAddr)"
        launch(device, x.tensor, x.tensor, out)
        assert_rejected(acl.rt.synchronize_stream(device.stream), acl.ACL_ERROR_RT_AICORE_EXCEPTION,
                        "gradInput", "not device memory")
        assert nn.aclDestroyTensor(out) == 0


def test_destroy_stream_reports_a_fault_of_its_queued_work():
    with npu() as device:
        stream, _ = acl.rt.create_stream()
        small = device.malloc(16)
        x = device.tensor(np.zeros(64), FLOAT)
        out = nn.aclCreateTensor([64], FLOAT, None, 0, nn.ACL_FORMAT_ND, None, small)
        launch(device, x.tensor, x.tensor, out, stream)
        assert_rejected(acl.rt.destroy_stream(stream), acl.ACL_ERROR_RT_AICORE_EXCEPTION, "gradInput", "overruns")
        assert_rejected(acl.rt.destroy_stream(stream), acl.ACL_ERROR_RT_INVALID_HANDLE, "stream")
        assert nn.aclDestroyTensor(out) == 0
