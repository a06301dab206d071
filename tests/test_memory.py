"""Device and host memory (docs/runtime.md): aclrtMalloc padding and capacity, lazy
backing, aclrtGetMemInfo, copies of every kind with every rejection, memset, and the acl.util
pointer helpers (bytes_to_ptr written in place, as the pyACL samples do)."""
import ctypes
import os

import numpy as np
import pytest

import acl
import emulator
import emulator.leaks
from support import ALL_SOCS, assert_rejected, last_error

H2H, H2D, D2H, D2D, DEFAULT, H2BUF2D = range(6)
PAGE = os.sysconf("SC_PAGE_SIZE")


def padded(size):
    """aclrtMalloc reserves ALIGN_UP(size, 32) + 32 bytes."""
    return (size + 31) // 32 * 32 + 32


@pytest.fixture
def device():
    assert acl.rt.set_device(0) == 0
    made = []

    def malloc(size):
        address, ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        assert ret == 0, last_error()
        made.append(address)
        return address
    yield malloc
    for address in made:
        acl.rt.free(address)
    acl.rt.reset_device(0)


def upload(address, data: bytes):
    assert acl.rt.memcpy(address, len(data), acl.util.bytes_to_ptr(data), len(data), H2D) == 0, last_error()


def download(address, size) -> bytes:
    out = bytes(size)
    assert acl.rt.memcpy(acl.util.bytes_to_ptr(out), size, address, size, D2H) == 0, last_error()
    return out


# ---------------------------------------------------------------------------------------------
# aclrtMalloc: padding, capacity, lazy backing, bad sizes


@pytest.mark.sanitizer_reports("padding overrun")
@pytest.mark.parametrize("size", [1, 31, 32, 33, 100, 4096, 5000])
def test_padding_is_usable_and_one_byte_beyond_is_an_overrun(device, size):
    free_before = acl.rt.get_mem_info(acl.ACL_HBM_MEM)[0]
    address = device(size)
    assert free_before - acl.rt.get_mem_info(acl.ACL_HBM_MEM)[0] == padded(size)
    data = bytes(np.random.default_rng(size).integers(0, 256, padded(size), dtype=np.uint8))
    upload(address, data)                                        # the whole padded range is legal
    assert download(address, padded(size)) == data
    assert acl.rt.memcpy(address + padded(size) - 1, 1, acl.util.bytes_to_ptr(b"x"), 1, H2D) == 0
    too_long = bytes(padded(size) + 1)
    ret = acl.rt.memcpy(address, len(too_long), acl.util.bytes_to_ptr(too_long), len(too_long), H2D)
    assert_rejected(ret, acl.ACL_ERROR_RT_PARAM_INVALID, "dst", "overruns", "allocation", "by 1 bytes")
    out = bytes(1)
    ret = acl.rt.memcpy(acl.util.bytes_to_ptr(out), 1, address + padded(size), 1, D2H)
    assert_rejected(ret, acl.ACL_ERROR_RT_PARAM_INVALID, "src", hex(address + padded(size)))


def test_start_addresses_are_64_byte_aligned(device):
    for size in (1, 7, 100, 1000, 33):
        assert device(size) % 64 == 0


def resident_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * PAGE


def test_device_memory_is_backed_lazily(device):
    before = resident_bytes()
    address = device(4 << 30)
    assert acl.rt.memset(address + (4 << 30) - 1, 1, 0x5A, 1) == 0      # touch the last byte
    assert download(address + (4 << 30) - 1, 1) == b"\x5a"
    assert resident_bytes() - before < 64 << 20, "a 4 GiB allocation was backed eagerly"


def test_capacity_limit_is_207001_and_freeing_makes_room():
    emulator.configure(device_memory="64M")
    assert acl.rt.set_device(0) == 0
    assert acl.rt.get_mem_info(acl.ACL_HBM_MEM) == (64 << 20, 64 << 20, 0)
    first, ret = acl.rt.malloc(40 << 20, 0)
    assert ret == 0
    assert acl.rt.get_mem_info(acl.ACL_HBM_MEM)[0] == (64 << 20) - padded(40 << 20)
    address, ret = acl.rt.malloc(30 << 20, 0)
    assert address == 0
    assert_rejected(ret, acl.ACL_ERROR_RT_MEMORY_ALLOCATION, "size", str(30 << 20), "device 0")
    assert acl.rt.free(first) == 0
    assert acl.rt.get_mem_info(acl.ACL_HBM_MEM)[0] == 64 << 20
    second, ret = acl.rt.malloc(30 << 20, 0)
    assert ret == 0
    assert acl.rt.free(second) == 0


@pytest.mark.parametrize("size,word", [(0, "positive"), (-5, "positive"), (1 << 70, "overflow")])
def test_bad_malloc_sizes_are_100000(device, size, word):
    address, ret = acl.rt.malloc(size, 0)
    assert address == 0
    assert_rejected(ret, acl.ACL_ERROR_INVALID_PARAM, "size", word)
    assert_rejected(acl.rt.malloc_host(size)[1], acl.ACL_ERROR_INVALID_PARAM, "size")


def test_any_policy_is_accepted_as_the_runtime_falls_back(device):
    for policy in (acl.ACL_MEM_MALLOC_HUGE_ONLY, acl.ACL_MEM_MALLOC_NORMAL_ONLY, 99,
                   acl.ACL_MEM_MALLOC_HUGE_FIRST | acl.ACL_MEM_TYPE_HIGH_BAND_WIDTH):
        address, ret = acl.rt.malloc(64, policy)
        assert ret == 0
        assert acl.rt.free(address) == 0


def test_free_rejections_name_the_allocation(device):
    address = device(64)
    assert_rejected(acl.rt.free(None), acl.ACL_ERROR_INVALID_PARAM, "devPtr", "null")
    assert_rejected(acl.rt.free(address + 32), acl.ACL_ERROR_RT_PARAM_INVALID, "devPtr", "inside", "allocation #")
    assert_rejected(acl.rt.free(np.zeros(4).ctypes.data), acl.ACL_ERROR_RT_PARAM_INVALID, "devPtr", "host address")
    other, _ = acl.rt.malloc(64, 0)
    assert acl.rt.free(other) == 0
    message = assert_rejected(acl.rt.free(other), acl.ACL_ERROR_RT_PARAM_INVALID, "devPtr", "freed at")
    assert os.path.basename(__file__) in message, "the message should name the line that freed it"


def test_a_host_range_that_runs_into_an_aclrtmallochost_allocation_is_refused(device):
    """From below: only a range that started inside an allocation was bounded, so one starting 16 bytes
    before it ran through it and past its end unchecked when the pages around were mapped."""
    host, ret = acl.rt.malloc_host(4096)
    assert ret == 0
    address = device(8192)
    try:
        for name, call in (("devPtr", lambda: acl.rt.memset(host - 16, 8192, 0xAB, 8192)),
                           ("dst", lambda: acl.rt.memcpy(host - 16, 8192, address, 8192, D2H))):
            message = assert_rejected(call(), acl.ACL_ERROR_RT_PARAM_INVALID, name, "aclrtMallocHost allocation")
            assert "past its end" in message or "run into it" in message, message
        assert acl.util.ptr_to_bytes(host - 16, 64) is None
    finally:
        acl.rt.free_host(host)


def test_host_memory_views_stay_within_their_aclrtmallochost_allocation():
    """ptr_to_bytes/ptr_to_numpy past the end of an aclrtMallocHost allocation read (or, through the
    view, overwrite) whatever the process keeps after it: refused as a copy there is."""
    host, ret = acl.rt.malloc_host(164)
    assert ret == 0
    try:
        assert acl.util.ptr_to_bytes(host, 164) is not None
        assert acl.util.ptr_to_bytes(host + 100, 200) is None
        message = last_error()
        assert "ptr: expected at most 64 bytes" in message and "allocation" in message and "164 bytes" in message
        assert acl.util.ptr_to_numpy(host, (41,), 11) is not None
        assert acl.util.ptr_to_numpy(host, (42,), 11) is None
        assert "run 4 bytes past its end" in last_error()
    finally:
        acl.rt.free_host(host)


def test_host_memory_is_real_and_free_host_checks_its_pointer():
    host, ret = acl.rt.malloc_host(100)
    assert ret == 0
    ctypes.memset(host, 0x33, 100)                               # plain host memory
    assert acl.util.ptr_to_bytes(host, 100) == b"\x33" * 100
    assert_rejected(acl.rt.free_host(host + 8), acl.ACL_ERROR_RT_PARAM_INVALID, "hostPtr")
    assert_rejected(acl.rt.free_host(None), acl.ACL_ERROR_INVALID_PARAM, "hostPtr", "null")
    assert acl.rt.free_host(host) == 0
    assert_rejected(acl.rt.free_host(host), acl.ACL_ERROR_RT_PARAM_INVALID, "hostPtr")


def test_host_memory_beyond_what_the_host_can_pin_is_207001_naming_the_sizes():
    """The card's driver pins aclrtMallocHost memory: a request beyond the memory the process may have (the
    host's physical memory, or its cgroup's limit if lower) less what npuemu's host allocations pin already
    fails at once, rather than later when the program fills it. (The pages of a granted allocation are
    committed only when touched: this test uses no memory.)"""
    physical = emulator.memory._memory_the_process_may_have()
    message = assert_rejected(acl.rt.malloc_host(1 << 45)[1], acl.ACL_ERROR_RT_MEMORY_ALLOCATION, "size")
    assert message.endswith("size: expected at most %d bytes, what the host can pin (its %d bytes of memory "
                            "less 0 bytes aclrtMallocHost allocations pin already), found %d bytes"
                            % (physical, physical, 1 << 45)), message
    half = physical // 2 // PAGE * PAGE + PAGE
    first, ret = acl.rt.malloc_host(half)
    assert ret == 0, last_error()
    try:
        address, ret = acl.rt.malloc_host(half)
        assert address == 0
        message = assert_rejected(ret, acl.ACL_ERROR_RT_MEMORY_ALLOCATION, "size")
        assert "expected at most %d bytes" % (physical - half) in message, message
        assert "less %d bytes aclrtMallocHost allocations pin already), found %d bytes" % (half, half) in message
        small, ret = acl.rt.malloc_host(100)  # the running total counts whole pages, and what is freed
        assert ret == 0, last_error()
        message = assert_rejected(acl.rt.malloc_host(half)[1], acl.ACL_ERROR_RT_MEMORY_ALLOCATION, "size")
        assert "less %d bytes aclrtMallocHost allocations pin already" % (half + PAGE) in message, message
        assert acl.rt.free_host(small) == 0
    finally:
        assert acl.rt.free_host(first) == 0
    second, ret = acl.rt.malloc_host(half)  # freed memory is pinnable again
    assert ret == 0, last_error()
    assert acl.rt.free_host(second) == 0


@pytest.mark.parametrize("limit,bound", [("max\n", "physical"), ("1073741824\n", 1 << 30), ("garbage", "physical")])
def test_a_cgroup_limit_below_physical_memory_bounds_what_the_host_can_pin(tmp_path, monkeypatch, limit, bound):
    """In a container the group's memory.max, not the machine's memory, is what the process may have."""
    path = tmp_path / "memory.max"
    path.write_text(limit)
    monkeypatch.setattr(emulator.memory, "CGROUP_LIMITS", (str(path),))
    physical = os.sysconf("SC_PHYS_PAGES") * PAGE
    emulator.memory._memory_the_process_may_have.cache_clear()  # read once a process: read these files
    try:
        assert emulator.memory._memory_the_process_may_have() == (physical if bound == "physical" else min(bound, physical))
    finally:
        emulator.memory._memory_the_process_may_have.cache_clear()


# ---------------------------------------------------------------------------------------------
# aclrtGetMemInfo


HBM_ATTRS = {acl.ACL_HBM_MEM, acl.ACL_HBM_MEM_HUGE, acl.ACL_HBM_MEM_NORMAL, acl.ACL_HBM_MEM_P2P_HUGE,
             acl.ACL_HBM_MEM_P2P_NORMAL, acl.ACL_HBM_MEM_HUGE1G, acl.ACL_HBM_MEM_P2P_HUGE1G}
DDR_ATTRS = {acl.ACL_DDR_MEM, acl.ACL_DDR_MEM_HUGE, acl.ACL_DDR_MEM_NORMAL, acl.ACL_DDR_MEM_P2P_HUGE,
             acl.ACL_DDR_MEM_P2P_NORMAL}


@pytest.mark.parametrize("soc", ALL_SOCS)
def test_mem_info_reports_the_chips_memory_kind_for_every_attr(soc):
    """HBM on the training/A2/A3/950 chips, DDR on the inference series; the other kind is (0, 0);
    the kind-neutral attrs 12..17 always report the device memory."""
    emulator.configure(soc=soc)
    assert acl.rt.set_device(0) == 0
    total = emulator.settings().device_memory
    address, _ = acl.rt.malloc(1000, 0)
    own = DDR_ATTRS if soc == "Ascend310P" else HBM_ATTRS
    for attr in range(18):
        free, size, ret = acl.rt.get_mem_info(attr)
        assert ret == 0
        if attr in own or attr >= 12:
            assert (free, size) == (total - padded(1000), total), attr
        else:
            assert (free, size) == (0, 0), attr
    for attr in (18, -1, 2**31 - 1):  # passed to the driver, whose "invalid value" the runtime maps to 107000
        free, size, ret = acl.rt.get_mem_info(attr)
        assert (free, size) == (0, 0)
        assert_rejected(ret, acl.ACL_ERROR_RT_PARAM_INVALID, "attr", "aclrtMemAttr", "0 (ACL_DDR_MEM)",
                        "17 (ACL_MEM_P2P_HUGE1G)", "found %d" % attr)
    assert acl.rt.free(address) == 0


def test_mem_info_with_an_unknown_attr_and_no_context_is_the_context_error():
    """The attr reaches the driver only through a context: without one, 107002 comes first. An attr
    beyond int32_t is refused before, as every C argument outside its type (100000)."""
    free, size, ret = acl.rt.get_mem_info(18)
    assert (free, size) == (0, 0)
    assert_rejected(ret, acl.ACL_ERROR_RT_CONTEXT_NULL)
    assert_rejected(acl.rt.get_mem_info(2**31)[2], acl.ACL_ERROR_INVALID_PARAM, "attr")


# ---------------------------------------------------------------------------------------------
# aclrtMemcpy: every kind, every rejection


def random_bytes(n, seed=0) -> bytes:
    return bytes(np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8))


@pytest.mark.parametrize("kind", [H2D, DEFAULT, H2BUF2D])
def test_host_to_device_kinds(device, kind):
    data = random_bytes(200, kind)
    address = device(200)
    assert acl.rt.memcpy(address, 200, acl.util.bytes_to_ptr(data), 200, kind) == 0, last_error()
    assert download(address, 200) == data


@pytest.mark.parametrize("kind", [D2H, DEFAULT])
def test_device_to_host_kinds(device, kind):
    data = random_bytes(300, kind)
    address = device(300)
    upload(address, data)
    out = np.zeros(300, np.uint8)
    assert acl.rt.memcpy(out.ctypes.data, 300, address, 300, kind) == 0
    assert out.tobytes() == data


@pytest.mark.parametrize("kind", [D2D, DEFAULT])
def test_device_to_device_kinds(device, kind):
    data = random_bytes(256, kind)
    source, target = device(256), device(256)
    upload(source, data)
    assert acl.rt.memcpy(target + 16, 240, source, 240, kind) == 0
    assert download(target + 16, 240) == data[:240]


@pytest.mark.parametrize("kind", [H2H, DEFAULT])
def test_host_to_host_kinds(device, kind):
    source = np.arange(64, dtype=np.uint8)
    target = np.zeros(64, np.uint8)
    assert acl.rt.memcpy(target.ctypes.data, 64, source.ctypes.data, 64, kind) == 0
    np.testing.assert_array_equal(target, source)


# (kind, dst is device, src is device) that do not match
MISMATCHED = [(H2D, False, False), (H2D, True, True), (H2D, False, True), (D2H, True, False), (D2H, False, False),
              (D2D, True, False), (D2D, False, True), (H2H, True, False), (H2H, False, True), (H2BUF2D, False, True)]
KIND_NAMES = {H2H: "HOST_TO_HOST", H2D: "HOST_TO_DEVICE", D2H: "DEVICE_TO_HOST", D2D: "DEVICE_TO_DEVICE",
              H2BUF2D: "HOST_TO_BUF_TO_DEVICE"}


@pytest.mark.parametrize("kind,dst_device,src_device", MISMATCHED)
def test_kind_that_does_not_match_the_addresses_is_107000(device, kind, dst_device, src_device):
    host_a, host_b = np.zeros(64, np.uint8), np.zeros(64, np.uint8)
    dst = device(64) if dst_device else host_a.ctypes.data
    src = device(64) if src_device else host_b.ctypes.data
    ret = acl.rt.memcpy(dst, 64, src, 64, kind)
    assert_rejected(ret, acl.ACL_ERROR_RT_PARAM_INVALID, "kind", KIND_NAMES[kind], hex(dst), hex(src))


@pytest.mark.parametrize("kind", [6, 7, -1, 100])
def test_kind_outside_0_to_5_is_100000(device, kind):
    address = device(64)
    assert_rejected(acl.rt.memcpy(address, 64, address + 32, 16, kind), acl.ACL_ERROR_INVALID_PARAM, "kind", str(kind))


def test_count_and_dest_max(device):
    address = device(64)
    host = np.zeros(64, np.uint8)
    ret = acl.rt.memcpy(address, 32, host.ctypes.data, 33, H2D)
    assert_rejected(ret, acl.ACL_ERROR_RT_PARAM_INVALID, "count", "destMax", "32", "33")
    assert_rejected(acl.rt.memcpy(address, 0, host.ctypes.data, 8, H2D), acl.ACL_ERROR_RT_PARAM_INVALID, "destMax")
    for null in (None, 0):
        assert acl.rt.memcpy(null, 0, null, 0, H2D) == 0, "count 0 succeeds even with null pointers"
        assert acl.rt.memcpy_async(null, 0, null, 0, H2D, None) == 0
    assert_rejected(acl.rt.memcpy(None, 64, host.ctypes.data, 8, H2D), acl.ACL_ERROR_INVALID_PARAM, "dst", "null")
    assert_rejected(acl.rt.memcpy(address, 64, 0, 8, H2D), acl.ACL_ERROR_INVALID_PARAM, "src", "null")
    assert acl.rt.memcpy(address, 64, address, 64, D2D) == 0, "dst == src is a successful no-op"


def test_freed_foreign_and_unmapped_pointers_are_107000(device):
    address = device(64)
    freed, _ = acl.rt.malloc(64, 0)
    assert acl.rt.free(freed) == 0
    host = np.zeros(64, np.uint8)
    ret = acl.rt.memcpy(host.ctypes.data, 64, freed, 64, D2H)
    assert_rejected(ret, acl.ACL_ERROR_RT_PARAM_INVALID, "src", "freed at", os.path.basename(__file__))
    foreign = address + (1 << 24)                                   # in the device range, never allocated
    ret = acl.rt.memcpy(foreign, 64, host.ctypes.data, 64, DEFAULT)
    assert_rejected(ret, acl.ACL_ERROR_RT_PARAM_INVALID, "dst", hex(foreign), "no allocation")
    ret = acl.rt.memcpy(address, 64, 0x10, 64, H2D)
    assert_rejected(ret, acl.ACL_ERROR_RT_PARAM_INVALID, "src", "unmapped")


@pytest.mark.sanitizer_reports("uninitialised read")
def test_pointer_of_another_device_is_107000(device):
    assert acl.rt.set_device(1) == 0
    other, _ = acl.rt.malloc(64, 0)
    assert acl.rt.set_device(0) == 0
    host = np.zeros(64, np.uint8)
    ret = acl.rt.memcpy(host.ctypes.data, 64, other, 64, D2H)
    assert_rejected(ret, acl.ACL_ERROR_RT_PARAM_INVALID, "src", "device 1", "device 0")
    ret = acl.rt.memcpy(device(64), 64, other, 64, D2D)
    assert_rejected(ret, acl.ACL_ERROR_RT_PARAM_INVALID, "src", "device 1")
    assert acl.rt.free(other) == 0
    acl.rt.reset_device(1)


@pytest.mark.sanitizer_reports("missing synchronisation")
def test_async_copy_runs_at_the_sync_and_checks_its_stream(device):
    context, _ = acl.rt.get_context()
    stream, _ = acl.rt.create_stream()
    address = device(128)
    data = random_bytes(128, 7)
    assert acl.rt.memset(address, 128, 0, 128) == 0
    assert acl.rt.memcpy_async(address, 128, acl.util.bytes_to_ptr(data), 128, H2D, stream) == 0
    assert download(address, 128) == bytes(128), "an async copy ran before any sync point"
    assert acl.rt.synchronize_stream(stream) == 0
    assert download(address, 128) == data
    ret = acl.rt.memcpy_async(address, 64, acl.util.bytes_to_ptr(data), 128, H2D, stream)
    assert_rejected(ret, acl.ACL_ERROR_RT_PARAM_INVALID, "count", "destMax")
    ret = acl.rt.memcpy_async(address, 128, acl.util.bytes_to_ptr(data), 128, D2H, stream)
    assert_rejected(ret, acl.ACL_ERROR_RT_PARAM_INVALID, "kind", "DEVICE_TO_HOST")
    assert acl.rt.set_device(1) == 0
    ret = acl.rt.memcpy_async(address, 128, acl.util.bytes_to_ptr(data), 128, H2D, stream)
    assert_rejected(ret, acl.ACL_ERROR_RT_STREAM_CONTEXT, "stream", "device 0")
    assert acl.rt.reset_device(1) == 0
    assert acl.rt.set_context(context) == 0  # destroying a stream needs its device's context too
    assert acl.rt.destroy_stream(stream) == 0


class ProtectedPages:
    """Host pages of the test's own, each with the protection it is given (mmap's PROT_* bits)."""

    def __init__(self, *protections: int):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                                                  ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self.libc, self.size = libc, PAGE * len(protections)
        self.address = libc.mmap(None, self.size, 3, 0x22, -1, 0)  # read-write, private, anonymous
        ctypes.memset(self.address, 0x5A, self.size)
        for page, protection in enumerate(protections):
            self.protect(page, protection)

    def protect(self, page: int, protection: int) -> None:
        assert self.libc.mprotect(self.address + page * PAGE, PAGE, protection) == 0

    def close(self) -> None:
        self.libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.libc.munmap(self.address, self.size)


READ, READ_WRITE, NONE = 1, 3, 0


@pytest.mark.parametrize("protections,start,problem", [
    ((READ,), 0, "read-only memory"),
    ((NONE,), 0, "memory the process cannot read"),
    ((READ_WRITE, READ), PAGE - 64, "read-only memory"),        # writable where it starts, not where it ends
])
def test_copies_into_protected_host_pages_are_107000_not_a_segfault(device, protections, start, problem):
    pages, address = ProtectedPages(*protections), device(256)
    target = pages.address + start
    try:
        source = bytes(128)
        for name, call in [("aclrtMemcpy", lambda: acl.rt.memcpy(target, 128, address, 128, D2H)),
                           ("aclrtMemcpyAsync", lambda: acl.rt.memcpy_async(target, 128, address, 128, D2H, None)),
                           ("aclrtMemcpy2d", lambda: acl.rt.memcpy_2d(target, 64, address, 64, 32, 2, D2H)),
                           ("aclrtMemcpy", lambda: acl.rt.memcpy(target, 128, acl.util.bytes_to_ptr(source), 128, H2H))]:
            assert_rejected(call(), acl.ACL_ERROR_RT_PARAM_INVALID, name, "dst", "writable host memory", problem)
    finally:
        pages.close()


def test_copies_from_unreadable_host_pages_are_107000_and_read_only_ones_are_fine(device):
    pages, address = ProtectedPages(READ, NONE), device(256)
    try:
        assert acl.rt.memcpy(address, 128, pages.address, 128, H2D) == 0, "a read-only source is fine"
        assert download(address, 128) == b"\x5a" * 128
        unreadable = pages.address + PAGE
        for name, call in [("aclrtMemcpy", lambda: acl.rt.memcpy(address, 128, unreadable, 128, H2D)),
                           ("aclrtMemcpyAsync", lambda: acl.rt.memcpy_async(address, 128, unreadable - 64, 128, H2D, None)),
                           ("aclrtMemcpy2d", lambda: acl.rt.memcpy_2d(address, 64, unreadable, 64, 32, 2, H2D))]:
            assert_rejected(call(), acl.ACL_ERROR_RT_PARAM_INVALID, name, "src", "readable host memory",
                            "memory the process cannot read")
        assert acl.util.ptr_to_bytes(unreadable, 8) is None
        assert "cannot read" in last_error()
    finally:
        pages.close()


def test_the_native_check_of_host_ranges_and_its_ctypes_twin_agree():
    """A tree without its native parts built checks host ranges through ctypes: the same answers."""
    from emulator import _host_memory, memory
    assert (_host_memory.USABLE, _host_memory.UNMAPPED, _host_memory.UNREADABLE, _host_memory.READ_ONLY) == \
        (memory.USABLE, memory.UNMAPPED, memory.UNREADABLE, memory.READ_ONLY)
    pages = ProtectedPages(READ_WRITE, READ, NONE, READ_WRITE)
    pages.libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    pages.libc.munmap(pages.address + 3 * PAGE, PAGE)                     # a hole after the unreadable page
    try:
        seen = set()
        for start in (0, PAGE - 8, PAGE, 2 * PAGE - 8, 2 * PAGE, 3 * PAGE - 8):
            for size in (0, 8, 16, PAGE):
                for write in (False, True):
                    native = _host_memory.check(pages.address + start, size, write)
                    assert native == memory._check_by_ctypes(pages.address + start, size, write), (start, size, write)
                    seen.add(native)
        assert seen == {memory.USABLE, memory.UNMAPPED, memory.UNREADABLE, memory.READ_ONLY}
    finally:
        pages.libc.munmap(pages.address, 3 * PAGE)


@pytest.mark.sanitizer_reports("missing synchronisation")
def test_a_download_whose_host_pages_turn_read_only_before_it_runs_faults_at_the_sync(device):
    pages, address = ProtectedPages(READ_WRITE), device(128)
    try:
        upload(address, bytes(range(128)))
        assert acl.rt.memcpy_async(pages.address, 128, address, 128, D2H, None) == 0
        pages.protect(0, READ)
        assert_rejected(acl.rt.synchronize_stream(None), acl.ACL_ERROR_RT_AICORE_EXCEPTION, "aclrtMemcpyAsync",
                        "dst", "read-only memory")
        assert ctypes.string_at(pages.address, 128) == b"\x5a" * 128, "nothing written"
    finally:
        pages.close()


@pytest.mark.sanitizer_reports("host memory in flight", "memory freed while in use")
def test_async_copy_rejects_unusable_memory_now_and_faults_on_memory_freed_before_it_runs(device):
    address, freed = device(64), device(64)
    host = np.zeros(64, np.uint8)
    assert acl.rt.free(freed) == 0
    ret = acl.rt.memcpy_async(host.ctypes.data, 64, freed, 64, D2H, None)
    assert_rejected(ret, acl.ACL_ERROR_RT_PARAM_INVALID, "src", "freed at")
    ret = acl.rt.memcpy_async(address, 64, 0x10, 64, H2D, None)
    assert_rejected(ret, acl.ACL_ERROR_RT_PARAM_INVALID, "src", "unmapped")
    doomed, _ = acl.rt.malloc(64, 0)
    assert acl.rt.memcpy_async(host.ctypes.data, 64, doomed, 64, D2H, None) == 0
    assert acl.rt.free(doomed) == 0
    host[:] = 0x5A
    assert_rejected(acl.rt.synchronize_stream(None), acl.ACL_ERROR_RT_AICORE_EXCEPTION, "aclrtMemcpyAsync", "src",
                    "freed at")
    assert (host == 0x5A).all(), "a copy from freed memory must not write anything"


# ---------------------------------------------------------------------------------------------
# aclrtMemset / aclrtMemsetAsync


@pytest.mark.parametrize("value,byte", [(0x41, 0x41), (0x1FF, 0xFF), (-1, 0xFF), (256, 0), (-255, 1)])
def test_memset_uses_the_value_as_a_byte_on_device_and_host_memory(device, value, byte):
    address = device(100)
    assert acl.rt.memset(address, 100, value, 60) == 0
    assert download(address, 60) == bytes([byte]) * 60
    host, _ = acl.rt.malloc_host(100)
    assert acl.rt.memset(host, 100, value, 100) == 0
    assert acl.util.ptr_to_bytes(host, 100) == bytes([byte]) * 100
    assert acl.rt.free_host(host) == 0


@pytest.mark.sanitizer_reports("missing synchronisation")
def test_memset_async_on_device_and_pinned_host_memory_runs_at_the_sync(device):
    stream, _ = acl.rt.create_stream()
    address = device(64)
    host, _ = acl.rt.malloc_host(64)
    ctypes.memset(host, 0, 64)
    assert acl.rt.memset(address, 64, 0, 64) == 0
    assert acl.rt.memset_async(address, 64, 0x17, 64, stream) == 0
    assert acl.rt.memset_async(host, 64, 0x29, 32, stream) == 0
    assert download(address, 64) == bytes(64) and acl.util.ptr_to_bytes(host, 64) == bytes(64)
    assert acl.rt.synchronize_stream(stream) == 0
    assert download(address, 64) == b"\x17" * 64
    assert acl.util.ptr_to_bytes(host, 64) == b"\x29" * 32 + bytes(32)
    assert acl.rt.free_host(host) == 0
    assert acl.rt.destroy_stream(stream) == 0


def test_memset_rejections(device):
    address = device(64)
    assert_rejected(acl.rt.memset(address, 16, 0, 17), acl.ACL_ERROR_RT_PARAM_INVALID, "count", "maxCount")
    assert_rejected(acl.rt.memset_async(address, 16, 0, 17, None), acl.ACL_ERROR_RT_PARAM_INVALID, "maxCount")
    assert_rejected(acl.rt.memset(None, 16, 0, 8), acl.ACL_ERROR_INVALID_PARAM, "devPtr", "null")
    assert acl.rt.memset(None, 0, 0, 0) == 0 and acl.rt.memset_async(None, 0, 0, 0, None) == 0
    pageable = np.zeros(64, np.uint8)
    ret = acl.rt.memset_async(pageable.ctypes.data, 64, 1, 64, None)
    assert_rejected(ret, acl.ACL_ERROR_RT_PARAM_INVALID, "devPtr", "aclrtMallocHost")
    assert_rejected(acl.rt.memset(address, 200, 0, 200), acl.ACL_ERROR_RT_PARAM_INVALID, "devPtr", "overruns")


# ---------------------------------------------------------------------------------------------
# aclrtMallocHost bounds: a copy or memset starting in one may not run past its end


def past_the_end_calls(host: int, size: int, device_ptr: int, stream: int) -> list:
    """(call, parameter, name) of every copy and memset whose host range starts at `host`, the start of an
    aclrtMallocHost allocation of `size` bytes, and runs `size` bytes past its end."""
    n = 2 * size
    return [
        (lambda: acl.rt.memcpy(host, n, device_ptr, n, D2H), "dst", "aclrtMemcpy"),
        (lambda: acl.rt.memcpy(device_ptr, n, host, n, H2D), "src", "aclrtMemcpy"),
        (lambda: acl.rt.memcpy(host, n, host + size, n, H2H), "dst", "aclrtMemcpy"),
        (lambda: acl.rt.memcpy_async(host, n, device_ptr, n, D2H, stream), "dst", "aclrtMemcpyAsync"),
        (lambda: acl.rt.memcpy_async(device_ptr, n, host, n, H2D, stream), "src", "aclrtMemcpyAsync"),
        (lambda: acl.rt.memcpy_2d(host, size, device_ptr, size, size, 2, D2H), "dst", "aclrtMemcpy2d"),
        (lambda: acl.rt.memcpy_2d(device_ptr, size, host, size, size, 2, H2D), "src", "aclrtMemcpy2d"),
        (lambda: acl.rt.memcpy_2d_async(host, size, device_ptr, size, size, 2, D2H, stream), "dst",
         "aclrtMemcpy2dAsync"),
        (lambda: acl.rt.memset(host, n, 0xAB, n), "devPtr", "aclrtMemset"),
        (lambda: acl.rt.memset_async(host, n, 0xAB, n, stream), "devPtr", "aclrtMemsetAsync"),
    ]


@pytest.mark.parametrize("size", [PAGE, 164, 1 << 20])
def test_a_copy_or_memset_running_past_an_aclrtmallochost_allocation_is_107000(device, size):
    """Only the mapping and the host range's first and last pages used to be checked: with the mapping after
    the allocation writable (the program's other data), aclrtMemset and a D2H aclrtMemcpy of twice the
    allocation's size returned 0 and overwrote it. Every copy and memset now refuses the range, naming the
    parameter, the allocation's size and where it was made, and touches nothing."""
    device_ptr = device(2 * size)
    assert acl.rt.memset(device_ptr, 2 * size, 0x11, 2 * size) == 0
    stream, _ = acl.rt.create_stream()
    host, ret = acl.rt.malloc_host(size)
    assert ret == 0
    ctypes.memset(host, 0x5A, size)
    try:
        for call, parameter, name in past_the_end_calls(host, size, device_ptr, stream):
            assert_rejected(call(), acl.ACL_ERROR_RT_PARAM_INVALID, name, parameter + ": expected at most",
                            "aclrtMallocHost allocation", "of %d bytes" % size, "made at",
                            os.path.basename(__file__), "run %d bytes past its end" % size)
        assert acl.rt.synchronize_stream(stream) == 0, "nothing was queued"
        assert ctypes.string_at(host, size) == b"\x5a" * size, "nothing written"
        # the allocation itself, to its last byte, is fine; one byte more is not
        assert acl.rt.memcpy(host, size, device_ptr, size, D2H) == 0
        assert acl.rt.memset(host + size - 1, 1, 0x22, 1) == 0
        assert_rejected(acl.rt.memset(host + size - 1, 2, 0x22, 2), acl.ACL_ERROR_RT_PARAM_INVALID, "devPtr",
                        "expected at most 1 bytes", "run 1 bytes past its end")
    finally:
        assert acl.rt.free_host(host) == 0
        assert acl.rt.destroy_stream(stream) == 0


def test_a_range_starting_in_the_slack_of_an_aclrtmallochost_page_is_past_its_end(device):
    """The bytes between an allocation's end and its last page's end are mapped but not the program's."""
    host, _ = acl.rt.malloc_host(100)
    try:
        assert_rejected(acl.rt.memset(host + 200, 8, 0, 8), acl.ACL_ERROR_RT_PARAM_INVALID, "devPtr",
                        "expected at most 0 bytes", "of 100 bytes")
    finally:
        assert acl.rt.free_host(host) == 0


def test_the_fuzzers_memset_of_1_5_gb_into_164_bytes_is_107000_not_a_segfault(device):
    """aclrtMemset(<aclrtMallocHost(164)>, 2**63, v, 1577543168) returned 0 and the process died with SIGSEGV."""
    host, _ = acl.rt.malloc_host(164)
    try:
        assert_rejected(acl.rt.memset(host, 2**63, 7, 1577543168), acl.ACL_ERROR_RT_PARAM_INVALID, "devPtr",
                        "of 164 bytes", "found 1577543168 bytes")
    finally:
        assert acl.rt.free_host(host) == 0


def test_sizes_no_address_space_holds_are_refused_before_any_probe(device, monkeypatch):
    """A count of 2**63 (or one whose end passes 2**63) is refused by arithmetic alone: the kernel is not
    asked about the range."""
    from emulator import memory

    def probed(*args):
        raise AssertionError("the host range was probed: %r" % (args,))
    monkeypatch.setattr(memory, "_check_host", probed)
    host, _ = acl.rt.malloc_host(64)
    data = np.zeros(64, np.uint8)
    address = device(64)
    try:
        for target in (host, data.ctypes.data):
            for count in (2**63, 2**64 - 1, 2**63 - target):
                assert_rejected(acl.rt.memset(target, 2**64 - 1, 0, count), acl.ACL_ERROR_RT_PARAM_INVALID,
                                "devPtr", "found %d bytes at %s" % (count, hex(target)), "end past 2**63")
                assert_rejected(acl.rt.memcpy(target, 2**64 - 1, address, count, D2H), acl.ACL_ERROR_RT_PARAM_INVALID,
                                "dst", "end past 2**63")
    finally:
        assert acl.rt.free_host(host) == 0


# ---------------------------------------------------------------------------------------------
# acl.util


def test_bytes_to_ptr_lets_a_device_to_host_copy_write_into_bytes(device):
    """The pyACL sample idiom: memcpy into bytes_to_ptr(b), then np.frombuffer(b)."""
    values = np.linspace(-1, 1, 25, dtype=np.float32)
    address = device(values.nbytes)
    assert acl.rt.memcpy(address, values.nbytes, acl.util.numpy_to_ptr(values), values.nbytes, H2D) == 0
    buffer = bytes(values.nbytes)
    assert acl.rt.memcpy(acl.util.bytes_to_ptr(buffer), len(buffer), address, values.nbytes, D2H) == 0
    np.testing.assert_array_equal(np.frombuffer(buffer, dtype=np.float32), values)
    mutable = bytearray(values.nbytes)
    assert acl.rt.memcpy(acl.util.bytes_to_ptr(mutable), len(mutable), address, values.nbytes, D2H) == 0
    assert bytes(mutable) == buffer


def test_device_pointers_are_refused_by_the_host_helpers(device):
    address = device(64)
    assert acl.util.ptr_to_bytes(address, 16) is None
    message = last_error()
    assert "device address" in message and hex(address) in message
    assert acl.util.ptr_to_numpy(address, (4,), 11) is None
    assert "device address" in last_error()


NPY = {0: np.bool_, 1: np.int8, 2: np.uint8, 3: np.int16, 4: np.uint16, 5: np.int32, 6: np.uint32,
       7: np.int64, 8: np.uint64, 11: np.float32, 12: np.float64, 23: np.float16}


@pytest.mark.parametrize("code", NPY)
def test_ptr_to_numpy_views_host_memory_with_the_numpy_type_code(code):
    source = np.arange(12).astype(NPY[code])
    view = acl.util.ptr_to_numpy(acl.util.numpy_to_ptr(source), (3, 4), code)
    assert view.dtype == NPY[code] and view.shape == (3, 4)
    np.testing.assert_array_equal(view, source.reshape(3, 4))
    source[0] = source[5]
    assert view[0, 0] == source[5], "ptr_to_numpy must view the memory, not copy it"


def test_ptr_to_bytes_copies_and_numpy_helpers(capfd):
    source = np.arange(16, dtype=np.uint8)
    copy = acl.util.ptr_to_bytes(acl.util.numpy_to_ptr(source), 16)
    source[:] = 0
    assert copy == bytes(range(16))
    assert acl.util.ptr_to_bytes(acl.util.numpy_to_ptr(source), 0) == b""
    strided = np.arange(20, dtype=np.float32)[::2]
    assert acl.util.numpy_to_ptr(strided) == strided.ctypes.data
    assert "numpy_contiguous_to_ptr" in capfd.readouterr().err
    pointer, contiguous = acl.util.numpy_contiguous_to_ptr(strided)
    assert contiguous.flags.c_contiguous and pointer == contiguous.ctypes.data
    np.testing.assert_array_equal(acl.util.ptr_to_numpy(pointer, (10,), 11), strided)
    assert "bytes_to_ptr" in dir(acl.util)                       # samples probe for it


def test_util_rejections_leave_messages():
    assert acl.util.ptr_to_numpy(np.zeros(4).ctypes.data, (4,), 99) is None
    assert "np_type" in last_error()
    assert acl.util.ptr_to_numpy(np.zeros(4).ctypes.data, (-1, 2), 11) is None
    assert "shape" in last_error()
    assert acl.util.ptr_to_bytes(0x10, 8) is None
    assert "unmapped" in last_error()
    assert acl.util.bytes_to_ptr("text") == 0
    assert "bytes" in last_error()
    assert acl.util.numpy_to_ptr([1, 2]) == 0
    assert "ndarray" in last_error()


@pytest.mark.parametrize("dtype", [object, [("name", object), ("value", np.float32)]])
def test_an_array_of_python_objects_has_no_pointer_to_copy_into(dtype):
    """acl.util.numpy_to_ptr and numpy_contiguous_to_ptr refuse an array holding Python objects (0 and a
    message): device bytes downloaded over its object pointers crashed the program later, outside any call."""
    array = np.zeros(4, dtype=dtype)
    assert acl.util.numpy_to_ptr(array) == 0
    message = last_error()
    assert "array: expected an array of plain values" in message and "Python objects" in message
    assert acl.util.numpy_contiguous_to_ptr(array) == (0, None)
    assert "numpy_contiguous_to_ptr" in last_error()


def test_a_pointer_kept_across_a_reset_is_stale_and_never_aliases_a_new_allocation():
    """DeviceHeap.release_all reset its cursor: after aclrtResetDevice the next aclrtMalloc returned the
    same address, so the stale pointer silently read and wrote the new allocation."""
    assert acl.rt.set_device(0) == 0
    stale, _ = acl.rt.malloc(256, 0)
    assert acl.rt.free(stale) == 0
    kept, _ = acl.rt.malloc(256, 0)       # left to the reset
    assert acl.rt.reset_device(0) == 0
    assert acl.rt.set_device(0) == 0
    fresh = [acl.rt.malloc(256, 0)[0] for _ in range(3)]
    assert kept not in fresh and stale not in fresh, "freed addresses are not reused, across resets too"
    host = np.zeros(256, np.uint8)
    message = assert_rejected(acl.rt.memcpy(host.ctypes.data, 256, kept, 256, D2H), acl.ACL_ERROR_RT_PARAM_INVALID,
                              "src", hex(kept), "freed at aclrtResetDevice(0)")
    assert_rejected(acl.rt.free(kept), acl.ACL_ERROR_RT_PARAM_INVALID, "devPtr", "freed at aclrtResetDevice(0)")
    assert "made at" in message
    for address in fresh:
        assert acl.rt.free(address) == 0
    assert acl.rt.reset_device(0) == 0
    emulator.leaks.forget()   # `kept` was left to the reset on purpose: not the leak this test is about


def test_after_the_address_range_wraps_freed_addresses_are_handed_out_last_and_stale_uses_are_caught():
    """DeviceHeap._place: once the cursor had reached the end of the device's address range, every
    aclrtMalloc was a first fit from the range's start: the address just freed was handed out again at
    once, and a copy through the stale pointer returned 0 and wrote the new allocation. Now the cursor
    wraps and goes on (next fit). A 64 MiB device has a 1 GiB range: 48 MiB buffers wrap it quickly."""
    emulator.configure(device_memory="64M")
    assert acl.rt.set_device(0) == 0
    kept, _ = acl.rt.malloc(4096, 0)                          # live at the start of the range
    addresses = []
    while len(addresses) < 2 or addresses[-1] > addresses[-2]:
        assert len(addresses) < 64, "the cursor never wrapped round a 1 GiB range"
        address, ret = acl.rt.malloc(48 << 20, 0)
        assert ret == 0, last_error()
        assert acl.rt.free(address) == 0
        addresses.append(address)
    last_before_wrap, first_after_wrap = addresses[-2:]
    assert kept < first_after_wrap < last_before_wrap, "the wrap skips live memory and starts at the range's start"
    following, _ = acl.rt.malloc(48 << 20, 0)
    assert following > first_after_wrap, "next fit: the address freed last is not the next one handed out"
    host = np.zeros(64, np.uint8)
    for stale in (first_after_wrap, last_before_wrap):
        assert_rejected(acl.rt.memcpy(stale, 64, host.ctypes.data, 64, H2D), acl.ACL_ERROR_RT_PARAM_INVALID,
                        "dst", hex(stale), "freed at")
    assert acl.rt.free(following) == 0
    assert acl.rt.free(kept) == 0


def test_an_address_handed_out_and_freed_again_after_a_wrap_is_remembered_once():
    """DeviceHeap._remember_freed added a second sorted start for an address freed again after the range
    wrapped; once the first was forgotten, naming a stale pointer there raised KeyError."""
    from emulator.memory import FREED_HISTORY, DeviceHeap
    from emulator.sites import UNKNOWN
    heap = DeviceHeap(0, base=1 << 40, span=1 << 20, capacity=1 << 20, padding=32)  # 4 buffers a lap
    for serial in range(FREED_HISTORY + 8):
        heap.free(heap.allocate(250 << 10, serial, UNKNOWN).address, "test")
    assert len(heap.freed_starts) == len(heap.freed) == 4, "one record an address: the last allocation freed there"
    assert "freed at test" in heap.explain(heap.base, "a live allocation's start")


def test_a_reset_of_more_leaks_than_the_history_holds_remembers_the_newest():
    """A reset freeing more leaked buffers than FREED_HISTORY remembered the oldest: a stale pointer to a
    buffer a loop still held (the newest) was "held by no allocation" instead of freed by the reset."""
    from emulator.memory import FREED_HISTORY, DeviceHeap
    from emulator.sites import UNKNOWN
    heap = DeviceHeap(0, base=1 << 40, span=1 << 30, capacity=1 << 30, padding=32)
    made = [heap.allocate(64, serial, UNKNOWN).address for serial in range(FREED_HISTORY + 100)]
    assert len(heap.release_all("aclrtResetDevice(0)")) == len(made)
    assert "freed at aclrtResetDevice(0)" in heap.explain(made[-1], "a live allocation's start")
    assert "freed at aclrtResetDevice(0)" in heap.explain(made[100], "a live allocation's start")
    assert "no allocation" in heap.explain(made[99], "a live allocation's start")
    assert next(iter(heap.freed)) == made[100], "the newest are the last to leave the history"


class RefusingLibc:
    """emulator.memory's libc, with a kernel that refuses munmap (as at vm.max_map_count, where unmapping a
    range in the middle of a mapping would split it) and, when told, mmap too, both with ENOMEM."""

    def __init__(self, libc):
        self.libc, self.refuse_munmap, self.refuse_mmap, self.calls = libc, True, False, []

    def munmap(self, address, size):
        self.calls.append(("munmap", address, size, not self.refuse_munmap))
        if self.refuse_munmap:
            ctypes.set_errno(12)
            return -1
        return self.libc.munmap(address, size)

    def mmap(self, *arguments):
        if self.refuse_mmap:
            ctypes.set_errno(12)
            return ctypes.c_void_p(-1).value
        return self.libc.mmap(*arguments)

    def madvise(self, address, size, advice):
        self.calls.append(("madvise", address, size, advice))
        return self.libc.madvise(address, size, advice)


def test_a_free_the_kernel_cannot_unmap_still_succeeds_gives_the_pages_back_and_unmaps_later(device, monkeypatch):
    """memory._unmap ignored munmap's failure (ENOMEM at vm.max_map_count): aclrtFree returned 0 and the
    pages stayed mapped and committed. Now the free succeeds, as on the card; the pages go back at once
    (madvise(MADV_DONTNEED)) and the range is unmapped once munmap can (after later frees, or when a
    mapping fails); a mapping that fails says why."""
    kernel = RefusingLibc(emulator.memory._libc)
    monkeypatch.setattr(emulator.memory, "_libc", kernel)
    address, _ = acl.rt.malloc(1 << 20, 0)
    upload(address, bytes(1 << 20))
    assert acl.rt.free(address) == 0
    (_, backing, size, _), = [call for call in kernel.calls if call[0] == "munmap"]
    assert ("madvise", backing, size, 4) in kernel.calls, "the pages were not given back"
    kernel.refuse_munmap = False
    for _ in range(2):
        other, _ = acl.rt.malloc(64, 0)
        assert acl.rt.free(other) == 0
    assert ("munmap", backing, size, True) in kernel.calls, "the range was never unmapped"
    kernel.refuse_munmap = True
    address, _ = acl.rt.malloc(64, 0)  # the failing mapping below unmaps what munmap refuses here first
    assert acl.rt.free(address) == 0
    kernel.refuse_munmap, kernel.refuse_mmap = False, True
    address, ret = acl.rt.malloc(64, 0)
    message = assert_rejected(ret, acl.ACL_ERROR_RT_MEMORY_ALLOCATION, "size", "errno 12", "vm.max_map_count")
    assert [call[3] for call in kernel.calls if call[0] == "munmap"][-1] is True, message
    assert emulator.memory._unmap_later == []


def test_malloc_accepts_numpy_integers():
    assert acl.rt.set_device(np.int32(0)) == 0
    address, ret = acl.rt.malloc(np.uint64(64), np.int8(0))
    assert ret == 0, last_error()
    data = np.arange(64, dtype=np.uint8)
    assert acl.rt.memcpy(np.int64(address), np.uint32(64), data.ctypes.data, np.int16(64), np.int64(H2D)) == 0
    assert acl.rt.free(np.uint64(address)) == 0
    assert acl.rt.reset_device(np.int64(0)) == 0
