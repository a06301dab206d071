"""Devices and contexts (docs/runtime.md): reference-counted set/reset, device ids and
count, the default context and stream of each device, the current context of each host thread,
created contexts, the chip name and run mode, 107002 before any device is set."""
import re
import threading

import numpy as np
import pytest

import acl
import emulator
from aclnn_api.operator import soc
from emulator.config import ConfigError
from emulator.sites import user_site
from support import ALL_SOCS, assert_rejected


def test_set_and_reset_are_reference_counted():
    assert acl.rt.set_device(0) == 0
    assert acl.rt.set_device(0) == 0
    assert acl.rt.reset_device(0) == 0
    assert acl.rt.get_device() == (0, 0), "one reset of two sets released the device"
    assert acl.rt.reset_device(0) == 0
    assert acl.rt.get_device()[1] == acl.ACL_ERROR_RT_CONTEXT_NULL
    assert_rejected(acl.rt.reset_device(0), acl.ACL_ERROR_RT_CONTEXT_RELEASE_ERROR, "deviceId", "reference count 0")


def test_a_reset_releases_only_what_set_device_took_never_a_created_context():
    """aclrtCreateContext holds the device too, but only aclrtDestroyContext releases that: a reset beyond
    the aclrtSetDevice count is 507007 and leaves the context and its streams alive."""
    context, ret = acl.rt.create_context(0)
    assert ret == 0
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    assert_rejected(acl.rt.reset_device(0), acl.ACL_ERROR_RT_CONTEXT_RELEASE_ERROR, "reference count 0",
                    "held by 1 context(s) of aclrtCreateContext")
    assert acl.rt.set_device(0) == 0 and acl.rt.reset_device(0) == 0
    assert_rejected(acl.rt.reset_device(0), acl.ACL_ERROR_RT_CONTEXT_RELEASE_ERROR, "reference count 0")
    assert acl.rt.set_context(context) == 0 and acl.rt.get_device() == (0, 0)
    assert acl.rt.destroy_stream(stream) == 0
    assert acl.rt.destroy_context(context) == 0
    assert_rejected(acl.rt.reset_device(0), acl.ACL_ERROR_RT_CONTEXT_RELEASE_ERROR, "reference count 0")


def test_reset_of_a_device_never_set_is_507007():
    assert_rejected(acl.rt.reset_device(3), acl.ACL_ERROR_RT_CONTEXT_RELEASE_ERROR, "device 3")


@pytest.mark.parametrize("call", [acl.rt.set_device, acl.rt.reset_device, acl.rt.create_context])
@pytest.mark.parametrize("device_id", [8, -1, 1000])
def test_device_id_outside_the_count_is_107001(call, device_id):
    ret = call(device_id)
    ret = ret[-1] if isinstance(ret, tuple) else ret
    assert_rejected(ret, acl.ACL_ERROR_RT_INVALID_DEVICEID, "deviceId", "[0, 8)", str(device_id))


def test_device_count_defaults_to_8_and_is_configurable():
    assert acl.rt.get_device_count() == (8, 0)
    emulator.configure(device_count=3)
    assert acl.rt.get_device_count() == (3, 0)
    assert_rejected(acl.rt.set_device(3), acl.ACL_ERROR_RT_INVALID_DEVICEID, "[0, 3)")
    assert acl.rt.set_device(2) == 0
    assert acl.rt.get_device() == (2, 0)


def test_configure_refuses_while_a_device_is_set_with_a_config_error():
    assert acl.rt.set_device(0) == 0
    with pytest.raises(ConfigError) as info:
        emulator.configure(device_count=2)
    assert "device" in str(info.value) and "reset" in str(info.value)


@pytest.mark.sanitizer_reports("missing synchronisation")
def test_each_device_has_its_own_default_context_and_stream():
    """SetDevice makes the device's default context current; the null stream is that context's
    default stream, so work queued on device 0's default stream is not synchronised from device 1."""
    host = np.zeros(64, np.uint8)
    assert acl.rt.set_device(0) == 0
    context0, ret = acl.rt.get_context()
    assert ret == 0 and context0
    buffer, _ = acl.rt.malloc(64, 0)
    assert acl.rt.memset(buffer, 64, 0, 64) == 0
    assert acl.rt.memset_async(buffer, 64, 7, 64, None) == 0     # device 0's default stream
    assert acl.rt.set_device(1) == 0
    context1, _ = acl.rt.get_context()
    assert context1 not in (0, context0)
    assert acl.rt.synchronize_stream(None) == 0                  # device 1's default stream
    assert acl.rt.set_device(0) == 0
    assert acl.rt.get_context() == (context0, 0), "SetDevice again must make the same default context current"
    assert acl.rt.memcpy(host.ctypes.data, 64, buffer, 64, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    assert not host.any(), "device 0's queued memset ran when device 1's default stream was synchronised"
    assert acl.rt.synchronize_stream(None) == 0
    assert acl.rt.memcpy(host.ctypes.data, 64, buffer, 64, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    assert (host == 7).all()
    assert acl.rt.free(buffer) == 0


def test_allocations_of_two_devices_are_disjoint_and_their_memory_info_separate():
    assert acl.rt.set_device(0) == 0
    free0, total0, ret = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
    a, _ = acl.rt.malloc(1 << 20, 0)
    assert acl.rt.set_device(1) == 0
    free1, total1, _ = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
    b, _ = acl.rt.malloc(1 << 20, 0)
    assert (free1, total1) == (free0, total0), "device 0's allocation counted against device 1"
    assert abs(a - b) >= 1 << 20
    assert acl.rt.free(a) == 0 and acl.rt.free(b) == 0


NEEDS_A_CONTEXT = {
    "get_device": lambda: acl.rt.get_device(),
    "get_context": lambda: acl.rt.get_context(),
    "malloc": lambda: acl.rt.malloc(64, 0),
    "memcpy": lambda: acl.rt.memcpy(*([np.zeros(8).ctypes.data, 64] * 2), acl.ACL_MEMCPY_HOST_TO_HOST),
    "memset": lambda: acl.rt.memset(np.zeros(8).ctypes.data, 64, 0, 64),
    "memset_async": lambda: acl.rt.memset_async(np.zeros(8).ctypes.data, 64, 0, 64, None),
    "get_mem_info": lambda: acl.rt.get_mem_info(acl.ACL_HBM_MEM),
    "create_stream": lambda: acl.rt.create_stream(),
    "create_event": lambda: acl.rt.create_event(),
    "synchronize_stream": lambda: acl.rt.synchronize_stream(None),
    "synchronize_device": lambda: acl.rt.synchronize_device(),
}


@pytest.mark.parametrize("name", NEEDS_A_CONTEXT)
def test_calls_before_any_set_device_are_107002(name):
    ret = NEEDS_A_CONTEXT[name]()
    ret = ret[-1] if isinstance(ret, tuple) else ret
    assert_rejected(ret, acl.ACL_ERROR_RT_CONTEXT_NULL, "aclrtSetDevice")


def test_free_needs_no_context():
    """aclrtFree works from a thread that never set a device."""
    assert acl.rt.set_device(0) == 0
    address, _ = acl.rt.malloc(64, 0)
    assert run_in_thread(lambda: (acl.rt.get_device()[1], acl.rt.free(address))) == (acl.ACL_ERROR_RT_CONTEXT_NULL, 0)


def test_created_context_is_current_until_destroyed_and_then_its_handle_is_stale():
    assert acl.rt.set_device(0) == 0
    default, _ = acl.rt.get_context()
    context, ret = acl.rt.create_context(1)
    assert ret == 0 and context not in (0, default)
    assert acl.rt.get_context() == (context, 0)
    assert acl.rt.get_device() == (1, 0)
    stream, ret = acl.rt.create_stream()                    # belongs to the created context
    assert ret == 0
    assert acl.rt.set_context(default) == 0
    assert acl.rt.get_device() == (0, 0)
    assert acl.rt.set_context(context) == 0
    assert acl.rt.destroy_stream(stream) == 0
    assert acl.rt.destroy_context(context) == 0
    assert_rejected(acl.rt.get_context()[1], acl.ACL_ERROR_RT_CONTEXT_NULL)
    assert_rejected(acl.rt.destroy_context(context), acl.ACL_ERROR_RT_INVALID_HANDLE, "context", hex(context)[2:])
    assert_rejected(acl.rt.set_context(context), acl.ACL_ERROR_RT_INVALID_HANDLE, "context")
    assert_rejected(acl.rt.reset_device(1), acl.ACL_ERROR_RT_CONTEXT_RELEASE_ERROR, "device 1"), \
        "device 1 was held only by the destroyed context"


def test_a_created_context_holds_its_device_open_but_not_its_default_context():
    """The last aclrtResetDevice releases what aclrtSetDevice took, the default context, even while a
    context of aclrtCreateContext holds the device open; the device closes with that context."""
    assert acl.rt.set_device(0) == 0
    default, _ = acl.rt.get_context()
    context, _ = acl.rt.create_context(0)
    memory, _ = acl.rt.malloc(64, 0)
    assert acl.rt.reset_device(0) == 0; reset_at = str(user_site())  # noqa: E702  (the same line: the same site)
    assert acl.rt.get_context() == (context, 0), "the context kept the device open"
    message = assert_rejected(acl.rt.set_context(default), acl.ACL_ERROR_RT_INVALID_HANDLE, "default context")
    assert "released at aclrtResetDevice(0) at %s" % reset_at in message, "the reset released the default context"
    assert acl.rt.memset(memory, 64, 0, 64) == 0, "device memory stays until the device closes"
    assert acl.rt.free(memory) == 0
    assert acl.rt.destroy_context(context) == 0
    assert_rejected(acl.rt.reset_device(0), acl.ACL_ERROR_RT_CONTEXT_RELEASE_ERROR), \
        "destroying the last holder closes the device"


def test_the_last_reset_releases_the_default_context_its_streams_and_events_while_a_created_context_lives(capsys):
    """The default context, its streams and events lived on after the last aclrtResetDevice while a context of
    aclrtCreateContext held the device, and went only with aclrtDestroyContext of that other context, which
    the stale handles' messages and the leak report then named. They go with the reset: a stale use and the
    leak report name it; the next aclrtSetDevice makes a new default context; the created context and its
    stream are untouched."""
    assert acl.init() == 0
    created, _ = acl.rt.create_context(1)
    in_created, _ = acl.rt.create_stream()
    assert acl.rt.set_device(1) == 0
    default, _ = acl.rt.get_context()
    stream, _ = acl.rt.create_stream()
    event, _ = acl.rt.create_event()
    assert acl.rt.reset_device(1) == 0; reset_at = str(user_site())  # noqa: E702  (the same line: the same site)
    released = "already released at aclrtResetDevice(1) at %s" % reset_at
    assert released in assert_rejected(acl.rt.set_context(default), acl.ACL_ERROR_RT_INVALID_HANDLE, "default context")
    assert acl.rt.set_context(created) == 0
    assert released in assert_rejected(acl.rt.synchronize_stream(stream), acl.ACL_ERROR_RT_INVALID_HANDLE, "stream")
    assert released in assert_rejected(acl.rt.query_event_status(event)[1], acl.ACL_ERROR_RT_INVALID_HANDLE, "event")
    assert acl.rt.synchronize_stream(in_created) == 0 and acl.rt.get_device() == (1, 0), "the created context lives"
    assert acl.rt.set_device(1) == 0
    fresh, _ = acl.rt.get_context()
    assert fresh not in (default, created), "the next aclrtSetDevice makes a new default context"
    assert acl.rt.reset_device(1) == 0
    assert acl.rt.set_context(created) == 0 and acl.rt.destroy_stream(in_created) == 0
    assert acl.rt.destroy_context(created) == 0
    assert acl.finalize() == 0
    leaks = re.findall(r"npuemu: leak: (.*)", capsys.readouterr().err)
    assert sorted(leak.split(" ")[0] for leak in leaks) == ["event", "stream"], leaks
    assert all(leak.endswith("(released only by aclrtResetDevice(1))") for leak in leaks), leaks
    emulator.leaks.forget()


def test_context_argument_errors():
    assert acl.rt.set_device(0) == 0
    default, _ = acl.rt.get_context()
    assert_rejected(acl.rt.destroy_context(None), acl.ACL_ERROR_INVALID_PARAM, "context", "null")
    assert_rejected(acl.rt.destroy_context(0), acl.ACL_ERROR_INVALID_PARAM, "context")
    assert_rejected(acl.rt.set_context(0x12345), acl.ACL_ERROR_RT_INVALID_HANDLE, "context")
    assert_rejected(acl.rt.destroy_context(default), acl.ACL_ERROR_RT_PARAM_INVALID, "default context")
    stream, _ = acl.rt.create_stream()
    assert_rejected(acl.rt.set_context(stream), acl.ACL_ERROR_RT_INVALID_HANDLE, "context")
    assert acl.rt.destroy_stream(stream) == 0


def run_in_thread(fn):
    result = {}
    thread = threading.Thread(target=lambda: result.update(value=fn()))
    thread.start()
    thread.join()
    return result["value"]


def test_each_host_thread_has_its_own_current_context_and_messages():
    assert acl.rt.set_device(0) == 0
    main_context, _ = acl.rt.get_context()

    def fresh_thread():
        before = acl.rt.get_device()
        message = acl.get_recent_err_msg()
        assert acl.rt.set_device(1) == 0
        after = acl.rt.get_device(), acl.rt.get_context()[0]
        acl.rt.reset_device(1)
        return before, message, after

    (before, message, (device, context)) = run_in_thread(fresh_thread)
    assert before == (0, acl.ACL_ERROR_RT_CONTEXT_NULL), "a new thread inherited the main thread's context"
    assert "context" in message
    assert device == (1, 0) and context != main_context
    assert acl.rt.get_device() == (0, 0), "the other thread's SetDevice changed this thread's context"
    assert acl.get_recent_err_msg() is None, "another thread's message showed up here"

    def adopt():
        assert acl.rt.set_context(main_context) == 0
        return acl.rt.get_device(), acl.rt.get_context()

    assert run_in_thread(adopt) == ((0, 0), (main_context, 0))


@pytest.mark.parametrize("release", ["aclrtResetDeviceForce", "aclrtResetDevice", "aclrtDestroyContext"])
def test_a_thread_whose_current_context_another_thread_released_is_told_by_which_call_and_where(release):
    """A worker's current context released by the main thread (a reset, a context destroyed): the worker's
    next call said only "found none", as if it had never set a context. It is 107002 still, and the
    message names the context and the call that released it, with the program's line, as stale handles do."""
    if release == "aclrtDestroyContext":
        context, _ = acl.rt.create_context(0)
    else:
        assert acl.rt.set_device(0) == 0
        context, _ = acl.rt.get_context()
    worker_ready, released, done = threading.Event(), threading.Event(), []

    def worker():
        assert acl.rt.set_context(context) == 0
        worker_ready.set()
        released.wait(10)
        done.append((acl.rt.malloc(64, 0)[1], acl.get_recent_err_msg()))
    thread = threading.Thread(target=worker)
    thread.start()
    worker_ready.wait(10)
    if release == "aclrtResetDeviceForce":  # (each on the line of its site: the same site)
        assert acl.rt.reset_device_force(0) == 0; released_at = str(user_site())  # noqa: E702
    elif release == "aclrtResetDevice":
        assert acl.rt.reset_device(0) == 0; released_at = str(user_site())  # noqa: E702
    else:
        assert acl.rt.destroy_context(context) == 0; released_at = str(user_site())  # noqa: E702
    released.set()
    thread.join()
    [(code, message)] = done
    assert code == acl.ACL_ERROR_RT_CONTEXT_NULL, message
    assert "aclrtMalloc: context: expected a current context on this thread" in message, message
    assert "found none: its current context %s" % hex(context) in message, message
    argument = 0 if "Reset" in release else hex(context)
    assert "was released by %s(%s) at %s" % (release, argument, released_at) in message, message


@pytest.mark.parametrize("family", ALL_SOCS)
def test_soc_name_of_a_family_is_a_specific_chip_of_that_family(family):
    emulator.configure(soc=family)
    name = acl.get_soc_name()
    assert name == acl.rt.get_soc_name()
    assert name.startswith(family) and name != family, "a real card reports its specific chip name"
    emulator.configure(soc=name)
    assert soc().family == family


@pytest.mark.parametrize("name,family", [("Ascend910B2", "Ascend910B"), ("Ascend910B4", "Ascend910B"),
                                         ("Ascend910_9392", "Ascend910_93"), ("Ascend310P1", "Ascend310P"),
                                         ("Ascend910ProB", "Ascend910"), ("Ascend950PR", "Ascend950")])
def test_specific_soc_name_is_reported_as_is_and_selects_its_family(name, family):
    emulator.configure(soc=name)
    assert acl.get_soc_name() == name
    assert soc().family == family


def test_unknown_soc_is_refused_with_the_known_families():
    with pytest.raises(emulator.ConfigError) as info:
        emulator.configure(soc="Ascend999")
    assert "Ascend999" in str(info.value) and "Ascend910B" in str(info.value)


def test_run_mode_is_host_as_for_a_pcie_card():
    assert acl.rt.get_run_mode() == (acl.ACL_HOST, 0)
    assert acl.ACL_HOST == 1 and acl.ACL_DEVICE == 0


def test_recent_error_messages_are_newest_first_and_cleared_by_reading():
    assert acl.get_recent_err_msg() is None
    assert acl.rt.set_device(99) == acl.ACL_ERROR_RT_INVALID_DEVICEID
    assert acl.rt.malloc(0, 0)[1] == acl.ACL_ERROR_INVALID_PARAM
    lines = acl.get_recent_err_msg().splitlines()
    assert len(lines) == 2
    assert re.match(r"\[PID:\d+\] \S+ ACL_ERROR_INVALID_PARAM\(100000\): aclrtMalloc: size: expected", lines[0])
    assert "ACL_ERROR_RT_INVALID_DEVICEID(107001): aclrtSetDevice: deviceId" in lines[1]
    assert acl.get_recent_err_msg() is None
