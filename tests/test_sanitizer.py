"""The sanitizer (docs/sanitizer.md): each scenario is a small client program, run in-process at every
level and in both execution modes; what it must report follows from the level (`memcheck` kinds from
memcheck up, the others at `full` only), never from the execution mode. Correct twins report nothing."""
import ctypes
import itertools
import mmap
import operator
import os
import random
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import acl
import aclnn_api as nn
import emulator
from aclnn_api.tensor import box_runs, byte_runs, conflicting_byte, shared_element
from emulator import report
from emulator.memory import Copy, Span
from emulator.sanitizer import POISON, Written

MEMCHECK_KINDS = {"invalid device access", "padding overrun", "misaligned tensor", "destroyed tensor",
                  "overlapping output"}
H2D, D2H, D2D = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST, acl.ACL_MEMCPY_DEVICE_TO_DEVICE
N = 256  # bytes of every buffer: 64 float32


class Program:
    """A device, two streams and buffers, released at the end whatever the scenario did."""

    def __init__(self):
        assert acl.init() == 0 and acl.rt.set_device(0) == 0
        self.s1, _ = acl.rt.create_stream()
        self.s2, _ = acl.rt.create_stream()
        self.buffers, self.events, self.tensors, self.pinned = [], [], [], []
        self.host = np.arange(N // 4, dtype=np.float32)
        self.out = np.zeros(N // 4, np.float32)

    def malloc(self, size=N, written=True):
        address, ret = acl.rt.malloc(size, 0)
        assert ret == 0
        if written:
            assert acl.rt.memset(address, size, 0, size) == 0
            assert acl.rt.memcpy(address, size, acl.util.numpy_to_ptr(self.host), min(size, N), H2D) == 0
        self.buffers.append(address)
        return address

    def malloc_host(self, fill=9.0):
        """N bytes of pinned memory holding `fill` in every float."""
        address, ret = acl.rt.malloc_host(N)
        assert ret == 0
        acl.util.ptr_to_numpy(address, (N // 4,), np.dtype(np.float32).num)[:] = fill
        self.pinned.append(address)
        return address

    def event(self):
        event, _ = acl.rt.create_event()
        self.events.append(event)
        return event

    def tensor(self, address, shape=(N // 4,)):
        tensor = nn.aclCreateTensor(list(shape), nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, address)
        self.tensors.append(tensor)
        return tensor

    def log_sigmoid_backward(self, grad, x, out, stream):
        """out = LogSigmoidBackward(grad, x) queued on `stream`; the tensors are destroyed after the launch."""
        tensors = [self.tensor(a) for a in (grad, x, x, out)]
        _, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(*tensors)
        assert ret == 0
        assert nn.aclnnLogSigmoidBackward(None, 0, executor, stream) == 0

    def read(self, address):
        return acl.rt.memcpy(acl.util.numpy_to_ptr(self.out), N, address, N, D2H)

    def close(self):
        for stream in (self.s1, self.s2):
            acl.rt.synchronize_stream(stream)
        for tensor in self.tensors:
            if tensor.alive:
                nn.aclDestroyTensor(tensor)
        for event in self.events:
            acl.rt.destroy_event(event)
        for address in self.buffers:
            acl.rt.free(address)
        for address in self.pinned:
            acl.rt.free_host(address)
        acl.rt.destroy_stream(self.s1)
        acl.rt.destroy_stream(self.s2)
        acl.rt.reset_device(0)
        acl.finalize()


def race_two_streams_write_one_buffer(p):
    a, b, out = p.malloc(), p.malloc(), p.malloc()
    p.log_sigmoid_backward(a, b, out, p.s1)
    p.log_sigmoid_backward(b, a, out, p.s2)


def race_ordered_by_an_event(p):
    a, b, out = p.malloc(), p.malloc(), p.malloc()
    event = p.event()
    p.log_sigmoid_backward(a, b, out, p.s1)
    assert acl.rt.record_event(event, p.s1) == 0
    assert acl.rt.stream_wait_event(p.s2, event) == 0
    p.log_sigmoid_backward(b, a, out, p.s2)


def race_ordered_by_a_host_synchronisation(p):
    a, b, out = p.malloc(), p.malloc(), p.malloc()
    p.log_sigmoid_backward(a, b, out, p.s1)
    assert acl.rt.synchronize_stream(p.s1) == 0
    p.log_sigmoid_backward(b, a, out, p.s2)


def race_event_waited_before_it_is_recorded(p):
    a, b, out = p.malloc(), p.malloc(), p.malloc()
    event = p.event()
    assert acl.rt.stream_wait_event(p.s2, event) == 0
    p.log_sigmoid_backward(a, b, out, p.s1)
    assert acl.rt.record_event(event, p.s1) == 0
    p.log_sigmoid_backward(out, a, b, p.s2)  # reads out, which s1 writes


def race_readers_only_do_not_race(p):
    a, b, out1, out2 = p.malloc(), p.malloc(), p.malloc(), p.malloc()
    p.log_sigmoid_backward(a, b, out1, p.s1)
    p.log_sigmoid_backward(a, b, out2, p.s2)


def race_download_and_upload_of_one_staging_buffer(p):
    """s1 downloads into the staging buffer while s2 uploads from it: two DMA engines, no event between,
    so the upload reads it before or after the download wrote it."""
    a, b = p.malloc(), p.malloc(written=False)
    stage = p.malloc_host()
    assert acl.rt.memcpy_async(stage, N, a, N, D2H, p.s1) == 0
    assert acl.rt.memcpy_async(b, N, stage, N, H2D, p.s2) == 0


def race_download_into_the_source_of_an_upload_queued_before(p):
    a, b = p.malloc(), p.malloc(written=False)
    stage = p.malloc_host()
    assert acl.rt.memcpy_async(b, N, stage, N, H2D, p.s2) == 0
    assert acl.rt.memcpy_async(stage, N, a, N, D2H, p.s1) == 0


def race_two_downloads_into_one_host_array(p):
    a, b = p.malloc(), p.malloc()
    assert acl.rt.memcpy_async(acl.util.numpy_to_ptr(p.out), N, a, N, D2H, p.s1) == 0
    assert acl.rt.memcpy_async(acl.util.numpy_to_ptr(p.out), N, b, N, D2H, p.s2) == 0


def race_memset_of_pinned_memory_and_an_upload_from_it(p):
    b = p.malloc(written=False)
    stage = p.malloc_host()
    assert acl.rt.memset_async(stage, N, 0, N, p.s1) == 0
    assert acl.rt.memcpy_async(b, N, stage, N, H2D, p.s2) == 0


def race_staging_buffer_ordered_by_an_event(p):
    a, b = p.malloc(), p.malloc(written=False)
    stage, event = p.malloc_host(), p.event()
    assert acl.rt.memcpy_async(stage, N, a, N, D2H, p.s1) == 0
    assert acl.rt.record_event(event, p.s1) == 0
    assert acl.rt.stream_wait_event(p.s2, event) == 0
    assert acl.rt.memcpy_async(b, N, stage, N, H2D, p.s2) == 0


def race_staging_buffer_reused_after_each_synchronisation(p):
    a, b = p.malloc(), p.malloc(written=False)
    stage = p.malloc_host()
    assert acl.rt.memcpy_async(stage, N, a, N, D2H, p.s1) == 0
    assert acl.rt.synchronize_stream(p.s1) == 0
    assert acl.rt.memcpy_async(b, N, stage, N, H2D, p.s2) == 0
    assert acl.rt.synchronize_stream(p.s2) == 0
    assert acl.rt.memcpy_async(stage, N, a, N, D2H, p.s1) == 0


def race_two_downloads_into_the_halves_of_one_host_array(p):
    a, b = p.malloc(), p.malloc()
    half = acl.util.numpy_to_ptr(p.out) + N // 2
    assert acl.rt.memcpy_async(acl.util.numpy_to_ptr(p.out), N // 2, a, N // 2, D2H, p.s1) == 0
    assert acl.rt.memcpy_async(half, N // 2, b, N // 2, D2H, p.s2) == 0


def race_two_uploads_from_one_host_buffer(p):
    a, b = p.malloc(written=False), p.malloc(written=False)
    stage = p.malloc_host()
    assert acl.rt.memcpy_async(a, N, stage, N, H2D, p.s1) == 0
    assert acl.rt.memcpy_async(b, N, stage, N, H2D, p.s2) == 0


def two_2d_downloads_of_8_rows_into_one_host_array(p, shift):
    """Rows of 16 bytes 32 apart from the array's start on s1, and from `shift` bytes further on s2."""
    a, b = p.malloc(), p.malloc()
    host = acl.util.numpy_to_ptr(p.out)
    assert acl.rt.memcpy_2d_async(host, 32, a, 16, 16, 8, D2H, p.s1) == 0
    assert acl.rt.memcpy_2d_async(host + shift, 32, b, 16, 16, 8, D2H, p.s2) == 0


def race_2d_downloads_into_the_same_rows(p):
    two_2d_downloads_of_8_rows_into_one_host_array(p, 8)  # each row over half of one of the first


def race_2d_downloads_into_alternate_rows(p):
    two_2d_downloads_of_8_rows_into_one_host_array(p, 16)  # the bytes between the first's rows


def sync_copy_without_synchronisation(p):
    a, b, out = p.malloc(), p.malloc(), p.malloc()
    p.log_sigmoid_backward(a, b, out, p.s1)
    assert p.read(out) == 0


def sync_copy_after_synchronisation(p):
    a, b, out = p.malloc(), p.malloc(), p.malloc()
    p.log_sigmoid_backward(a, b, out, p.s1)
    assert acl.rt.synchronize_stream(p.s1) == 0
    assert p.read(out) == 0


def sync_copy_after_the_event_of_the_kernel(p):
    a, b, out = p.malloc(), p.malloc(), p.malloc()
    event = p.event()
    p.log_sigmoid_backward(a, b, out, p.s1)
    assert acl.rt.record_event(event, p.s1) == 0
    assert acl.rt.synchronize_event(event) == 0
    assert p.read(out) == 0


def sync_event_recorded_before_the_kernel(p):
    a, b, out = p.malloc(), p.malloc(), p.malloc()
    event = p.event()
    assert acl.rt.record_event(event, p.s1) == 0
    p.log_sigmoid_backward(a, b, out, p.s1)
    assert acl.rt.synchronize_event(event) == 0
    assert p.read(out) == 0


def sync_memset_over_an_input_of_queued_work(p):
    a, b, out = p.malloc(), p.malloc(), p.malloc()
    p.log_sigmoid_backward(a, b, out, p.s1)
    assert acl.rt.memset(a, N, 0, N) == 0


def sync_free_while_queued_work_reads(p):
    a, b, out = p.malloc(), p.malloc(), p.malloc()
    p.log_sigmoid_backward(a, b, out, p.s1)
    p.buffers.remove(a)
    assert acl.rt.free(a) == 0
    assert acl.rt.synchronize_stream(p.s1) == _fault_if_queued()


def _fault_if_queued() -> int:
    """The code of a synchronisation after memory under queued work went: a fault, unless (eager) the
    work ran before it went."""
    return 0 if emulator.settings().execution == "eager" else 507015


def sync_destroy_stream_with_queued_work(p):
    a, b, out = p.malloc(), p.malloc(), p.malloc()
    p.log_sigmoid_backward(a, b, out, p.s1)
    assert acl.rt.destroy_stream(p.s1) == 0
    p.s1, _ = acl.rt.create_stream()


def sync_host_memory_changed_before_the_async_copy(p):
    a = p.malloc(written=False)
    host = np.ones(N // 4, np.float32)
    assert acl.rt.memcpy_async(a, N, acl.util.numpy_to_ptr(host), N, H2D, p.s1) == 0
    host[0] = 7.0  # the copy has not run: it will see the 7 (on the card, either)
    assert acl.rt.synchronize_stream(p.s1) == 0


def sync_one_host_buffer_uploaded_then_refilled_on_one_stream(p):
    """The buffer is the upload's source and, after a kernel, the download's destination: stream order
    puts the download after the upload, so the device changing it is no change by the host."""
    a, b, out = p.malloc(written=False), p.malloc(), p.malloc(written=False)
    host = np.full(N // 4, 0.5, np.float32)
    assert acl.rt.memcpy_async(a, N, acl.util.numpy_to_ptr(host), N, H2D, p.s1) == 0
    p.log_sigmoid_backward(a, b, out, p.s1)
    assert acl.rt.memcpy_async(acl.util.numpy_to_ptr(host), N, out, N, D2H, p.s1) == 0
    assert acl.rt.synchronize_stream(p.s1) == 0


def sync_pinned_buffer_memset_downloaded_into_then_uploaded(p):
    a, b = p.malloc(), p.malloc(written=False)
    pinned, _ = acl.rt.malloc_host(N)
    try:
        assert acl.rt.memset_async(pinned, N, 0, N, p.s1) == 0
        assert acl.rt.memcpy_async(pinned, N, a, N, D2H, p.s1) == 0
        assert acl.rt.memcpy_async(b, N, pinned, N, H2D, p.s1) == 0
        assert acl.rt.synchronize_stream(p.s1) == 0
    finally:
        assert acl.rt.free_host(pinned) == 0


def sync_host_fills_the_gaps_between_the_rows_of_a_2d_download(p):
    """A 2-D copy's host memory is its rows: the host may use the bytes between them meanwhile."""
    a = p.malloc()
    host = np.zeros((16, 8), np.float32)
    assert acl.rt.memcpy_2d_async(acl.util.numpy_to_ptr(host), 32, a, 16, 16, 16, D2H, p.s1) == 0
    host[:, 4:] = 7.0
    assert acl.rt.synchronize_stream(p.s1) == 0


def sync_copy_reads_the_host_memory_a_queued_download_writes(p):
    """aclrtMemcpy does not wait for the stream: it uploads what the staging buffer held before."""
    a, b = p.malloc(), p.malloc()
    stage = p.malloc_host()
    assert acl.rt.memcpy_async(stage, N, a, N, D2H, p.s1) == 0
    assert acl.rt.memcpy(b, N, stage, N, H2D) == 0


def sync_memset_writes_the_host_memory_a_queued_download_writes(p):
    """One finding: the memset's, not also the download's memory changed in flight."""
    a = p.malloc()
    stage = p.malloc_host()
    assert acl.rt.memcpy_async(stage, N, a, N, D2H, p.s1) == 0
    assert acl.rt.memset(stage, N, 0, N) == 0


def sync_ptr_to_bytes_reads_the_host_memory_a_queued_download_writes(p):
    """acl.util.ptr_to_bytes copies the memory now (pyACL's read-back path): stale bytes, as aclrtMemcpy's."""
    a = p.malloc()
    stage = p.malloc_host()
    assert acl.rt.memcpy_async(stage, N, a, N, D2H, p.s1) == 0
    assert acl.util.ptr_to_bytes(stage, N) is not None


def sync_ptr_to_bytes_reads_the_host_memory_a_queued_memset_writes(p):
    stage = p.malloc_host()
    assert acl.rt.memset_async(stage, N, 0, N, p.s1) == 0
    assert acl.util.ptr_to_bytes(stage, N) is not None


def sync_ptr_to_numpy_views_a_download_read_after_its_synchronisation(p):
    """A view reads nothing when made: the program reads it once it has synchronised."""
    a = p.malloc()
    stage = p.malloc_host()
    assert acl.rt.memcpy_async(stage, N, a, N, D2H, p.s1) == 0
    view = acl.util.ptr_to_numpy(stage, (N // 4,), np.dtype(np.float32).num)
    assert acl.rt.synchronize_stream(p.s1) == 0
    assert (view == p.host).all()
    assert acl.util.ptr_to_bytes(stage, N) == p.host.tobytes()


def sync_copy_reads_a_download_after_its_synchronisation(p):
    a, b = p.malloc(), p.malloc()
    stage = p.malloc_host()
    assert acl.rt.memcpy_async(stage, N, a, N, D2H, p.s1) == 0
    assert acl.rt.synchronize_stream(p.s1) == 0
    assert acl.rt.memcpy(b, N, stage, N, H2D) == 0


def sync_copy_reads_the_host_memory_a_queued_upload_reads(p):
    a, b = p.malloc(written=False), p.malloc(written=False)
    stage = p.malloc_host()
    assert acl.rt.memcpy_async(a, N, stage, N, H2D, p.s1) == 0
    assert acl.rt.memcpy(b, N, stage, N, H2D) == 0


def sync_host_changes_a_middle_row_of_a_2d_upload(p):
    """1000 rows of 16 bytes, 32 apart: all of them are summed, not 256 samples."""
    rows = 1000
    a = p.malloc(rows * 16, written=False)
    host = np.ones((rows, 8), np.float32)
    assert acl.rt.memcpy_2d_async(a, 16, acl.util.numpy_to_ptr(host), 32, 16, rows, H2D, p.s1) == 0
    host[500, :4] = 42.0
    assert acl.rt.synchronize_stream(p.s1) == 0


def sync_host_memory_unmapped_before_the_async_copy(p):
    """The pages of a temporary array (a large NumPy array, a std::vector) go back to the system when it
    goes: freed before the copy was synchronised, as aclrtFreeHost is."""
    a = p.malloc()
    pages = mmap.mmap(-1, N)
    first = ctypes.c_char.from_buffer(pages)
    address = ctypes.addressof(first)
    del first  # the mapping can only be closed once nothing points into it
    assert acl.rt.memcpy_async(a, N, address, N, H2D, p.s1) == 0
    pages.close()
    assert acl.rt.synchronize_stream(p.s1) == _fault_if_queued()


def sync_pinned_memory_freed_before_the_async_copy(p):
    a = p.malloc()
    pinned, _ = acl.rt.malloc_host(N)
    assert acl.rt.memcpy_async(pinned, N, a, N, D2H, p.s1) == 0
    assert acl.rt.free_host(pinned) == 0
    assert acl.rt.synchronize_stream(p.s1) == _fault_if_queued()  # the copy writes memory that is gone


def sync_pinned_memory_freed_under_a_queued_memset(p):
    pinned, _ = acl.rt.malloc_host(N)
    assert acl.rt.memset_async(pinned, N, 0, N, p.s1) == 0
    assert acl.rt.free_host(pinned) == 0
    assert acl.rt.synchronize_stream(p.s1) == _fault_if_queued()


def mem_unread_parameter_misaligned_and_destroyed(p):
    """KlDivBackward's kernel never reads `self` (the gradient is -target * gradOutput): its descriptor is
    the executor's all the same."""
    a, b, out = p.malloc(N + 64), p.malloc(), p.malloc()
    grad, self_, target, result = (p.tensor(a), p.tensor(a + 8), p.tensor(b), p.tensor(out))
    _, executor, ret = nn.aclnnKlDivBackwardGetWorkspaceSize(grad, self_, target, 0, False, result)
    assert ret == 0 and nn.aclDestroyTensor(self_) == 0
    assert nn.aclnnKlDivBackward(None, 0, executor, p.s1) == 0
    assert acl.rt.synchronize_stream(p.s1) == 0


def init_kernel_reads_a_fresh_buffer(p):
    a, b, out = p.malloc(written=False), p.malloc(), p.malloc(written=False)
    p.log_sigmoid_backward(a, b, out, p.s1)
    assert acl.rt.synchronize_stream(p.s1) == 0
    assert p.read(out) == 0
    if emulator.settings().sanitize == "full":  # below full, fresh memory is zeros
        assert np.isnan(p.out).all(), "the poison pattern read as a NaN, which the kernel propagates"


def init_half_written_buffer(p):
    a = p.malloc(written=False)
    assert acl.rt.memset(a, N, 0, N // 2) == 0
    assert p.read(a) == 0


def init_written_by_a_kernel_then_read(p):
    a, b, out = p.malloc(), p.malloc(), p.malloc(written=False)
    p.log_sigmoid_backward(a, b, out, p.s1)
    assert acl.rt.synchronize_stream(p.s1) == 0
    assert p.read(out) == 0
    assert np.isfinite(p.out).all()


def mem_view_into_the_padding(p):
    a = p.malloc(N - 8)  # 62 floats requested, the tensors are 64 long: the last two are padding
    b, out = p.malloc(), p.malloc()
    assert acl.rt.memset(a, N, 0, N) == 0  # memset may write the padding: reading it is what is reported
    p.log_sigmoid_backward(a, b, out, p.s1)
    assert acl.rt.synchronize_stream(p.s1) == 0


def mem_misaligned_tensor(p):
    a, b, out = p.malloc(N + 64), p.malloc(), p.malloc()
    p.log_sigmoid_backward(a + 4, b, out, p.s1)
    assert acl.rt.synchronize_stream(p.s1) == 0


def mem_input_destroyed_between_the_phases(p):
    a, b, out = p.malloc(), p.malloc(), p.malloc()
    tensors = [p.tensor(x) for x in (a, b, b, out)]
    _, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(*tensors)
    assert ret == 0 and nn.aclDestroyTensor(tensors[0]) == 0
    assert nn.aclnnLogSigmoidBackward(None, 0, executor, p.s1) == 0
    assert acl.rt.synchronize_stream(p.s1) == 0


def mem_kernel_on_freed_memory(p):
    a, b, out = p.malloc(), p.malloc(), p.malloc()
    p.buffers.remove(a)
    assert acl.rt.free(a) == 0
    p.log_sigmoid_backward(a, b, out, p.s1)
    assert acl.rt.synchronize_stream(p.s1) == 507015


def log_sigmoid_into(p, x, out):
    """aclnnLogSigmoid(x, out) on stream 1, synchronised."""
    _, executor, ret = nn.aclnnLogSigmoidGetWorkspaceSize(x, out)
    assert ret == 0, acl.get_recent_err_msg()
    assert nn.aclnnLogSigmoid(None, 0, executor, p.s1) == 0
    assert acl.rt.synchronize_stream(p.s1) == 0


def described(p, address, shape, strides):
    tensor = nn.aclCreateTensor(list(shape), nn.ACL_FLOAT, list(strides), 0, nn.ACL_FORMAT_ND, None, address)
    p.tensors.append(tensor)
    return tensor


def log_sigmoid_findings(make_views) -> list:
    """The findings of aclnnLogSigmoid on the (x, out) tensors make_views(program) returns."""
    program = Program()
    try:
        log_sigmoid_into(program, *make_views(program))
    finally:
        program.close()
    return emulator.reports()


def mem_output_rows_on_one_row(p):
    a, out = p.malloc(), p.malloc()
    log_sigmoid_into(p, p.tensor(a, (8, 8)), described(p, out, (8, 8), (0, 1)))


def mem_broadcast_input_and_an_output_in_place(p):
    a, out = p.malloc(), p.malloc()
    log_sigmoid_into(p, described(p, a, (8, 8), (0, 1)), p.tensor(out, (8, 8)))
    in_place = p.tensor(out, (8, 8))
    log_sigmoid_into(p, in_place, in_place)


def mem_device_copy_onto_its_source_shifted(p):
    a = p.malloc()
    assert acl.rt.memcpy_async(a + 32, N - 32, a, N - 32, D2D, p.s1) == 0
    assert acl.rt.synchronize_stream(p.s1) == 0
    assert p.read(a) == 0
    assert (p.out[8:] == p.host[:-8]).all()  # as memmove: the source is as if read whole first


def mem_2d_copy_whose_rows_overlap_their_source(p):
    a = p.malloc()
    assert acl.rt.memcpy_2d(a + 16, 64, a, 64, 32, 3, D2D) == 0


def mem_copies_onto_themselves_and_into_the_other_half(p):
    a = p.malloc()
    assert acl.rt.memcpy_2d(a, 16, a, 8, 4, 2, D2D) == 0  # its first row onto itself, the second past the source
    assert acl.rt.memcpy_async(a, N, a, N, D2D, p.s1) == 0
    assert acl.rt.memcpy_2d_async(a, 64, a, 64, 32, 4, D2D, p.s1) == 0
    assert acl.rt.memcpy_async(a + N // 2, N // 2, a, N // 2, D2D, p.s1) == 0
    assert acl.rt.synchronize_stream(p.s1) == 0


SCENARIOS = {
    race_two_streams_write_one_buffer: {"race"},
    race_ordered_by_an_event: set(),
    race_ordered_by_a_host_synchronisation: set(),
    race_event_waited_before_it_is_recorded: {"race"},
    race_readers_only_do_not_race: set(),
    race_download_and_upload_of_one_staging_buffer: {"race"},
    race_download_into_the_source_of_an_upload_queued_before: {"race"},
    race_two_downloads_into_one_host_array: {"race"},
    race_memset_of_pinned_memory_and_an_upload_from_it: {"race"},
    race_staging_buffer_ordered_by_an_event: set(),
    race_staging_buffer_reused_after_each_synchronisation: set(),
    race_two_downloads_into_the_halves_of_one_host_array: set(),
    race_two_uploads_from_one_host_buffer: set(),
    race_2d_downloads_into_the_same_rows: {"race"},
    race_2d_downloads_into_alternate_rows: set(),
    sync_copy_without_synchronisation: {"missing synchronisation"},
    sync_copy_after_synchronisation: set(),
    sync_copy_after_the_event_of_the_kernel: set(),
    sync_event_recorded_before_the_kernel: {"missing synchronisation"},
    sync_memset_over_an_input_of_queued_work: {"missing synchronisation"},
    sync_free_while_queued_work_reads: {"memory freed while in use", "invalid device access"},
    sync_destroy_stream_with_queued_work: {"pending work destroyed"},
    sync_host_memory_changed_before_the_async_copy: {"host memory in flight"},
    sync_one_host_buffer_uploaded_then_refilled_on_one_stream: set(),
    sync_pinned_buffer_memset_downloaded_into_then_uploaded: set(),
    sync_host_fills_the_gaps_between_the_rows_of_a_2d_download: set(),
    sync_copy_reads_the_host_memory_a_queued_download_writes: {"missing synchronisation"},
    sync_memset_writes_the_host_memory_a_queued_download_writes: {"missing synchronisation"},
    sync_ptr_to_bytes_reads_the_host_memory_a_queued_download_writes: {"missing synchronisation"},
    sync_ptr_to_bytes_reads_the_host_memory_a_queued_memset_writes: {"missing synchronisation"},
    sync_ptr_to_numpy_views_a_download_read_after_its_synchronisation: set(),
    sync_copy_reads_a_download_after_its_synchronisation: set(),
    sync_copy_reads_the_host_memory_a_queued_upload_reads: set(),
    sync_host_changes_a_middle_row_of_a_2d_upload: {"host memory in flight"},
    sync_host_memory_unmapped_before_the_async_copy: {"host memory in flight", "invalid device access"},
    sync_pinned_memory_freed_before_the_async_copy: {"host memory in flight", "invalid device access"},
    sync_pinned_memory_freed_under_a_queued_memset: {"host memory in flight", "invalid device access"},
    mem_unread_parameter_misaligned_and_destroyed: {"destroyed tensor"},
    init_kernel_reads_a_fresh_buffer: {"uninitialised read"},
    init_half_written_buffer: {"uninitialised read"},
    init_written_by_a_kernel_then_read: set(),
    mem_view_into_the_padding: {"padding overrun"},
    mem_misaligned_tensor: {"misaligned tensor"},
    mem_input_destroyed_between_the_phases: {"destroyed tensor"},
    mem_kernel_on_freed_memory: {"invalid device access"},
    mem_output_rows_on_one_row: {"overlapping output"},
    mem_broadcast_input_and_an_output_in_place: set(),
    mem_device_copy_onto_its_source_shifted: {"overlapping output"},
    mem_2d_copy_whose_rows_overlap_their_source: {"overlapping output"},
    mem_copies_onto_themselves_and_into_the_other_half: set(),
}


def expected_at(kinds: set, level: str, execution: str) -> set:
    """The hazards are judged on the program's order of calls, the same in both modes; a device fault
    happens (or not) when the work really runs."""
    if execution == "eager" and _fault_if_queued() == 0:
        kinds = kinds - ({"invalid device access"} if "memory freed while in use" in kinds or
                         "host memory in flight" in kinds else set())
    if level == "off":
        return set()
    return set(kinds) if level == "full" else kinds & MEMCHECK_KINDS


@pytest.mark.sanitizer_reports(*sorted({kind for kinds in SCENARIOS.values() for kind in kinds}))
@pytest.mark.parametrize("execution", ["async", "eager"])
@pytest.mark.parametrize("level", ["full", "memcheck", "off"])
@pytest.mark.parametrize("scenario", list(SCENARIOS), ids=lambda f: f.__name__)
def test_each_scenario_reports_what_its_level_checks_in_either_execution_mode(scenario, level, execution):
    emulator.configure(sanitize=level, execution=execution)
    program = Program()
    try:
        scenario(program)
    finally:
        program.close()
    found = {finding.kind for finding in emulator.reports()}
    assert found == expected_at(SCENARIOS[scenario], level, execution), "\n".join(map(str, emulator.reports()))


def views(rank: int):
    """Every view of `rank` dims of 1 to 3 elements with strides among 0, 1, 2, 3, 4 and 6."""
    return itertools.product(itertools.product((1, 2, 3), repeat=rank), itertools.product((0, 1, 2, 3, 4, 6), repeat=rank))


def test_shared_elements_are_found_exactly_as_listing_every_offset_finds_them():
    for dims, strides in itertools.chain(*(views(rank) for rank in range(4))):
        offsets = [sum(i * s for i, s in zip(index, strides)) for index in itertools.product(*map(range, dims))]
        shared = shared_element(dims, strides)
        assert (shared is not None) == (len(set(offsets)) < len(offsets)), (dims, strides, shared)
        if shared:
            first, second = shared
            assert first != second and sum(map(operator.mul, first, strides)) == sum(map(operator.mul, second, strides))


def test_a_view_too_large_to_list_counts_as_sharing_nothing_unless_a_rule_decides():
    assert shared_element((3, 2, 1 << 19), (2, 3, 6)) is None  # shares nothing, but only a listing could tell
    assert shared_element((2, 3, 1 << 19), (0, 1, 3)) == ((0, 0, 0), (1, 0, 0))
    assert shared_element((1 << 19, 4), (4, 1)) is None


@pytest.mark.parametrize("strides,shares", [((0, 1), True), ((1, 1), True), ((1, 8), False), ((9, 1), False),
                                            ((8, 1), False)])
@pytest.mark.sanitizer_reports("overlapping output")
def test_an_output_whose_indices_share_elements_is_reported_with_its_making_and_launch(strides, shares):
    found = log_sigmoid_findings(lambda p: (p.tensor(p.malloc(), (8, 8)), described(p, p.malloc(N * 2), (8, 8), strides)))
    assert len(found) == shares, "\n".join(map(str, found))
    if shares:
        (finding,) = found
        assert finding.tool == "memcheck" and "aclnnLogSigmoid writes its out (FLOAT[8, 8], strides %s" % list(strides) \
            in finding.message and "are one element" in finding.message, finding.message
        (launch_role, launch), (made_role, made) = finding.sites
        assert launch_role == "launch of aclnnLogSigmoid" and launch.location.startswith(__file__)
        assert made_role == "out made" and str(made).startswith(__file__) and " in described <- " in str(made)


def bytes_by_unit(view, units, tag=0) -> dict:
    """{address: {unit}} of every byte of the view: its elements, its rows with units "rows", or with
    units None the view itself (`tag`: no unit of one view is a unit of another)."""
    start, itemsize, dims, strides = view
    per_unit = dims[-1] if units == "rows" and dims else 1
    found: dict = {}
    for flat, index in enumerate(itertools.product(*map(range, dims))):
        element = start + itemsize * sum(map(operator.mul, index, strides))
        for address in range(element, element + itemsize):
            found.setdefault(address, set()).add(("view", tag) if units is None else flat // per_unit)
    return found


@pytest.mark.parametrize("units", ["elements", "rows", None])
def test_conflicting_bytes_are_found_exactly_as_listing_every_byte_finds_them(units):
    """A byte both views cover conflicts when some unit of one holds it and another unit of the other
    (the very same view aside, unless no unit of one is one of the other); the checker must find one
    exactly when such a byte exists."""
    rng = random.Random(7)
    for _ in range(10000):
        a, b = ((rng.randint(0, 12), rng.choice((1, 2, 4)), dims, tuple(rng.choice((0, 1, 2, 3, 5)) for _ in dims))
                for dims in (tuple(rng.randint(0, 3) for _ in range(rng.randint(0, 3))) for _ in range(2)))
        if rng.random() < 0.1:
            b = a
        units_a, units_b = bytes_by_unit(a, units, 0), bytes_by_unit(b, units, 1)
        conflicts = {address for address in units_a.keys() & units_b.keys()
                     if any(x != y for x in units_a[address] for y in units_b[address])}
        byte = conflicting_byte(a, b, units)
        if b is a and units is not None:
            assert byte is None, a
        else:
            assert (byte is not None) == bool(conflicts) and (byte is None or byte in conflicts), (a, b, byte)


def test_large_views_conflict_where_their_ranges_meet_unless_they_are_one_view():
    big = (4096, 4096)
    whole = (1 << 20, 4, big, (4096, 1))
    assert conflicting_byte(whole, (1 << 20, 4, (1 << 24,), (1,))) is None  # one view, described flat
    assert conflicting_byte(whole, (1 << 20, 4, (4096, 1, 4096), (4096, 7, 1))) is None  # and with a dim of one
    assert conflicting_byte(whole, (1 << 20, 4, big, (1, 4096))) == 1 << 20  # transposed: other elements
    assert conflicting_byte(whole, ((1 << 20) + 4 * 4096, 4, big, (4096, 1))) == (1 << 20) + 4 * 4096  # a row on
    assert conflicting_byte(whole, ((1 << 20) + 4, 4, big, (4097, 1))) is None  # gaps: not decided, not reported
    x = (1 << 20, 4, (2, 8, 1024, 1024), (1 << 23, 1 << 20, 1024, 1))
    assert conflicting_byte(x, x[:2] + ((16, 1024, 1024), (1 << 20, 1024, 1)), "rows") is None
    assert conflicting_byte(x, x[:2] + ((16384, 1024), (1024, 1)), "rows") is None  # rows merged, not split
    assert conflicting_byte(x, x[:2] + ((16, 1024 * 1024), (1 << 20, 1)), "rows") == 1 << 20  # other rows
    assert conflicting_byte(whole, whole, None) == 1 << 20  # no unit in common: even one view conflicts


@pytest.mark.parametrize("shift,shares", [(0, False), (32, False), (64, True), (512, False)])
@pytest.mark.sanitizer_reports("overlapping output")
def test_an_output_over_another_view_of_an_input_is_reported_but_not_in_place_nor_interleaved(shift, shares):
    """x: the even rows (8 of 16 floats) of a buffer; out: the same view (in place), the odd rows, the
    even rows from the second on (one row of x overlaps each row of out but the last), or past x."""
    def views(p):
        buffer = p.malloc(N * 4)
        return [described(p, buffer + at, (8, 8), (16, 1)) for at in (0, shift)]
    found = log_sigmoid_findings(views)
    assert len(found) == shares, "\n".join(map(str, found))
    if shares:
        (finding,) = found
        assert "writes its out (FLOAT[8, 8], strides [16, 1], offset 0) over memory of its self (FLOAT[8, 8]" \
            in finding.message and "not the same view" in finding.message, finding.message
        assert [role for role, _ in finding.sites] == ["launch of aclnnLogSigmoid", "out made", "self made"]


@pytest.mark.parametrize("shift,shares", [(0, False), (4, False), (8, False), (32, True)])
@pytest.mark.sanitizer_reports("overlapping output")
def test_a_softmax_output_over_its_input_is_reported_across_rows_only(shift, shares):
    """Rows of 8 floats, 16 apart: y the very same view, shifted 4 floats (within x's rows: a core
    reads a row whole before it writes it), 8 (into the gaps), or 32 (two rows on: other rows' input)."""
    program = Program()
    try:
        buffer, mask = program.malloc(N * 4), program.malloc(N)
        x, y = (nn.aclCreateTensor([1, 1, 4, 8], nn.ACL_FLOAT, [64, 64, 16, 1], offset, nn.ACL_FORMAT_ND, None, buffer)
                for offset in (0, shift))
        mask_tensor = nn.aclCreateTensor([1, 1, 4, 8], nn.ACL_BOOL, None, 0, nn.ACL_FORMAT_ND, None, mask)
        program.tensors += [x, y, mask_tensor]
        _, executor, ret = nn.aclnnScaledMaskedSoftmaxGetWorkspaceSize(x, mask_tensor, 1.0, False, y)
        assert ret == 0, acl.get_recent_err_msg()
        assert nn.aclnnScaledMaskedSoftmax(None, 0, executor, program.s1) == 0
        assert acl.rt.synchronize_stream(program.s1) == 0
    finally:
        program.close()
    found = emulator.reports()
    assert len(found) == shares, "\n".join(map(str, found))
    assert not shares or "writes its y (FLOAT[1, 1, 4, 8], strides [64, 64, 16, 1], offset 32) over memory of its x" \
        in found[0].message, found[0].message


class OneBuffer:
    """Tensors described over one device buffer at element offsets, holding the values put there."""

    def __init__(self, program: Program, nbytes: int = 1 << 16):
        self.program, self.address = program, program.malloc(nbytes)

    def tensor(self, shape, at: int = 0, values=None, dtype=nn.ACL_FLOAT):
        """A contiguous tensor of `shape` starting `at` of its elements (4 bytes; 8 for INT64, 1 for BOOL)
        into the buffer."""
        numpy_type = {nn.ACL_INT64: np.int64, nn.ACL_BOOL: np.bool_}.get(dtype, np.float32)
        itemsize = np.dtype(numpy_type).itemsize
        if values is not None:
            data = np.ascontiguousarray(values, numpy_type)
            assert acl.rt.memcpy(self.address + at * itemsize, data.nbytes, acl.util.numpy_to_ptr(data), data.nbytes,
                                 H2D) == 0
        tensor = nn.aclCreateTensor(list(shape), dtype, None, at, nn.ACL_FORMAT_ND, None, self.address)
        self.program.tensors.append(tensor)
        return tensor

    def read(self, at: int, count: int) -> np.ndarray:
        out = np.zeros(count, np.float32)
        assert acl.rt.memcpy(acl.util.numpy_to_ptr(out), out.nbytes, self.address + 4 * at, out.nbytes, D2H) == 0
        return out


def run_op(program: Program, name: str, *args) -> None:
    """aclnn<name>'s two phases with a workspace of its own, on s1, synchronised."""
    size, executor, ret = getattr(nn, "aclnn%sGetWorkspaceSize" % name)(*args)
    assert ret == 0, acl.get_recent_err_msg()
    workspace = program.malloc(size, written=False) if size else None
    assert getattr(nn, "aclnn" + name)(workspace, size, executor, program.s1) == 0
    assert acl.rt.synchronize_stream(program.s1) == 0


@pytest.mark.sanitizer_reports("overlapping output")
@pytest.mark.parametrize("execution", ["async", "eager"])
@pytest.mark.parametrize("place,shared", [(50, "target"), (44, "target"), (96, "out"), (58, None), (200, None)])
def test_a_workspace_over_memory_of_the_calls_own_tensors_is_an_overlapping_output(execution, place, shared):
    """The workspace (16 floats at element `place` of the buffer of self at 0, target at 50, out at 100) is
    the kernel's scratch: over a tensor of the call (a pool's block still in use) it is reported, naming
    the tensor; next to them, nothing is."""
    emulator.configure(execution=execution)
    program = Program()
    try:
        buffer = OneBuffer(program)
        self_ = buffer.tensor((8,), 0, np.linspace(-2, 2, 8))
        target = buffer.tensor((8,), 50, np.linspace(0.1, 0.9, 8))
        out = buffer.tensor((), 100)
        size, executor, ret = nn.aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize(self_, target, None, None, 1, out)
        assert ret == 0 and size == 64
        assert nn.aclnnBinaryCrossEntropyWithLogits(buffer.address + 4 * place, size, executor, program.s1) == 0
        assert acl.rt.synchronize_stream(program.s1) == 0
    finally:
        program.close()
    found = emulator.reports()
    if shared is None:
        assert found == [], "\n".join(map(str, found))
        return
    (finding,) = found
    assert finding.tool == "memcheck" and finding.kind == "overlapping output"
    assert "writes its workspace" in finding.message and "over memory of its %s (" % shared in finding.message
    assert [role for role, _ in finding.sites] == ["launch of aclnnBinaryCrossEntropyWithLogits", "%s made" % shared]


T, B, C, S = 3, 3, 8, 2   # a CTC problem: time steps, batch items, classes, labels per item (A = C = 8)
CTC_LOG_PROBS = np.log(np.full((T, B, C), 1.0 / C))
CTC_TARGETS = np.array([[1, 2], [3, 3], [4, 1]])


def ctc_findings(place: dict, backward: bool) -> tuple:
    """The overlap findings of aclnnCtcLoss (or, with `backward`, of aclnnCtcLossBackward after it), with
    its tensors at the element offsets of `place` in one buffer (apart by default), and the values of the
    launch's output at its place (nll for the forward, out for the backward)."""
    program, lengths = Program(), [nn.aclCreateIntArray(values) for values in ([3, 3, 3], [2, 2, 2])]
    try:
        buffer = OneBuffer(program)
        at = {"logProbs": 0, "targets": 500, "nll": 2000, "logAlpha": 3000, "gradOut": 4000, "out": 5000, **place}
        log_probs = buffer.tensor((T, B, C), at["logProbs"], CTC_LOG_PROBS)
        targets = buffer.tensor((B, S), at["targets"], CTC_TARGETS, nn.ACL_INT64)
        nll_ = buffer.tensor((B,), at["nll"])
        alpha = buffer.tensor((B, T, C), at["logAlpha"])
        run_op(program, "CtcLoss", log_probs, targets, *lengths, 0, False, nll_, alpha)
        if not backward:
            return [f for f in emulator.reports() if f.kind == "overlapping output"], buffer.read(at["nll"], B)
        emulator.report.clear()
        out = buffer.tensor((T, B, C), at["out"])
        run_op(program, "CtcLossBackward", buffer.tensor((B,), at["gradOut"], np.ones(B)), log_probs, targets,
               *lengths, nll_, alpha, 0, False, out)
        return [f for f in emulator.reports() if f.kind == "overlapping output"], buffer.read(at["out"], T * B * C)
    finally:
        for array in lengths:
            nn.aclDestroyIntArray(array)
        program.close()


@pytest.mark.sanitizer_reports("overlapping output")
@pytest.mark.parametrize("place,reported", [
    ({}, False),
    ({"nll": 3000}, True),                               # the two outputs at one address
    ({"nll": 3001}, True),
    ({"logAlpha": 0}, True),                             # logAlphaOut over logProbs: one view, as T = B and A = C
])
def test_ctc_loss_outputs_may_share_no_memory_with_another_view(place, reported):
    """The CTC recursion ties no piece of its outputs to one piece of an input: a batch item's loss and
    alphas are written while other items still read theirs (an output at the very view of an input of
    another meaning included)."""
    found, _ = ctc_findings(place, backward=False)
    assert len(found) == reported, "\n".join(map(str, found))


@pytest.mark.sanitizer_reports("overlapping output")
@pytest.mark.parametrize("place,reported", [
    ({}, False),
    ({"out": 0}, False),                                 # in place: out is logProbs' very view
    ({"out": 2000}, True),                               # out over negLogLikelihood: item 0 overwrites nll[1], nll[2]
    ({"out": 1}, True),                                  # over logProbs, one class on
    ({"out": 4000}, True),                               # over gradOut
])
def test_ctc_loss_backward_out_may_only_be_log_probs_very_view(place, reported):
    found, out = ctc_findings(place, backward=True)
    assert len(found) == reported, "\n".join(map(str, found))
    if place.get("out") == 0:
        np.testing.assert_array_equal(out, ctc_findings({}, backward=True)[1], "in place gives what apart gives")


@pytest.mark.sanitizer_reports("overlapping output")
@pytest.mark.parametrize("name", ["BinaryCrossEntropyWithLogits", "KlDiv"])
@pytest.mark.parametrize("at", [0, 5])
def test_a_reduction_to_one_element_may_be_written_over_any_input_element(name, at):
    """Every input is summed before the one result is stored: out over self[k] is defined, for any k."""
    x, t = np.linspace(-2, 2, 8), np.linspace(0.1, 0.9, 8)
    results = []
    for place in (100, at):
        program = Program()
        try:
            buffer = OneBuffer(program)
            self_, target = buffer.tensor((8,), 0, x), buffer.tensor((8,), 50, t)
            out = buffer.tensor((), place)
            if name == "KlDiv":
                run_op(program, name, self_, target, 2, False, out)       # sum
            else:
                run_op(program, name, self_, target, None, None, 1, out)  # mean
            results.append(buffer.read(place, 1)[0])
        finally:
            program.close()
        assert not emulator.reports(), "\n".join(map(str, emulator.reports()))
    assert results[0] == results[1]


@pytest.mark.sanitizer_reports("overlapping output")
@pytest.mark.parametrize("m", [64, 2048])
def test_a_gradient_summed_over_a_broadcast_may_not_overlap_the_input_it_sums(m):
    """KlDivBackward with self (M, 1) and gradOutput (M, N): out[i] sums gradOutput's row i, so out over
    gradOutput's first row is reported whatever the size (element i of out is not element i of gradOutput)."""
    program = Program()
    try:
        n = 4
        buffer = OneBuffer(program, 4 * (2 * m * n + 64))
        grad, target = buffer.tensor((m, n), 0, np.ones((m, n))), buffer.tensor((m, n), m * n, np.full((m, n), 0.5))
        self_ = buffer.tensor((m, 1), 2 * m * n)
        run_op(program, "KlDivBackward", grad, self_, target, 0, False, buffer.tensor((m, 1), 0))
    finally:
        program.close()
    found = [f for f in emulator.reports() if f.kind == "overlapping output"]
    assert len(found) == 1 and "writes its out" in found[0].message, "\n".join(map(str, found))


@pytest.mark.sanitizer_reports("overlapping output")
@pytest.mark.parametrize("mask_at,reported", [(16384, False), (512, True)])
def test_a_softmax_gradient_may_overlap_gradoutput_or_y_within_a_row_but_not_the_mask(mask_at, reported):
    """The backward kernel reads gradOutput's and y's row before it writes out's, but reads the mask as it
    writes: out (floats 0..255) over the mask (bytes 512..767, inside out's row) gives wrong numbers."""
    program = Program()
    try:
        buffer, row = OneBuffer(program), (1, 1, 1, 256)
        grad, y = buffer.tensor(row, 1024, np.linspace(-1, 1, 256)), buffer.tensor(row, 2048, np.full(256, 1 / 256))
        mask = buffer.tensor(row, mask_at, np.zeros(256), nn.ACL_BOOL)
        run_op(program, "ScaledMaskedSoftmaxBackward", grad, y, mask, 1.0, False, buffer.tensor(row, 0))
    finally:
        program.close()
    found = emulator.reports()
    assert len(found) == reported, "\n".join(map(str, found))
    if reported:
        assert "which it may not overlap at all (aclnnScaledMaskedSoftmaxBackward does not write its out piece by " \
               "piece as it reads its mask)" in found[0].message and "in-place call" not in found[0].message


def test_an_output_over_an_input_of_the_same_elements_in_another_shape_is_in_place():
    """KlDivBackward, self [64], target and gradOutput [1, 64]: out [64] over gradOutput's very bytes is
    element i over element i (nothing is summed: out has as many elements as the broadcast)."""
    results = []
    for out_at in (4096, 0):
        program = Program()
        try:
            buffer = OneBuffer(program)
            grad, target = buffer.tensor((1, 64), 0, np.linspace(-1, 1, 64)), buffer.tensor((1, 64), 128, np.full(64, 0.5))
            self_ = buffer.tensor((64,), 256, np.zeros(64))
            run_op(program, "KlDivBackward", grad, self_, target, 0, False, buffer.tensor((64,), out_at))
            results.append(buffer.read(out_at, 64))
        finally:
            program.close()
        assert emulator.reports() == []
    np.testing.assert_array_equal(results[0], results[1])


@pytest.mark.sanitizer_reports("race")
def test_a_race_names_both_tasks_with_their_launch_sites_and_the_allocation():
    program = Program()
    try:
        race_two_streams_write_one_buffer(program)
    finally:
        program.close()
    (race,) = emulator.reports()
    assert race.tool == "racecheck" and "write/write race" in race.message
    roles = [role for role, _ in race.sites]
    assert roles[0].startswith("write by aclnnLogSigmoidBackward on stream") and roles[1].startswith("write by")
    lines = [site.location for _, site in race.sites]
    assert all(line.startswith(__file__) for line in lines) and len(set(lines)) == 1  # both from the helper...
    assert all(" <- " in str(site) for _, site in race.sites)  # ...whose callers say which launch it was
    assert race.resources and race.resources[0].startswith("allocation #")


@pytest.mark.sanitizer_reports("race")
def test_a_race_on_host_memory_names_both_copies_with_their_launch_sites():
    program = Program()
    try:
        race_download_and_upload_of_one_staging_buffer(program)
    finally:
        program.close()
    (race,) = emulator.reports()
    assert race.tool == "racecheck" and "read/write race" in race.message and "of host memory" in race.message
    assert [role.split(" on stream ")[0] for role, _ in race.sites] == [
        "write by aclrtMemcpyAsync(%d bytes)" % N, "read by aclrtMemcpyAsync(%d bytes)" % N]
    downloaded, uploaded = (site.frames[0][1] for _, site in race.sites)
    assert uploaded == downloaded + 1


@pytest.mark.sanitizer_reports("missing synchronisation")
@pytest.mark.parametrize("execution", ["async", "eager"])
def test_a_copy_of_host_memory_a_queued_download_writes_names_the_call_and_the_download(execution):
    """The upload copies what the staging buffer held before the download (async), or after it (eager: the
    download ran at once): on the card either, so both modes report it."""
    emulator.configure(execution=execution)
    program = Program()
    try:
        sync_copy_reads_the_host_memory_a_queued_download_writes(program)
        assert program.read(program.buffers[1]) == 0
        copied = program.out.copy()
    finally:
        program.close()
    (finding,) = emulator.reports()
    assert finding.tool == "synccheck" and "aclrtMemcpy reads" in finding.message and "host memory" in finding.message
    assert [role.split(" on stream ")[0] for role, _ in finding.sites] == [
        "host call aclrtMemcpy", "write by aclrtMemcpyAsync(%d bytes)" % N]
    assert (copied == (9.0 if execution == "async" else program.host)).all()


@pytest.mark.sanitizer_reports("missing synchronisation")
def test_ptr_to_bytes_of_a_queued_downloads_memory_names_the_call_and_the_download():
    """acl.util.ptr_to_bytes is a read of host memory, as a synchronous copy's is: before the download was
    synchronised, it gets what the buffer held before (9s), and synccheck says so with both sites."""
    program = Program()
    try:
        device, stage = program.malloc(), program.malloc_host()
        assert acl.rt.memcpy_async(stage, N, device, N, D2H, program.s1) == 0
        stale = np.frombuffer(acl.util.ptr_to_bytes(stage, N), np.float32)
    finally:
        program.close()
    (finding,) = emulator.reports()
    assert finding.tool == "synccheck" and finding.message.startswith(
        "acl.util.ptr_to_bytes reads [0x%x, 0x%x) (host memory) now, while aclrtMemcpyAsync(%d bytes)" % (stage, stage + N, N))
    assert [role.split(" on stream ")[0] for role, _ in finding.sites] == [
        "host call acl.util.ptr_to_bytes", "write by aclrtMemcpyAsync(%d bytes)" % N]
    assert (stale == 9.0).all()


@pytest.mark.sanitizer_reports("host memory in flight", "invalid device access")
@pytest.mark.parametrize("execution", ["async", "eager"])
def test_host_memory_unmapped_under_a_queued_copy_is_reported_as_freed(execution):
    """Found when the copy runs (async: it then faults too) or at the synchronisation (eager: it ran
    before the memory went)."""
    emulator.configure(execution=execution)
    program = Program()
    try:
        sync_host_memory_unmapped_before_the_async_copy(program)
    finally:
        program.close()
    (finding,) = [found for found in emulator.reports() if found.kind == "host memory in flight"]
    assert "the host freed memory" in finding.message and "no longer mapped" in finding.message
    when = "when the copy ran" if execution == "async" else "by the synchronisation"
    assert [role.split(" at ")[0] for role, _ in finding.sites] == [
        "aclrtMemcpyAsync(%d bytes), launched" % N, "found freed %s, in the call" % when
        if execution == "async" else "found freed by the synchronisation"]


@pytest.mark.sanitizer_reports("host memory in flight", "invalid device access", "race", "pending work destroyed")
def test_host_memory_unmapped_under_two_queued_downloads_is_reported_for_each():
    """Two downloads of one buffer share a checksum: when the memory went, the copy that expected the
    shared one was not counted as changed, so only the first was reported and the second was lost when
    its stream was destroyed by force (review)."""
    program = Program()
    try:
        a = program.malloc()
        pages = mmap.mmap(-1, N)
        first = ctypes.c_char.from_buffer(pages)
        address = ctypes.addressof(first)
        del first
        assert acl.rt.memcpy_async(address, N, a, N, D2H, program.s1) == 0
        assert acl.rt.memcpy_async(address, N, a, N, D2H, program.s2) == 0
        pages.close()
        assert acl.rt.synchronize_stream(program.s1) == acl.ACL_ERROR_RT_AICORE_EXCEPTION
        assert emulator.runtime.aclrtDestroyStreamForce(program.s2) == 0
        program.s2 = None
    finally:
        program.close()
    found = [finding for finding in emulator.reports() if finding.kind == "host memory in flight"]
    assert len(found) == 2 and len({finding.sites[0][1] for finding in found}) == 2, [str(f) for f in found]


@pytest.mark.sanitizer_reports("missing synchronisation")
def test_a_missing_synchronisation_names_the_host_call_and_the_queued_task():
    program = Program()
    try:
        sync_copy_without_synchronisation(program)
        stale = program.out.copy()
    finally:
        program.close()
    (finding,) = emulator.reports()
    assert finding.tool == "synccheck"
    assert [role.split(" at ")[0] for role, _ in finding.sites] == [
        "host call aclrtMemcpy", "write by aclnnLogSigmoidBackward on stream %s, launched"
        % finding.sites[1][0].split("on stream ")[1].split(", launched")[0]]
    assert "aclrtMemcpy reads" in finding.message and "not synchronised" in finding.message
    assert (stale == program.host).all(), "the copy read the output as it was before the kernel ran"


@pytest.mark.sanitizer_reports("uninitialised read")
def test_uninitialised_bytes_read_as_the_poison_and_the_report_says_which():
    program = Program()
    try:
        init_half_written_buffer(program)
        raw = program.out.view(np.uint8)
    finally:
        program.close()
    assert not raw[:N // 2].any() and (raw[N // 2:] == POISON).all()
    (finding,) = emulator.reports()
    assert "%d byte(s) from offset %d" % (N // 2, N // 2) in finding.message
    assert [role for role, _ in finding.sites] == ["read by aclrtMemcpy, called", "allocation made"]


def test_byte_runs_are_the_bytes_a_view_covers_exactly_when_it_has_gaps():
    rng = random.Random(11)
    for _ in range(3000):
        dims = tuple(rng.randint(0, 4) for _ in range(rng.randint(0, 3)))
        view = (rng.randint(0, 8), rng.choice((1, 2, 4)), dims, tuple(rng.choice((0, 1, 2, 3, 5, 8)) for _ in dims))
        covered = set(bytes_by_unit(view, "elements"))
        runs = byte_runs(*view)
        if runs is None:  # no gap (or nothing at all)
            assert not covered or len(covered) == max(covered) - min(covered) + 1, view
        else:
            starts, ends = runs[0].tolist(), runs[1].tolist()
            listed = {address for begin, end in zip(starts, ends) for address in range(begin, end)}
            assert listed == covered and len(covered) < max(covered) - min(covered) + 1, view
            assert all(end < begin for end, begin in zip(ends, starts[1:])), "disjoint, in order, not meeting"


def generated_views(rng: random.Random, count: int):
    """(dims, strides) of tensors' views: strides that repeat elements, leave gaps, or both, zero strides,
    and permutations of row-major strides (with and without a gap after the innermost dim)."""
    for _ in range(count):
        dims = tuple(rng.randint(0, 4) for _ in range(rng.randint(0, 4)))
        if rng.random() < 0.3:
            order, step, row_major = list(range(len(dims))), rng.choice((1, 2)), [0] * len(dims)
            rng.shuffle(order)
            for axis in order:
                row_major[axis] = step
                step *= max(dims[axis], 1)
            yield dims, tuple(row_major)
        else:
            yield dims, tuple(rng.choice((0, 1, 2, 3, 4, 6)) for _ in dims)


def test_a_tensor_is_dense_exactly_when_its_elements_cover_its_byte_range():
    """aclTensor.dense (which spares a launch the look at the view's runs) against every byte listed; and
    what initcheck takes its own view to touch (its runs, or its whole range) is those bytes exactly."""
    from aclnn_api.operator import view
    rng = random.Random(5)
    for dims, strides in generated_views(rng, 3000):
        tensor = nn.aclCreateTensor(list(dims), nn.ACL_FLOAT, list(strides), 3, nn.ACL_FORMAT_ND, None, 1 << 20)
        try:
            touched = set(bytes_by_unit(((1 << 20) + 12, 4, dims, strides), "elements"))
            whole = set(range(min(touched), max(touched) + 1)) if touched else set()
            assert tensor.dense == (touched == whole), (dims, strides)
            kernel_view = view("self", tensor)
            runs = kernel_view.byte_runs()
            if runs is not None:
                listed = {address for begin, end in zip(*runs) for address in range(begin, end)}
            else:
                listed = set(range(kernel_view.start, kernel_view.start + kernel_view.nbytes))
            assert listed == touched, (dims, strides)
        finally:
            nn.aclDestroyTensor(tensor)


def test_box_runs_are_the_bytes_the_boxes_cover():
    """tensor.box_runs against every byte of every element of every box listed, over generated views and
    boxes (empty ones, ones that overlap each other, whole views)."""
    rng = random.Random(7)
    for dims, strides in generated_views(rng, 2000):
        boxes = []
        for _ in range(rng.randint(0, 3)):
            box = []
            for dim in dims:
                start = rng.randint(0, dim)
                box.append((start, rng.randint(start, dim)))
            boxes.append(tuple(box))
        covered = set()
        for box in boxes:
            sub_dims = tuple(stop - start for start, stop in box)
            base = sum(start * stride for (start, _), stride in zip(box, strides))
            covered |= set(bytes_by_unit((4 * base, 4, sub_dims, strides), "elements"))
        starts, ends = box_runs(4, strides, boxes)
        listed = [address for begin, end in zip(starts.tolist(), ends.tolist()) for address in range(begin, end)]
        assert sorted(listed) == sorted(covered) and len(listed) == len(covered), (dims, strides, boxes)
        assert all(end < begin for end, begin in zip(ends.tolist(), starts.tolist()[1:])), "disjoint, in order"


def test_an_input_read_over_more_boxed_runs_than_listed_is_read_whole(monkeypatch):
    """Above LISTED_RUNS runs (4 here) of its boxes a view is read as without boxes: its own runs (a
    pitched view), or its whole range (None)."""
    from aclnn_api import tensor as tensors
    from aclnn_api.operator import TensorView
    monkeypatch.setattr(tensors, "LISTED_RUNS", 4)
    firsts = lambda rows: tuple(((row, row + 1), (0, 1)) for row in range(rows))  # each row's first element
    dense = TensorView("x", None, nn.ACL_FLOAT, (4, 2), (2, 1), 0, data=1024)
    pitched = TensorView("x", None, nn.ACL_FLOAT, (4, 2), (4, 1), 0, data=1024)
    assert [run.tolist() for run in dense.reading(lambda: firsts(4)).byte_runs()] == [[1024, 1032, 1040, 1048],
                                                                              [1028, 1036, 1044, 1052]]
    elements = tuple(((row, row + 1), (column, column + 1)) for row in range(4) for column in range(2))
    assert dense.reading(lambda: elements).byte_runs() is None  # 8 runs (merged into one, but counted before)
    assert [run.tolist() for run in pitched.reading(lambda: elements).byte_runs()] == [[1024, 1040, 1056, 1072],
                                                                               [1032, 1048, 1064, 1080]]


def test_a_launch_may_only_declare_boxes_of_its_input_views():
    from aclnn_api.operator import KernelLaunch, TensorView
    x, out = (TensorView(name, None, nn.ACL_FLOAT, (4,), (1,), 0, data=1024) for name in ("x", "out"))
    with pytest.raises(ValueError, match="reads: out, y: not input views of the launch"):
        KernelLaunch(print, (x, out), outputs=("out",), reads={"y": list, "out": list, "x": list})
    assert KernelLaunch(print, (x, out), outputs=("out",), reads={"x": list}).args[0].reads is list


def test_a_kernel_reading_a_view_that_repeats_elements_and_misses_others_reads_only_its_elements():
    """[3, 3] strides [2, 2]: elements {0, 2, 4, 6, 8} of 9, repeated, in a range of 9 elements (as many
    as the view has indices). Only those five are written: initcheck reports nothing."""
    program = Program()
    try:
        storage, result = program.malloc(written=False), program.malloc()
        for element in (0, 2, 4, 6, 8):
            assert acl.rt.memcpy(storage + 4 * element, 4, acl.util.numpy_to_ptr(program.host), 4, H2D) == 0
        log_sigmoid_into(program, described(program, storage, (3, 3), (2, 2)), program.tensor(result, (3, 3)))
    finally:
        program.close()
    assert not emulator.reports(), "\n".join(map(str, emulator.reports()))


@pytest.mark.parametrize("width", [6, 4])
@pytest.mark.sanitizer_reports("uninitialised read")
def test_a_kernel_reading_a_pitched_view_reads_its_rows_not_the_bytes_between_them(width):
    """Rows of `width` floats, 16 apart, uploaded by aclrtMemcpy2d, read by a kernel as rows of 6: of
    exactly those rows it reads nothing unwritten; of rows of 4 it reads the 2 unwritten floats ending
    each row (and not the bytes between rows). Its output, a pitched view too, writes its rows only:
    reading the whole output buffer back reads the bytes between them, never written."""
    program = Program()
    try:
        pitched, result = program.malloc(written=False), program.malloc(written=False)
        rows = np.arange(4 * width, dtype=np.float32).reshape(4, width)
        assert acl.rt.memcpy_2d(pitched, 64, acl.util.numpy_to_ptr(rows), 4 * width, 4 * width, 4, H2D) == 0
        x, y = (described(program, address, (4, 6), (16, 1)) for address in (pitched, result))
        log_sigmoid_into(program, x, y)
        read_rows = [f for f in emulator.reports() if "aclnnLogSigmoid reads" in f.message]
        assert len(read_rows) == (width == 4), "\n".join(map(str, emulator.reports()))
        if width == 4:
            assert "%d byte(s) from offset 16" % (4 * 2 * 4) in read_rows[0].message, read_rows[0].message
        emulator.report.clear()
        assert program.read(result) == 0
    finally:
        program.close()
    (finding,) = emulator.reports()
    # 4 rows of 24 bytes written of the 256: 160 never written, the first at offset 24
    assert "aclrtMemcpy reads" in finding.message and "160 byte(s) from offset 24" in finding.message, finding.message


@pytest.mark.sanitizer_reports("race")
def test_a_finding_repeated_in_a_loop_is_printed_once_and_counted(capfd):
    program = Program()
    try:
        a, b, out = program.malloc(), program.malloc(), program.malloc()
        for _ in range(5):
            program.log_sigmoid_backward(a, b, out, program.s1)
            program.log_sigmoid_backward(b, a, out, program.s2)
    finally:
        program.close()
    races = emulator.reports()
    assert len(races) == 2 and sum(r.count for r in races) == report.count() >= 5
    printed = capfd.readouterr().err
    assert printed.count("npuemu: racecheck: race:") == 2


@pytest.mark.sanitizer_reports("uninitialised read")
def test_a_loop_reading_a_buffer_element_by_element_is_one_finding_counted(capfd):
    """Each round reads another offset of the never-written buffer: one bug, one printed report (the
    first round's message) whose count grows; the offsets made each round a new report."""
    program = Program()
    try:
        unwritten, element = program.malloc(written=False), np.zeros(1, np.float32)
        for i in range(6):
            assert acl.rt.memcpy(acl.util.numpy_to_ptr(element), 4, unwritten + 4 * i, 4, D2H) == 0
    finally:
        program.close()
    (finding,) = emulator.reports()
    assert finding.count == 6 == report.count() and finding.differed
    assert "4 byte(s) from offset 0 of allocation" in finding.message, finding.message
    assert capfd.readouterr().err.count("npuemu: initcheck: uninitialised read:") == 1


@pytest.mark.sanitizer_reports("missing synchronisation")
def test_a_finding_repeated_with_the_same_numbers_did_not_differ():
    """The same unsynchronised copy of the same buffer, three rounds: one record counted three times,
    whose repeats did not differ (the plugin then says nothing of "other numbers")."""
    program = Program()
    try:
        buffer = program.malloc()
        for _ in range(3):
            assert acl.rt.memset_async(buffer, N, 0, N, program.s1) == 0
            assert acl.rt.memcpy(acl.util.numpy_to_ptr(program.out), N, buffer, N, D2H) == 0
            assert acl.rt.synchronize_stream(program.s1) == 0
    finally:
        program.close()
    (finding,) = emulator.reports()
    assert finding.count == 3 and finding.differed is False, finding


@pytest.mark.sanitizer_reports("race")
def test_a_repeat_says_whether_its_numbers_differed():
    site = (("write by X, launched", "a.py:1 in f"),)
    same = [report.publish("race", "racecheck", "writes [0x100, 0x140)", site) for _ in range(3)]
    other = [report.publish("race", "racecheck", "reads [0x%x, 0x%x)" % (at, at + 64), site) for at in (256, 512)]
    assert same[0] is same[-1] and same[0].count == 3 and same[0].differed is False
    assert other[0] is other[-1] and other[0].count == 2 and other[0].differed is True
    assert emulator.reports() == [same[0], other[0]]


@pytest.mark.sanitizer_reports("race")
def test_distinct_findings_past_the_print_limit_are_counted_not_printed(capfd, monkeypatch):
    monkeypatch.setattr(report, "PRINT_LIMIT", 2)
    for line in range(5):
        report.publish("race", "racecheck", "what happened", (("write by X, launched", "a.py:%d in f" % line),))
    assert len(emulator.reports()) == 5 == report.count()
    printed = capfd.readouterr().err
    assert printed.count("npuemu: racecheck: race:") == 2, printed
    assert printed.count("2 distinct findings printed: later ones are counted") == 1, printed

def test_the_printed_form_is_the_documented_one():
    finding = report.publish("race", "racecheck", "what happened", (("write by X, launched", "a.py:1 in f"),),
                             ("allocation #1",))
    report.clear()
    assert finding.text().splitlines() == ["========= npuemu: racecheck: race: what happened",
                                           "=========     write by X, launched at a.py:1 in f",
                                           "=========     allocation #1"]


@pytest.mark.parametrize("start,end,expected", [
    (0, 10, [(0, 10)]), (100, 110, []), (95, 105, [(95, 100)]), (105, 215, [(150, 200)]),
    (150, 160, [(150, 160)]), (199, 300, [(199, 200), (250, 300)]), (240, 400, [(250, 400)]),
])
def test_written_ranges_merge_and_tell_their_gaps(start, end, expected):
    written = Written()
    for range_ in ((100, 110), (200, 210), (205, 250), (108, 150), (0, 0)):
        if range_[1] > range_[0]:
            written.add(*range_)
    assert written.bounds == [100, 150, 200, 250]
    assert written.gaps(start, end) == expected


def _run(source: str, **env) -> subprocess.CompletedProcess:
    environment = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(source)], capture_output=True, text=True,
                          env=environment, timeout=120)


BUGGY = """
    import acl, numpy as np
    acl.init(); acl.rt.set_device(0)
    a, _ = acl.rt.malloc(64, 0)
    out = np.zeros(16, np.float32)
    acl.rt.memcpy(out.ctypes.data, 64, a, 64, 2)
    acl.rt.free(a); acl.rt.reset_device(0); acl.finalize()
    print("done")
"""


@pytest.mark.parametrize("level,exitcode,expected", [("full", "7", 7), ("full", "", 0), ("off", "7", 0),
                                                     ("memcheck", "7", 0)])
def test_the_exit_code_is_the_sanitizers_when_something_was_reported(level, exitcode, expected):
    done = _run(BUGGY, NPUEMU_SANITIZE=level, NPUEMU_SANITIZE_EXITCODE=exitcode)
    assert done.returncode == expected, done.stderr
    assert done.stdout == "done\n"
    assert ("SUMMARY: 1 report(s) (1 uninitialised read)" in done.stderr) == (level == "full")


def test_a_leak_alone_sets_the_exit_code():
    done = _run("""
        import acl
        acl.init(); acl.rt.set_device(0)
        acl.rt.malloc(64, 0)
    """, NPUEMU_SANITIZE_EXITCODE="5")
    assert done.returncode == 5 and "npuemu: leak: device memory" in done.stderr
    assert "SUMMARY: 1 report(s) (1 leak)" in done.stderr


def test_a_bad_level_is_the_first_calls_invalid_parameter_code():
    done = _run("""
        import acl
        print(acl.init(), acl.rt.set_device(0), acl.get_recent_err_msg())
    """, NPUEMU_SANITIZE="paranoid")
    assert done.stdout.split()[1] == "100000" and "NPUEMU_SANITIZE: expected one of off, memcheck, full" in done.stdout


def test_a_program_that_never_synchronises_keeps_the_tracker_bounded(monkeypatch):
    from emulator import sanitizer
    monkeypatch.setattr(sanitizer, "PENDING", 64)
    emulator.configure(execution="eager")
    program = Program()
    try:
        a = program.malloc()
        for _ in range(200):
            assert acl.rt.memset_async(a, N, 1, N, program.s1) == 0
        state = sanitizer.TRACKER.clocks[program.s1]
        assert len(state.pending) == len(state.epochs) <= 64
        assert state.count == 200
    finally:
        program.close()
    assert emulator.reports() == []


def test_a_destroyed_stream_leaves_every_clock():
    """The tracker's clocks name live streams only. A process that makes and destroys streams (a test
    session makes some in every test) otherwise made every launch join the clocks of all the streams
    it had ever made: slower and slower, 60 us more for a 4x4 call after 600 streams."""
    from emulator import sanitizer
    program = Program()
    try:
        a, event, gone = program.malloc(), program.event(), []
        for _ in range(20):
            stream, _ = acl.rt.create_stream()
            assert acl.rt.memset_async(a, N, 1, N, stream) == 0
            assert acl.rt.record_event(event, stream) == 0
            assert acl.rt.stream_wait_event(program.s1, event) == 0
            assert acl.rt.synchronize_stream(stream) == 0
            assert acl.rt.destroy_stream(stream) == 0
            gone.append(stream)
        assert acl.rt.memset_async(a, N, 2, N, program.s1) == 0
        assert acl.rt.synchronize_stream(program.s1) == 0
        tracker = sanitizer.TRACKER
        named = set(tracker.host) | set(tracker.clocks)
        named |= {handle for state in tracker.clocks.values() for handle in state.clock}
        named |= {handle for recorded in tracker.events.values() for handle in recorded}
        assert named <= {program.s1, program.s2}, named & set(gone)
    finally:
        program.close()
    assert emulator.reports() == []


def test_synchronised_streams_leave_no_entry_in_a_busy_streams_clock_nor_any_check():
    """Streams that ran work and were synchronised are known to the host: what the host saw is kept once,
    not joined into each stream's clock as it queues (each launch after a synchronisation walked every
    live stream's entry: 120 us a 4x4 call with 1000 such streams), and checks look at streams with
    work pending only. The races that remain are still found (the twin below)."""
    from emulator import sanitizer
    program, others = Program(), []
    try:
        a, b = program.malloc(), program.malloc()
        for _ in range(30):
            stream, _ = acl.rt.create_stream()
            others.append(stream)
            assert acl.rt.memset_async(b, N, 1, N, stream) == 0
            assert acl.rt.synchronize_stream(stream) == 0
        for _ in range(3):
            assert acl.rt.memset_async(a, N, 2, N, program.s1) == 0
            assert acl.rt.synchronize_stream(program.s1) == 0
        assert acl.rt.memset_async(a, N, 3, N, program.s1) == 0
        assert set(sanitizer.TRACKER.clocks[program.s1].clock) == {program.s1}
        assert set(sanitizer.TRACKER.busy) == {program.s1}
        assert acl.rt.synchronize_stream(program.s1) == 0
    finally:
        for stream in others:
            acl.rt.destroy_stream(stream)
        program.close()
    assert emulator.reports() == []


@pytest.mark.sanitizer_reports("race")
def test_a_stream_synchronised_before_is_still_raced_with_by_its_later_work():
    program = Program()
    try:
        a = program.malloc()
        assert acl.rt.memset_async(a, N, 1, N, program.s2) == 0
        assert acl.rt.synchronize_stream(program.s2) == 0
        assert acl.rt.memset_async(a, N, 2, N, program.s1) == 0   # ordered after s2's first memset
        assert acl.rt.memset_async(a, N, 3, N, program.s2) == 0   # not after s1's
    finally:
        program.close()
    (race,) = emulator.reports()
    assert "write/write race" in race.message, race.message

def test_an_event_released_by_a_device_reset_leaves_the_tracker():
    """Events never destroyed, released by aclrtResetDevice (a leak, reported): the tracker forgets their
    records' clocks as it does a destroyed event's (kept, each init/reset cycle added one, and every
    stream destroyed afterwards walked them all)."""
    from emulator import sanitizer
    for _ in range(5):
        assert acl.init() == 0 and acl.rt.set_device(0) == 0
        stream, _ = acl.rt.create_stream()
        event, _ = acl.rt.create_event()
        assert acl.rt.record_event(event, stream) == 0 and acl.rt.synchronize_stream(stream) == 0
        assert acl.rt.destroy_stream(stream) == 0
        assert acl.rt.reset_device(0) == 0
        assert event not in sanitizer.TRACKER.events
        assert acl.finalize() == 0
    assert sanitizer.TRACKER.events == {}


class _Watched(list):
    """A stream's pending tasks that count how many of them are looked at."""
    looked_at = 0

    def __iter__(self):
        for item in super().__iter__():
            self.looked_at += 1
            yield item


def test_a_synchronisation_settles_the_host_copies_without_a_look_at_other_streams_pending_work():
    """An upload and a synchronisation of s1, round after round, while s2 has work queued that the host has
    not synchronised: settling the upload's host memory looks at s1's copy, not at s2's tasks (it looked at
    all of them every synchronisation: 5 ms a round with 60000 of them queued)."""
    from emulator import sanitizer
    program = Program()
    try:
        a, b = program.malloc(), program.malloc()
        for _ in range(100):
            assert acl.rt.memset_async(b, N, 1, N, program.s2) == 0
        host = acl.util.numpy_to_ptr(program.host)
        rounds = [lambda: acl.rt.memcpy_async(a, N, host, N, H2D, program.s1),
                  lambda: acl.rt.synchronize_stream(program.s1)]
        assert [call() for call in rounds] == [0, 0]  # indexes s2's pending work once (AccessIndex)
        state = sanitizer.TRACKER.clocks[program.s2]
        state.pending = _Watched(state.pending)
        for _ in range(10):
            assert [call() for call in rounds] == [0, 0]
            assert sanitizer.TRACKER.host_copies == {}
        assert state.pending.looked_at == 0 and len(state.pending) == 100
    finally:
        program.close()
    assert emulator.reports() == []


def test_a_synchronisation_with_no_host_copy_pending_asks_for_none(monkeypatch):
    """Kernels and synchronisations, no asynchronous copy of host memory: a synchronisation cuts the
    stream's pending tasks without asking which host copies leave with them (it called _cut_host and made
    a list for nothing at each one: 400 of the 140 000 instructions of a whole aclnn call from C). With an
    upload pending, it asks, and the upload is settled."""
    from emulator import sanitizer
    program = Program()
    try:
        a, b, out = program.malloc(), program.malloc(), program.malloc()
        asked = _counting(monkeypatch, sanitizer.StreamClock, "_cut_host")
        for _ in range(5):
            program.log_sigmoid_backward(a, b, out, program.s1)
            assert acl.rt.synchronize_stream(program.s1) == 0
        assert asked[0] == 0
        assert acl.rt.memcpy_async(a, N, acl.util.numpy_to_ptr(program.host), N, H2D, program.s1) == 0
        assert acl.rt.synchronize_stream(program.s1) == 0
        assert (asked[0], sanitizer.TRACKER.host_copies) == (1, {})
    finally:
        program.close()
    assert emulator.reports() == []


def _watched(items):
    """`items` (a list or a dict) as a copy of its type that counts how many of its items are iterated over."""
    class Watched(type(items)):
        looked_at = 0

        def __iter__(self):
            for item in super().__iter__():
                self.looked_at += 1
                yield item
    return Watched(items)


def test_a_launch_looks_at_none_of_another_streams_pending_tasks_on_other_memory(monkeypatch):
    """s2 has 300 kernels queued that the host has not synchronised; s1 launches and synchronises, round
    after round, on memory that lies between s2's (next-fit) and reads the weight s2 reads: s1's launches
    test none of s2's tasks' ranges (two reads are no race). They tested every one of them, as s1's
    memory lay inside the box of all of s2's: a launch cost O(pending) (928 us with 4000 pending). Only
    the oldest of s2's pending tasks is compared with each launch, range by range (a loop that races does
    so with its oldest), then s2's index."""
    from emulator import sanitizer
    program = Program()
    try:
        weight, x2, x1, out1, out2 = (program.malloc() for _ in range(5))
        for _ in range(300):
            program.log_sigmoid_backward(weight, x2, out2, program.s2)
        overlap_tests = _counting(monkeypatch, sanitizer, "_conflict")
        for _ in range(10):
            program.log_sigmoid_backward(weight, x1, out1, program.s1)
            assert acl.rt.synchronize_stream(program.s1) == 0
        assert overlap_tests[0] <= 10 * 5  # the oldest task's 4 ranges against each launch's: not O(pending)
        assert len(sanitizer.TRACKER.clocks[program.s2].pending) == 300
    finally:
        program.close()
    assert emulator.reports() == []


@pytest.mark.sanitizer_reports("race")
def test_a_race_with_one_of_many_pending_tasks_names_the_oldest_it_races_with():
    """Among 300 kernels pending on s2, the 100th and the 200th write what s1 then reads: the race found
    through s2's index of pending memory is with the 100th (the oldest), as a look at every task found."""
    program = Program()

    def oldest_writer():
        program.log_sigmoid_backward(weight, x2, shared, program.s2)

    def newer_writer():
        program.log_sigmoid_backward(weight, x2, shared, program.s2)
    try:
        weight, x2, out2, shared = (program.malloc() for _ in range(4))
        for i in range(300):
            if i in (99, 199):
                (oldest_writer if i == 99 else newer_writer)()
            else:
                program.log_sigmoid_backward(weight, x2, out2, program.s2)
        program.log_sigmoid_backward(shared, weight, program.malloc(), program.s1)
    finally:
        program.close()
    (race,) = emulator.reports()
    assert "read/write race" in race.message and "reads [0x%x, 0x%x)" % (shared, shared + N) in race.message
    (writer, writer_site), (reader, _) = race.sites
    assert writer.startswith("write by aclnnLogSigmoidBackward") and reader.startswith("read by")
    assert " in oldest_writer" in str(writer_site), writer_site


def test_a_synchronisation_settles_its_own_streams_copies_only():
    """s2 has 300 uploads queued that the host has not synchronised; s1 uploads and synchronises, round
    after round: each synchronisation settles s1's copy, without a look at s2's (it walked all pending
    copies, and rebuilt their index, at every synchronisation: 5.4 ms a round with 20000 pending)."""
    from emulator import sanitizer
    program = Program()
    pinned, ret = acl.rt.malloc_host(16 * 300)
    assert ret == 0
    program.pinned.append(pinned)
    try:
        own, device = program.malloc(), program.malloc(16 * 300)
        for i in range(300):
            assert acl.rt.memcpy_async(device + 16 * i, 16, pinned + 16 * i, 16, H2D, program.s2) == 0
        host = acl.util.numpy_to_ptr(program.host)
        looked_at = 0
        for _ in range(10):
            watched = sanitizer.TRACKER.host_copies = _watched(sanitizer.TRACKER.host_copies)
            assert acl.rt.memcpy_async(own, N, host, N, H2D, program.s1) == 0
            assert acl.rt.synchronize_stream(program.s1) == 0
            assert len(sanitizer.TRACKER.host_copies) == 300
            looked_at += watched.looked_at
        assert looked_at == 0
    finally:
        program.close()
    assert emulator.reports() == []


def _counting(monkeypatch, owner, name: str) -> list:
    """Replace owner.name with a wrapper that counts its calls (in the list returned)."""
    calls, wrapped = [0], getattr(owner, name)

    def counted(*args):
        calls[0] += 1
        return wrapped(*args)
    monkeypatch.setattr(owner, name, counted)
    return calls


@pytest.mark.parametrize("slice_step", [16, 0], ids=["own slices", "one slice"])
def test_a_download_checks_the_pending_copies_near_its_memory_only(monkeypatch, slice_step):
    """K downloads into pinned memory, each into its own 16-byte slice of one buffer (or all into the same
    slice), then one synchronisation: a download finds the pending copies whose memory it writes over
    among those near it, and sums one range once for all the copies handed it. (It tested every pending
    copy for overlap, and summed each overlapping one: O(K^2), 8 M overlap tests for 2000 downloads.)"""
    from emulator import sanitizer
    overlap_tests = _counting(monkeypatch, sanitizer.HostRows, "overlaps")
    sums = _counting(monkeypatch, sanitizer, "_checksum")
    program, downloads = Program(), 300
    pinned, ret = acl.rt.malloc_host(16 * downloads)
    assert ret == 0
    try:
        device = program.malloc()
        for i in range(downloads):
            assert acl.rt.memcpy_async(pinned + slice_step * i, 16, device, 16, D2H, program.s1) == 0
        assert acl.rt.synchronize_stream(program.s1) == 0
        assert overlap_tests[0] <= 4 * downloads and sums[0] <= 6 * downloads, (overlap_tests, sums)
        assert sanitizer.TRACKER.host_index.ranges == {}
    finally:
        acl.rt.free_host(pinned)
        program.close()
    assert emulator.reports() == []


@pytest.mark.sanitizer_reports("host memory in flight")
def test_a_change_between_two_downloads_into_one_buffer_is_found_for_the_first_only():
    """Two downloads handed the same memory expect it to hold what it held when each was queued: the host
    changing it between the two is the first one's finding (once), not the second's."""
    program = Program()
    try:
        device, stage = program.malloc(), program.malloc_host()
        staged = acl.util.ptr_to_numpy(stage, (N // 4,), np.dtype(np.float32).num)
        assert acl.rt.memcpy_async(stage, N, device, N, D2H, program.s2) == 0
        staged[0] = 5.0
        assert acl.rt.memcpy_async(stage, N, device, N, D2H, program.s2) == 0
        assert acl.rt.synchronize_stream(program.s2) == 0
    finally:
        program.close()
    (finding,) = emulator.reports()
    assert finding.count == 1 and finding.message.startswith("the host changed memory"), finding.message
    assert "aclrtMemcpyAsync" in finding.message and "writes" in finding.message, finding.message

@pytest.mark.sanitizer_reports("pending work destroyed", "missing synchronisation")
def test_an_event_whose_record_was_dropped_orders_nothing_its_stream_had_waited_for():
    """The record stood for s1's kernel (its stream waited for it). aclrtDestroyStreamForce dropped it: the
    event is as never recorded, so synchronising it is no synchronisation with the kernel, and reading the
    kernel's output is a missing one (the host took the dropped record's order as seen)."""
    program = Program()
    try:
        a, b, out = program.malloc(), program.malloc(), program.malloc()
        kernel_done, event = program.event(), program.event()
        program.log_sigmoid_backward(a, b, out, program.s1)
        assert acl.rt.record_event(kernel_done, program.s1) == 0
        dropped, _ = acl.rt.create_stream()
        assert acl.rt.stream_wait_event(dropped, kernel_done) == 0
        assert acl.rt.record_event(event, dropped) == 0
        assert acl.rt.destroy_stream_force(dropped) == 0
        assert acl.rt.synchronize_event(event) == 0
        assert program.read(out) == 0
    finally:
        program.close()
    kinds = sorted(finding.kind for finding in emulator.reports())
    assert kinds == ["missing synchronisation", "pending work destroyed"]


@pytest.mark.sanitizer_reports("uninitialised read")
def test_a_pointer_kept_across_a_device_reset_is_named_as_freed_by_the_reset():
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    kept, _ = acl.rt.malloc(N, 0)
    assert acl.rt.reset_device(0) == 0        # releases the memory: reported as a leak, then forgotten
    emulator.leaks.forget()
    report.clear()
    assert acl.rt.set_device(0) == 0
    try:
        program_out = np.zeros(N // 4, np.float32)
        stream, _ = acl.rt.create_stream()
        assert acl.rt.memcpy_async(acl.util.numpy_to_ptr(program_out), N, kept, N, D2H, stream) == 107000
        message = acl.get_recent_err_msg()
        assert "freed at aclrtResetDevice(0)" in message, message
        x, _ = acl.rt.malloc(N, 0)
        tensors = [nn.aclCreateTensor([N // 4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, a)
                   for a in (kept, x, x, x)]
        _, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(*tensors)
        assert ret == 0 and nn.aclnnLogSigmoidBackward(None, 0, executor, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 507015
        (fault,) = [r for r in emulator.reports() if r.kind == "invalid device access"]
        assert fault.tool == "memcheck" and "freed at aclrtResetDevice(0)" in fault.message
        assert [role for role, _ in fault.sites][:2] == [
            "aclnnLogSigmoidBackward on stream %s, launched" % fault.sites[0][0].split(" on stream ")[1].split(",")[0],
            "allocation made"]
        for tensor in tensors:
            nn.aclDestroyTensor(tensor)
        acl.rt.free(x)
        acl.rt.destroy_stream(stream)
    finally:
        acl.rt.reset_device(0)
        acl.finalize()


@pytest.mark.parametrize("nbytes,changed_at", [(4096, 100), (8 << 20, 0), (8 << 20, (8 << 20) - 1)])
def test_a_changed_host_buffer_is_found_whole_or_sampled(nbytes, changed_at):
    from emulator.sanitizer import _checksum
    buffer = np.zeros(nbytes, np.uint8)
    before = _checksum(buffer.ctypes.data, nbytes)
    assert _checksum(buffer.ctypes.data, nbytes) == before
    buffer[changed_at] = 1  # the first and last bytes are in sampled pages
    assert _checksum(buffer.ctypes.data, nbytes) != before


@pytest.mark.parametrize("rows,width,pitch", [(1000, 16, 32), (256, 4096, 8192), (65536, 16, 32), (512, 4096, 4100)])
def test_a_2d_copys_rows_are_summed_whole_up_to_1_mib_of_them_and_sampled_beyond(rows, width, pitch):
    """A 2-D copy's memory is its rows: the bytes between them are not summed; its rows' bytes are, as a
    1-D copy's bytes are (whole up to SUMMED_WHOLE; beyond, sampled pages, the first and the last)."""
    from emulator.sanitizer import SUMMED_WHOLE, _checksum
    memory = np.zeros(rows * pitch, np.uint8)
    copy = (memory.ctypes.data, (rows - 1) * pitch + width, pitch, width)
    before = _checksum(*copy)
    memory[width:pitch] = 1  # between rows 0 and 1
    assert _checksum(*copy) == before
    if rows * width <= SUMMED_WHOLE:
        memory[rows // 2 * pitch + 3] = 1
        assert _checksum(*copy) != before
        memory[rows // 2 * pitch + 3] = 0
    memory[(rows - 1) * pitch + width - 1] = 1
    assert _checksum(*copy) != before


def test_host_rows_overlap_exactly_when_they_share_a_byte():
    from emulator.sanitizer import HostRows
    generator = random.Random(11)

    def rows():
        width = generator.randint(1, 6)
        pitch, height, start = generator.randint(width, 10), generator.randint(1, 6), generator.randrange(30)
        return HostRows(start, start + pitch * (height - 1) + width, "reads", pitch, width)

    def bytes_of(memory):
        pitch, width = memory.pitch or memory.end - memory.start, memory.width or memory.end - memory.start
        return {memory.start + row * pitch + column for row in range(memory.rows()) for column in range(width)}
    for _ in range(3000):
        a, b = rows(), rows()
        shared = bool(bytes_of(a) & bytes_of(b))
        assert a.overlaps(b) == b.overlaps(a) == shared, [(m.start, m.end, m.pitch, m.width) for m in (a, b)]


@pytest.mark.sanitizer_reports("uninitialised read")
def test_an_in_place_output_never_written_is_read_uninitialised_whatever_the_kernels_argument_order():
    """KlDivBackward's kernel takes its output first: `out` is also `gradOutput` here, and never written."""
    program = Program()
    try:
        grad_out = program.malloc(written=False)
        target = program.malloc()
        self_ = program.malloc()
        tensors = [program.tensor(a) for a in (grad_out, self_, target, grad_out)]
        _, executor, ret = nn.aclnnKlDivBackwardGetWorkspaceSize(tensors[0], tensors[1], tensors[2], 0, False,
                                                                 tensors[3])
        assert ret == 0 and nn.aclnnKlDivBackward(None, 0, executor, program.s1) == 0
        assert acl.rt.synchronize_stream(program.s1) == 0
    finally:
        program.close()
    (finding,) = emulator.reports()
    assert finding.kind == "uninitialised read" and "gradOutput" in finding.message


def run_with_a_callback(program: Program, callback, block: int = acl.ACL_CALLBACK_BLOCK, then=None) -> None:
    """`callback` queued (blocking by default) on s1 behind a kernel that writes `program.result`, then
    `then(program)` queued behind it, all run by a report thread, then s1 synchronised. The thread
    serves once everything is queued: its aclrtProcessReport runs s1 up to the callback by itself, and
    what `then` does must come before the callback starts, whenever the thread gets there."""
    ctx, _ = acl.rt.get_context()
    stop, go = threading.Event(), threading.Event()

    def serve():
        acl.rt.set_context(ctx)
        go.wait(10)
        while not stop.is_set():
            acl.rt.process_report(20)
    thread = threading.Thread(target=serve)
    thread.start()
    try:
        assert acl.rt.subscribe_report(thread.ident, program.s1) == 0
        a, b = program.malloc(), program.malloc()
        program.result = program.malloc(written=False)
        program.log_sigmoid_backward(a, b, program.result, program.s1)
        assert acl.rt.launch_callback(callback, None, block, program.s1) == 0
        if then is not None:
            then(program)
        go.set()
        assert acl.rt.synchronize_stream(program.s1) == 0
        assert acl.rt.unsubscribe_report(thread.ident, program.s1) == 0
    finally:
        go.set()
        stop.set()
        thread.join()


@pytest.mark.parametrize("execution", ["async", "eager"])
@pytest.mark.parametrize("changed_by", [None, "callback", "host"])
@pytest.mark.sanitizer_reports("host memory in flight")
def test_a_blocking_callback_may_refill_the_staging_buffer_of_the_upload_behind_it(execution, changed_by):
    """Upload from pinned staging, a blocking callback refills it, upload again: the second copy starts
    when the callback has returned, so it reads the refill (a pipeline's usual loop, not a race). The
    host thread changing the staging while the copies run or wait is one: nothing orders that change
    with the first copy nor with the callback's return."""
    emulator.configure(execution=execution)
    program = Program()
    staging, _ = acl.rt.malloc_host(N)
    values = acl.util.ptr_to_numpy(staging, (N // 4,), np.dtype(np.float32).num)
    first, second = program.malloc(written=False), program.malloc(written=False)

    def refill(_):
        if changed_by == "callback":
            values[:] = 2

    def upload_both_ways(program):
        assert acl.rt.memcpy_async(second, N, staging, N, H2D, program.s1) == 0
        if changed_by == "host":
            values[:] = 3
    try:
        values[:] = 1
        assert acl.rt.memcpy_async(first, N, staging, N, H2D, program.s1) == 0
        run_with_a_callback(program, refill, then=upload_both_ways)
        assert program.read(second) == 0
        assert program.out[0] == {None: 1, "callback": 2, "host": 3}[changed_by]
    finally:
        acl.rt.free_host(staging)
        program.close()
    found = emulator.reports()
    if changed_by != "host":
        assert found == [], "\n".join(map(str, found))
        return
    # the host's change races with both uploads: the first may still be reading, the second may start
    assert [f.kind for f in found] == ["host memory in flight"] * 2, "\n".join(map(str, found))
    assert "found changed when a blocking callback ahead of the copy started" in str(found[1])


@pytest.mark.parametrize("execution", ["async", "eager"])
def test_a_callback_comes_after_the_work_before_it_on_its_stream_so_its_runtime_calls_report_nothing(execution):
    """The callback copies the kernel's result back and queues a copy into it on the other stream: both
    come after the kernel (the stream reached the callback), so neither is a missing synchronisation
    or a race; eagerly too, where the stream reaches the callback as it is launched."""
    emulator.configure(execution=execution)
    program, seen = Program(), []

    def copy_back_and_again(_):
        seen.append(program.read(program.result))
        seen.append(acl.rt.memcpy_async(program.result, N, acl.util.numpy_to_ptr(program.host), N, H2D, program.s2))
        seen.append(acl.rt.synchronize_stream(program.s2))
    try:
        run_with_a_callback(program, copy_back_and_again)
    finally:
        program.close()
    assert seen == [0, 0, 0] and emulator.reports() == []


@pytest.mark.sanitizer_reports("race")
def test_a_callback_is_not_ordered_after_work_of_another_stream():
    """Work of s2 queued before the callback but not waited for by s1 stays unordered with the
    callback's copy into its output."""
    program = Program()

    def write_the_other_streams_output(_):
        acl.rt.memcpy_async(program.other, N, acl.util.numpy_to_ptr(program.host), N, H2D, program.s1)
    try:
        a, b = program.malloc(), program.malloc()
        program.other = program.malloc(written=False)
        program.log_sigmoid_backward(a, b, program.other, program.s2)
        run_with_a_callback(program, write_the_other_streams_output)
    finally:
        program.close()
    assert [finding.kind for finding in emulator.reports()] == ["race"]


def overwrite_the_result(program: Program) -> None:
    assert acl.rt.memset_async(program.result, N, 0, N, program.s1) == 0


@pytest.mark.parametrize("execution", ["async", "eager"])
def test_work_queued_behind_a_blocking_callback_cannot_race_with_what_the_callback_reads(execution):
    """The memset behind a blocking callback waits for it: the callback's copy of the buffer it overwrites
    is no missing synchronisation (and it reads the kernel's result)."""
    emulator.configure(execution=execution)
    program, seen = Program(), []
    try:
        run_with_a_callback(program, lambda _: seen.append(program.read(program.result)), then=overwrite_the_result)
        assert seen == [0] and program.out.any(), "the callback read the kernel's result, not the memset's zeros"
    finally:
        program.close()
    assert emulator.reports() == []



@pytest.mark.sanitizer_reports("padding overrun")
def test_a_copy_into_the_padding_is_one_finding_named_by_its_access_and_a_rejected_one_none():
    """A call's argument checks are no access: only the copy itself is reported (the host call's, the
    queued copy's), once each; a copy rejected by another check touched nothing."""
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    stream, _ = acl.rt.create_stream()
    address, _ = acl.rt.malloc(250, 0)
    host = np.ones(64, np.float32)
    try:
        assert acl.rt.memcpy(address, 256, acl.util.numpy_to_ptr(host), 256, H2D) == 0
        assert acl.rt.memcpy_async(address, 256, acl.util.numpy_to_ptr(host), 256, H2D, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        unmapped = 0x10
        assert acl.rt.memcpy(address, 256, unmapped, 256, H2D) == acl.ACL_ERROR_RT_PARAM_INVALID
        assert acl.rt.memcpy_async(address, 256, unmapped, 256, H2D, stream) == acl.ACL_ERROR_RT_PARAM_INVALID
    finally:
        acl.rt.free(address)
        acl.rt.destroy_stream(stream)
        acl.rt.reset_device(0)
        acl.finalize()
    roles = [finding.sites[0][0] for finding in emulator.reports()]
    assert roles == ["host call aclrtMemcpy", "aclrtMemcpyAsync(256 bytes), launched"], roles


@pytest.mark.sanitizer_reports("missing synchronisation", "uninitialised read")
def test_one_bug_in_a_loop_that_allocates_each_round_is_one_finding_counted_each_round():
    """The addresses and allocation numbers differ from round to round; the finding is the same."""
    program = Program()
    try:
        for _ in range(5):
            a, b = program.malloc(), program.malloc()
            out = program.malloc(written=False)
            program.log_sigmoid_backward(a, b, out, program.s1)
            program.read(out)  # the bug: no synchronisation first
            assert acl.rt.synchronize_stream(program.s1) == 0
    finally:
        program.close()
    missing = [finding for finding in emulator.reports() if finding.kind == "missing synchronisation"]
    assert [finding.count for finding in missing] == [5], [finding.message for finding in missing]


@pytest.mark.sanitizer_reports("padding overrun", "uninitialised read")
def test_a_host_call_inside_a_callback_is_named_as_the_host_call_not_the_callbacks_launch():
    """While the stream waits for its blocking callback, the calls the callback makes are its own."""
    program, small = Program(), None
    try:
        small, _ = acl.rt.malloc(250, 0)
        assert acl.rt.memset(small, 250, 0, 250) == 0
        host = np.zeros(64, np.float32)
        run_with_a_callback(program, lambda _: acl.rt.memcpy(acl.util.numpy_to_ptr(host), 256, small, 256, D2H))
    finally:
        acl.rt.free(small)
        program.close()
    (finding,) = [finding for finding in emulator.reports() if finding.kind == "padding overrun"]
    assert finding.sites[0][0] == "host call aclrtMemcpy", finding.sites


@pytest.mark.parametrize("execution", ["async", "eager"])
def test_work_waiting_for_an_event_recorded_behind_a_blocking_callback_comes_after_what_it_reads(execution):
    """s2 waits for an event recorded on s1 behind the callback, then overwrites what the callback reads:
    on the card s2's kernel cannot start before the callback returns."""
    emulator.configure(execution=execution)
    program, seen = Program(), []

    def overwrite_after_the_callback(p: Program) -> None:
        event = p.event()
        assert acl.rt.record_event(event, p.s1) == 0 and acl.rt.stream_wait_event(p.s2, event) == 0
        p.log_sigmoid_backward(p.malloc(), p.malloc(), p.result, p.s2)
    try:
        run_with_a_callback(program, lambda _: seen.append(program.read(program.result)),
                            then=overwrite_after_the_callback)
        assert acl.rt.synchronize_stream(program.s2) == 0
    finally:
        program.close()
    assert seen == [0] and emulator.reports() == []


def copy_of(dst, src, width, height, dpitch, spitch):
    rows = lambda start, pitch: Span("", start, pitch * (height - 1) + width, True, False)
    return Copy(rows(dst, dpitch), rows(src, spitch), width, height, dpitch, spitch)


def test_a_copy_overlaps_its_source_exactly_where_a_listing_of_its_bytes_says():
    rng = random.Random(7)
    for _ in range(3000):
        width, height = rng.randint(1, 8), rng.randint(1, 4)
        dpitch, spitch = width + rng.randint(0, 6), width + rng.randint(0, 6)
        dst, src = rng.randint(0, 40), rng.randint(0, 40)
        copy = copy_of(dst, src, width, height, dpitch, spitch)
        written = {dst + row * dpitch + i: (row, i) for row in range(height) for i in range(width)}
        read = {src + row * spitch + i: (row, i) for row in range(height) for i in range(width)}
        moved = [byte for byte in written.keys() & read.keys() if written[byte] != read[byte]]  # not onto itself
        assert copy.overlap() == (min(moved) if moved else None), (dst, src, width, height, dpitch, spitch)


@pytest.mark.sanitizer_reports("overlapping output")
def test_an_overlapping_copy_names_the_call_its_site_and_the_allocation():
    program = Program()
    try:
        a = program.malloc()
        line = sys._getframe().f_lineno + 1
        assert acl.rt.memcpy(a + 64, N - 64, a, 128, D2D) == 0
    finally:
        program.close()
    (finding,) = emulator.reports()
    assert finding.tool == "memcheck" and finding.message.startswith(
        "aclrtMemcpy copies src [0x%x, 0x%x) onto dst [0x%x, 0x%x), which overlap (both hold the byte at 0x%x)"
        % (a, a + 128, a + 64, a + 192, a + 64)), finding.message
    ((role, site),) = finding.sites
    assert role == "host call aclrtMemcpy" and site.location == "%s:%d" % (__file__, line)
    assert len(finding.resources) == 1 and "allocation #" in finding.resources[0]


@pytest.mark.sanitizer_reports("race")
def test_a_race_repeated_each_step_with_many_pending_tasks_costs_one_comparison_not_a_search(monkeypatch):
    """s1 queues 2000 small memsets over one buffer and never synchronises; s2 then reads the whole buffer
    each step (a race, reported once and counted). The index visited every one of s1's ranges that met
    the read, each step: O(pending) (30000 pending: 6.4 ms a step, against 0.12 ms before the index). The
    oldest pending task, which it races with, is now looked at first."""
    from emulator import sanitizer
    program = Program()
    try:
        buffer, copy = program.malloc(8192), program.malloc(8192)
        for offset in range(0, 8000, 4):
            assert acl.rt.memset_async(buffer + offset, 4, 0, 4, program.s1) == 0
        visited = _counting(monkeypatch, sanitizer._Epochs, "first_after")
        for _ in range(10):
            assert acl.rt.memcpy_async(copy, 8192, buffer, 8192, D2D, program.s2) == 0
            assert acl.rt.synchronize_stream(program.s2) == 0
        assert visited[0] == 0
        (race,) = emulator.reports()
        assert race.kind == "race" and race.count == 10
    finally:
        program.close()
