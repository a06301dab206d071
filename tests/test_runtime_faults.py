"""Execution faults never silently corrupt (docs/runtime.md, "Execution faults"): a kernel whose tensor view leaves
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


@pytest.mark.sanitizer_reports("uninitialised read")
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


@pytest.mark.sanitizer_reports("memory freed while in use")
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
        assert re.search(r"freed at [^<]*%s:\d+" % THIS_FILE, message), "the message should name the line of the free"
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


@pytest.mark.sanitizer_reports("pending work destroyed")
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


# -- faults as records ----------------------------------------------------------------------------

from emulator import faults as fault_records  # noqa: E402
from emulator import interface  # noqa: E402
from emulator.state import PROCESS  # noqa: E402


def failing(error):
    def run():
        raise error
    return run


def queue_on(device, name, run):
    """Queue a task from a helper of the test: its launch site is this helper and its caller."""
    interface.launch(interface.work_stream(device.stream), name, run)


def test_every_fault_is_kept_and_the_message_names_the_first_five_then_counts():
    with npu() as device:
        address = device.malloc(64)
        for i in range(7):
            queue_on(device, "bad%d" % i, failing(interface.DeviceFault("x: expected fault number %d, found it" % i)))
        assert acl.rt.memset_async(address, 64, 9, 64, device.stream) == 0   # later work still runs
        message = assert_rejected(acl.rt.synchronize_stream(device.stream), acl.ACL_ERROR_RT_AICORE_EXCEPTION,
                                  "7 exceptions", "and 2 more")
        for i in range(5):
            assert "bad%d" % i in message and "fault number %d" % i in message
        assert "bad5" not in message and "bad6" not in message
        host = np.zeros(64, np.uint8)
        assert acl.rt.memcpy(host.ctypes.data, 64, address, 64, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
        assert (host == 9).all()
        assert acl.rt.synchronize_stream(device.stream) == 0, "faults are reported once"


def test_a_fault_record_has_the_tensor_range_allocation_and_launch_site():
    with npu() as device:
        address = device.malloc(64)
        assert acl.rt.free(address) == 0
        device.buffers.remove(address)
        stream = interface.work_stream(device.stream)
        queue_on(device, "reader", lambda: interface.resolve(address, 16, 0, "x"))
        assert acl.rt.stream_query(device.stream)[0] == acl.ACL_STREAM_STATUS_NOT_READY   # runs it, keeps the fault
        (fault,) = stream.faults
        assert (fault.kind, fault.code, fault.task) == ("AI Core exception", acl.ACL_ERROR_RT_AICORE_EXCEPTION, "reader")
        assert fault.tensor == "x" and fault.address_range == (address, address + 16)
        assert fault.allocation.address == address and THIS_FILE in str(fault.allocation.freed_site)
        frames = fault.launch_site.frames
        assert [f[2] for f in frames[:2]] == ["queue_on", "test_a_fault_record_has_the_tensor_range_allocation_and_launch_site"]
        message = assert_rejected(acl.rt.synchronize_stream(device.stream), acl.ACL_ERROR_RT_AICORE_EXCEPTION,
                                  "reader", "launched at", "queue_on", " <- ")
        assert stream.faults == [] and "freed at" in message


def test_an_exception_of_a_broken_kernel_contract_is_an_internal_error_and_the_stream_goes_on():
    with npu() as device:
        address = device.malloc(64)
        queue_on(device, "broken", failing(ValueError("index out of range")))
        assert acl.rt.memset_async(address, 64, 3, 64, device.stream) == 0
        assert acl.rt.synchronize_stream(device.stream) == acl.ACL_ERROR_RT_INTERNAL_ERROR
        message = last_error()
        for word in ("npuemu internal error in broken", "ValueError: index out of range", "launched at", THIS_FILE):
            assert word in message, message
        assert "AI Core" not in message
        host = np.zeros(64, np.uint8)
        assert acl.rt.memcpy(host.ctypes.data, 64, address, 64, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
        assert (host == 3).all()


def test_a_task_timeout_is_107020_naming_the_task_and_where_it_was_launched():
    with npu() as device:
        queue_on(device, "aclnnSlow", failing(TimeoutError("it ran for 60 s")))
        queue_on(device, "bad", failing(interface.DeviceFault("y: expected a later fault, found it")))
        message = assert_rejected(acl.rt.synchronize_device(), acl.ACL_ERROR_RT_TASK_TIMEOUT,
                                  "aclnnSlow", "NPUEMU_TASK_TIMEOUT", "it ran for 60 s", THIS_FILE, "later fault")
        assert message.index("aclnnSlow") < message.index("later fault"), "the first fault comes first"


def test_ctrl_c_in_a_task_stops_the_program():
    with npu() as device:
        queue_on(device, "interrupted", failing(KeyboardInterrupt()))
        with pytest.raises(KeyboardInterrupt):
            acl.rt.synchronize_stream(device.stream)
        assert acl.rt.synchronize_stream(device.stream) == 0


def test_the_summary_of_faults_counts_what_it_does_not_show():
    records = [fault_records.Fault("AI Core exception", 507015, "t%d" % i, "stream s", "m%d" % i) for i in range(12)]
    text = fault_records.summary(records)
    assert text.count("AI Core exception in") == fault_records.SHOWN and text.endswith("and 7 more")


@pytest.mark.sanitizer_reports("pending work destroyed")
@pytest.mark.parametrize("closing", ["reset_device", "finalize", "destroy_context"])
def test_closing_calls_run_the_queued_work_and_report_its_faults(closing):
    assert acl.init() == 0
    if closing == "destroy_context":
        context, _ = acl.rt.create_context(0)
    else:
        assert acl.rt.set_device(0) == 0
    interface.launch(interface.current_stream(), "doomed", failing(interface.DeviceFault("z: expected this, found that")))
    if closing == "reset_device":
        ret = acl.rt.reset_device(0)
    elif closing == "finalize":
        ret = acl.finalize()
    else:
        ret = acl.rt.destroy_context(context)
    assert_rejected(ret, acl.ACL_ERROR_RT_AICORE_EXCEPTION, "doomed", THIS_FILE)
    assert not any(device.is_open for device in PROCESS.devices), "the device is closed all the same"


def test_handles_of_every_kind_come_from_one_table():
    with npu() as device:
        context, _ = acl.rt.get_context()
        event, _ = acl.rt.create_event()
        message = assert_rejected(acl.rt.synchronize_stream(context), acl.ACL_ERROR_RT_INVALID_HANDLE, "stream",
                                  "a context")
        assert "expected a stream" in message
        assert acl.rt.destroy_event(event) == 0
        message = assert_rejected(acl.rt.record_event(event, device.stream), acl.ACL_ERROR_RT_INVALID_HANDLE,
                                  "event", "already released at", "made at", THIS_FILE)
        assert len({context, event, device.stream}) == 3
