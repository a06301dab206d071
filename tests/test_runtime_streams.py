"""Streams and events (docs/runtime.md): work is queued and runs only at sync points
(stream, device, event), in stream order; events order work across streams; aclrtMemcpy does not
wait for queued work; event status and measured elapsed times; eager mode; stale handles."""
import re
import threading

import numpy as np
import pytest

import acl
import aclnn_api as nn
import emulator
from emulator.sites import user_site
from support import assert_rejected, last_error, npu

D2H = acl.ACL_MEMCPY_DEVICE_TO_HOST


def sigmoid_complement(x):
    """LogSigmoidBackward with gradOutput = 1: 1 / (1 + e^x), in float64."""
    return 1.0 / (1.0 + np.exp(x))


def launch(device, stream, n=64, seed=0):
    """Queue aclnnLogSigmoidBackward on `stream` into a zero-filled output; returns (output, expected)."""
    x = np.random.default_rng(seed).uniform(-4, 4, n).astype(np.float32)
    grad, xs = device.tensor(np.ones(n), nn.ACL_FLOAT), device.tensor(x, nn.ACL_FLOAT)
    out = device.empty((n,), nn.ACL_FLOAT)
    relaunch(out, grad, xs, stream)
    return out, sigmoid_complement(x.astype(np.float64)), (grad, xs)


def relaunch(out, grad, xs, stream):
    size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(grad.tensor, xs.tensor, grad.tensor, out.tensor)
    assert (size, ret) == (0, 0), last_error()
    assert nn.aclnnLogSigmoidBackward(None, 0, executor, stream) == 0, last_error()


def peek(t) -> np.ndarray:
    """The output's device bytes right now, with no synchronisation (aclrtMemcpy is immediate)."""
    host = np.empty(t.storage_elements, np.float32)
    assert acl.rt.memcpy(host.ctypes.data, host.nbytes, t.address, host.nbytes, D2H) == 0, last_error()
    return host.astype(np.float64)


@pytest.mark.sanitizer_reports("missing synchronisation")
def test_memcpy_without_synchronize_reads_stale_data():
    with npu() as device:
        out, expected, _ = launch(device, device.stream)
        assert not peek(out).any(), "the kernel ran before any sync point"
        assert acl.rt.synchronize_stream(device.stream) == 0
        np.testing.assert_allclose(peek(out), expected, rtol=1e-6)


@pytest.mark.sanitizer_reports("missing synchronisation")
def test_synchronize_event_runs_work_up_to_the_event_only():
    with npu() as device:
        event, _ = acl.rt.create_event()
        first, expected_first, _ = launch(device, device.stream, seed=1)
        assert acl.rt.record_event(event, device.stream) == 0
        second, expected_second, _ = launch(device, device.stream, seed=2)
        assert acl.rt.synchronize_event(event) == 0
        np.testing.assert_allclose(peek(first), expected_first, rtol=1e-6)
        assert not peek(second).any(), "work recorded after the event ran at the event's sync"
        assert acl.rt.synchronize_device() == 0
        np.testing.assert_allclose(peek(second), expected_second, rtol=1e-6)
        assert acl.rt.destroy_event(event) == 0


def test_synchronize_device_runs_every_stream_of_the_device():
    with npu() as device:
        other, _ = acl.rt.create_stream()
        a, expected_a, _ = launch(device, device.stream, seed=3)
        b, expected_b, _ = launch(device, other, seed=4)
        c, expected_c, _ = launch(device, None, seed=5)           # the default stream
        assert acl.rt.synchronize_device() == 0
        for t, expected in ((a, expected_a), (b, expected_b), (c, expected_c)):
            np.testing.assert_allclose(peek(t), expected, rtol=1e-6)
        assert acl.rt.destroy_stream(other) == 0


def test_work_of_one_stream_runs_in_order():
    with npu() as device:
        a, b = device.malloc(256), device.malloc(256)
        stream = device.stream
        assert acl.rt.memset(b, 256, 0, 256) == 0
        assert acl.rt.memset_async(a, 256, 1, 256, stream) == 0
        assert acl.rt.memcpy_async(b, 256, a, 256, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, stream) == 0
        assert acl.rt.memset_async(a, 256, 2, 128, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        host = np.zeros(256, np.uint8)
        assert acl.rt.memcpy(host.ctypes.data, 256, b, 256, D2H) == 0
        assert (host == 1).all()
        assert acl.rt.memcpy(host.ctypes.data, 256, a, 256, D2H) == 0
        assert (host[:128] == 2).all() and (host[128:] == 1).all()


@pytest.mark.sanitizer_reports("race")
@pytest.mark.parametrize("wait", [True, False])
def test_stream_wait_event_orders_a_copy_after_a_kernel_of_another_stream(wait):
    """Stream B copies the kernel's output of stream A: with aclrtStreamWaitEvent on an event recorded
    after the kernel, synchronising B alone gives the kernel's result; without it, B's copy runs first."""
    with npu() as device:
        stream_b, _ = acl.rt.create_stream()
        event, _ = acl.rt.create_event()
        out, expected, _ = launch(device, device.stream)
        assert acl.rt.record_event(event, device.stream) == 0
        copy = device.empty(out.shape, nn.ACL_FLOAT)
        if wait:
            assert acl.rt.stream_wait_event(stream_b, event) == 0
        nbytes = out.storage_elements * 4
        assert acl.rt.memcpy_async(copy.address, nbytes, out.address, nbytes, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, stream_b) == 0
        assert acl.rt.synchronize_stream(stream_b) == 0
        if wait:
            np.testing.assert_allclose(peek(copy), expected, rtol=1e-6)
        else:
            assert not peek(copy).any()
        assert acl.rt.synchronize_device() == 0
        assert acl.rt.destroy_event(event) == 0
        assert acl.rt.destroy_stream(stream_b) == 0


def test_query_event_status_tells_pending_from_complete():
    with npu() as device:
        event, never_recorded = acl.rt.create_event()[0], acl.rt.create_event()[0]
        assert acl.rt.query_event_status(never_recorded) == (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)
        out, expected, _ = launch(device, device.stream)
        assert acl.rt.record_event(event, device.stream) == 0
        assert acl.rt.query_event_status(event) == (acl.ACL_EVENT_RECORDED_STATUS_NOT_READY, 0)
        assert acl.ACL_EVENT_RECORDED_STATUS_NOT_READY == 0 and acl.ACL_EVENT_RECORDED_STATUS_COMPLETE == 1
        assert acl.rt.synchronize_stream(device.stream) == 0
        assert acl.rt.query_event_status(event) == (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)
        np.testing.assert_allclose(peek(out), expected, rtol=1e-6)
        for handle in (event, never_recorded):
            assert acl.rt.destroy_event(handle) == 0


def test_the_deprecated_query_event_answers_with_the_opposite_polarity():
    """aclrtQueryEvent: ACL_EVENT_STATUS_COMPLETE is 0 and NOT_READY 1, the reverse of aclrtQueryEventStatus."""
    with npu() as device:
        event = acl.rt.create_event()[0]
        launch(device, device.stream)
        assert acl.rt.record_event(event, device.stream) == 0
        assert acl.rt.query_event(event) == (acl.ACL_EVENT_STATUS_NOT_READY, 0) == (1, 0)
        assert acl.rt.synchronize_stream(device.stream) == 0
        assert acl.rt.query_event(event) == (acl.ACL_EVENT_STATUS_COMPLETE, 0) == (0, 0)
        assert acl.rt.destroy_event(event) == 0
        assert acl.rt.query_event(event)[1] == acl.ACL_ERROR_RT_INVALID_HANDLE


def test_stream_query_reports_not_ready_while_work_is_queued():
    with npu() as device:
        launch(device, device.stream)
        assert acl.rt.stream_query(device.stream) == (acl.ACL_STREAM_STATUS_NOT_READY, 0)
        assert acl.rt.synchronize_stream(device.stream) == 0
        assert acl.rt.stream_query(device.stream) == (acl.ACL_STREAM_STATUS_COMPLETE, 0)


@pytest.mark.parametrize("how", ["synchronize", "poll"])
def test_a_pipeline_of_thousands_of_streams_chained_by_events_runs_first_stream_first(how):
    """Stream i waits for an event recorded on stream i-1; the last stream's synchronisation (or a polling
    loop of queries) runs the whole chain. Each wait ran the stream before it by a recursion: from about
    500 streams on, 507000 RecursionError."""
    with npu() as device:
        streams = [acl.rt.create_stream()[0] for _ in range(2000)]
        events = [acl.rt.create_event()[0] for _ in streams]
        source, copy = device.malloc(256), device.malloc(256)
        assert acl.rt.memset_async(source, 256, 7, 256, streams[0]) == 0
        for i, (stream, event) in enumerate(zip(streams, events)):
            if i:
                assert acl.rt.stream_wait_event(stream, events[i - 1]) == 0
            assert acl.rt.record_event(event, stream) == 0
        assert acl.rt.memcpy_async(copy, 256, source, 256, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, streams[-1]) == 0
        if how == "synchronize":
            assert acl.rt.synchronize_stream(streams[-1]) == 0, last_error()
        else:
            answers = [acl.rt.stream_query(streams[-1]) for _ in range(2)]
            assert answers == [(acl.ACL_STREAM_STATUS_NOT_READY, 0), (acl.ACL_STREAM_STATUS_COMPLETE, 0)], last_error()
        host = np.zeros(256, np.uint8)
        assert acl.rt.memcpy(host.ctypes.data, 256, copy, 256, D2H) == 0
        assert (host == 7).all(), "the copy at one end of the chain ran before the memset at the other"
        assert {acl.rt.query_event_status(event) for event in events} == {(acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)}
        ms, ret = acl.rt.event_elapsed_time(events[0], events[-1])
        assert ret == 0 and ms >= 0.0, last_error()
        for event in events:
            assert acl.rt.destroy_event(event) == 0
        for stream in streams:
            assert acl.rt.destroy_stream(stream) == 0


def timed(device, n, launches=6):
    """Milliseconds between two events around `launches` LogSigmoidBackward runs over n elements."""
    start, end = acl.rt.create_event()[0], acl.rt.create_event()[0]
    out, _, (grad, xs) = launch(device, device.stream, n)
    assert acl.rt.synchronize_stream(device.stream) == 0
    assert acl.rt.record_event(start, device.stream) == 0
    for _ in range(launches):
        relaunch(out, grad, xs, device.stream)
    assert acl.rt.record_event(end, device.stream) == 0
    _, ret = acl.rt.event_elapsed_time(start, end)
    assert_rejected(ret, acl.ACL_ERROR_RT_EVENT_NOT_COMPLETE, "startEvent", "synchronise")
    assert acl.rt.synchronize_stream(device.stream) == 0
    ms, ret = acl.rt.event_elapsed_time(start, end)
    assert ret == 0, last_error()
    for event in (start, end):
        acl.rt.destroy_event(event)
    return ms


def test_event_elapsed_time_measures_the_work_between_the_events():
    with npu() as device:
        small = timed(device, 16)
        large = timed(device, 1 << 20)
        assert 0 < small < large, (small, large)
        assert large > 4 * small, "the time between the events should be dominated by the kernels' work"
        assert large == float(np.float32(large)), "the elapsed time is a C float, as C and pyACL return it"


@pytest.mark.parametrize("flag", [acl.ACL_EVENT_TIME_LINE, acl.ACL_EVENT_SYNC, 0, acl.ACL_EVENT_DEVICE_USE_ONLY])
def test_events_without_time_line_still_time_as_documented(flag):
    """docs/runtime.md's choice: only EXTERNAL and IPC events are refused an elapsed time (the runtime's
    documented refusals); an event without ACL_EVENT_TIME_LINE times as any other."""
    with npu() as device:
        start, end = acl.rt.create_event_with_flag(flag)[0], acl.rt.create_event_with_flag(flag)[0]
        assert acl.rt.record_event(start, device.stream) == 0 and acl.rt.record_event(end, device.stream) == 0
        assert acl.rt.synchronize_stream(device.stream) == 0
        ms, ret = acl.rt.event_elapsed_time(start, end)
        assert ret == 0 and ms >= 0.0, last_error()
        stamp, ret = acl.rt.event_get_timestamp(start)
        assert ret == 0 and stamp > 0, last_error()
        assert acl.rt.destroy_event(start) == 0 and acl.rt.destroy_event(end) == 0


def test_event_elapsed_time_errors():
    with npu() as device:
        recorded, never = acl.rt.create_event()[0], acl.rt.create_event()[0]
        external, ret = acl.rt.create_event_with_flag(acl.ACL_EVENT_EXTERNAL)
        assert ret == 0
        assert acl.rt.record_event(recorded, device.stream) == 0
        assert acl.rt.record_event(external, device.stream) == 0
        assert acl.rt.synchronize_stream(device.stream) == 0
        ms, ret = acl.rt.event_elapsed_time(recorded, never)
        assert ms == 0.0
        assert_rejected(ret, acl.ACL_ERROR_RT_PARAM_INVALID, "endEvent", "aclrtRecordEvent")
        assert_rejected(acl.rt.event_elapsed_time(external, recorded)[1], acl.ACL_ERROR_RT_PARAM_INVALID,
                        "startEvent", "EXTERNAL")
        later, _ = acl.rt.create_event()
        assert acl.rt.record_event(later, device.stream) == 0
        assert acl.rt.synchronize_stream(device.stream) == 0
        assert acl.rt.event_elapsed_time(recorded, later)[1] == 0
        assert_rejected(acl.rt.event_elapsed_time(later, recorded)[1], acl.ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL,
                        "endEvent", "earlier")
        for event in (recorded, never, external, later):
            assert acl.rt.destroy_event(event) == 0
        assert_rejected(acl.rt.event_elapsed_time(recorded, recorded)[1], acl.ACL_ERROR_RT_INVALID_HANDLE, "startEvent")


@pytest.mark.parametrize("create", [acl.rt.create_event_with_flag, acl.rt.create_event_ex_with_flag])
def test_event_flag_bits_no_acl_event_flag_names_are_taken_and_change_nothing(create):
    """docs/runtime.md's choice: unnamed bits (0x4, 0x80, 0x1000) are accepted, unlike the stream flags'
    (masked, 100000); the named bits beside them keep their meaning (EXTERNAL still cannot time)."""
    with npu() as device:
        plain = [create(flag) for flag in (0x4, 0x80, 0x1000, acl.ACL_EVENT_TIME_LINE | 0x80)]
        assert all(ret == 0 for _, ret in plain), last_error()
        external, ret = create(acl.ACL_EVENT_EXTERNAL | 0x80)
        assert ret == 0, last_error()
        events = [event for event, _ in plain] + [external]
        for event in events:
            assert acl.rt.record_event(event, device.stream) == 0
        assert acl.rt.synchronize_stream(device.stream) == 0
        assert acl.rt.event_elapsed_time(events[0], events[1])[1] == 0, last_error()
        assert_rejected(acl.rt.event_elapsed_time(external, events[0])[1], acl.ACL_ERROR_RT_PARAM_INVALID,
                        "startEvent", "EXTERNAL")
        assert_rejected(acl.rt.create_stream_with_config(0, 0x80)[1], acl.ACL_ERROR_INVALID_PARAM, "flag", "mask")
        for event in events:
            assert acl.rt.destroy_event(event) == 0


@pytest.mark.sanitizer_reports("missing synchronisation")
def test_eager_execution_runs_work_at_once():
    emulator.configure(execution="eager")
    with npu() as device:
        out, expected, _ = launch(device, device.stream)
        np.testing.assert_allclose(peek(out), expected, rtol=1e-6)
        event, _ = acl.rt.create_event()
        assert acl.rt.record_event(event, device.stream) == 0
        assert acl.rt.query_event_status(event) == (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)
        assert acl.rt.destroy_event(event) == 0


def test_stale_and_null_stream_and_event_handles():
    with npu() as device:
        stream, _ = acl.rt.create_stream()
        event, _ = acl.rt.create_event()
        assert acl.rt.destroy_stream(stream) == 0
        assert acl.rt.destroy_event(event) == 0
        buffer = device.malloc(8)
        for call in (lambda: acl.rt.destroy_stream(stream), lambda: acl.rt.synchronize_stream(stream),
                     lambda: acl.rt.stream_query(stream)[1], lambda: acl.rt.memset_async(buffer, 8, 0, 8, stream)):
            assert_rejected(call(), acl.ACL_ERROR_RT_INVALID_HANDLE, "stream", hex(stream))
        assert_rejected(acl.rt.destroy_event(event), acl.ACL_ERROR_RT_INVALID_HANDLE, "event", hex(event))
        assert_rejected(acl.rt.record_event(event, None), acl.ACL_ERROR_RT_INVALID_HANDLE, "event")
        assert_rejected(acl.rt.synchronize_event(event), acl.ACL_ERROR_RT_INVALID_HANDLE, "event")
        assert_rejected(acl.rt.query_event_status(event)[1], acl.ACL_ERROR_RT_INVALID_HANDLE, "event")
        assert_rejected(acl.rt.stream_wait_event(None, event), acl.ACL_ERROR_RT_INVALID_HANDLE, "event")
        for garbage in (0x1234, -8):
            assert_rejected(acl.rt.synchronize_stream(garbage), acl.ACL_ERROR_RT_INVALID_HANDLE, "stream")
            assert_rejected(acl.rt.synchronize_event(garbage), acl.ACL_ERROR_RT_INVALID_HANDLE, "event")
        for null in (None, 0):
            assert_rejected(acl.rt.destroy_stream(null), acl.ACL_ERROR_INVALID_PARAM, "stream", "null")
            assert_rejected(acl.rt.destroy_event(null), acl.ACL_ERROR_INVALID_PARAM, "event", "null")
            assert_rejected(acl.rt.record_event(null, None), acl.ACL_ERROR_INVALID_PARAM, "event", "null")
            assert_rejected(acl.rt.synchronize_event(null), acl.ACL_ERROR_INVALID_PARAM, "event", "null")
        assert acl.rt.synchronize_stream(None) == 0, "the null stream is the default stream"
        context, _ = acl.rt.get_context()
        assert_rejected(acl.rt.synchronize_stream(context), acl.ACL_ERROR_RT_INVALID_HANDLE, "stream")


def test_work_on_a_stream_of_another_context_of_the_device_is_107003():
    """The runtime refuses work on a stream that is not in the current context."""
    with npu() as device:
        buffer = device.malloc(64)
        event, _ = acl.rt.create_event()
        context, _ = acl.rt.create_context(0)                   # now current: device.stream is not in it
        calls = {"memset_async": lambda: acl.rt.memset_async(buffer, 64, 0, 64, device.stream),
                 "memcpy_async": lambda: acl.rt.memcpy_async(buffer, 64, buffer + 64, 8, 3, device.stream),
                 "record_event": lambda: acl.rt.record_event(event, device.stream),
                 "stream_wait_event": lambda: acl.rt.stream_wait_event(device.stream, event)}
        for name, call in calls.items():
            assert_rejected(call(), acl.ACL_ERROR_RT_STREAM_CONTEXT, "stream", "current context", hex(context))
        assert acl.rt.synchronize_stream(device.stream) == 0, "synchronising it needs no particular context"
        assert acl.rt.destroy_context(context) == 0
        assert acl.rt.destroy_event(event) == 0


@pytest.mark.parametrize("destroy", [acl.rt.destroy_stream, acl.rt.destroy_stream_force])
def test_destroying_a_stream_of_another_device_or_with_no_current_context_is_refused_as_synchronising_it(destroy):
    """aclrtDestroyStream and aclrtDestroyStreamForce skipped the check every other stream call makes: with
    device 1 current a stream of device 0 was destroyed (0), and so it was from a thread with no current
    context. They now give what aclrtSynchronizeStream gives (107003, 107002), and the stream lives on."""
    assert acl.rt.set_device(0) == 0
    context, _ = acl.rt.get_context()
    stream, _ = acl.rt.create_stream()
    assert acl.rt.set_device(1) == 0
    assert_rejected(destroy(stream), acl.ACL_ERROR_RT_STREAM_CONTEXT, "stream", "current device 1", hex(stream)[2:],
                    "of device 0")
    codes = []
    thread = threading.Thread(target=lambda: codes.append((destroy(stream), last_error())))
    thread.start()
    thread.join()
    [(code, message)] = codes
    assert code == acl.ACL_ERROR_RT_CONTEXT_NULL and "expected a current context" in message, message
    assert acl.rt.reset_device(1) == 0 and acl.rt.set_context(context) == 0
    assert acl.rt.synchronize_stream(stream) == 0 and destroy(stream) == 0, "the stream lived on"
    assert acl.rt.reset_device(0) == 0


def test_an_event_is_recorded_and_timed_on_its_own_device_and_waited_for_from_any():
    """An event of device 0 was recorded on a stream of device 1 and reset there, and the elapsed time of
    records on two devices (whose clocks are unrelated) was given. An event belongs to its device, as
    in CUDA: a record or reset on a stream of another device is 107003, an elapsed time across devices
    107000, each naming both devices; a wait, a synchronisation and a query across devices still work."""
    assert acl.rt.set_device(0) == 0
    context0, _ = acl.rt.get_context()
    stream0, _ = acl.rt.create_stream()
    event0, _ = acl.rt.create_event()
    assert acl.rt.set_device(1) == 0
    stream1, _ = acl.rt.create_stream()
    event1, _ = acl.rt.create_event()
    assert_rejected(acl.rt.record_event(event0, stream1), acl.ACL_ERROR_RT_STREAM_CONTEXT, "stream",
                    "the event's device 0", "%x of device 1" % stream1, "%x on device 0" % event0)
    assert_rejected(acl.rt.reset_event(event0, stream1), acl.ACL_ERROR_RT_STREAM_CONTEXT, "stream",
                    "the event's device 0", "%x of device 1" % stream1)
    assert acl.rt.record_event(event1, stream1) == 0
    assert acl.rt.set_context(context0) == 0
    assert acl.rt.record_event(event0, stream0) == 0
    assert acl.rt.stream_wait_event(stream0, event1) == 0, "a stream waits for an event of another device"
    assert acl.rt.query_event_status(event1)[1] == 0
    assert acl.rt.synchronize_event(event1) == 0 and acl.rt.synchronize_stream(stream0) == 0
    assert acl.rt.query_event_status(event1) == (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)
    assert acl.rt.event_elapsed_time(event0, event0) == (0.0, 0)
    elapsed, ret = acl.rt.event_elapsed_time(event0, event1)
    assert elapsed == 0.0
    assert_rejected(ret, acl.ACL_ERROR_RT_PARAM_INVALID, "endEvent", "startEvent's device 0", "%x on device 1" % event1)
    for event in (event0, event1):
        assert acl.rt.destroy_event(event) == 0
    assert acl.rt.destroy_stream(stream0) == 0 and acl.rt.reset_device(0) == 0
    assert acl.rt.set_device(1) == 0 and acl.rt.destroy_stream(stream1) == 0
    assert acl.rt.reset_device(1) == 0 and acl.rt.reset_device(1) == 0


def released_by(message: str) -> str:
    """What a 107017 or 107000 message says released the object: the text after "released at" or
    "freed at", up to where it says where the object was made."""
    match = re.search(r"(?:released|freed) at (.*?)(?: \(made at |, made at |$)", message)
    assert match, message
    return match.group(1)


def test_handles_released_by_a_reset_or_a_context_destroyed_name_that_release():
    """A stream or event released by aclrtResetDevice or aclrtDestroyContext said only "already released
    (made at ...)": every kind of object such a call releases (created and default streams, events, the
    default context, device memory) now names the call and the program's line that made it."""
    emulator.leaks.forget()
    assert acl.rt.set_device(0) == 0
    default_context, _ = acl.rt.get_context()
    stream, _ = acl.rt.create_stream()
    event, _ = acl.rt.create_event()
    memory, _ = acl.rt.malloc(64, 0)
    created, _ = acl.rt.create_context(0)
    in_created, _ = acl.rt.create_stream()
    event_in_created, _ = acl.rt.create_event()
    memory_in_created, _ = acl.rt.malloc(64, 0)
    assert acl.rt.destroy_context(created) == 0; destroyed_at = str(user_site())  # noqa: E702  (the same line: the same site)
    assert acl.rt.set_context(default_context) == 0
    assert acl.rt.reset_device(0) == 0; reset_at = str(user_site())  # noqa: E702  (the same line: the same site)
    assert acl.rt.set_device(0) == 0
    try:
        by_destroy = "aclrtDestroyContext(%s) at %s" % (hex(created), destroyed_at)
        by_reset = "aclrtResetDevice(0) at %s" % reset_at
        host = np.zeros(64, np.uint8)
        for call, released, code in [
                (lambda: acl.rt.synchronize_stream(stream), by_reset, acl.ACL_ERROR_RT_INVALID_HANDLE),
                (lambda: acl.rt.record_event(event, None), by_reset, acl.ACL_ERROR_RT_INVALID_HANDLE),
                (lambda: acl.rt.set_context(default_context), by_reset, acl.ACL_ERROR_RT_INVALID_HANDLE),
                (lambda: acl.rt.free(memory), by_reset, acl.ACL_ERROR_RT_PARAM_INVALID),
                (lambda: acl.rt.synchronize_stream(in_created), by_destroy, acl.ACL_ERROR_RT_INVALID_HANDLE),
                (lambda: acl.rt.query_event_status(event_in_created)[1], by_destroy, acl.ACL_ERROR_RT_INVALID_HANDLE),
                (lambda: acl.rt.memcpy(host.ctypes.data, 64, memory_in_created, 64, D2H), by_reset,
                 acl.ACL_ERROR_RT_PARAM_INVALID)]:   # the device's memory goes with its last reset
            message = assert_rejected(call(), code, "made at")
            assert released_by(message) == released, message
    finally:
        assert acl.rt.reset_device(0) == 0
        emulator.leaks.forget()  # left to the reset and the destroy on purpose


def test_a_default_stream_released_by_a_forced_reset_names_it():
    """The default stream's handle (a program may keep it) goes with aclrtResetDeviceForce too."""
    emulator.leaks.forget()
    assert acl.rt.set_device(0) == 0
    context, _ = acl.rt.get_context()
    default_stream = emulator.runtime.live(emulator.context.Context, "context", context).default_stream.handle
    created, _ = acl.rt.create_context(0)
    assert acl.rt.reset_device_force(0) == 0; reset_at = str(user_site())  # noqa: E702  (the same line: the same site)
    assert acl.rt.set_device(0) == 0
    try:
        for call in (lambda: acl.rt.synchronize_stream(default_stream), lambda: acl.rt.set_context(created)):
            message = assert_rejected(call(), acl.ACL_ERROR_RT_INVALID_HANDLE, "already released", "made at")
            assert released_by(message) == "aclrtResetDeviceForce(0) at %s" % reset_at, message
    finally:
        assert acl.rt.reset_device(0) == 0
        emulator.leaks.forget()


def test_messages_about_a_stale_stream_or_event_do_not_repeat_the_kind():
    """They said "stream stream 0x...": the kind was named by the message and again by the description."""
    with npu() as device:
        stream, _ = acl.rt.create_stream()
        event, _ = acl.rt.create_event()
        assert acl.rt.destroy_stream(stream) == 0 and acl.rt.destroy_event(event) == 0
        address = device.malloc(8)
        for call in (lambda: acl.rt.synchronize_stream(stream), lambda: acl.rt.record_event(event, device.stream),
                     lambda: acl.rt.memset_async(address, 8, 0, 8, stream)):
            message = assert_rejected(call(), acl.ACL_ERROR_RT_INVALID_HANDLE, "already released")
            assert not re.search(r"\b(stream|event) \1\b", message), message
