"""The roofline of a large case: is its kernel held back by the memory bandwidth or by its own compute?

A large case's attainable rate is min(memory roof, compute roof). The memory roof is the triad
timed in the same rounds (timing.Triad). The compute roof (the "ceiling") is the same kernel on the
same dtype with its data in the L2 cache: the case cut to a few rows of its own inner layout (the
operator's `Operator.in_cache`), small enough that each thread's share stays in its core's L2, and
called back to back so that all but the first call of a burst find the data there.

What is timed is the row's own call path, the whole two-phase call (timing.NpuemuCall), at two
in-cache sizes, one twice the other, in the same interleaved rounds as the row. In cache a call
does only 20 to 100 µs of kernel work, while the call's fixed cost (the first phase's checks, the
launch, the synchronisation, waking the pool: about 25 µs) does not depend on the size; timing one
size and subtracting nothing would charge that fixed cost to the kernel and make a kernel look
compute-bound when it is not. The difference of the two medians is the cost of the extra elements
alone, the per-element cost of the kernel in cache, with the fixed cost cancelled rather than
estimated; it is also exactly what the large row pays per element (at 4096x4096 the fixed cost is
0.2% of the call), sanitizer level included.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from aclnn_api import _kernels
from timing import cache_levels

# The larger in-cache call gives each thread at most this share of an L2: the rest holds the
# runtime's own data between calls and keeps the cache's associativity from evicting our lines (on
# this machine, 768 KiB of a 2 MiB L2 ran at the in-cache rate, 1.5 MiB already 50% slower).
L2_SHARE = 0.5
# The share a cut may take when half an L2 would leave its smaller call on fewer threads than the
# row's (BCE-with-logits FLOAT with weight and posWeight, forward and backward, 2 threads, on a 1 MiB
# L2: 4 rows of 4096 are one grain). The cuts this admits there hold up to about 660 KiB per thread
# (8 rows of the backward's five FLOAT streams and the shared posWeight; at 0.7 the backward, whose
# unit is counted with posWeight, got no ceiling). On the AMD EPYC (Zen 5, 1 MiB L2) ceilings
# measured on such cuts were up to about 5% below those at 0.5 (BCE FLOAT16, 1 thread, 16 rows of
# 40 KiB: 2.25-2.30 against 2.36-2.48 Gelem/s): a lower ceiling, so a row judged against it looks
# closer to its roof, not farther.
L2_SHARE_STRETCHED = 0.75
# The units per thread the larger cut should hold, where the stretched share allows: half of a 2 MiB
# L2 (the Intel Xeon) gives every operator's cut at least this many, and a 1 MiB L2 (the AMD EPYC)
# should not measure on smaller cuts where three quarters of it hold these. It matters for CtcLoss,
# whose ceiling reads higher the fewer batch items a cut has (AMD EPYC, FLOAT, one thread: 11.5-12.2
# GB/s-equivalent with 4 and 2 items, 10.5-10.8 with 8 and 4; bench/README.md); ScaledMaskedSoftmax
# and BCE-with-logits FLOAT measured the same with 4 and 2 rows as with 8 and 4.
UNITS_PER_THREAD = 8
# Seconds of back-to-back calls per turn of an in-cache call: tens of calls, so the first one
# (which reloads what the previous contender evicted) does not move the median.
IN_CACHE_BURST = 0.003
# Elements per thread below which the kernels use fewer threads (kGrain of kernels_cpp/common/
# elementwise.h, also the softmax's and BCE's and KlDiv's): a smaller call that the kernels would
# give fewer than the row's threads would not time the row's per-element cost.
KERNEL_GRAIN = _kernels.ELEMENTWISE_GRAIN
DEFAULT_L2 = 1 << 20    # when the system does not say (e.g. no /sys): a size most x86 cores exceed


def l2_bytes(root: str = "/sys/devices/system/cpu/cpu0/cache") -> Optional[int]:
    """The size of cpu0's level-2 data or unified cache (per core), or None when sysfs does not say.
    Not the last level: this VM reports a 480 MiB L3 shared by both cores."""
    sizes = [size for level, kind, size in cache_levels(root) if level == 2 and kind in ("Unified", "Data")]
    return max(sizes) if sizes else None


def in_cache_units(unit_bytes: int, threads: int, l2: int, share: float = L2_SHARE) -> Optional[tuple[int, int]]:
    """(larger, smaller) counts of the operator's in-cache unit (a row of its inner layout) for the
    two calls, or None when two units per thread do not fit in `share` of an L2.

    Each thread gets a power of two of units at the larger size and half as many at the smaller:
    the kernels hand out blocks of a power of two of rows, so both sizes share evenly between the
    threads and the difference of the two calls is not the cost of one thread finishing late."""
    budget = int(l2 * share)
    if unit_bytes <= 0 or 2 * unit_bytes > budget:
        return None
    per_thread = 2
    while 2 * per_thread * unit_bytes <= budget:
        per_thread *= 2
    return threads * per_thread, threads * per_thread // 2


def kernel_participants(elements: int, threads: int) -> int:
    """How many of `threads` the kernels put to work on `elements`: one per started grain, as
    every kernel counts them (min(threads, ceil(elements / kGrain)))."""
    return max(1, min(threads, -(-elements // KERNEL_GRAIN)))


def seconds_per_element(larger_s: float, smaller_s: float, larger_elements: int,
                        smaller_elements: int) -> Optional[float]:
    """The cost of one more element: the difference of the two calls' medians over the difference
    of their sizes. None when the larger call was not slower (noise swamped the difference)."""
    extra = larger_elements - smaller_elements
    if extra <= 0 or larger_s <= smaller_s:
        return None
    return (larger_s - smaller_s) / extra


@dataclass(frozen=True)
class Ceiling:
    """A large case's compute ceiling, measured in cache (or why it was not)."""
    shapes: tuple                         # (larger, smaller) in-cache shapes, as the tables write them
    per_element_s: Optional[float]        # kernel seconds per element of work in cache
    bytes_per_element: float              # the large case's bytes moved per element of work
    calls: int = 0                        # calls each in-cache median comes from (the fewer)
    why_not: str = ""                     # when per_element_s is None: why
    unit: str = "elem"                    # the element of work: an output element, or the operator's
                                          # own unit (CtcLoss: a cell of the alpha lattice)

    @property
    def elements_per_s(self) -> Optional[float]:
        return 1.0 / self.per_element_s if self.per_element_s else None

    @property
    def gbps(self) -> Optional[float]:
        """The in-cache rate as the GB/s it would take at the large case's bytes per element."""
        eps = self.elements_per_s
        return eps * self.bytes_per_element / 1e9 if eps else None


def not_measured(why: str, bytes_per_element: float = 0.0) -> Ceiling:
    return Ceiling((), None, bytes_per_element, 0, why)


def bound(memory_gbps: float, compute_gbps: Optional[float]) -> str:
    """Which roof is lower: 'compute' when the kernel in cache runs below the memory bandwidth (it
    cannot go faster from memory than it computes), else 'memory'; 'unknown' without a ceiling."""
    if compute_gbps is None:
        return "unknown"
    return "compute" if compute_gbps < memory_gbps else "memory"


def attainable(memory_gbps: float, compute_gbps: Optional[float]) -> float:
    """The roofline: min(memory roof, compute roof); the memory roof alone without a ceiling."""
    return memory_gbps if compute_gbps is None else min(memory_gbps, compute_gbps)


def default_l2() -> int:
    return l2_bytes() or DEFAULT_L2
