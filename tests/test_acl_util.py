"""acl.util, the host-pointer helpers: what they return for every kind of argument, and that odd
values give 0/None with a message, never an exception; start_thread, which starts pyACL's report
threads."""
import ctypes
import itertools
import threading

import numpy as np
import pytest

import acl
from support import assert_rejected

ODD = [None, 0, -1, 1, 2 ** 64, 1.5, "x", b"x", np.array([1]), object(), True, np.int64(0)]


def test_bytes_to_ptr_gives_the_buffer_of_bytes_and_bytearrays_empty_ones_included():
    for data in (b"abc", bytearray(b"abc"), b"", bytearray()):
        address = acl.util.bytes_to_ptr(data)
        assert address > 0, (data, acl.get_recent_err_msg())
        assert ctypes.string_at(address, len(data)) == bytes(data)


def test_a_copy_into_a_bytearray_lands_in_place():
    data = bytearray(4)
    ctypes.memmove(acl.util.bytes_to_ptr(data), b"wxyz", 4)
    assert data == b"wxyz"


def test_numpy_integers_are_accepted_as_pointers_sizes_and_types():
    values = np.arange(4, dtype=np.float32)
    address = np.uint64(acl.util.numpy_to_ptr(values))
    assert acl.util.ptr_to_bytes(address, np.int32(16)) == values.tobytes()
    assert acl.util.ptr_to_numpy(address, (np.int64(4),), np.int32(11)).tolist() == values.tolist()


@pytest.mark.parametrize("function,arguments", [
    (acl.util.bytes_to_ptr, (None,)), (acl.util.bytes_to_ptr, ("text",)), (acl.util.bytes_to_ptr, (np.zeros(2),)),
    (acl.util.numpy_to_ptr, ([1, 2],)), (acl.util.numpy_contiguous_to_ptr, ((1, 2),)),
    *[(acl.util.ptr_to_bytes, pair) for pair in itertools.product(ODD, [4, -1, "4", np.array([4])])],
    *[(acl.util.ptr_to_numpy, (ptr, (2,), 11)) for ptr in ODD],
    (acl.util.ptr_to_numpy, (1 << 40, (2,), 99)), (acl.util.ptr_to_numpy, (1 << 40, (-2,), 11)),
    (acl.util.ptr_to_numpy, (1 << 40, "2", 11)), (acl.util.ptr_to_numpy, (1 << 40, np.array(2), 11)),
])
def test_odd_arguments_give_nothing_and_a_message_never_an_exception(function, arguments):
    acl.get_recent_err_msg()  # clear
    result = function(*arguments)
    if isinstance(result, tuple):
        result = result[0]
    if result not in (0, None):
        return  # a usable argument after all (e.g. ptr_to_bytes of a real address)
    message = acl.get_recent_err_msg()
    assert message and "expected" in message and "found" in message, (arguments, message)


def test_start_thread_runs_the_report_thread_of_the_pyacl_pattern():
    """RUNTIME.md's pyACL pattern: tid, ret = acl.util.start_thread(fn, [ctx]), then
    acl.rt.subscribe_report(tid, stream); the thread gets the list, and its process_report runs the
    callbacks of the stream by its synchronisation."""
    assert acl.rt.set_device(0) == 0
    context, _ = acl.rt.get_context()
    stream, _ = acl.rt.create_stream()
    running, given, ran = threading.Event(), [], []

    def report_thread(args_list):
        given.append(args_list)
        acl.rt.set_context(args_list[0])
        while not running.is_set():
            acl.rt.process_report(20)

    tid, ret = acl.util.start_thread(report_thread, [context])
    assert ret == 0 and isinstance(tid, int) and tid > 0
    try:
        assert acl.rt.subscribe_report(tid, stream) == 0, acl.get_recent_err_msg()
        assert acl.rt.launch_callback(ran.append, "done", acl.ACL_CALLBACK_BLOCK, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0, acl.get_recent_err_msg()
        assert ran == ["done"] and given == [[context]]
        assert acl.rt.unsubscribe_report(tid, stream) == 0
    finally:
        running.set()
        next(thread for thread in threading.enumerate() if thread.ident == tid).join(5)
        acl.rt.destroy_stream(stream)
        acl.rt.reset_device(0)


@pytest.mark.parametrize("fn,args,words", [
    (None, [], ("fn", "expected a callable", "found null")), ("report", [], ("fn", "expected a callable", "'report'")),
    (print, None, ("args", "expected a list", "found null")), (print, 5, ("args", "expected a list", "found 5")),
])
def test_start_thread_refuses_what_it_cannot_run_with_100000(fn, args, words):
    before = threading.active_count()
    tid, ret = acl.util.start_thread(fn, args)
    assert tid == 0
    assert_rejected(ret, acl.ACL_ERROR_INVALID_PARAM, "acl.util.start_thread", *words)
    assert threading.active_count() == before
