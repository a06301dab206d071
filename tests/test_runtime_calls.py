"""The runtime calls added after the first release (docs/runtime.md, "Calls"): callbacks and their report
thread, 2-D copies, version, synchronisation with a timeout, streams with a configuration, forced stream
destruction, event timestamps and wait status, events made with the Ex form, aligned and cached
allocation, the thread's last error, and the float16 helpers. Each with its error codes."""
import _thread
import signal
import os
import sys
import threading
import time

import numpy as np
import pytest

import acl
import aclnn_api as nn
import emulator
from emulator import hooks, interface
from support import REPO, assert_rejected, last_error

H2D, D2H, D2D = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST, acl.ACL_MEMCPY_DEVICE_TO_DEVICE


@pytest.fixture
def device():
    """Device 0 set, with a created stream; everything made through `device.malloc` is freed after."""
    assert acl.rt.set_device(0) == 0
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    made = []

    class Device:
        pass
    d = Device()
    d.stream = stream

    def malloc(n, how=acl.rt.malloc):
        address, ret = how(n, 0)
        assert ret == 0, last_error()
        made.append(address)
        return address
    d.malloc = malloc
    yield d
    for address in made:
        acl.rt.free(address)
    acl.rt.destroy_stream(stream)
    assert acl.rt.reset_device(0) == 0


def slow_task(seconds):
    def run():
        time.sleep(seconds)
    return run


# -- version and float16 ------------------------------------------------------------------------


def test_get_version_is_the_emulated_api_version():
    assert acl.rt.get_version() == (1, 17, 0, 0)


@pytest.mark.parametrize("value", [0.0, -0.0, 1.0, -2.5, 65504.0, 6.1e-5, 5.96e-8, 1e-9, 1e6, float("inf"), 0.1, 1 / 3])
def test_float16_conversions_agree_with_numpy(value):
    bits = acl.float_to_float16(value)
    with np.errstate(over="ignore"):
        expected = int(np.array([value], np.float32).astype(np.float16).view(np.uint16)[0])
    assert bits == expected
    assert acl.rt.float16_to_float(bits) == float(np.array([bits], np.uint16).view(np.float16)[0])


def test_float16_nan_and_bad_values():
    assert np.isnan(acl.float16_to_float(0x7E00))
    assert acl.float16_to_float(1 << 16) == 0.0
    message = last_error()
    assert "value" in message and "expected" in message
    assert acl.float_to_float16("x") == 0
    assert "expected a number" in last_error()


# -- last error -----------------------------------------------------------------------------------


def test_last_error_is_the_threads_latest_failure_until_read():
    assert acl.rt.get_last_error(0) in range(0, 1 << 20)      # whatever earlier tests left: cleared now
    assert acl.rt.get_last_error(0) == 0
    assert acl.rt.free(0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.get_device_count()[1] == 0                  # a success does not clear it
    assert acl.rt.peek_at_last_error(0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.peek_at_last_error(0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.get_last_error(0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.get_last_error(0) == 0
    assert nn.aclDestroyAclOpExecutor(None) != 0, "an aclnn failure"
    assert acl.rt.get_last_error(0) == 0, "aclnn statuses are not the runtime's last error"
    other = []
    thread = threading.Thread(target=lambda: other.append((acl.rt.free(0), acl.rt.get_last_error(0))))
    thread.start(), thread.join()
    assert other == [(acl.ACL_ERROR_INVALID_PARAM, acl.ACL_ERROR_INVALID_PARAM)]
    assert acl.rt.peek_at_last_error(0) == 0, "the last error is per thread"


def test_last_error_level_other_than_thread_is_100000():
    assert acl.rt.get_last_error(1) == acl.ACL_ERROR_INVALID_PARAM
    assert "level" in last_error()
    acl.rt.get_last_error(0)


# -- allocation -----------------------------------------------------------------------------------


@pytest.mark.sanitizer_reports("padding overrun", "uninitialised read")
def test_malloc_align32_has_no_extra_padding(device):
    address = device.malloc(40, acl.rt.malloc_align32)
    host = np.zeros(64, np.uint8)
    assert acl.rt.memcpy(host.ctypes.data, 64, address, 64, D2H) == 0, "64 = ALIGN_UP(40, 32) is inside"
    assert_rejected(acl.rt.memcpy(host.ctypes.data, 65, address, 65, D2H), acl.ACL_ERROR_RT_PARAM_INVALID,
                    "src", "overruns")
    padded = device.malloc(40)
    wider = np.zeros(96, np.uint8)
    assert acl.rt.memcpy(wider.ctypes.data, 96, padded, 96, D2H) == 0, "aclrtMalloc adds 32 bytes"


@pytest.mark.sanitizer_reports("padding overrun", "uninitialised read")
@pytest.mark.parametrize("policy,padding", [(0, 32), (1, 32), (5, 32), (6, 0), (7, 0), (6 | 0x1000, 0),
                                            (3 | 0x100, 32), (99, 32)])
def test_the_1g_huge_page_policies_are_padded_as_malloc_align32(device, policy, padding):
    address = device.malloc(40, lambda size, _: acl.rt.malloc(size, policy))
    host = np.zeros(128, np.uint8)
    inside = 64 + padding  # ALIGN_UP(40, 32), plus the extra 32 of the other policies
    assert acl.rt.memcpy(host.ctypes.data, inside, address, inside, D2H) == 0, last_error()
    assert_rejected(acl.rt.memcpy(host.ctypes.data, inside + 1, address, inside + 1, D2H),
                    acl.ACL_ERROR_RT_PARAM_INVALID, "src", "overruns")


@pytest.mark.parametrize("how", ["malloc_align32", "malloc_cached"])
def test_malloc_variants_reject_size_zero_and_need_a_context(how):
    fn = getattr(acl.rt, how)
    assert_rejected(fn(0, 0)[1], acl.ACL_ERROR_INVALID_PARAM, "size")
    assert_rejected(fn(64, 0)[1], acl.ACL_ERROR_RT_CONTEXT_NULL, "context")


def test_malloc_cached_is_device_memory(device):
    address = device.malloc(100, acl.rt.malloc_cached)
    data = np.arange(100, dtype=np.uint8)
    back = np.zeros(100, np.uint8)
    assert acl.rt.memcpy(address, 100, data.ctypes.data, 100, H2D) == 0
    assert acl.rt.memcpy(back.ctypes.data, 100, address, 100, D2H) == 0
    assert (back == data).all()


# -- 2-D copies ---------------------------------------------------------------------------------


def test_memcpy_2d_copies_rows_between_pitches(device):
    rows, width, spitch, dpitch = 5, 12, 20, 16
    source = np.arange(rows * spitch, dtype=np.uint8)
    address = device.malloc(rows * dpitch)
    assert acl.rt.memset(address, rows * dpitch, 0xEE, rows * dpitch) == 0
    assert acl.rt.memcpy_2d(address, dpitch, source.ctypes.data, spitch, width, rows, H2D) == 0, last_error()
    back = np.zeros(rows * dpitch, np.uint8)
    assert acl.rt.memcpy(back.ctypes.data, back.nbytes, address, back.nbytes, D2H) == 0
    expected = np.full((rows, dpitch), 0xEE, np.uint8)
    expected[:, :width] = source.reshape(rows, spitch)[:, :width]
    assert (back.reshape(rows, dpitch) == expected).all()


def test_memcpy_2d_async_runs_on_the_stream(device):
    rows, width = 3, 8
    address = device.malloc(rows * width)
    source = np.arange(rows * 32, dtype=np.uint8)
    assert acl.rt.memcpy_2d_async(address, width, source.ctypes.data, 32, width, rows, H2D, device.stream) == 0
    back = np.zeros(rows * 16, np.uint8)
    assert acl.rt.memcpy_2d_async(back.ctypes.data, 16, address, width, width, rows, D2H, device.stream) == 0
    assert not back.any(), "queued work has not run before the synchronisation"
    assert acl.rt.synchronize_stream(device.stream) == 0
    assert (back.reshape(rows, 16)[:, :width] == source.reshape(rows, 32)[:, :width]).all()
    assert not back.reshape(rows, 16)[:, width:].any()


@pytest.mark.parametrize("args,code,word", [
    (dict(width=0), acl.ACL_ERROR_INVALID_PARAM, "width"),
    (dict(height=0), acl.ACL_ERROR_INVALID_PARAM, "height"),
    (dict(width=17), acl.ACL_ERROR_INVALID_PARAM, "dpitch"),
    (dict(spitch=8), acl.ACL_ERROR_INVALID_PARAM, "spitch"),
    (dict(dst=0), acl.ACL_ERROR_INVALID_PARAM, "dst"),
    (dict(kind=9), acl.ACL_ERROR_INVALID_PARAM, "kind"),
    (dict(kind=D2H), acl.ACL_ERROR_RT_PARAM_INVALID, "kind"),
    (dict(height=7), acl.ACL_ERROR_RT_PARAM_INVALID, "overruns"),
    # the rows span pitch * (height - 1) + width bytes: a range like any other, 107000 where no memory holds it
    (dict(spitch=1 << 62, height=2), acl.ACL_ERROR_RT_PARAM_INVALID, "src: expected 4611686018427387920 bytes"),
    (dict(spitch=1 << 63, height=2), acl.ACL_ERROR_RT_PARAM_INVALID, "end past 2**63"),
    # a bad kind is named when it is the only thing wrong, and before any range is looked at
    (dict(spitch=1 << 62, height=2, kind=7), acl.ACL_ERROR_INVALID_PARAM, "kind"),
    (dict(spitch=1 << 63, height=2, kind=7), acl.ACL_ERROR_INVALID_PARAM, "kind"),
])
def test_memcpy_2d_rejections(device, args, code, word):
    address = device.malloc(64)
    source = np.zeros(256, np.uint8)
    call = dict(dst=address, dpitch=16, src=source.ctypes.data, spitch=32, width=16, height=4, kind=H2D)
    call.update(args)
    assert_rejected(acl.rt.memcpy_2d(*call.values()), code, word)
    assert_rejected(acl.rt.memcpy_2d_async(*call.values(), device.stream), code, word)


def test_a_2d_copy_of_more_rows_than_its_allocation_holds_is_rejected_without_listing_them(device):
    """A height past the allocation (a handle passed by mistake) is 107000 at once: nothing is made per
    row before the range is checked (a row each took 262 MB at 10**6 rows, and an OOM kill beyond)."""
    import tracemalloc
    address = device.malloc(64)
    tracemalloc.start()
    try:
        for copy in (acl.rt.memcpy_2d, acl.rt.memcpy_2d_async):
            extra = (device.stream,) if copy is acl.rt.memcpy_2d_async else ()
            assert_rejected(copy(address, 64, address, 64, 3, 10 ** 6, D2D, *extra), acl.ACL_ERROR_RT_PARAM_INVALID,
                            "expected a range inside allocation")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak


def test_async_copies_and_memsets_of_no_bytes_succeed_before_the_stream_or_context_is_looked_at(device):
    stream, ret = acl.rt.create_stream()
    assert ret == 0 and acl.rt.destroy_stream(stream) == 0
    for bad_stream in (stream, 12345):
        assert acl.rt.memcpy_async(0, 0, 0, 0, H2D, bad_stream) == 0, last_error()
        assert acl.rt.memset_async(0, 0, 0, 0, bad_stream) == 0, last_error()
    results = []
    thread = threading.Thread(target=lambda: results.extend(  # a thread with no context
        [acl.rt.memcpy_async(0, 0, 0, 0, H2D, None), acl.rt.memset_async(0, 0, 0, 0, None),
         acl.rt.memcpy_async(0, 1, 0, 1, H2D, None)]))
    thread.start()
    thread.join()
    assert results == [0, 0, acl.ACL_ERROR_INVALID_PARAM], "a null pointer of 1 byte is checked first"


def test_rejected_copies_and_memsets_read_and_write_nothing_so_the_sanitizer_reports_nothing(device):
    """A copy from never-written device memory that is rejected (its other side unmapped) reads no byte:
    no uninitialised-read report, and the memory keeps its state (the fixture fails on a report)."""
    address, before = device.malloc(64), list(emulator.reports())
    unmapped = 0x10
    assert_rejected(acl.rt.memcpy(unmapped, 64, address, 64, D2H), acl.ACL_ERROR_RT_PARAM_INVALID, "dst")
    assert_rejected(acl.rt.memcpy_2d(unmapped, 16, address, 16, 8, 4, D2H), acl.ACL_ERROR_RT_PARAM_INVALID, "dst")
    assert_rejected(acl.rt.memset(address, 1 << 20, 0, 1 << 20), acl.ACL_ERROR_RT_PARAM_INVALID, "devPtr")
    assert emulator.reports() == before


# -- streams --------------------------------------------------------------------------------------


def test_create_stream_with_config_makes_a_working_stream(device):
    stream, ret = acl.rt.create_stream_with_config(3, acl.ACL_STREAM_FAST_LAUNCH | acl.ACL_STREAM_FAST_SYNC)
    assert ret == 0, last_error()
    address = device.malloc(64)
    assert acl.rt.memset_async(address, 64, 7, 64, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert acl.rt.destroy_stream(stream) == 0


@pytest.mark.parametrize("priority,flag,word", [(8, 0, "priority"), (0, 0x40, "flag"), (-1, 0, "priority")])
def test_create_stream_with_config_rejects_bad_priority_and_flags(device, priority, flag, word):
    stream, ret = acl.rt.create_stream_with_config(priority, flag)
    assert stream == 0
    assert_rejected(ret, acl.ACL_ERROR_INVALID_PARAM, word)


@pytest.mark.sanitizer_reports("pending work destroyed")
def test_destroy_stream_force_drops_queued_work(device):
    stream, _ = acl.rt.create_stream()
    address = device.malloc(64)
    assert acl.rt.memset(address, 64, 0, 64) == 0
    assert acl.rt.memset_async(address, 64, 0x55, 64, stream) == 0
    assert acl.rt.destroy_stream_force(stream) == 0
    back = np.ones(64, np.uint8)
    assert acl.rt.memcpy(back.ctypes.data, 64, address, 64, D2H) == 0
    assert not back.any(), "the forced destroy must not run the queued memset"
    assert_rejected(acl.rt.destroy_stream_force(stream), acl.ACL_ERROR_RT_INVALID_HANDLE, "stream")
    default = interface.current_stream().handle
    assert_rejected(acl.rt.destroy_stream_force(default), acl.ACL_ERROR_RT_PARAM_INVALID, "default stream")


@pytest.mark.sanitizer_reports("pending work destroyed")
def test_an_event_whose_only_record_was_dropped_is_as_never_recorded(device):
    """aclrtDestroyStreamForce drops the event's record: every event call agrees that the event is as it was
    before (docs/runtime.md). aclrtSynchronizeEvent said complete while a query said NOT_READY forever (a
    polling loop never ended) and aclrtEventGetTimestamp said "still queued"."""
    stream, _ = acl.rt.create_stream()
    event, _ = acl.rt.create_event()
    assert acl.rt.record_event(event, stream) == 0
    assert acl.rt.stream_wait_event(device.stream, event) == 0
    assert acl.rt.destroy_stream_force(stream) == 0
    assert acl.rt.query_event_status(event) == (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)
    assert acl.rt.query_event(event) == (acl.ACL_EVENT_STATUS_COMPLETE, 0)
    assert acl.rt.query_event_wait_status(event) == (acl.ACL_EVENT_WAIT_STATUS_COMPLETE, 0)
    assert acl.rt.synchronize_event(event) == 0
    assert acl.rt.synchronize_stream(device.stream) == 0, "a wait for the dropped record waits for nothing"
    assert_rejected(acl.rt.event_get_timestamp(event)[1], acl.ACL_ERROR_RT_PARAM_INVALID, "event",
                    "dropped", "aclrtDestroyStreamForce")
    assert_rejected(acl.rt.event_elapsed_time(event, event)[1], acl.ACL_ERROR_RT_PARAM_INVALID, "startEvent",
                    "aclrtDestroyStreamForce")
    assert acl.rt.record_event(event, device.stream) == 0
    assert acl.rt.synchronize_event(event) == 0
    assert acl.rt.event_get_timestamp(event)[1] == 0, last_error()
    assert acl.rt.destroy_event(event) == 0


def test_an_event_reset_after_its_record_is_named_reset_where_a_record_is_needed(device):
    """aclrtResetEvent makes the event as never recorded; the calls that need a record say it was reset,
    and where, not that it was never recorded (which the same calls say of a fresh event)."""
    event, _ = acl.rt.create_event()
    assert_rejected(acl.rt.event_elapsed_time(event, event)[1], acl.ACL_ERROR_RT_PARAM_INVALID, "startEvent",
                    "never passed to aclrtRecordEvent")
    assert acl.rt.reset_event(event, device.stream) == 0
    assert_rejected(acl.rt.event_elapsed_time(event, event)[1], acl.ACL_ERROR_RT_PARAM_INVALID, "startEvent",
                    "never passed to aclrtRecordEvent")  # a fresh event reset is still never recorded
    assert acl.rt.record_event(event, device.stream) == 0
    assert acl.rt.synchronize_stream(device.stream) == 0
    assert acl.rt.event_elapsed_time(event, event) == (0.0, 0)
    reset_line = sys._getframe().f_lineno + 1
    assert acl.rt.reset_event(event, device.stream) == 0
    reset_at = "reset by aclrtResetEvent at %s:%d" % (__file__, reset_line)
    for message in (assert_rejected(acl.rt.event_elapsed_time(event, event)[1], acl.ACL_ERROR_RT_PARAM_INVALID,
                                    "startEvent", "expected a recorded event"),
                    assert_rejected(acl.rt.event_get_timestamp(event)[1], acl.ACL_ERROR_RT_PARAM_INVALID, "event")):
        assert reset_at in message and "since its last aclrtRecordEvent" in message, message
        assert "never passed" not in message, message
    assert acl.rt.query_event_status(event) == (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0), "as never recorded"
    assert acl.rt.record_event(event, device.stream) == 0
    assert acl.rt.synchronize_event(event) == 0
    assert acl.rt.event_get_timestamp(event)[1] == 0, last_error()
    assert acl.rt.destroy_event(event) == 0


@pytest.mark.sanitizer_reports("pending work destroyed")
def test_a_dropped_record_leaves_the_event_with_the_record_before_it(device):
    event, _ = acl.rt.create_event()
    assert acl.rt.record_event(event, device.stream) == 0
    assert acl.rt.synchronize_stream(device.stream) == 0
    first, ret = acl.rt.event_get_timestamp(event)
    assert ret == 0
    stream, _ = acl.rt.create_stream()
    assert acl.rt.record_event(event, stream) == 0
    assert acl.rt.destroy_stream_force(stream) == 0
    assert acl.rt.event_get_timestamp(event) == (first, 0), "the earlier record's time"
    # the record before the dropped one is still queued: a wait made for the dropped one waits for it
    interface.launch(interface.work_stream(device.stream), "slow", slow_task(0.001))
    assert acl.rt.record_event(event, device.stream) == 0
    stream, _ = acl.rt.create_stream()
    waiter, _ = acl.rt.create_stream()
    assert acl.rt.record_event(event, stream) == 0
    assert acl.rt.stream_wait_event(waiter, event) == 0
    assert acl.rt.destroy_stream_force(stream) == 0
    assert_rejected(acl.rt.event_get_timestamp(event)[1], acl.ACL_ERROR_RT_EVENT_NOT_COMPLETE, "still queued")
    assert acl.rt.synchronize_stream(waiter) == 0
    assert acl.rt.query_event_status(event) == (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0), "the wait ran it"
    later, ret = acl.rt.event_get_timestamp(event)
    assert ret == 0 and later > first
    assert acl.rt.destroy_stream(waiter) == 0
    assert acl.rt.destroy_event(event) == 0


def test_synchronize_stream_with_timeout_expires_and_leaves_work_queued(device):
    for _ in range(3):
        interface.launch(interface.work_stream(device.stream), "slow", slow_task(0.05))
    message = assert_rejected(acl.rt.synchronize_stream_with_timeout(device.stream, 20),
                              acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, "timeout")
    assert "still queued" in message
    assert acl.rt.stream_query(device.stream)[0] == acl.ACL_STREAM_STATUS_NOT_READY
    assert acl.rt.synchronize_stream_with_timeout(device.stream, -1) == 0


@pytest.mark.parametrize("timeout", [0, -2])
def test_synchronize_with_a_timeout_below_minus_one_or_zero_is_107000(device, timeout):
    event, _ = acl.rt.create_event()
    assert_rejected(acl.rt.synchronize_stream_with_timeout(device.stream, timeout), acl.ACL_ERROR_RT_PARAM_INVALID, "timeout")
    assert_rejected(acl.rt.synchronize_event_with_timeout(event, timeout), acl.ACL_ERROR_RT_PARAM_INVALID, "timeout")
    assert_rejected(acl.rt.synchronize_device_with_timeout(timeout), acl.ACL_ERROR_RT_PARAM_INVALID, "timeout")
    assert acl.rt.destroy_event(event) == 0


def test_synchronize_device_with_timeout(device):
    interface.launch(interface.work_stream(device.stream), "slow", slow_task(0.05))
    interface.launch(interface.work_stream(device.stream), "slow", slow_task(0.05))
    assert_rejected(acl.rt.synchronize_device_with_timeout(10), acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, "device 0")
    assert acl.rt.synchronize_device_with_timeout(5000) == 0


# -- events ---------------------------------------------------------------------------------------


def test_synchronize_event_with_timeout(device):
    event, _ = acl.rt.create_event()
    interface.launch(interface.work_stream(device.stream), "slow", slow_task(0.05))
    interface.launch(interface.work_stream(device.stream), "slow", slow_task(0.05))
    assert acl.rt.record_event(event, device.stream) == 0
    assert_rejected(acl.rt.synchronize_event_with_timeout(event, 10), acl.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, "event")
    assert acl.rt.synchronize_event_with_timeout(event, -1) == 0
    assert acl.rt.query_event_status(event) == (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)
    assert acl.rt.destroy_event(event) == 0


def test_event_timestamp_is_device_time_in_microseconds(device):
    first, _ = acl.rt.create_event()
    second, _ = acl.rt.create_event()
    assert_rejected(acl.rt.event_get_timestamp(first)[1], acl.ACL_ERROR_RT_PARAM_INVALID, "never")
    assert acl.rt.record_event(first, device.stream) == 0
    assert_rejected(acl.rt.event_get_timestamp(first)[1], acl.ACL_ERROR_RT_EVENT_NOT_COMPLETE, "synchronise")
    interface.launch(interface.work_stream(device.stream), "slow", slow_task(0.02))
    assert acl.rt.record_event(second, device.stream) == 0
    assert acl.rt.synchronize_stream(device.stream) == 0
    (t1, r1), (t2, r2) = acl.rt.event_get_timestamp(first), acl.rt.event_get_timestamp(second)
    assert r1 == r2 == 0
    elapsed, _ = acl.rt.event_elapsed_time(first, second)
    assert t2 - t1 >= 20000 and abs((t2 - t1) / 1000.0 - elapsed) < 0.01
    for event in (first, second):
        assert acl.rt.destroy_event(event) == 0
    assert_rejected(acl.rt.event_get_timestamp(first)[1], acl.ACL_ERROR_RT_INVALID_HANDLE, "event")


def test_query_event_wait_status(device):
    event, _ = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC)
    assert acl.rt.query_event_wait_status(event) == (acl.ACL_EVENT_WAIT_STATUS_COMPLETE, 0), "never recorded"
    interface.launch(interface.work_stream(device.stream), "slow", slow_task(0.001))
    assert acl.rt.record_event(event, device.stream) == 0
    assert acl.rt.query_event_wait_status(event) == (acl.ACL_EVENT_WAIT_STATUS_NOT_READY, 0)
    assert acl.rt.query_event_wait_status(event) == (acl.ACL_EVENT_WAIT_STATUS_COMPLETE, 0), "the device progressed"
    assert acl.rt.destroy_event(event) == 0
    assert_rejected(acl.rt.query_event_wait_status(event)[1], acl.ACL_ERROR_RT_INVALID_HANDLE, "event")


@pytest.mark.parametrize("query,not_ready", [
    (acl.rt.stream_query, acl.ACL_STREAM_STATUS_NOT_READY), (acl.rt.query_event, acl.ACL_EVENT_STATUS_NOT_READY),
    (acl.rt.query_event_status, acl.ACL_EVENT_RECORDED_STATUS_NOT_READY),
    (acl.rt.query_event_wait_status, acl.ACL_EVENT_WAIT_STATUS_NOT_READY),
])
def test_a_failed_query_answers_not_ready_never_complete(device, query, not_ready):
    """docs/runtime.md, "Calling conventions": a failed call's outputs are 0, but a query's status is its
    NOT_READY value (0 is COMPLETE for most of them): a poll that skips `ret` never sees work done."""
    status, ret = query(12345)
    assert status == not_ready
    assert_rejected(ret, acl.ACL_ERROR_RT_INVALID_HANDLE, "12345")
    assert acl.rt.malloc(0, 0) == (0, acl.ACL_ERROR_INVALID_PARAM), "the other calls' outputs are 0"


def test_create_event_ex_with_flag_needs_a_context_and_an_integer_flag():
    assert_rejected(acl.rt.create_event_ex_with_flag(0)[1], acl.ACL_ERROR_RT_CONTEXT_NULL, "context")
    assert_rejected(acl.rt.create_event_ex_with_flag(-1)[1], acl.ACL_ERROR_INVALID_PARAM, "flag")


# -- callbacks ------------------------------------------------------------------------------------


class ReportThread:
    """A host thread that processes the callbacks of the streams it subscribes to, as pyACL samples do."""

    def __init__(self, context):
        self.context, self.stop, self.codes = context, False, []
        self.thread = threading.Thread(target=self.loop)
        self.started = threading.Event()
        self.thread.start()
        self.started.wait()

    def loop(self):
        acl.rt.set_context(self.context)
        self.started.set()
        while not self.stop:
            code = acl.rt.process_report(20)
            if code not in (0, acl.ACL_ERROR_WAIT_CALLBACK_TIMEOUT, acl.ACL_ERROR_THREAD_NOT_SUBSCRIBE):
                self.codes.append(code)
            if code == acl.ACL_ERROR_THREAD_NOT_SUBSCRIBE:
                time.sleep(0.002)

    def join(self):
        self.stop = True
        self.thread.join()


@pytest.mark.sanitizer_reports("missing synchronisation")
def test_blocking_callback_runs_on_the_report_thread_before_later_work(device):
    context, _ = acl.rt.get_context()
    reporter = ReportThread(context)
    assert acl.rt.subscribe_report(reporter.thread.ident, device.stream) == 0
    address = device.malloc(64)
    assert acl.rt.memset(address, 64, 0, 64) == 0
    seen = []

    def callback(data):
        host = np.ones(64, np.uint8)
        assert acl.rt.memcpy(host.ctypes.data, 64, address, 64, D2H) == 0  # the callback may call the runtime
        seen.append((data, threading.get_ident(), int(host.sum())))

    assert acl.rt.memset_async(address, 64, 1, 64, device.stream) == 0
    assert acl.rt.launch_callback(callback, "first", acl.ACL_CALLBACK_BLOCK, device.stream) == 0
    assert acl.rt.memset_async(address, 64, 2, 64, device.stream) == 0
    assert acl.rt.synchronize_stream(device.stream) == 0, last_error()
    assert seen == [("first", reporter.thread.ident, 64)], "the callback saw the work before it, not after"
    assert acl.rt.unsubscribe_report(reporter.thread.ident, device.stream) == 0
    reporter.join()
    assert reporter.codes == []


def test_non_blocking_callback_is_handed_to_the_report_thread(device):
    context, _ = acl.rt.get_context()
    reporter = ReportThread(context)
    assert acl.rt.subscribe_report(reporter.thread.ident, device.stream) == 0
    done = threading.Event()
    assert acl.rt.launch_callback(lambda data: done.set(), None, acl.ACL_CALLBACK_NO_BLOCK, device.stream) == 0
    assert acl.rt.synchronize_stream(device.stream) == 0
    assert done.wait(5)
    assert acl.rt.unsubscribe_report(reporter.thread.ident, device.stream) == 0
    reporter.join()


@pytest.mark.parametrize("block", [acl.ACL_CALLBACK_NO_BLOCK, acl.ACL_CALLBACK_BLOCK])
def test_a_callback_reaches_its_report_thread_while_the_host_only_waits_for_it(device, block):
    """On the card the stream reaches the callback by itself, and the callback is the host's signal: the
    report thread's aclrtProcessReport runs the stream up to it (the work before it included) and then
    runs it, with no synchronisation or query. Nothing ran the stream before: the callback never came."""
    context, _ = acl.rt.get_context()
    reporter = ReportThread(context)
    assert acl.rt.subscribe_report(reporter.thread.ident, device.stream) == 0
    address = device.malloc(64)
    assert acl.rt.memset(address, 64, 0, 64) == 0
    seen, ran = [], threading.Event()

    def signal_the_host(_):
        host = np.zeros(64, np.uint8)
        assert acl.rt.memcpy(host.ctypes.data, 64, address, 64, D2H) == 0
        seen.append(int(host.sum()))
        ran.set()
    try:
        assert acl.rt.memset_async(address, 64, 1, 64, device.stream) == 0
        assert acl.rt.launch_callback(signal_the_host, None, block, device.stream) == 0
        assert ran.wait(5), "the callback never reached its report thread"
        assert seen == [64], "the callback ran before the work ahead of it"
        assert acl.rt.synchronize_stream(device.stream) == 0, last_error()
        assert acl.rt.unsubscribe_report(reporter.thread.ident, device.stream) == 0
    finally:
        reporter.join()
    assert reporter.codes == []


def test_callback_errors(device):
    me = threading.get_ident()
    assert_rejected(acl.rt.launch_callback(print, None, 0, device.stream), acl.ACL_ERROR_STREAM_NOT_SUBSCRIBE, "stream")
    assert_rejected(acl.rt.process_report(1), acl.ACL_ERROR_THREAD_NOT_SUBSCRIBE, "thread")
    assert acl.rt.subscribe_report(me, device.stream) == 0
    assert_rejected(acl.rt.subscribe_report(me, device.stream), acl.ACL_ERROR_REPEAT_SUBSCRIBE, "stream")
    assert_rejected(acl.rt.process_report(1), acl.ACL_ERROR_WAIT_CALLBACK_TIMEOUT, "timeout")
    assert_rejected(acl.rt.launch_callback("print", None, 0, device.stream), acl.ACL_ERROR_INVALID_PARAM, "fn")
    assert_rejected(acl.rt.launch_callback(None, None, 0, device.stream), acl.ACL_ERROR_INVALID_PARAM,
                    "fn: expected a callable, found null")
    assert_rejected(acl.rt.launch_callback(print, None, 2, device.stream), acl.ACL_ERROR_INVALID_PARAM, "blockType")
    assert_rejected(acl.rt.process_report(-2), acl.ACL_ERROR_INVALID_PARAM, "timeout")
    # processed by the thread itself: a non-blocking one runs when it asks for it
    seen = []
    assert acl.rt.launch_callback(seen.append, 5, acl.ACL_CALLBACK_NO_BLOCK, device.stream) == 0
    assert acl.rt.synchronize_stream(device.stream) == 0
    assert acl.rt.process_report(100) == 0 and seen == [5]
    # a blocking one can never run: the thread that must run it is the one waiting (a deadlock on the card)
    assert acl.rt.launch_callback(seen.append, 6, acl.ACL_CALLBACK_BLOCK, device.stream) == 0
    assert_rejected(acl.rt.synchronize_stream(device.stream), acl.ACL_ERROR_RT_TASK_TIMEOUT, "aclrtLaunchCallback",
                    "test_runtime_calls.py")
    assert acl.rt.unsubscribe_report(me, device.stream) == 0
    assert_rejected(acl.rt.unsubscribe_report(me, device.stream), acl.ACL_ERROR_STREAM_NOT_SUBSCRIBE, "stream")
    assert_rejected(acl.rt.process_report(1), acl.ACL_ERROR_THREAD_NOT_SUBSCRIBE, "thread")


@pytest.mark.parametrize("block", [acl.ACL_CALLBACK_NO_BLOCK, acl.ACL_CALLBACK_BLOCK])
def test_process_report_with_timeout_0_runs_the_stream_up_to_its_callback_and_runs_it(device, block):
    """A poll: on the card the stream reaches its callback by itself, so aclrtProcessReport(0) finds it. In
    the default (lazy) mode it never did: its deadline, now, stopped the stream before its first task, and
    a loop of polls got 100036 for ever (246,894 times in 3 s). The work ahead of the callback ran first."""
    me = threading.get_ident()
    assert acl.rt.subscribe_report(me, device.stream) == 0
    address = device.malloc(64)
    seen = []
    assert acl.rt.memset_async(address, 64, 3, 64, device.stream) == 0
    assert acl.rt.launch_callback(first_byte_reader(address, seen), None, block, device.stream) == 0
    assert acl.rt.process_report(0) == 0, last_error()
    assert seen == [3], "the callback ran, after the work ahead of it"
    assert_rejected(acl.rt.process_report(0), acl.ACL_ERROR_WAIT_CALLBACK_TIMEOUT, "timeout")  # nothing left
    assert acl.rt.synchronize_stream(device.stream) == 0, last_error()
    assert acl.rt.unsubscribe_report(me, device.stream) == 0


def test_process_report_with_timeout_0_does_not_wait_for_another_thread(device):
    """A poll runs the stream only as far as it goes without waiting: work behind another stream's blocking
    callback, whose report thread has not run it, stays queued, and the poll answers 100036 at once."""
    me = threading.get_ident()
    other, _ = acl.rt.create_stream()
    go = threading.Event()
    server = threading.Thread(target=lambda: (go.wait(10), acl.rt.process_report(5000)))
    server.start()
    event, _ = acl.rt.create_event()
    seen = []
    try:
        assert acl.rt.subscribe_report(server.ident, other) == 0
        assert acl.rt.launch_callback(seen.append, "other", acl.ACL_CALLBACK_BLOCK, other) == 0
        assert acl.rt.record_event(event, other) == 0
        assert acl.rt.subscribe_report(me, device.stream) == 0
        assert acl.rt.stream_wait_event(device.stream, event) == 0
        assert acl.rt.launch_callback(seen.append, "mine", acl.ACL_CALLBACK_NO_BLOCK, device.stream) == 0
        start = time.perf_counter()
        assert_rejected(acl.rt.process_report(0), acl.ACL_ERROR_WAIT_CALLBACK_TIMEOUT, "timeout")
        assert time.perf_counter() - start < 0.5 and seen == []
        go.set()
        server.join()
        assert seen == ["other"]
        assert acl.rt.process_report(0) == 0, last_error()
        assert seen == ["other", "mine"]
        assert acl.rt.unsubscribe_report(me, device.stream) == 0
        assert acl.rt.synchronize_stream(other) == 0, last_error()
        assert acl.rt.unsubscribe_report(server.ident, other) == 0
    finally:
        go.set()
        server.join()
        acl.rt.destroy_event(event)
        acl.rt.destroy_stream(other)


def test_a_thread_handed_its_blocking_callback_by_a_query_is_told_it_has_not_run_it(device):
    """The report thread queries its stream (which hands it the blocking callback) and synchronises it
    before any aclrtProcessReport: 107020, as before, but the message said the thread "is running" the
    callback and waits "from inside its own blocking callback", which it was not."""
    me, seen = threading.get_ident(), []
    assert acl.rt.subscribe_report(me, device.stream) == 0
    assert acl.rt.launch_callback(seen.append, "handed", acl.ACL_CALLBACK_BLOCK, device.stream) == 0
    assert acl.rt.stream_query(device.stream) == (acl.ACL_STREAM_STATUS_NOT_READY, 0)
    message = assert_rejected(acl.rt.synchronize_stream(device.stream), acl.ACL_ERROR_RT_TASK_TIMEOUT, "stream",
                              "aclrtLaunchCallback", "handed to this thread, which has not run it yet",
                              "aclrtProcessReport")
    assert "is running" not in message and "from inside" not in message, message
    assert seen == []
    assert acl.rt.process_report(0) == 0 and seen == ["handed"]
    assert acl.rt.synchronize_stream(device.stream) == 0, last_error()
    assert acl.rt.unsubscribe_report(me, device.stream) == 0


@pytest.mark.sanitizer_reports("missing synchronisation")
@pytest.mark.parametrize("query", ["stream", "event"])
def test_a_thread_polling_its_own_stream_runs_the_blocking_callback_in_process_report(device, query):
    """A query never blocks (on the card it answers NOT_READY): a thread subscribed to the stream it polls
    runs the blocking callback the stream reached in aclrtProcessReport, and the loop ends. The query ran
    the callback's task itself, which waited for this very thread: 107020 at the synchronisation."""
    me = threading.get_ident()
    assert acl.rt.subscribe_report(me, device.stream) == 0
    address = device.malloc(64)
    assert acl.rt.memset(address, 64, 0, 64) == 0
    event, _ = acl.rt.create_event()
    seen = []

    def callback(data):
        host = np.zeros(64, np.uint8)
        assert acl.rt.memcpy(host.ctypes.data, 64, address, 64, D2H) == 0
        seen.append((data, int(host.sum())))

    assert acl.rt.memset_async(address, 64, 1, 64, device.stream) == 0
    assert acl.rt.launch_callback(callback, "polled", acl.ACL_CALLBACK_BLOCK, device.stream) == 0
    assert acl.rt.memset_async(address, 64, 2, 64, device.stream) == 0
    assert acl.rt.record_event(event, device.stream) == 0
    complete = {"stream": (acl.ACL_STREAM_STATUS_COMPLETE, 0), "event": (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)}
    ask = {"stream": lambda: acl.rt.stream_query(device.stream), "event": lambda: acl.rt.query_event_status(event)}
    for _ in range(5):
        if ask[query]() == complete[query]:
            break
        assert acl.rt.process_report(10) in (0, acl.ACL_ERROR_WAIT_CALLBACK_TIMEOUT)
    assert ask[query]() == complete[query]
    assert seen == [("polled", 64)], "the callback saw the work before it, not after"
    assert acl.rt.synchronize_stream(device.stream) == 0, last_error()
    assert acl.rt.unsubscribe_report(me, device.stream) == 0
    assert acl.rt.destroy_event(event) == 0


class BusyReportThread:
    """A blocking callback queued on the device's stream, then an event recorded behind it; the stream's
    report thread is busy elsewhere until release() (or `busy_for` seconds), then runs the callback.
    `done` gets "callback" when the callback has run, then aclrtProcessReport's status."""

    def __init__(self, device, busy_for: float):
        self.device, self.go, self.done = device, threading.Event(), []
        self.thread = threading.Thread(target=self._serve, args=(busy_for,))
        self.thread.start()
        self.event, _ = acl.rt.create_event()
        assert acl.rt.subscribe_report(self.thread.ident, device.stream) == 0
        assert acl.rt.launch_callback(self.done.append, "callback", acl.ACL_CALLBACK_BLOCK, device.stream) == 0
        assert acl.rt.record_event(self.event, device.stream) == 0

    def _serve(self, busy_for: float) -> None:
        self.go.wait(busy_for)
        self.done.append(acl.rt.process_report(5000))

    def release(self) -> None:
        self.go.set()
        self.thread.join()

    def close(self) -> None:
        self.release()
        assert self.done == ["callback", 0]
        assert acl.rt.synchronize_stream(self.device.stream) == 0, last_error()
        assert acl.rt.unsubscribe_report(self.thread.ident, self.device.stream) == 0
        assert acl.rt.destroy_event(self.event) == 0


def test_a_query_does_not_wait_for_the_report_thread_of_a_blocking_callback(device):
    """The report thread is busy: every query answers NOT_READY at once (they waited for the thread), and
    the callback is waiting for it when it gets to aclrtProcessReport."""
    busy = BusyReportThread(device, busy_for=1.0)
    try:
        start = time.perf_counter()
        assert acl.rt.stream_query(device.stream) == (acl.ACL_STREAM_STATUS_NOT_READY, 0)
        assert acl.rt.query_event_status(busy.event) == (acl.ACL_EVENT_RECORDED_STATUS_NOT_READY, 0)
        assert acl.rt.query_event(busy.event) == (acl.ACL_EVENT_STATUS_NOT_READY, 0)
        assert acl.rt.query_event_wait_status(busy.event) == (acl.ACL_EVENT_WAIT_STATUS_NOT_READY, 0)
        assert time.perf_counter() - start < 0.5, "a query waited for the report thread"
        busy.release()
        assert busy.done == ["callback", 0]
        assert acl.rt.stream_query(device.stream) == (acl.ACL_STREAM_STATUS_NOT_READY, 0)   # runs what is left
        assert acl.rt.stream_query(device.stream) == (acl.ACL_STREAM_STATUS_COMPLETE, 0)
    finally:
        busy.close()


@pytest.mark.parametrize("synchronise", ["stream", "event", "device"])
def test_a_synchronisation_with_a_timeout_waits_for_a_blocking_callback_only_until_its_timeout(device, synchronise):
    """The report thread is busy until the synchronisation has returned (or 5 s went by): with a 50 ms
    timeout it returns the timeout code before the thread ran the callback (it used to wait for the
    thread, for up to the task timeout of 60 s)."""
    busy = BusyReportThread(device, busy_for=5.0)
    try:
        call, code = {"stream": (lambda: acl.rt.synchronize_stream_with_timeout(device.stream, 50),
                                 acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT),
                      "event": (lambda: acl.rt.synchronize_event_with_timeout(busy.event, 50),
                                acl.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT),
                      "device": (lambda: acl.rt.synchronize_device_with_timeout(50),
                                 acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT)}[synchronise]
        assert_rejected(call(), code, "timeout")
        assert busy.done == [], "the synchronisation waited for the report thread"
    finally:
        busy.close()


def test_work_behind_a_blocking_callback_that_the_report_thread_ran_meanwhile_is_not_lost(device, monkeypatch):
    """Stream._run: a synchronisation with a timeout waits for a blocking callback with the runtime lock
    released; meanwhile the report thread's aclrtProcessReport may run the stream up to the callback and
    take its task off the queue. The synchronisation then popped the task behind it, a memset, and ran the
    callback's task again in its place: the memset was lost and the call returned 0. Here the
    synchronising thread resumes late, as the scheduler may make it, after the report thread did that."""
    from emulator import callback
    from emulator.runtime import stream_of
    target = stream_of(device.stream)
    waiting = callback.wait_unlocked

    def resumed_late(lock, done, stop):
        waiting(lock, done, stop)
        waiting(lock, lambda: len(target.queue) == 1, time.perf_counter() + 5)  # the memset is left
    monkeypatch.setattr(callback, "wait_unlocked", resumed_late)
    address = device.malloc(16)
    assert acl.rt.memset(address, 16, 1, 16) == 0
    ctx, _ = acl.rt.get_context()
    reporter, seen = ReportThread(ctx), []
    try:
        assert acl.rt.subscribe_report(reporter.thread.ident, device.stream) == 0
        assert acl.rt.launch_callback(first_byte_reader(address, seen), None, acl.ACL_CALLBACK_BLOCK,
                                      device.stream) == 0
        assert acl.rt.memset_async(address, 16, 7, 16, device.stream) == 0
        assert acl.rt.synchronize_stream_with_timeout(device.stream, 10000) == 0, last_error()
        assert acl.rt.unsubscribe_report(reporter.thread.ident, device.stream) == 0
    finally:
        reporter.join()
    host = np.zeros(16, np.uint8)
    assert acl.rt.memcpy(host.ctypes.data, 16, address, 16, D2H) == 0
    assert seen == [1] and host[0] == 7, "the memset behind the callback ran, after it"
    assert reporter.codes == []


@pytest.mark.parametrize("waiter", ["the synchronising thread", "a second synchronisation"])
def test_a_thread_waiting_for_a_blocking_callback_is_woken_when_it_ends_not_at_its_next_poll(
        device, monkeypatch, waiter):
    """A synchronisation waiting for a blocking callback (or for another thread inside the callback's task)
    looked every POLL (2 ms) and nothing woke it: 2 ms of wall time a callback. With polls 30 s apart, a
    synchronisation with a 10 s timeout still sees the callback end, and runs the memset behind it: it is
    woken. (In the second case, another thread synchronises with an event recorded after the callback,
    and runs the callback's task, not the memset.)"""
    monkeypatch.setattr(emulator.stream, "POLL", 30.0)
    address = device.malloc(16)
    assert acl.rt.memset(address, 16, 1, 16) == 0
    ctx, _ = acl.rt.get_context()
    event, _ = acl.rt.create_event()
    go, stop, seen, results = threading.Event(), threading.Event(), [], []
    server = held_report_thread(ctx, go, stop, 5.0)
    server.start()
    try:
        assert acl.rt.subscribe_report(server.ident, device.stream) == 0
        assert acl.rt.launch_callback(first_byte_reader(address, seen), None, acl.ACL_CALLBACK_BLOCK,
                                      device.stream) == 0
        assert acl.rt.record_event(event, device.stream) == 0
        assert acl.rt.memset_async(address, 16, 7, 16, device.stream) == 0
        if waiter == "the synchronising thread":
            go.set()
        else:
            first = threading.Thread(target=lambda: (acl.rt.set_context(ctx),
                                                     results.append(acl.rt.synchronize_event(event))))
            first.start()
            time.sleep(0.1)  # it is inside the callback's task by now, waiting for the report thread
            threading.Timer(0.1, go.set).start()
        assert acl.rt.synchronize_stream_with_timeout(device.stream, 10000) == 0, last_error()
        if waiter != "the synchronising thread":
            first.join()
        assert acl.rt.unsubscribe_report(server.ident, device.stream) == 0
    finally:
        go.set()
        stop.set()
        server.join()
    host = np.zeros(16, np.uint8)
    assert acl.rt.memcpy(host.ctypes.data, 16, address, 16, D2H) == 0
    assert seen == [1] and host[0] == 7, "the memset behind the callback ran, after it"
    assert results in ([], [0])
    assert acl.rt.destroy_event(event) == 0


def first_byte_reader(address: int, seen: list):
    """A callback that copies the byte at device `address` back and appends it to `seen`."""
    def read_back(_):
        host = np.zeros(16, np.uint8)
        assert acl.rt.memcpy(host.ctypes.data, 16, address, 16, D2H) == 0
        seen.append(int(host[0]))
    return read_back


def held_report_thread(ctx, go: threading.Event, stop: threading.Event, hold: float) -> threading.Thread:
    """A report thread (not started) that serves its streams in `ctx` from `go` (or after `hold` seconds)
    until `stop`."""
    def serve():
        acl.rt.set_context(ctx)
        go.wait(hold)
        while not stop.is_set():
            acl.rt.process_report(20)
    return threading.Thread(target=serve)


def queue_blocking_callback_then_memset(device, server: threading.Thread, callback, address: int) -> None:
    """`server` subscribed to the device's stream, the blocking `callback` queued on it, and a memset of 7
    into the 16 bytes at `address` behind it."""
    assert acl.rt.subscribe_report(server.ident, device.stream) == 0
    assert acl.rt.launch_callback(callback, None, acl.ACL_CALLBACK_BLOCK, device.stream) == 0
    assert acl.rt.memset_async(address, 16, 7, 16, device.stream) == 0


@pytest.mark.parametrize("other", ["query", "synchronise"])
def test_work_behind_a_blocking_callback_waits_for_it_whichever_thread_drains_the_stream(device, other):
    """One thread synchronises and waits for the callback (its report thread is held back); meanwhile
    another thread queries or synchronises the stream: the memset queued behind the callback still runs
    after it (the callback reads the value from before the memset). It used to run at once, as the
    second thread found the callback's task already taken off the queue."""
    address = device.malloc(16)
    assert acl.rt.memset(address, 16, 1, 16) == 0
    ctx, _ = acl.rt.get_context()
    go, stop, seen, results = threading.Event(), threading.Event(), [], []
    read_back = first_byte_reader(address, seen)

    def in_context(call):
        return threading.Thread(target=lambda: (acl.rt.set_context(ctx), results.append(call())))

    server = held_report_thread(ctx, go, stop, 5.0)
    server.start()
    try:
        queue_blocking_callback_then_memset(device, server, read_back, address)
        first = in_context(lambda: acl.rt.synchronize_stream(device.stream))
        first.start()
        time.sleep(0.1)  # the first thread is waiting for the callback by now
        second = in_context((lambda: acl.rt.stream_query(device.stream)[0]) if other == "query"
                            else (lambda: acl.rt.synchronize_stream(device.stream)))
        second.start()
        if other == "query":
            second.join()
        go.set()
        first.join()
        second.join()
    finally:
        go.set()
        stop.set()
        server.join()
    assert seen == [1], "the memset behind the blocking callback ran before it"
    assert sorted(results) == [0, acl.ACL_STREAM_STATUS_NOT_READY if other == "query" else 0]
    assert acl.rt.unsubscribe_report(server.ident, device.stream) == 0


@pytest.mark.parametrize("first", ["report thread", "synchronisation"])
@pytest.mark.parametrize("waits_for", ["its own stream", "a stream behind it"])
def test_a_blocking_callback_waiting_for_its_stream_is_told_it_would_wait_for_itself(device, first, waits_for):
    """The card would hang: the stream waits for the callback, which waits for the stream (its own, or one
    that waits for an event recorded behind the callback). Whoever reaches the callback first, its report
    thread (which runs its streams up to their callbacks) or the host's synchronisation, that wait is
    107020 and the work behind the callback still waits for it: the memset of 7 behind it has not run when
    the callback reads the byte."""
    address = device.malloc(16)
    assert acl.rt.memset(address, 16, 1, 16) == 0
    ctx, _ = acl.rt.get_context()
    behind, _ = acl.rt.create_stream()
    event, _ = acl.rt.create_event()
    go, stop, inside, seen = threading.Event(), threading.Event(), [], []
    read_back = first_byte_reader(address, seen)
    waited = device.stream if waits_for == "its own stream" else behind

    def wait_for_the_stream(_):
        inside.append(acl.rt.synchronize_stream(waited))
        inside.append(last_error())
        read_back(None)

    server = held_report_thread(ctx, go, stop, 10.0)
    server.start()
    try:
        assert acl.rt.subscribe_report(server.ident, device.stream) == 0
        assert acl.rt.launch_callback(wait_for_the_stream, None, acl.ACL_CALLBACK_BLOCK, device.stream) == 0
        assert acl.rt.record_event(event, device.stream) == 0
        assert acl.rt.stream_wait_event(behind, event) == 0
        assert acl.rt.memset_async(address, 16, 7, 16, waited) == 0
        if first == "report thread":
            go.set()
            deadline = time.monotonic() + 10
            while not seen and time.monotonic() < deadline:
                time.sleep(0.01)
        else:
            threading.Timer(0.2, go.set).start()
        for stream in (waited, device.stream, behind):
            assert acl.rt.synchronize_stream(stream) == 0, last_error()
        assert acl.rt.unsubscribe_report(server.ident, device.stream) == 0
    finally:
        go.set()
        stop.set()
        server.join()
        acl.rt.destroy_event(event)
        acl.rt.destroy_stream(behind)
    assert inside[0] == acl.ACL_ERROR_RT_TASK_TIMEOUT, inside
    assert "from inside its own blocking callback" in inside[1], inside[1]
    assert seen == [1], "the work behind the blocking callback ran before it ended"
    first_byte_reader(address, seen)(None)
    assert seen == [1, 7]


@pytest.mark.sanitizer_reports("missing synchronisation")
def test_in_eager_mode_a_blocking_callback_holds_the_later_work_without_blocking_its_launch():
    """Eagerly, work runs as far as it can without waiting for another thread: the launch returns, and the
    work after the callback runs once the thread has run it. The launch waited for the thread (here the
    launching thread itself: a 107020 fault at once)."""
    emulator.configure(execution="eager")
    assert acl.rt.set_device(0) == 0
    me, seen = threading.get_ident(), []
    address, _ = acl.rt.malloc(64, 0)
    try:
        assert acl.rt.memset(address, 64, 0, 64) == 0
        assert acl.rt.subscribe_report(me, None) == 0
        assert acl.rt.launch_callback(seen.append, "eager", acl.ACL_CALLBACK_BLOCK, None) == 0
        assert acl.rt.memset_async(address, 64, 5, 64, None) == 0
        host = np.ones(64, np.uint8)
        assert acl.rt.memcpy(host.ctypes.data, 64, address, 64, D2H) == 0
        assert not host.any(), "the memset ran before the blocking callback had"
        assert acl.rt.process_report(100) == 0 and seen == ["eager"]
        assert acl.rt.synchronize_stream(None) == 0, last_error()
        assert acl.rt.memcpy(host.ctypes.data, 64, address, 64, D2H) == 0
        assert (host == 5).all()
        assert acl.rt.unsubscribe_report(me, None) == 0
    finally:
        acl.rt.free(address)
        acl.rt.reset_device(0)


@pytest.mark.parametrize("block", [acl.ACL_CALLBACK_NO_BLOCK, acl.ACL_CALLBACK_BLOCK])
def test_a_callback_whose_stream_lost_its_thread_before_reaching_it_is_a_task_timeout(device, block):
    """aclrtUnSubscribeReport before the stream reaches the callback: no thread can ever run it, a task fault
    naming why (it was 507000, a KeyError of npuemu's)."""
    me, seen = threading.get_ident(), []
    assert acl.rt.subscribe_report(me, device.stream) == 0
    assert acl.rt.launch_callback(seen.append, 1, block, device.stream) == 0
    assert acl.rt.unsubscribe_report(me, device.stream) == 0
    assert acl.rt.stream_query(device.stream) == (acl.ACL_STREAM_STATUS_NOT_READY, 0)
    assert_rejected(acl.rt.synchronize_stream(device.stream), acl.ACL_ERROR_RT_TASK_TIMEOUT, "aclrtLaunchCallback",
                    "aclrtUnSubscribeReport")
    assert seen == []


@pytest.mark.sanitizer_reports("pending work destroyed")
@pytest.mark.parametrize("destroy", [acl.rt.destroy_stream, acl.rt.destroy_stream_force])
def test_a_report_thread_keeps_no_stream_destroyed_while_it_was_subscribed(device, destroy):
    """A report thread serves one stream throughout and, round after round, a new stream destroyed while
    still subscribed: it serves the streams alive, not every one it ever served (one more each round, as
    a pipeline that makes a stream a step kept them all); its callbacks all run. With its last stream
    unsubscribed it serves none: aclrtProcessReport is 100035."""
    from emulator import callback
    context, _ = acl.rt.get_context()
    reporter = ReportThread(context)
    assert acl.rt.subscribe_report(reporter.thread.ident, device.stream) == 0
    ran = []
    try:
        for step in range(5):
            stream, _ = acl.rt.create_stream()
            assert acl.rt.subscribe_report(reporter.thread.ident, stream) == 0
            assert acl.rt.launch_callback(ran.append, step, acl.ACL_CALLBACK_BLOCK, stream) == 0
            assert acl.rt.synchronize_stream(stream) == 0, last_error()
            assert destroy(stream) == 0, last_error()
        assert ran == list(range(5))
        served = callback._threads[reporter.thread.ident].streams
        assert [stream.handle for stream in served] == [device.stream]
        assert acl.rt.unsubscribe_report(reporter.thread.ident, device.stream) == 0
        assert reporter.thread.ident not in callback._threads
    finally:
        reporter.join()
    assert reporter.codes == []


def test_a_stream_released_with_its_context_or_by_a_reset_leaves_its_report_thread(capsys):
    """Streams never destroyed, released by aclrtDestroyContext and by aclrtResetDevice (leaks, reported):
    their thread serves them no longer either, and when none is left it serves nothing (100035)."""
    from emulator import callback
    me = threading.get_ident()
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    device_context, _ = acl.rt.get_context()
    kept, _ = acl.rt.create_stream()
    created, _ = acl.rt.create_context(0)
    in_created, _ = acl.rt.create_stream()
    assert acl.rt.subscribe_report(me, kept) == 0 and acl.rt.subscribe_report(me, in_created) == 0
    assert acl.rt.destroy_context(created) == 0
    assert acl.rt.set_context(device_context) == 0
    assert [stream.handle for stream in callback._threads[me].streams] == [kept]
    assert_rejected(acl.rt.process_report(1), acl.ACL_ERROR_WAIT_CALLBACK_TIMEOUT, "timeout")
    assert acl.rt.reset_device(0) == 0
    assert me not in callback._threads
    assert acl.finalize() == 0
    err = capsys.readouterr().err
    assert "(released only by aclrtDestroyContext" in err and "(released only by aclrtResetDevice" in err, err


RELEASES = {"aclrtResetDevice": lambda context, stream: acl.rt.reset_device(0),
            "aclrtResetDeviceForce": lambda context, stream: acl.rt.reset_device_force(0),
            "aclrtDestroyContext": lambda context, stream: acl.rt.destroy_context(context),
            "aclrtDestroyStream": lambda context, stream: acl.rt.destroy_stream(stream),
            "aclFinalize": lambda context, stream: acl.finalize()}


@pytest.mark.parametrize("release", RELEASES)
def test_a_release_refused_inside_a_blocking_callback_of_its_stream_changes_nothing_and_reports_nothing(release):
    """A blocking callback that releases its own stream (its device reset, its context or the stream
    destroyed, aclFinalize) would wait for itself: 107020. aclrtResetDevice lowered the device's reference
    counts all the same (the next reset said "not set", the next set made a second default context), and
    every such call reported the stream's work as destroyed although nothing was. Refused, the call leaves
    everything as it was: the same call succeeds afterwards, once, and the sanitizer reports nothing."""
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    context, _ = acl.rt.create_context(0) if release == "aclrtDestroyContext" else acl.rt.get_context()
    stream, _ = acl.rt.create_stream()
    reporter = ReportThread(context)
    assert acl.rt.subscribe_report(reporter.thread.ident, stream) == 0
    refused = []

    def callback(_):
        refused.append((RELEASES[release](context, stream), acl.get_recent_err_msg()))
    event, _ = acl.rt.create_event()
    try:
        assert acl.rt.launch_callback(callback, None, acl.ACL_CALLBACK_BLOCK, stream) == 0
        assert acl.rt.record_event(event, stream) == 0  # work behind the callback, unsynchronised when it calls
        assert acl.rt.synchronize_stream(stream) == 0, last_error()
        assert acl.rt.unsubscribe_report(reporter.thread.ident, stream) == 0
    finally:
        reporter.join()
    [(code, message)] = refused
    assert code == acl.ACL_ERROR_RT_TASK_TIMEOUT, message
    for word in (release + ": stream: expected", hex(stream)[2:], "held by aclrtLaunchCallback"):
        assert word in message, message
    assert emulator.reports() == [], "a refused call reported the stream's work as destroyed"
    assert acl.rt.get_context() == (context, 0) and acl.rt.synchronize_stream(stream) == 0
    assert acl.rt.destroy_event(event) == 0 and acl.rt.destroy_stream(stream) == 0
    if release != "aclrtDestroyStream":
        assert RELEASES[release](context, stream) == 0, last_error()
    if release == "aclrtResetDevice":
        assert_rejected(acl.rt.reset_device(0), acl.ACL_ERROR_RT_CONTEXT_RELEASE_ERROR, "not set"), \
            "the refused reset left the device set once, as before it"
    if release in ("aclrtDestroyContext", "aclrtDestroyStream"):
        assert acl.rt.reset_device(0) == 0
    if release != "aclFinalize":
        assert acl.finalize() == 0
    assert_rejected(acl.finalize(), acl.ACL_ERROR_REPEAT_FINALIZE, "repeated call")


def test_a_thread_waiting_for_a_callback_while_its_only_stream_is_destroyed_gets_100035(device):
    """aclrtProcessReport waits for a callback; meanwhile the only stream its thread serves is destroyed:
    it serves none, and returns 100035 (docs/runtime.md), not its timeout."""
    stream, _ = acl.rt.create_stream()
    context, _ = acl.rt.get_context()
    subscribed, codes = threading.Event(), []

    def wait_for_a_callback():
        acl.rt.set_context(context)
        subscribed.wait(5)
        codes.append(acl.rt.process_report(10000))
    waiter = threading.Thread(target=wait_for_a_callback)
    waiter.start()
    assert acl.rt.subscribe_report(waiter.ident, stream) == 0
    subscribed.set()
    time.sleep(0.05)  # inside aclrtProcessReport (otherwise it finds no stream at once: 100035 too)
    assert acl.rt.destroy_stream(stream) == 0
    waiter.join(5)
    assert codes == [acl.ACL_ERROR_THREAD_NOT_SUBSCRIBE]


@pytest.fixture
def timeout_5s():
    """The task timeout at 5 s (set before the device): a wait for it takes seconds, not a minute."""
    emulator.configure(task_timeout=5)


class IdleSubscriber:
    """A thread subscribed to `stream` that runs no callback until `serve()`, and a blocking callback
    queued on the stream which a query has handed to it."""

    def __init__(self, stream):
        self.go, self.seen, self.codes = threading.Event(), [], []
        self.thread = threading.Thread(target=self._serve)
        self.thread.start()
        assert acl.rt.subscribe_report(self.thread.ident, stream) == 0
        assert acl.rt.launch_callback(self.seen.append, "ran", acl.ACL_CALLBACK_BLOCK, stream) == 0
        assert acl.rt.stream_query(stream) == (acl.ACL_STREAM_STATUS_NOT_READY, 0)  # hands it over

    def _serve(self) -> None:
        self.go.wait(10)
        self.codes.append(acl.rt.process_report(100))

    def serve(self) -> None:
        self.go.set()
        self.thread.join()


@pytest.mark.parametrize("when", ["before", "while"])
def test_a_callback_handed_over_and_then_unsubscribed_is_a_task_timeout_at_once(timeout_5s, device, when):
    """A query handed the blocking callback to its thread, which then unsubscribed ("before" the
    synchronisation, or "while" it waits for the callback): it takes the callback back, so, as without the
    query, no thread can ever run it: 107020 at once, naming the unsubscribe (it waited for the whole
    task timeout, then blamed the thread)."""
    idle = IdleSubscriber(device.stream)
    context, _ = acl.rt.get_context()

    def unsubscribe():
        assert acl.rt.set_context(context) == 0
        assert acl.rt.unsubscribe_report(idle.thread.ident, device.stream) == 0
    try:
        if when == "before":
            unsubscribe()
        else:
            threading.Timer(0.2, unsubscribe).start()
        start = time.perf_counter()
        assert_rejected(acl.rt.synchronize_stream(device.stream), acl.ACL_ERROR_RT_TASK_TIMEOUT, "aclrtLaunchCallback",
                        "aclrtUnSubscribeReport")
        assert time.perf_counter() - start < 2, "the synchronisation waited for the task timeout"
    finally:
        idle.serve()
    assert idle.seen == [] and idle.codes == [acl.ACL_ERROR_THREAD_NOT_SUBSCRIBE]


@pytest.mark.sanitizer_reports("pending work destroyed")
def test_a_synchronisation_waiting_for_a_callback_whose_stream_another_thread_force_destroys_returns(timeout_5s,
                                                                                                      device):
    """aclrtDestroyStreamForce drops the stream's work, and with it the callback its thread has not
    started: the synchronisation waiting for it returns at once (it waited for the task timeout)."""
    stream, _ = acl.rt.create_stream()
    idle = IdleSubscriber(stream)
    context, _ = acl.rt.get_context()
    results = []
    destroyer = threading.Timer(0.2, lambda: results.append((acl.rt.set_context(context),
                                                             acl.rt.destroy_stream_force(stream))))
    destroyer.start()
    try:
        start = time.perf_counter()
        assert acl.rt.synchronize_stream(stream) == 0, last_error()
        assert time.perf_counter() - start < 2, "the synchronisation waited for the task timeout"
    finally:
        destroyer.join()
        idle.serve()
    assert results == [(0, 0)]
    assert idle.seen == [], "a callback of the dropped work ran"


class TaskTimes:
    """A task observer (emulator.hooks): the seconds each task ran, by name."""

    def __init__(self):
        self.seconds = {}

    def enqueued(self, stream, task):
        pass

    def executed(self, stream, task, begin, end):
        self.seconds[task.name] = end - begin


@pytest.mark.parametrize("synchronised", ["after the callback ran", "by polling with timeouts"])
def test_a_blocking_callback_lasts_from_the_stream_reaching_it_to_its_end_whoever_waited(device, synchronised):
    """The events around a blocking callback that holds the stream 300 ms are 300 ms apart, and the task
    observers (the log's line, the trace's slice) see it run 300 ms. The task was timed from when the
    synchronisation ran it: the report thread had run the callback before ("after the callback ran":
    0.06 ms), or the synchronisations that timed out meanwhile were not counted."""
    context, _ = acl.rt.get_context()
    reporter, observer = ReportThread(context), TaskTimes()
    hooks.attach("TASKS", observer)
    start, end = acl.rt.create_event()[0], acl.rt.create_event()[0]
    ran = threading.Event()

    def hold_the_stream(_):
        time.sleep(0.3)
        ran.set()
    try:
        assert acl.rt.subscribe_report(reporter.thread.ident, device.stream) == 0
        assert acl.rt.record_event(start, device.stream) == 0
        assert acl.rt.launch_callback(hold_the_stream, None, acl.ACL_CALLBACK_BLOCK, device.stream) == 0
        assert acl.rt.record_event(end, device.stream) == 0
        if synchronised == "after the callback ran":
            assert ran.wait(5)
            assert acl.rt.synchronize_stream(device.stream) == 0, last_error()
        else:
            while acl.rt.synchronize_stream_with_timeout(device.stream, 20) == acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT:
                pass
            assert ran.is_set(), last_error()
        elapsed, ret = acl.rt.event_elapsed_time(start, end)
        assert ret == 0 and elapsed >= 300, "the callback held the stream 300 ms, found %g ms" % elapsed
        (began, _), (ended, _) = acl.rt.event_get_timestamp(start), acl.rt.event_get_timestamp(end)
        assert ended - began >= 300000
        assert observer.seconds["aclrtLaunchCallback(hold_the_stream)"] >= 0.3
        assert acl.rt.unsubscribe_report(reporter.thread.ident, device.stream) == 0
    finally:
        hooks.detach("TASKS", observer)
        reporter.join()
        acl.rt.destroy_event(start)
        acl.rt.destroy_event(end)
    assert reporter.codes == []


@pytest.fixture
def timeout_1s():
    """The task timeout at 1 s (set before the device)."""
    emulator.configure(task_timeout=1)


def test_the_task_timeout_of_a_blocking_callback_counts_from_the_stream_reaching_it(timeout_1s, device):
    """Synchronisations with a 300 ms timeout, one after another, while the callback's thread never runs it:
    the task timeout (1 s) passes during the fourth, which returns 107020. Each synchronisation started the
    task timeout again, so none ever did."""
    idle = IdleSubscriber(device.stream)
    try:
        started, codes = time.perf_counter(), []
        while time.perf_counter() - started < 5:
            codes.append(acl.rt.synchronize_stream_with_timeout(device.stream, 300))
            if codes[-1] != acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT:
                break
        assert_rejected(codes[-1], acl.ACL_ERROR_RT_TASK_TIMEOUT, "aclrtLaunchCallback")
        assert time.perf_counter() - started < 2.5, "the task timeout started again with each synchronisation"
    finally:
        idle.serve()


def test_ctrl_c_while_a_synchronisation_waits_for_a_blocking_callback_keeps_it_ahead_of_the_later_work(device):
    """Ctrl-C stops the synchronisation; the callback still holds the stream: the next synchronisation
    waits for it, and the memset queued behind it runs after it (the callback reads the value from
    before). The task had been taken off the queue: the next synchronisation ran the memset at once."""
    address = device.malloc(16)
    assert acl.rt.memset(address, 16, 1, 16) == 0
    ctx, _ = acl.rt.get_context()
    go, stop, seen = threading.Event(), threading.Event(), []
    read_back = first_byte_reader(address, seen)
    server = held_report_thread(ctx, go, stop, 10.0)
    server.start()
    try:
        queue_blocking_callback_then_memset(device, server, read_back, address)
        # Python ignores a simulated Ctrl-C when SIGINT is ignored, as in a suite started in the background
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            threading.Timer(0.2, _thread.interrupt_main).start()
            with pytest.raises(KeyboardInterrupt):
                acl.rt.synchronize_stream(device.stream)
        finally:
            signal.signal(signal.SIGINT, previous)
        go.set()
        assert acl.rt.synchronize_stream(device.stream) == 0, last_error()
        assert acl.rt.unsubscribe_report(server.ident, device.stream) == 0
    finally:
        go.set()
        stop.set()
        server.join()
    assert seen == [1], "the memset behind the blocking callback ran before it"


def test_a_blocking_callback_nobody_processes_times_out_with_the_task_timeout():
    emulator.configure(task_timeout=0.05)
    assert acl.rt.set_device(0) == 0
    waiting = threading.Event()
    subscriber = threading.Thread(target=waiting.wait)   # subscribed, but never calls process_report
    subscriber.start()
    try:
        assert acl.rt.subscribe_report(subscriber.ident, None) == 0
        assert acl.rt.launch_callback(print, None, acl.ACL_CALLBACK_BLOCK, None) == 0
        start = time.perf_counter()
        assert_rejected(acl.rt.synchronize_stream(None), acl.ACL_ERROR_RT_TASK_TIMEOUT, "not processed", "0.05 s")
        assert time.perf_counter() - start < 2
        assert acl.rt.unsubscribe_report(subscriber.ident, None) == 0
    finally:
        waiting.set()
        subscriber.join()
        acl.rt.reset_device(0)


# -- data buffers ---------------------------------------------------------------------------------


def test_a_data_buffer_records_its_address_and_size_and_is_destroyed_once():
    host = np.zeros(16, np.uint8)
    for data, size in ((host.ctypes.data, host.nbytes), (0, 0), (0x1000, (1 << 32) + 5)):
        buffer = acl.create_data_buffer(data, size)
        assert buffer, last_error()
        assert acl.get_data_buffer_addr(buffer) == data
        assert acl.get_data_buffer_size_v2(buffer) == size
        assert acl.get_data_buffer_size(buffer) == size & 0xFFFFFFFF, "the deprecated call's uint32_t"
        assert acl.destroy_data_buffer(buffer) == 0
        assert_rejected(acl.destroy_data_buffer(buffer), acl.ACL_ERROR_RT_INVALID_HANDLE, "dataBuffer",
                        "already released at")
        assert acl.get_data_buffer_addr(buffer) == 0 and "already released" in last_error()


@pytest.mark.parametrize("call", [acl.get_data_buffer_addr, acl.get_data_buffer_size_v2, acl.get_data_buffer_size])
def test_a_null_or_foreign_data_buffer_gives_0_and_a_message(call):
    assert call(None) == 0 and "dataBuffer: expected an aclDataBuffer, found null" in last_error()
    assert call(12345) == 0 and "which no call made" in last_error()


def test_a_data_buffer_of_values_no_c_argument_holds_is_0_and_a_message():
    assert acl.create_data_buffer(-1, 4) == 0 and "data: expected an integer" in last_error()
    assert acl.create_data_buffer(0x1000, -4) == 0 and "size: expected an integer" in last_error()
    assert acl.create_data_buffer("x", 4) == 0 and "data" in last_error()


# Names the real library's documentation gives that npuemu deliberately does not provide (docs/runtime.md,
# "Not provided"): pyACL's modules and top-level calls outside an aclnn runtime, and aclnn's
# aclDumpOpTensors, whose parameters are not known.
NOT_PROVIDED = {"acl": ("mdl", "op", "media", "prof", "app_log", "create_tensor_desc", "destroy_tensor_desc",
                        "get_tensor_desc_size"),
                "aclnn_api": ("aclDumpOpTensors",)}


def test_names_npuemu_leaves_out_are_absent_and_listed_as_omitted_with_why():
    with open(os.path.join(REPO, "docs", "runtime.md"), encoding="utf-8") as file:
        text = file.read()
    omitted = " ".join(text[text.index("**Not provided.**"):text.index("## aclnn framework")].split())
    for module_name, names in NOT_PROVIDED.items():
        module = {"acl": acl, "aclnn_api": nn}[module_name]
        for name in names:
            assert not hasattr(module, name), "%s.%s exists: take it out of NOT_PROVIDED and the docs" % (
                module_name, name)
            shown = "`acl.%s`" % name if module_name == "acl" else "`%s`" % name
            assert shown in omitted, "docs/runtime.md's 'Not provided' does not name %s" % shown
    for why in ("outside an aclnn runtime", "its parameters are not known"):
        assert why in omitted, why
