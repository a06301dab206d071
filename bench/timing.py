"""Timing: interleaved bursts to a time budget, the STREAM-like triad, and the small-call profile.

The machine is shared and noisy, so the contenders of one case (npuemu, PyTorch, triad) take turns,
a short burst of calls each per round: a spell of load from other users hits all of them alike, and
their ratio holds better than their absolute times. A burst rather than a single call because a
thread pool that sits idle between calls falls asleep, and on this virtual machine waking a sleeping
OpenMP worker costs milliseconds: calls back to back, as in a real program, keep it awake, and the
first call of a burst (the only one that can pay for the wake-up) is a minority of the samples.
Each reported time is the median of all calls.
"""
from __future__ import annotations

import cProfile
import io
import os
import pstats
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

import acl
from aclnn_api import _kernels


@dataclass(frozen=True)
class Budget:
    seconds: float     # stop after this long, once min_rounds rounds are done
    min_rounds: int
    max_rounds: int
    warmup: int        # untimed calls of each contender first
    cap: float = 0.0   # stop after this long even short of min_rounds (at least one round); 0: no cap
    burst: float = 0.0  # seconds of back-to-back calls per contender per round (3 to 200 calls); 0: one call
    clean_caches: bool = False  # write back what the previous contender left dirty before each turn


BUDGETS = {"4x4": Budget(0.2, 20, 1000, 20, burst=0.002), "1e5": Budget(0.4, 8, 200, 3, burst=0.02),
           "large": Budget(2.0, 5, 20, 1, cap=8.0, clean_caches=True)}
QUICK = Budget(0.0, 2, 2, 1)
MIN_BURST, MAX_BURST = 3, 200   # calls per burst


def interleaved_medians(contenders: dict, budget: Budget) -> tuple[dict, int]:
    """{name: median seconds per call} of the calls, run in turns until the budget is spent; and the
    number of calls the smallest sample holds."""
    for call in contenders.values():
        for _ in range(budget.warmup):
            call()
    samples: dict = {name: [] for name in contenders}
    scrub = CacheScrub() if budget.clean_caches else None
    start = time.perf_counter()
    rounds = 0
    while True:
        for name, call in contenders.items():
            in_cache = isinstance(call, InCache)
            if scrub is not None and not in_cache:
                scrub()
            times = _burst(call, call.burst if in_cache else budget.burst)
            samples[name] += times
            if in_cache:
                call.timed += len(times)
        rounds += 1
        spent = time.perf_counter() - start
        if rounds >= budget.max_rounds or (rounds >= budget.min_rounds and spent >= budget.seconds):
            break
        if budget.cap and spent >= budget.cap:
            break
    return {name: statistics.median(values) for name, values in samples.items()}, min(map(len, samples.values()))


def _burst(call: Callable, seconds: float) -> list:
    """Seconds of each call of a burst: one call, or back-to-back calls for about `seconds`."""
    times = []
    begin = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        call()
        t1 = time.perf_counter()
        times.append(t1 - t0)
        if not seconds or len(times) >= MAX_BURST or (len(times) >= MIN_BURST and t1 - begin >= seconds):
            return times


class InCache:
    """A contender timed with its data in cache among contenders timed from memory (a roofline's
    compute ceiling, see roofline.py): a burst of back-to-back calls per turn whatever the budget
    says, so that all but the first call find back in cache the data the previous contender evicted
    (the median ignores that first call); and no cache scrub before its turn: its data is a few
    hundred KiB, which displaces little of what the previous contender left dirty, and no more than
    the first call of the burst pays for what it does displace."""

    def __init__(self, call: Callable[[], None], burst: float):
        self.call, self.burst = call, burst
        self.timed = 0      # calls its median comes from (counted by interleaved_medians)

    def __call__(self) -> None:
        self.call()


class CacheScrub:
    """Reads a buffer of 1.5 times the last-level cache, untimed, before a contender's turn: the
    output the previous contender left dirty in the cache (up to the cache's size; npuemu's large
    outputs bypass it) is written back now rather than during the next one's call. Without it, the
    contender that runs after one with cached stores pays for them, which favoured whoever came
    after npuemu."""

    def __init__(self):
        self.buffer = np.ones(int(1.5 * _last_level_cache_bytes()) // 4, dtype=np.float32)

    def __call__(self) -> None:
        self.buffer.sum()


def _last_level_cache_bytes(default: int = 32 << 20) -> int:
    return max((size for _, _, size in cache_levels()), default=default)


def cache_levels(root: str = "/sys/devices/system/cpu/cpu0/cache") -> list:
    """(level, type, bytes) of each cache of cpu0 that sysfs lists (type: Data, Instruction, Unified)."""
    found = []
    for index in range(8):
        try:
            with open(os.path.join(root, "index%d" % index, "size")) as handle:
                text = handle.read().strip()
            with open(os.path.join(root, "index%d" % index, "level")) as handle:
                level = int(handle.read())
            with open(os.path.join(root, "index%d" % index, "type")) as handle:
                kind = handle.read().strip()
        except (OSError, ValueError):
            break
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        found.append((level, kind, int(text.rstrip("KMG")) * scale))
    return found


class Triad:
    """a[i] = b[i] + 3·c[i] over float32 buffers moving `nbytes` in all (3 × 4 bytes per element,
    STREAM's count: two reads and one write), in the kernels' thread pool."""

    def __init__(self, nbytes: int):
        self.n = max(1, nbytes // 12)
        self.a = np.zeros(self.n, dtype=np.float32)
        self.b = np.ones(self.n, dtype=np.float32)
        self.c = np.full(self.n, 2.0, dtype=np.float32)
        self.pointers = (self.a.ctypes.data, self.b.ctypes.data, self.c.ctypes.data)

    @property
    def nbytes(self) -> int:
        return 12 * self.n

    def __call__(self) -> None:
        _kernels.stream_triad(*self.pointers, self.n, 3.0)

    def verify(self) -> bool:
        self()
        return bool(self.a[0] == 7.0 and self.a[-1] == 7.0)


class NpuemuCall:
    """npuemu's whole two-phase call on prepared device tensors: GetWorkspaceSize, the second phase
    on the stream, aclrtSynchronizeStream. The workspace is allocated once, from a first call."""

    def __init__(self, device, first_phase: Callable, second_phase: Callable, args: tuple):
        self.device, self.first_phase, self.second_phase, self.args = device, first_phase, second_phase, args
        self.workspace_size, executor, ret = first_phase(*args)
        self.status, self.message = ret, (acl.get_recent_err_msg() or "") if ret else ""
        if ret == 0:
            self.workspace = device.malloc(self.workspace_size) if self.workspace_size else None
            self._launch(self.workspace_size, executor)

    def _launch(self, size: int, executor) -> None:
        ret = self.second_phase(self.workspace if size else None, size, executor, self.device.stream)
        if ret == 0:
            ret = acl.rt.synchronize_stream(self.device.stream)
        if ret != 0:
            raise RuntimeError("npuemu call failed with %d: %s" % (ret, acl.get_recent_err_msg()))

    def __call__(self) -> None:
        size, executor, ret = self.first_phase(*self.args)
        if ret != 0 or size > self.workspace_size:
            raise RuntimeError("first phase returned %d (workspace %d): %s" % (ret, size, acl.get_recent_err_msg()))
        self._launch(size, executor)

    def phase_medians(self, calls: int) -> dict:
        """Median microseconds of each step over `calls` calls."""
        steps: dict = {"GetWorkspaceSize": [], "second phase (enqueue)": [], "synchronize_stream (runs the kernel)": []}
        for _ in range(calls):
            t0 = time.perf_counter()
            size, executor, ret = self.first_phase(*self.args)
            t1 = time.perf_counter()
            self.second_phase(self.workspace if size else None, size, executor, self.device.stream)
            t2 = time.perf_counter()
            acl.rt.synchronize_stream(self.device.stream)
            t3 = time.perf_counter()
            for name, seconds in zip(steps, (t1 - t0, t2 - t1, t3 - t2)):
                steps[name].append(seconds)
        return {name: statistics.median(values) * 1e6 for name, values in steps.items()}


def profile_text(call: Callable, calls: int, top: int = 15) -> str:
    """cProfile of `calls` calls: the top functions by own time (tottime)."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        call()
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    lines = out.getvalue().splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls"))
    return "\n".join(_shorten(line) for line in lines[header:] if line.strip())


def _shorten(line: str) -> str:
    """The file path of a pstats line from the package (or bench/, or the stdlib) on."""
    head, space, path = line.rpartition(" ")
    if "site-packages/" in path:
        path = path.split("site-packages/", 1)[1]
    elif "/bench/bench/" in path or path.startswith(os.path.dirname(__file__)):
        path = "bench/" + path.rpartition("/")[2]
    elif "/lib/python3" in path:
        path = path.split("/lib/", 1)[1]
    return head + space + path
