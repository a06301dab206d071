"""Device memory: an address space of its own, which the host cannot dereference.

The whole device range is reserved with PROT_NONE at start-up, so no host mapping can land
there and a host access through a device pointer faults instead of reading something else.
Each allocation is backed by its own anonymous host mapping (lazily committed by the kernel:
a 4 GiB buffer that is never touched costs no memory). Resolving a device address to its
backing is where out-of-bounds, use-after-free and wrong-device accesses are caught.
"""
from __future__ import annotations

import bisect
import ctypes
import ctypes.util
import errno
import functools
import os
import platform
from dataclasses import dataclass, field
from typing import Callable, Optional, Union

import numpy as np

from . import status
from .errors import AclError
from .faults import DeviceFault
from .sanitizer import TRACKER, Written
from .sites import Released, Site

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

PROT_NONE, PROT_READ, PROT_WRITE = 0, 1, 2
MAP_PRIVATE, MAP_ANONYMOUS, MAP_NORESERVE = 0x02, 0x20, 0x4000
MADV_DONTNEED, MADV_HUGEPAGE = 4, 14
MS_ASYNC = 1
HUGE_PAGE = 2 << 20
MAP_FAILED = ctypes.c_void_p(-1).value
PAGE = os.sysconf("SC_PAGE_SIZE")

ALIGNMENT = 512          # start addresses are 512-byte aligned (the documented minimum is 64)
RESERVE_FACTOR = 4       # address range per device = 4 x capacity: freed addresses are not reused soon
FREED_HISTORY = 4096     # freed allocations remembered, to name them in use-after-free reports


# Ranges munmap refused, their pages already given back (see _unmap): tried again when a mapping fails,
# and after as many munmaps as there are of them (each retry walks them all: amortised O(1) a free).
_unmap_later: list[tuple[int, int]] = []
_unmapped_since_retry = 0


def _map(size: int, prot: int) -> int:
    """A new anonymous mapping, or 0 (errno says why). When the kernel refuses, the ranges munmap refused
    before are unmapped first, if it now can, and the mapping asked again."""
    address = _libc.mmap(None, size, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
    if address in (None, MAP_FAILED) and _unmap_later and _unmap_refused():
        address = _libc.mmap(None, size, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
    if address in (None, MAP_FAILED):
        return 0
    return address


def _back(size: int) -> int:
    """Host memory backing a device allocation: committed page by page on first touch. Large
    buffers ask for transparent huge pages (as the default HUGE_FIRST policy does on the device),
    which keeps the TLB out of the way of kernels streaming through them."""
    address = _map(size, PROT_READ | PROT_WRITE)
    if address and size >= HUGE_PAGE:
        _libc.madvise(address, size, MADV_HUGEPAGE)
    return address


def _unmap(address: int, size: int) -> None:
    """Give the range back. The kernel merges neighbouring mappings into one: unmapping a range in the
    middle splits it in two, which fails (ENOMEM) once the process has vm.max_map_count mappings. Then
    the pages are given back at once (madvise(MADV_DONTNEED), which splits nothing) and the range, empty,
    stays mapped until a later munmap succeeds (_unmap_refused). A free on the card never fails for this."""
    global _unmapped_since_retry
    if _libc.munmap(address, size) != 0:
        _libc.madvise(address, size, MADV_DONTNEED)
        _unmap_later.append((address, size))
    elif _unmap_later:  # a neighbour gone may let a refused range go as a whole mapping
        _unmapped_since_retry += 1
        if _unmapped_since_retry >= len(_unmap_later):
            _unmap_refused()


# The host memory that kernels and queued copies read and write while the runtime lock is released
# (emulator.stream.compute_unlocked), and the backings freed meanwhile that lie there (device memory, or
# aclrtMallocHost's): those stay mapped until nothing running touches them any more, as the card's kernel
# or copy engine goes on writing memory being freed (its writes land there, harmlessly). Both under the
# runtime lock.
_in_use: list = []                        # per task running: its (address, nbytes) host ranges (a list)
_unmap_after: list[tuple[int, int]] = []   # (backing, size) freed while in use


# in_use(ranges): keep the host `ranges`, a list of (address, nbytes) pairs, mapped until
# `no_longer_in_use(ranges)` with the same list: a free meanwhile unmaps the backing only then. The list's
# own append, not a function around it: it runs for every kernel and queued copy, where a Python call
# costs as much as the rest of the bookkeeping.
in_use: Callable[[list], None] = _in_use.append


def no_longer_in_use(ranges: list) -> None:
    """The `ranges` given to `in_use` are no longer touched: the backings freed meanwhile are unmapped,
    unless another running task still touches them."""
    try:  # (the first equal list: this one, or another task's of the same ranges, which leaves the same held)
        _in_use.remove(ranges)
    except ValueError:  # forgotten meanwhile: this is a child made by fork (_forked)
        pass
    if _unmap_after:
        _unmap_freed_meanwhile()


def _unmap_freed_meanwhile() -> None:
    """Unmap the backings freed while a task touched them, but those another running task still touches."""
    waiting = _unmap_after[:]
    _unmap_after.clear()
    for address, size in waiting:
        _release_backing(address, size)


def _release_backing(address: int, size: int) -> None:
    """Unmap a freed allocation's backing, or, while a running task touches it, once none does."""
    if _in_use and any(start < address + size and address < start + nbytes
                       for ranges in _in_use for start, nbytes in ranges):
        _unmap_after.append((address, size))
    else:
        _unmap(address, size)


def _forked() -> None:
    """In a child made by fork only the forking thread lives on: the kernels of other threads that touched
    memory never end there, so what they kept mapped is unmapped now."""
    _in_use.clear()
    _unmap_freed_meanwhile()


os.register_at_fork(after_in_child=_forked)


def _unmap_refused() -> bool:
    """Unmap the ranges munmap refused, neighbours together (a run that spans a whole mapping unmaps
    without a split); whether any was unmapped."""
    global _unmapped_since_retry
    _unmapped_since_retry = 0
    runs: list[list[int]] = []
    for address, size in sorted(_unmap_later):
        if runs and runs[-1][0] + runs[-1][1] == address:
            runs[-1][1] += size
        else:
            runs.append([address, size])
    _unmap_later.clear()
    for address, size in runs:
        if _libc.munmap(address, size) != 0:
            _unmap_later.append((address, size))
    return len(_unmap_later) < len(runs)


def _map_failure() -> str:
    """Why the last mapping failed, for a 207001's message."""
    code = ctypes.get_errno()
    if code != errno.ENOMEM:
        return "errno %d, %s" % (code, os.strerror(code))
    try:
        with open("/proc/sys/vm/max_map_count") as limit:
            most = limit.read().strip()
    except OSError:
        most = "unknown"
    return ("errno %d, %s: the host's memory, or the process's memory mappings, ran out (each allocation "
            "is one; vm.max_map_count is %s)" % (code, os.strerror(code), most))


# Where a cgroup (v2, then v1) says how much memory the process's group may have.
CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


@functools.lru_cache(maxsize=1)
def _memory_the_process_may_have() -> Optional[int]:
    """The host's physical memory, or its cgroup's limit when lower (a container); None if unknown.
    Read once: reading it took 16 us of an aclrtMallocHost + aclrtFreeHost pair of 26 us."""
    pages = os.sysconf("SC_PHYS_PAGES")
    found = [pages * PAGE] if pages > 0 else []
    for path in CGROUP_LIMITS:
        try:
            with open(path) as limit:
                text = limit.read().strip()
        except OSError:
            continue
        if text.isdigit():  # "max" (v2) or a huge number (v1) when there is no limit
            found.append(int(text))
        break
    return min(found) if found else None


def padded_size(size: int, padding: int = 32, extra: bool = True) -> int:
    """What aclrtMalloc really reserves: (size + 32 + pad - 1) / 32 * 32, `pad` being the chip's padding
    size (32 by default). aclrtMallocAlign32 (`extra=False`) only rounds up to a multiple of 32."""
    if not extra:
        return (size + 31) // 32 * 32
    return (size + 32 + padding - 1) // 32 * 32


# What the check of a host range finds (emulator/native/host_memory.cpp returns the same numbers).
USABLE, UNMAPPED, UNREADABLE, READ_ONLY = range(4)
_HOST_PROBLEMS = {UNMAPPED: "unmapped memory", UNREADABLE: "memory the process cannot read", READ_ONLY: "read-only memory"}
_SYS_FUTEX, _FUTEX_CMP_REQUEUE_PRIVATE, _FUTEX_WAKE_OP_PRIVATE, _EFAULT = 202, 4 | 128, 5 | 128, 14  # x86-64 Linux
_futex = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_void_p,
                          ctypes.c_void_p, ctypes.c_int, use_errno=True)(("syscall", _libc))
_nobody = ctypes.c_uint32(0)
_MACHINE = platform.machine()


def _probe_by_ctypes(address: int, write: bool) -> bool:
    """host_memory.cpp's futex probes, through ctypes: False only where the access would fault (the
    system call's number is x86-64's: elsewhere the caller is trusted, as host_memory.cpp does where the
    kernel would not say)."""
    if _MACHINE != "x86_64":
        return True
    word, nobody = address & ~3, ctypes.addressof(_nobody)
    if write:  # FUTEX_WAKE_OP adds 0 to the word atomically and wakes no one
        done = _futex(_SYS_FUTEX, nobody, _FUTEX_WAKE_OP_PRIVATE, 0, 0, word, 1 << 28)
    else:      # FUTEX_CMP_REQUEUE loads the word and compares it, moving no one
        done = _futex(_SYS_FUTEX, word, _FUTEX_CMP_REQUEUE_PRIVATE, 0, 0, nobody, 0x5A5A5A5A)
    return done >= 0 or ctypes.get_errno() != _EFAULT


def _check_by_ctypes(address: int, size: int, write: bool) -> int:
    """host_memory.cpp's check, for a tree whose native parts are not built (the runtime runs without
    them): the same answers, for about 1.2 µs more a probe."""
    last = address + max(size, 1) - 1
    start = address - address % PAGE
    if _libc.msync(start, last + 1 - start, MS_ASYNC) != 0:  # ENOMEM over a hole
        return UNMAPPED
    ends = (address,) if address // PAGE == last // PAGE else (address, last)
    refused = next((end for end in ends if not _probe_by_ctypes(end, write)), None)
    if refused is None:
        return USABLE
    return READ_ONLY if write and _probe_by_ctypes(refused, False) else UNREADABLE


try:  # one native call: cheaper than ctypes' msync alone
    from ._host_memory import check as _check_host
except ImportError:
    _check_host = _check_by_ctypes


ADDRESS_SPACE_END = 1 << 63  # no user-space address reaches it (x86-64 and AArch64 end far below)

# The public C call in progress on this thread whose own frames (npuemu's and libpython's, on the program's
# stack below its frame) hold a byte of [address, address+nbytes), or None: set by the C toolkit
# (toolkit/src/core.cpp), which alone knows where a C call's frames begin. Python callers have none.
_call_frames_in: Callable[[int, int], Optional[str]] = lambda address, nbytes: None


def watch_call_frames(find: Callable[[int, int], Optional[str]]) -> None:
    """The C toolkit tells where its calls' frames are: host memory there is refused as a write's target."""
    global _call_frames_in
    _call_frames_in = find


def host_memory_problem(address: int, nbytes: int, write: bool) -> Optional[str]:
    """What keeps the host from reading (with `write`, writing) [address, address+nbytes), as "expected
    ..., found ...", or None, without regard to aclrtMallocHost allocations (AddressSpace.host_problem
    adds them): a size no address space holds, refused before the kernel is asked anything, then what the
    kernel says. The whole range must be mapped; its protection is asked of its first and last page (see
    native/host_memory.cpp), so that a bad pointer is an error instead of a segfault. A target on the stack
    below the program's frame of a C call in progress is refused too: it is no longer the program's (a
    buffer of a function that returned), and the call's own frames are there now."""
    if nbytes >= ADDRESS_SPACE_END - address:  # (address and nbytes are C arguments: address > 0, nbytes >= 0)
        return ("expected a range the address space holds, found %d bytes at 0x%x, which end past 2**63"
                % (nbytes, address))
    call = _call_frames_in(address, nbytes) if write else None
    if call is not None:
        return ("expected %d bytes of writable host memory at 0x%x, found [0x%x, 0x%x) on this thread's stack below "
                "the frame of the program's call to %s, which is in progress and has its own frames there: a stack "
                "buffer whose function returned before the copy ran (keep the buffer alive until the copy has run)"
                % (nbytes, address, address, address + nbytes, call))
    found = _check_host(address, nbytes, write)
    if found != USABLE:
        return ("expected %d bytes of %s host memory at 0x%x, found %s"
                % (nbytes, "writable" if write else "readable", address, _HOST_PROBLEMS[found]))
    return None


def host_range_readable(address: int, size: int) -> bool:
    """Whether the host can read [address, address+size), for any integers."""
    return address > 0 and size >= 0 and host_memory_problem(address, size, False) is None


@dataclass(eq=False)
class Allocation:
    """One aclrtMalloc: `size` bytes requested, `padded` reserved, backed at host address `backing`."""
    serial: int
    device_id: int
    address: int
    size: int
    padded: int
    backing: int
    site: Site
    freed_site: Optional[Union[Site, Released, str]] = None  # the user's site, or the reset that released it
    end: int = field(init=False)                    # address + padded: read by every range check
    user_end: int = field(init=False)               # address + size: beyond it, the padding
    written: Written = field(init=False)            # what was written (initcheck)

    def __post_init__(self) -> None:
        self.end = self.address + self.padded
        self.user_end = self.address + self.size
        self.written = Written()

    def describe(self) -> str:
        state = "freed at %s" % self.freed_site if self.freed_site else "live"
        return ("allocation #%d on device %d [0x%x, 0x%x) of %d bytes (%d with padding), made at %s, %s"
                % (self.serial, self.device_id, self.address, self.address + self.size, self.size,
                   self.padded, self.site, state))


def _text(what) -> str:
    """The description of a range: a string, a callable that makes one, or an object that says itself
    (hot paths pass the last two, so that the text is only made when there is a fault)."""
    return what if type(what) is str else what() if callable(what) else str(what)


def _holding(starts: list, by_start: dict, address: int) -> Optional[Allocation]:
    """The allocation of `by_start` (sorted `starts`) whose reserved range holds `address`."""
    index = bisect.bisect_right(starts, address) - 1
    if index >= 0:
        allocation = by_start[starts[index]]
        if address < allocation.end:
            return allocation
    return None


class DeviceHeap:
    """The memory of one device: a next-fit allocator over its address range, with capacity accounting."""

    def __init__(self, device_id: int, base: int, span: int, capacity: int, padding: int):
        self.device_id = device_id
        self.base, self.span, self.capacity, self.padding = base, span, capacity, padding
        self.cursor = base
        self.used = 0
        self.starts: list[int] = []                    # sorted start addresses of live allocations
        self.live: dict[int, Allocation] = {}
        self.freed_starts: list[int] = []              # sorted, bounded history of freed allocations
        self.freed: dict[int, Allocation] = {}

    def contains(self, address: int) -> bool:
        return self.base <= address < self.base + self.span

    def allocate(self, size: int, serial: int, site: Site, extra_padding: bool = True) -> Allocation:
        padded = padded_size(size, self.padding, extra_padding)
        if self.used + padded > self.capacity:
            raise AclError(status.ACL_ERROR_RT_MEMORY_ALLOCATION,
                           "size: expected at most %d free bytes on device %d, found a request of %d bytes "
                           "(%d with padding); %d of %d bytes in use"
                           % (self.capacity - self.used, self.device_id, size, padded, self.used, self.capacity))
        address = self._place(padded)
        backing = _back(padded)
        if not backing:
            raise AclError(status.ACL_ERROR_RT_MEMORY_ALLOCATION,
                           "size: expected a size the host can back, found %d bytes of device memory (%s)"
                           % (padded, _map_failure()))
        allocation = Allocation(serial, self.device_id, address, size, padded, backing, site)
        bisect.insort(self.starts, address)
        self.live[address] = allocation
        self.used += padded
        return allocation

    def _place(self, padded: int) -> int:
        """A free, aligned address range, by next fit: from the cursor on, wrapping round at the end of the
        range, so that a freed address is handed out again as late as possible (only when the cursor comes
        round to it). Each step is a search of the sorted starts: cheap however many allocations live."""
        need = (padded + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        end = self.base + self.span
        position, wrapped = self.cursor, False
        while not (wrapped and position >= self.cursor):  # past the start again: every gap was tried
            if position + need > end:
                if wrapped:
                    break
                position, wrapped = self.base, True
                continue
            blocking = self._overlapping(position, position + need)
            if blocking is None:
                self.cursor = position + need
                return position
            position = (blocking.end + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        raise AclError(status.ACL_ERROR_RT_MEMORY_ALLOCATION,
                       "size: no contiguous free range of %d bytes left on device %d" % (padded, self.device_id))

    def _overlapping(self, start: int, end: int) -> Optional[Allocation]:
        """The first live allocation whose reserved range meets [start, end), or None."""
        index = bisect.bisect_right(self.starts, start)
        if index:
            before = self.live[self.starts[index - 1]]
            if before.end > start:
                return before
        if index < len(self.starts) and self.starts[index] < end:
            return self.live[self.starts[index]]
        return None

    def free(self, address: int, site: Union[Site, Released, str], remember: bool = True) -> Allocation:
        allocation = self.live.pop(address, None)
        if allocation is None:
            raise AclError(status.ACL_ERROR_RT_PARAM_INVALID, "devPtr: " + self.explain(address, "a live allocation's start"))
        del self.starts[bisect.bisect_left(self.starts, address)]
        self.used -= allocation.padded
        _release_backing(allocation.backing, allocation.padded)
        allocation.backing = 0
        allocation.freed_site = site
        if remember:
            self._remember_freed(allocation)
        return allocation

    def _remember_freed(self, allocation: Allocation) -> None:
        if self.freed.pop(allocation.address, None) is not None:  # an address handed out again after a wrap
            del self.freed_starts[bisect.bisect_left(self.freed_starts, allocation.address)]
        bisect.insort(self.freed_starts, allocation.address)
        self.freed[allocation.address] = allocation
        if len(self.freed_starts) > FREED_HISTORY:  # forget the first freed: the dict keeps the order of frees
            oldest = next(iter(self.freed))
            del self.freed[oldest]
            del self.freed_starts[bisect.bisect_left(self.freed_starts, oldest)]

    def find(self, address: int) -> Optional[Allocation]:
        """The live allocation whose reserved range holds `address`."""
        return _holding(self.starts, self.live, address)

    def find_freed(self, address: int) -> Optional[Allocation]:
        """The remembered freed allocation whose reserved range held `address`."""
        return _holding(self.freed_starts, self.freed, address)

    def explain(self, address: int, expected: str) -> str:
        """Why `address` is not usable, in words: expected X, found Y."""
        live = self.find(address)
        if live is not None:
            return "expected %s, found 0x%x inside %s" % (expected, address, live.describe())
        freed = self.find_freed(address)
        if freed is not None:
            return "expected %s, found 0x%x in %s" % (expected, address, freed.describe())
        return "expected %s, found 0x%x, which no allocation of device %d holds" % (expected, address, self.device_id)

    def release_all(self, how: Union[Released, str]) -> list[Allocation]:
        """Free everything (device reset, named by `how`); returns what the program had not freed. The
        cursor stays where it is: addresses handed out before the reset come back only when next fit
        reaches them again, so until then a pointer kept across the reset is reported as freed by it.
        The newest allocations (a loop's buffers still held) are the ones remembered, oldest first, so
        that they are also the last to leave the history."""
        leaked = list(self.live.values())  # in the order they were made
        for allocation in reversed(leaked):  # the newest first: usually the last of the sorted starts (cheap)
            self.free(allocation.address, how, remember=False)
        for allocation in leaked[-FREED_HISTORY:]:
            self._remember_freed(allocation)
        return leaked


@dataclass(eq=False)
class HostAllocation:
    """One aclrtMallocHost: `size` bytes at `address`, in a mapping of whole pages."""
    address: int
    size: int
    site: Site
    end: int = field(init=False)     # address + size: a copy or memset that starts inside stops there
    mapped: int = field(init=False)  # the mapping's size, whole pages

    def __post_init__(self) -> None:
        self.end = self.address + self.size
        self.mapped = (self.size + PAGE - 1) // PAGE * PAGE

    def overrun(self, address: int, nbytes: int) -> str:
        """The "expected ..., found ..." of a range from `address` inside the allocation that runs past its end."""
        return ("expected at most %d bytes from 0x%x, the rest of the aclrtMallocHost allocation [0x%x, 0x%x) of %d "
                "bytes made at %s, found %d bytes, which run %d bytes past its end"
                % (max(self.end - address, 0), address, self.address, self.end, self.size, self.site, nbytes,
                   address + nbytes - self.end))

    def entered(self, address: int, nbytes: int) -> str:
        """The "expected ..., found ..." of a range that starts before the allocation and runs into it."""
        return ("expected at most %d bytes from 0x%x, up to the aclrtMallocHost allocation [0x%x, 0x%x) of %d bytes "
                "made at %s, found %d bytes, which run into it" % (self.address - address, address, self.address,
                                                                   self.end, self.size, self.site, nbytes))


class AddressSpace:
    """The reserved device range of all devices, and the host memory from aclrtMallocHost."""

    def __init__(self, device_count: int, capacity: int, padding: int):
        span = (capacity * RESERVE_FACTOR + (1 << 30) - 1) // (1 << 30) * (1 << 30)
        base = 0
        while span >= capacity and not base:
            base = _map(span * device_count, PROT_NONE)
            if not base:
                span //= 2
        if not base:
            raise MemoryError("npuemu: cannot reserve %d bytes of address space for device memory" % (capacity * device_count))
        self.base, self.span, self.total = base, span, span * device_count
        self.heaps = [DeviceHeap(i, base + i * span, span, capacity, padding) for i in range(device_count)]
        self.host: dict[int, HostAllocation] = {}
        self.host_starts: list[int] = []  # sorted starts of self.host: which one a host range starts in
        self.pinned = 0                   # the sum of self.host's mapped sizes: kept, not summed on each call
        self.serial = 0

    def close(self) -> None:
        for heap in self.heaps:
            heap.release_all("<shutdown>")
        for host in list(self.host.values()):
            self.free_host(host.address)
        if _unmap_later:
            _unmap_refused()
        _unmap(self.base, self.total)

    def is_device(self, address: int) -> bool:
        return self.base <= address < self.base + self.total

    def heap_of(self, address: int) -> DeviceHeap:
        return self.heaps[(address - self.base) // self.span]

    def allocate(self, device_id: int, size: int, site: Site, extra_padding: bool = True) -> Allocation:
        self.serial += 1
        return self.heaps[device_id].allocate(size, self.serial, site, extra_padding)

    def allocate_host(self, size: int, site: Site) -> HostAllocation:
        rounded = (size + PAGE - 1) // PAGE * PAGE
        self._check_pinnable(size, rounded)
        address = _map(rounded, PROT_READ | PROT_WRITE)
        if not address:
            raise AclError(status.ACL_ERROR_RT_MEMORY_ALLOCATION,
                           "size: expected a size the host can allocate, found %d bytes (%s)" % (size, _map_failure()))
        host = HostAllocation(address, size, site)
        self.host[address] = host
        bisect.insort(self.host_starts, address)
        self.pinned += host.mapped
        return host

    def _check_pinnable(self, size: int, rounded: int) -> None:
        """The card's driver pins aclrtMallocHost memory: a request beyond the memory the process may
        have (the host's physical memory, or its cgroup's limit if lower) less what is pinned already
        fails at once (207001), where the lazily committed mapping would succeed and the program be
        killed when it fills the buffer."""
        physical = _memory_the_process_may_have()
        if physical is None:
            return  # the host does not say: the mapping's own failure is the only bound
        if rounded > physical - self.pinned:
            raise AclError(status.ACL_ERROR_RT_MEMORY_ALLOCATION,
                           "size: expected at most %d bytes, what the host can pin (its %d bytes of memory less "
                           "%d bytes aclrtMallocHost allocations pin already), found %d bytes"
                           % (max(physical - self.pinned, 0), physical, self.pinned, size))

    def host_around(self, address: int, nbytes: int) -> tuple[Optional[HostAllocation], Optional[HostAllocation]]:
        """(the aclrtMallocHost allocation whose mapping holds `address`, the slack of its last page too:
        the program was not given those bytes; the first one that starts inside [address, address+nbytes)),
        each None if there is none: one search of the sorted starts."""
        index = bisect.bisect_right(self.host_starts, address)
        holding = self.host[self.host_starts[index - 1]] if index else None
        if holding is not None and address >= holding.address + holding.mapped:
            holding = None
        entered = index < len(self.host_starts) and self.host_starts[index] < address + nbytes
        return holding, self.host[self.host_starts[index]] if entered else None

    def host_problem(self, address: int, nbytes: int, write: bool, pinned: bool = False) -> Optional[str]:
        """What keeps a copy or memset from using [address, address+nbytes) of host memory, as "expected ...,
        found ...", or None: the one check of every host range a copy or memset touches, when called and
        when queued work runs. In order, each before any byte is touched: a size no address space holds
        (refused before the kernel is asked anything); a range that starts in an aclrtMallocHost allocation
        and runs past its end (npuemu made it and knows its size: the mapping after it, often the program's
        other data, would pass the probes and be overwritten), or that starts before one and runs into it
        (the program's buffer overrun into npuemu's, or the reverse); with `pinned` (memory the device reaches by
        DMA), a range outside every such allocation; then what the kernel says of the range."""
        if nbytes < ADDRESS_SPACE_END - address:  # else host_memory_problem refuses the size first
            host, entered = self.host_around(address, nbytes) if self.host_starts else (None, None)  # most: none
            if host is not None and address + nbytes > host.end:
                return host.overrun(address, nbytes)
            if host is None and entered is not None:  # from the program's own memory into npuemu's
                return entered.entered(address, nbytes)
            if pinned and host is None:
                return ("expected device memory or aclrtMallocHost memory for %d bytes, found host address 0x%x "
                        "outside any aclrtMallocHost allocation" % (nbytes, address))
        return host_memory_problem(address, nbytes, write)

    def free_host(self, address: int) -> None:
        host = self.host.pop(address, None)
        if host is None:
            raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                           "hostPtr: expected an address returned by aclrtMallocHost, found 0x%x" % address)
        del self.host_starts[bisect.bisect_left(self.host_starts, address)]
        self.pinned -= host.mapped
        _release_backing(host.address, host.mapped)  # a queued copy moving its bytes may still touch it

    def resolve(self, address: int, nbytes: int, device_id: int, what: Union[str, Callable[[], str]],
                base: Optional[int] = None, access: bool = True) -> tuple[Allocation, int]:
        """The allocation of device `device_id` holding `base` (default: `address`), which must hold all of
        [address, address+nbytes), and the host address backing `address`; DeviceFault, naming `what` and
        the allocation, if not. A tensor passes its data address as `base`: a view whose offset or shape
        carries it into a neighbouring allocation is an overrun of its own, not an access to the other.
        `what` may be a callable, so that hot paths only build the description when there is a fault.
        `access` False: the range is only checked (a call validating its arguments), so reaching into the
        padding is not reported (the access that follows is)."""
        allocation = self._holding(address if base is None else base, device_id)
        if allocation is not None and allocation.address <= address and address + nbytes <= allocation.end:
            if access and address + nbytes > allocation.user_end and TRACKER.memory:
                TRACKER.padding_overrun(allocation, address, nbytes, what)
            return allocation, allocation.backing + (address - allocation.address)
        self._fault(address, nbytes, device_id, _text(what), address if base is None else base)

    def pointer(self, address: int, nbytes: int, device_id: int, what: Union[str, Callable[[], str]],
                base: Optional[int] = None, write: Optional[bool] = None) -> int:
        """`resolve()`'s host address alone: what a kernel launch asks for each of its tensors. `write`:
        whether the kernel writes the range (True) or reads it (False), for the sanitizer's initcheck;
        None when the range is only checked, not accessed."""
        if base is None:
            base = address
        allocation = None
        if self.base <= base < self.base + self.total:  # _holding(), inline: three of these per launch
            heap = self.heaps[(base - self.base) // self.span]
            if heap.device_id == device_id:
                allocation = heap.live.get(base) or heap.find(base)
        if allocation is not None and allocation.address <= address and address + nbytes <= allocation.end:
            if write is not None and address + nbytes > allocation.user_end and TRACKER.memory:  # None: a check
                TRACKER.padding_overrun(allocation, address, nbytes, what)
            if write is not None and TRACKER.hazards:
                TRACKER.touched(allocation, address, nbytes, write, what)
            return allocation.backing + (address - allocation.address)
        self._fault(address, nbytes, device_id, _text(what), base)

    def _holding(self, base: int, device_id: int) -> Optional[Allocation]:
        """The live allocation of device `device_id` holding `base`: most often its start (a tensor's
        data address), a dict lookup; else a search of the heap."""
        if self.base <= base < self.base + self.total:
            heap = self.heaps[(base - self.base) // self.span]
            if heap.device_id == device_id:
                return heap.live.get(base) or heap.find(base)
        return None

    def _fault(self, address: int, nbytes: int, device_id: int, what: str, base: int) -> None:
        where = "%s [0x%x, 0x%x)" % (what, address, address + nbytes)
        span = (address, address + nbytes)
        if not self.is_device(base):
            raise DeviceFault("%s: expected device memory, found 0x%x, which is not device memory (a host address?)"
                              % (where, base), what, span)
        heap = self.heap_of(base)
        if heap.device_id != device_id:
            raise DeviceFault("%s: expected memory of device %d, where the work runs, found 0x%x of device %d"
                              % (where, device_id, base, heap.device_id), what, span, heap.find(base))
        allocation = heap.find(base)
        if allocation is None:
            raise DeviceFault("%s: %s" % (where, heap.explain(base, "memory of a live allocation")),
                              what, span, heap.find_freed(base))
        beyond = max(address + nbytes - allocation.end, allocation.address - address)
        other = heap.find(address + nbytes - 1) if self.is_device(address + nbytes - 1) else None
        reach = ", reaching into %s" % other.describe() if other not in (None, allocation) else ""
        raise DeviceFault("%s: expected a range inside %s; found it overruns that allocation by %d bytes%s"
                          % (where, allocation.describe(), beyond, reach), what, span, allocation)


# ---------------------------------------------------------------------------------------------
# Copies and memsets. Every range they touch goes through `Span.pointer`, the one routine that
# turns a host or device range into a usable host pointer: `pointer` raises DeviceFault (the form a
# queued copy uses when it runs), `pointer_now` the AclError 107000 of a call that checks at once.

MEMCPY_KINDS = {0: "ACL_MEMCPY_HOST_TO_HOST", 1: "ACL_MEMCPY_HOST_TO_DEVICE", 2: "ACL_MEMCPY_DEVICE_TO_HOST",
                3: "ACL_MEMCPY_DEVICE_TO_DEVICE", 4: "ACL_MEMCPY_DEFAULT", 5: "ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE"}
_DIRECTIONS = {0: (False, False), 1: (True, False), 2: (False, True), 3: (True, True), 5: (True, False)}


@dataclass(frozen=True)
class Span:
    """A byte range a copy or memset touches, named as its parameter (`dst`, `src`, `devPtr`), which
    it writes (`written`) or reads. `pinned`: host memory must come from aclrtMallocHost (the device
    reaches it by DMA)."""
    name: str
    address: int
    nbytes: int
    on_device: bool
    written: bool
    pinned: bool = False

    def pointer(self, space: "AddressSpace", device_id: int, access: bool = True) -> int:
        """The host pointer backing the range, or DeviceFault naming the parameter and what is wrong.
        `access` False: only a check, which reports nothing to the sanitizer."""
        if self.on_device:
            return space.resolve(self.address, self.nbytes, device_id, self.name, access=access)[1]
        problem = space.host_problem(self.address, self.nbytes, self.written, self.pinned)
        if problem:
            raise DeviceFault("%s: %s" % (self.name, problem), self.name, (self.address, self.address + self.nbytes))
        return self.address

    def pointer_now(self, space: "AddressSpace", device_id: int, access: bool = True) -> int:
        """`pointer` for a call that checks its arguments at once: 107000 instead of a device fault."""
        try:
            return self.pointer(space, device_id, access)
        except DeviceFault as fault:
            raise AclError(status.ACL_ERROR_RT_PARAM_INVALID, fault.message) from None


def _place_of(on_device: bool) -> str:
    return "device" if on_device else "host"


@dataclass(frozen=True)
class Copy:
    """aclrtMemcpy[Async] (one row) or aclrtMemcpy2d[Async] (`height` rows of `width` bytes, `dpitch`
    and `spitch` apart)."""
    dst: Span
    src: Span
    width: int
    height: int = 1
    dpitch: int = 0
    spitch: int = 0

    @classmethod
    def plan(cls, space: "AddressSpace", dst: int, src: int, kind: int, width: int, height: int = 1,
             dpitch: int = 0, spitch: int = 0) -> "Copy":
        """The copy, after checking that an explicit `kind` matches where the addresses are (107000)."""
        dst_device, src_device = space.is_device(dst), space.is_device(src)
        expected = _DIRECTIONS.get(kind)
        if expected is not None and (dst_device, src_device) != expected:
            raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                           "kind: expected %s (dst %s, src %s), found dst 0x%x in %s memory and src 0x%x in %s memory"
                           % (MEMCPY_KINDS[kind], _place_of(expected[0]), _place_of(expected[1]),
                              dst, _place_of(dst_device), src, _place_of(src_device)))
        dst_bytes = dpitch * (height - 1) + width
        src_bytes = spitch * (height - 1) + width
        return cls(Span("dst", dst, dst_bytes, dst_device, True), Span("src", src, src_bytes, src_device, False),
                   width, height, dpitch, spitch)

    @property
    def involves_device(self) -> bool:
        return self.dst.on_device or self.src.on_device

    def device_reads(self) -> list:
        """(address, nbytes, name) of the device bytes the copy reads: a row each for a 2-D copy."""
        return self._rows(self.src, self.spitch) if self.src.on_device else []

    def device_writes(self) -> list:
        return self._rows(self.dst, self.dpitch) if self.dst.on_device else []

    def overlap(self) -> Optional[int]:
        """The first byte the copy both writes and reads, other than a byte copied onto itself (a row onto
        itself), or None. The card's copy engines move such a copy's bytes in no fixed order, so what the
        shared bytes hold afterwards is not defined (npuemu moves them as memmove does)."""
        dst, src = self.dst, self.src
        if dst.on_device != src.on_device or dst.address >= src.address + src.nbytes \
                or src.address >= dst.address + dst.nbytes:
            return None
        if self.height == 1:
            return None if dst.address == src.address else max(dst.address, src.address)
        # Rows as arrays (a million rows: array work, not a Python loop). Each row, read or written, is
        # `width` bytes and the rows of one side do not overlap (pitch >= width), so a written row meets
        # at most two read rows: the last starting before it ends, and the one before that.
        width, rows = self.width, np.arange(self.height, dtype=np.int64)
        writes, reads = dst.address + rows * self.dpitch, src.address + rows * self.spitch
        last = np.searchsorted(reads, writes + width) - 1
        first = None
        for read_row in (last, last - 1):
            row = np.maximum(read_row, 0)
            meets = (read_row >= 0) & (reads[row] < writes + width) & (reads[row] + width > writes)
            meets &= (row != rows) | (reads[row] != writes)  # a row copied onto itself moves nothing
            if meets.any():
                start = int(np.maximum(writes[meets], reads[row][meets]).min())
                first = start if first is None else min(first, start)
        return first

    def _rows(self, span: Span, pitch: int) -> list:
        if self.height == 1 or pitch == self.width:
            return [(span.address, span.nbytes, span.name)]
        return [(span.address + row * pitch, self.width, span.name) for row in range(self.height)]

    def pointers_now(self, space: "AddressSpace", device_id: int, access: bool = True) -> tuple[int, int]:
        """(target, source): both ranges usable now, else the AclError 107000 of a call that checks at
        once, before the sanitizer lists the rows (a height past the allocation would make a row each).
        `access` False: only a check, which reports nothing to the sanitizer."""
        return self.dst.pointer_now(space, device_id, access), self.src.pointer_now(space, device_id, access)

    def accessed(self, space: "AddressSpace", device_id: int) -> None:
        """The device ranges accessed, once both ranges passed their checks (a copy rejected for its other
        range touches nothing): memcheck reports a reach into an allocation's padding. (A device range is
        resolved by a lookup; the host range's check, a system call, is not repeated.)"""
        for span in (self.dst, self.src):
            if span.on_device:
                span.pointer(space, device_id)

    def run(self, space: "AddressSpace", device_id: int, compute: Callable[..., None]) -> None:
        """Queued work: checked when it runs (DeviceFault), then copied by `compute(move, args, touched)`,
        with the runtime lock released (emulator.stream.compute_unlocked): the host memory it touches is
        the two ranges' backings."""
        target, source = self.dst.pointer(space, device_id), self.src.pointer(space, device_id)
        compute(self.move, (target, source), [(target, self.dst.nbytes), (source, self.src.nbytes)])

    def move(self, target: int, source: int) -> None:
        """The copy itself, between host pointers backing the two ranges."""
        if self.height == 1:
            ctypes.memmove(target, source, self.width)
            return
        for row in range(self.height):
            ctypes.memmove(target + row * self.dpitch, source + row * self.spitch, self.width)


@dataclass(frozen=True)
class Fill:
    """aclrtMemset[Async]: `count` bytes of `span` set to `byte`."""
    span: Span
    byte: int

    @classmethod
    def plan(cls, space: "AddressSpace", address: int, value: int, count: int, pinned: bool) -> "Fill":
        """The value is used as a byte, as memset does."""
        return cls(Span("devPtr", address, count, space.is_device(address), True, pinned), value & 0xFF)

    def device_writes(self) -> list:
        span = self.span
        return [(span.address, span.nbytes, span.name)] if span.on_device else []

    def run(self, space: "AddressSpace", device_id: int, compute: Callable[..., None]) -> None:
        """Queued work: checked when it runs (DeviceFault), then set by `compute(set_at, args, touched)`, as
        a queued copy is moved (Copy.run)."""
        target = self.span.pointer(space, device_id)
        compute(self.set_at, (target,), [(target, self.span.nbytes)])

    def set_at(self, target: int) -> None:
        ctypes.memset(target, self.byte, self.span.nbytes)
