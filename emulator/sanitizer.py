"""The sanitizer: what the card would silently get wrong, reported with both sites (docs/sanitizer.md).

Levels (NPUEMU_SANITIZE): `off`; `memcheck`: faults of queued work, overruns into an allocation's
padding, misaligned tensors, tensors destroyed between the two phases, outputs (and workspaces) that
overlap themselves or another view of the launch; `full`: also

- racecheck: two tasks on different streams, not ordered, where one writes what the other touches
  (device memory, or the host memory of a copy or memset);
- synccheck: a synchronous host call (aclrtMemcpy, aclrtMemset, ...) touching memory that queued,
  unsynchronised work touches (device memory, or host memory that a copy writes); host memory changed
  or freed (unmapped) while an async copy still needs it;
  memory freed, a stream destroyed or a device reset while work queued on it was never synchronised;
- initcheck: a kernel or a copy reading device bytes that nothing ever wrote. Such bytes read as the
  poison pattern 0xFF (a NaN in every floating type), as fresh memory on the card is garbage.

Order is tracked with vector clocks, as the happens-before checkers of ThreadSanitizer do: each
stream counts its tasks; a task's clock says, for every stream, how many of its tasks are ordered
before it. A stream's clock takes in an event's clock (at aclrtRecordEvent) at each
aclrtStreamWaitEvent; what the host has seen complete (a synchronisation) orders it before all later
work, and is kept once for all streams: each stream keeps only the tasks the host has not seen as
pending, and only those are checked against. racecheck and
synccheck follow the program's order of calls, not the emulator's order of running, so eager and
queued execution report alike; initcheck (and memcheck's faults) are about the bytes as they are when
read. Device memory is tracked as byte ranges (a strided view counts as the whole range from its first
element to its last); a kernel's ranges are checked where it resolves them (`touched`), a copy's before
and after it runs.
"""
from __future__ import annotations

import bisect
import ctypes
import itertools
import threading
import zlib
from typing import Iterator, Optional, Sequence

import numpy as np

from . import report, status
from .dtypes import item_size
from .sites import Site, user_site

ALIGNMENT = 32   # tensorData must be 32-byte aligned (the aclCreateTensor documentation)
PENDING = 1 << 16  # unsynchronised tasks remembered per stream: a program that never synchronises
                   # (eager mode) keeps the newest, and the memory they hold stays bounded
POISON = 0xFF    # a NaN in fp32/fp16/bf16/fp64, -1 in every integer type


class Access:
    """A byte range [start, end) of device memory that a task reads or writes, as a report names it."""

    __slots__ = ("start", "end", "write", "label", "task", "epoch")

    def __init__(self, start: int, end: int, write: bool, label, task, epoch: int):
        self.start, self.end, self.write, self.label, self.task, self.epoch = start, end, write, label, task, epoch

    def verb(self) -> str:
        return "write" if self.write else "read"

    def what(self) -> str:
        label = " of %s" % self.label if self.label else ""
        return "[0x%x, 0x%x)%s" % (self.start, self.end, label)


class StreamClock:
    """A stream's vector clock (stream handle -> tasks of that stream ordered before its next task) and
    its tasks that the host has not yet seen complete, in the order queued: (epoch, task); a task's
    ranges (Task.ranges()) are only asked for when something is checked against them. The host memory
    of its pending copies and memsets is kept apart (`host`): racecheck compares it with other streams'
    host memory only, not with every pending task's device ranges."""

    __slots__ = ("handle", "clock", "count", "pending", "epochs", "last_task", "index", "waits",
                 "host", "host_box")

    def __init__(self, handle: int):
        self.handle = handle
        self.count = 0                       # tasks queued on the stream
        self.clock: dict = {}
        self.pending: list[tuple] = []
        self.epochs: list[int] = []          # the pending tasks' epochs, for bisect
        self.last_task = None
        self.index: Optional[AccessIndex] = None  # the pending tasks' ranges by where they lie, once asked
        self.waits: list[tuple] = []         # (count, the awaited record's clock): waits, oldest first
        self.host: list[HostCopy] = []       # the pending tasks' host memory, in the order queued
        self.host_box = _EMPTY               # (low, high) of that memory (or more: see _cut_host)

    def after(self, stream_handle: int, epoch: int) -> Optional[int]:
        """The count after which this stream's tasks come after task `epoch` of stream `stream_handle`
        through a wait for an event recorded behind it (None: none of them do)."""
        for count, recorded in self.waits:
            if recorded.get(stream_handle, 0) >= epoch:
                return count
        return None

    def accesses(self) -> "AccessIndex":
        """The pending tasks' device ranges, by where they lie: built when first asked (most streams are
        never checked against: one stream synchronised each step), then kept up to date as tasks are
        queued and cut."""
        if self.index is None:
            self.index = AccessIndex()
            for epoch, task in self.pending:
                self.index.add(epoch, task)
        return self.index

    def first_conflict(self, reads: Sequence[tuple], writes: Sequence[tuple], after: int) -> Optional[int]:
        """The epoch of the oldest pending task later than `after` that a task with these ranges races with
        (it writes what they touch, or reads what they write), or None. The oldest such task is looked at
        first, as a loop that races does at each step: then the index is not searched (it would visit
        every range that meets: O(N) with N such tasks); else the index, told the epoch it can stop at."""
        at = bisect.bisect_right(self.epochs, after)
        if at == len(self.epochs):
            return None
        oldest_epoch, oldest = self.pending[at]
        oldest_reads, oldest_writes = oldest.ranges()
        if len(oldest_reads) + len(oldest_writes) <= _DIRECT and len(reads) + len(writes) <= _DIRECT:
            if _meets(oldest_reads, oldest_writes, reads, writes):
                return oldest_epoch
            at += 1
        floor = self.epochs[at] if at < len(self.epochs) else None
        return self.accesses().first_conflict(reads, writes, after, floor) if floor is not None else None

    def pending_task(self, epoch: int):
        """The pending task queued as `epoch`."""
        return self.pending[bisect.bisect_left(self.epochs, epoch)][1]

    def queued(self, epoch: int, task) -> None:
        """`task` joins the pending ones (and the index, once built)."""
        if self.index is not None:
            self.index.add(epoch, task)

    def queued_host(self, copies: list) -> None:
        """The host memory of a task queued now joins the stream's (and its box grows to take it in)."""
        self.host.extend(copies)
        for copy in copies:
            low, high = self.host_box if self.host_box is not _EMPTY else (copy.start, copy.end)
            self.host_box = (min(low, copy.start), max(high, copy.end))

    def cut(self, count: int) -> Sequence:
        """The oldest `count` pending tasks are done with (seen by the host, or too old to keep): the
        host copies of theirs that leave the stream's are returned (none, the usual case: `()`, made
        without a call). Costs what was cut, not what stays."""
        if self.index is not None:
            if count >= len(self.pending):
                self.index = None  # (built again if asked)
            else:
                through = self.epochs[count - 1]
                for _, task in self.pending[:count]:
                    self.index.drop(task, through)
        del self.pending[:count], self.epochs[:count]
        gone = self._cut_host() if self.host else ()
        if self.epochs:  # a wait before the oldest pending task orders them all: the latest such one is enough
            older = [wait for wait in self.waits if wait[0] < self.epochs[0]]
            self.waits = older[-1:] + [wait for wait in self.waits if wait[0] >= self.epochs[0]]
        else:
            self.waits = []
        return gone

    def _cut_host(self) -> list:
        """The host memory of the tasks cut from the pending ones leaves the stream's (returned). The box
        stays as it was while some is left: a box too large only costs a look (at the memory left), a
        box worked out again cost a look at all of it at every cut. (Asked only while some is kept.)"""
        if not self.epochs:  # all of it, as is usual
            gone, self.host, self.host_box = self.host, [], _EMPTY
            return gone
        kept = bisect.bisect_left(self.host, self.epochs[0], key=_epoch_of)
        gone = self.host[:kept]
        del self.host[:kept]
        if not self.host:
            self.host_box = _EMPTY
        return gone


def _epoch_of(copy: "HostCopy") -> int:
    return copy.epoch


def _serial_of(copy: "HostCopy") -> int:
    return copy.serial


class _Epochs:
    """The epochs of a stream's pending tasks that read (or write) one range, oldest first: those cut
    leave from the front (`head`), without moving the list each time."""

    __slots__ = ("epochs", "head")

    def __init__(self) -> None:
        self.epochs: list[int] = []
        self.head = 0

    def __bool__(self) -> bool:
        return self.head < len(self.epochs)

    def add(self, epoch: int) -> None:
        if not self.epochs or self.epochs[-1] != epoch:  # (a task reading one range twice counts once)
            self.epochs.append(epoch)

    def first_after(self, epoch: int) -> Optional[int]:
        """The oldest epoch later than `epoch`, or None."""
        at = bisect.bisect_right(self.epochs, epoch, self.head)
        return self.epochs[at] if at < len(self.epochs) else None

    def drop_through(self, epoch: int) -> None:
        """The epochs up to `epoch` leave."""
        self.head = bisect.bisect_right(self.epochs, epoch, self.head)
        if self.head > 64 and 2 * self.head > len(self.epochs):
            del self.epochs[:self.head]
            self.head = 0


class _Span:
    """One byte range [start, end) that pending tasks of a stream touch, and which of them write and read it."""

    __slots__ = ("start", "end", "writes", "reads")

    def __init__(self, start: int, end: int):
        self.start, self.end = start, end
        self.writes, self.reads = _Epochs(), _Epochs()


class AccessIndex:
    """A stream's pending tasks' device ranges, by where they lie, so that a check of a range looks at
    the tasks whose ranges meet it only: one stream's launch or host call is not O(N) with N tasks
    pending on another that works on memory of its own (a bounding box of all of them did that job until
    next-fit addresses put the other stream's memory inside it: 2.5 M range tests in 200 iterations).
    A loop reuses its tensors, so the distinct ranges (`_Span`s) are few and each keeps its tasks' epochs.
    The spans are grouped by length class (at most 2^k bytes): those of class k that meet [start, end)
    start less than 2^k bytes before it, found by bisect on the class's sorted starts."""

    def __init__(self) -> None:
        self.spans: dict = {}    # (start, end) -> _Span
        self.classes: dict = {}  # k -> (sorted distinct starts, {start: [_Span, ...]}) of spans <= 2^k bytes

    def add(self, epoch: int, task) -> None:
        """Task `epoch` (the newest) touches its ranges."""
        reads, writes = task.ranges()
        for entries, write in ((writes, True), (reads, False)):
            for entry in entries:
                span = self.spans.get((entry[0], entry[0] + entry[1])) or self._new(entry[0], entry[0] + entry[1])
                (span.writes if write else span.reads).add(epoch)

    def drop(self, task, through: int) -> None:
        """`task`, cut with every pending task up to epoch `through`, leaves (spans left empty with it)."""
        for entries in task.ranges():
            for entry in entries:
                span = self.spans.get((entry[0], entry[0] + entry[1]))
                if span is not None:
                    span.writes.drop_through(through)
                    span.reads.drop_through(through)
                    if not span.writes and not span.reads:
                        self._remove(span)

    def first(self, start: int, end: int, write: bool, after: int, floor: Optional[int] = None) -> Optional[int]:
        """The epoch of the oldest task later than `after` that writes a byte of [start, end), or (if
        `write`: an access to check against reads too) reads one; None if none does. `floor`: the oldest
        epoch there can be (found: the search ends)."""
        found = None
        for length_class, (starts, at) in self.classes.items():
            for span_start in starts[bisect.bisect_right(starts, start - (1 << length_class)):
                                     bisect.bisect_left(starts, end)]:
                for span in at[span_start]:
                    if span.end <= start:
                        continue
                    for epochs in (span.writes, span.reads) if write else (span.writes,):
                        epoch = epochs.first_after(after)
                        if epoch is not None and (found is None or epoch < found):
                            if epoch == floor:
                                return epoch
                            found = epoch
        return found

    def first_conflict(self, reads: Sequence[tuple], writes: Sequence[tuple], after: int,
                       floor: Optional[int] = None) -> Optional[int]:
        """The epoch of the oldest task later than `after` that a task with these ranges races with: one
        that writes what it touches, or reads what it writes (two reads are no race: not looked at).
        `floor` as for `first`."""
        found = None
        for entries, write in ((writes, True), (reads, False)):
            for entry in entries:
                epoch = self.first(entry[0], entry[0] + entry[1], write, after, floor)
                if epoch is not None and (found is None or epoch < found):
                    if epoch == floor:
                        return epoch
                    found = epoch
        return found

    def _new(self, start: int, end: int) -> _Span:
        span = self.spans[(start, end)] = _Span(start, end)
        starts, at = self.classes.get(_length_class(end - start)) or self.classes.setdefault(
            _length_class(end - start), ([], {}))
        here = at.get(start)
        if here is None:
            bisect.insort(starts, start)
            here = at[start] = []
        here.append(span)
        return span

    def _remove(self, span: _Span) -> None:
        del self.spans[(span.start, span.end)]
        length_class = _length_class(span.end - span.start)
        starts, at = self.classes[length_class]
        here = at[span.start]
        here.remove(span)
        if not here:
            del at[span.start]
            del starts[bisect.bisect_left(starts, span.start)]
            if not starts:
                del self.classes[length_class]


def _length_class(nbytes: int) -> int:
    """k such that 2^(k-1) < nbytes <= 2^k."""
    return (nbytes - 1).bit_length()


_EMPTY = (0, 0)


def _join(into: dict, other: dict) -> None:
    for key, value in other.items():
        if into.get(key, 0) < value:
            into[key] = value


_DIRECT = 64  # ranges of a task and a query few enough to compare pairwise (a 2-D copy's rows: the index)


def _meets(task_reads: Sequence[tuple], task_writes: Sequence[tuple], reads: Sequence[tuple],
           writes: Sequence[tuple]) -> bool:
    """Whether a task with ranges (task_reads, task_writes) races with one with (reads, writes)."""
    return any(_conflict(task_writes, entry[0], entry[0] + entry[1]) or _conflict(task_reads, entry[0], entry[0] + entry[1])
               for entry in writes) or any(_conflict(task_writes, entry[0], entry[0] + entry[1]) for entry in reads)


def _conflict(ranges: Sequence[tuple], start: int, end: int) -> Optional[tuple]:
    """The first of `ranges` ((address, nbytes[, label]), ...) that overlaps [start, end)."""
    for entry in ranges:
        if entry[0] < end and start < entry[0] + entry[1]:
            return entry
    return None


def _access(entry: tuple, write: bool, task, epoch: int) -> Access:
    return Access(entry[0], entry[0] + entry[1], write, entry[2] if len(entry) > 2 else None, task, epoch)


def _task_role(access: Access, stream_name: str) -> str:
    return "%s by %s on stream %s, launched" % (access.verb(), access.task.name, stream_name)


class HostRows:
    """Host memory that a copy or memset reads (`role` "reads") or writes ("writes"): [start, end), or a
    2-D copy's rows (`width` bytes each, `pitch` apart), not the gaps between them, which the host may
    use meanwhile (pitch 0: one range)."""

    __slots__ = ("start", "end", "role", "pitch", "width")

    def __init__(self, start: int, end: int, role: str, pitch: int = 0, width: int = 0):
        self.start, self.end, self.role = start, end, role
        self.pitch, self.width = (pitch, width) if pitch != width else (0, 0)  # rows that touch: one range

    @property
    def write(self) -> bool:
        return self.role == "writes"

    def key(self) -> tuple:
        """What tells two such memories apart: copies handed the same one share its HostRange."""
        return self.start, self.end, self.pitch, self.width

    def rows(self) -> int:
        return (self.end - self.start - self.width) // self.pitch + 1 if self.pitch else 1

    def sum(self) -> int:
        return _checksum(self.start, self.end - self.start, self.pitch, self.width)

    def mapped(self) -> bool:
        return _mapped(self.start, self.end - self.start)

    def hits(self, low: int, high: int) -> bool:
        """Whether a byte of [low, high) is one of its bytes."""
        if high <= self.start or self.end <= low:
            return False
        if not self.pitch:
            return True
        first = max(0, (low - self.start - self.width) // self.pitch + 1)  # the first row that ends past low
        return first < self.rows() and self.start + first * self.pitch < high

    def overlaps(self, other: "HostRows") -> bool:
        """Whether the two share a byte: a row's, for a 2-D copy."""
        if other.end <= self.start or self.end <= other.start:
            return False
        if not other.pitch:
            return self.hits(other.start, other.end)
        if not self.pitch:
            return other.hits(self.start, self.end)
        return _rows_meet(*sorted((self, other), key=HostRows.rows))


def _rows_meet(fewer: HostRows, more: HostRows) -> bool:
    """Whether a row of `fewer` shares a byte with a row of `more` (both 2-D): hits() of the rows of
    `fewer` that lie within `more`'s range, all at once."""
    first = max(0, (more.start - fewer.start - fewer.width) // fewer.pitch + 1)
    last = min(fewer.rows(), (more.end - fewer.start - 1) // fewer.pitch + 1)
    starts = fewer.start + np.arange(first, last, dtype=np.int64) * fewer.pitch
    rows = np.maximum(0, (starts - more.start - more.width) // more.pitch + 1)
    return bool(((rows < more.rows()) & (more.start + rows * more.pitch < starts + fewer.width)).any())


_COPY_SERIALS = itertools.count()


class HostCopy(HostRows):
    """Host memory an async copy (or a memset) reads or writes, from its aclrtMemcpyAsync until the host
    has seen the copy complete. The checksum of what the memory should hold (taken when queued, and
    again after a copy in stream order wrote it) is kept by its `range`, with the other copies there."""

    __slots__ = ("task", "reported", "stream_handle", "epoch", "range", "serial")

    def __init__(self, task, start: int, end: int, role: str, pitch: int = 0, width: int = 0):
        super().__init__(start, end, role, pitch, width)
        self.task = task
        self.serial = next(_COPY_SERIALS)        # the order handed, across streams (as reports come)
        self.reported = False
        self.stream_handle: Optional[int] = None  # where the task was queued, and as which task of its
        self.epoch = 0                            # stream (Tracker.enqueued): None while not queued
        self.range: Optional[HostRange] = None    # HostIndex.watch

    def access(self) -> Access:
        """The memory as a report names it, with its task (once queued)."""
        return Access(self.start, self.end, self.write, "host memory", self.task, self.epoch)


class HostRange(HostRows):
    """One range (or one 2-D copy's rows) of host memory handed to pending copies, and the checksum each
    of them expects it to hold: one probe and one checksum check them all (K downloads into one buffer
    cost one sum a check, not K). Each expects `common` but those of `own`, which expect another (a
    change between two of them queued, a blocking callback's refill for the copies behind it)."""

    __slots__ = ("copies", "common", "own")

    def __init__(self, start: int, end: int, pitch: int, width: int):
        super().__init__(start, end, "", pitch, width)
        self.copies: dict = {}  # the copies watched (not reported), in the order queued
        self.common = 0
        self.own: dict = {}     # copy -> the checksum it expects, where not `common`

    def now(self) -> Optional[int]:
        """The checksum of the memory now; None when it is no longer mapped (an aclrtFreeHost, a NumPy
        array or a std::vector gone with its pages)."""
        return self.sum() if self.mapped() else None

    def expected(self, copy: HostCopy) -> int:
        return self.own.get(copy, self.common)

    def watch(self, copy: HostCopy, checksum: int) -> None:
        if not self.copies:
            self.common = checksum
        self.copies[copy] = None
        self.expect(copy, checksum)

    def unwatch(self, copy: HostCopy) -> None:
        self.copies.pop(copy, None)
        self.own.pop(copy, None)

    def expect(self, copy: HostCopy, checksum: int) -> None:
        if checksum == self.common:
            self.own.pop(copy, None)
        else:
            self.own[copy] = checksum

    def expect_all(self, checksum: int) -> None:
        """Every copy there expects `checksum` (a copy wrote the memory in stream order)."""
        self.common = checksum
        self.own.clear()

    def changed(self, now: Optional[int]) -> list:
        """The copies watched that expect another checksum than `now` (None: the memory is unmapped):
        a look at those set apart only, when the memory holds what most of them expect."""
        if now is None:  # freed under every copy, whatever each expects
            return list(self.copies)
        if now != self.common:
            return [copy for copy in self.copies if self.own.get(copy) != now]
        return [copy for copy, checksum in self.own.items() if checksum != now]


def _with_sums(copies) -> Iterator[tuple]:
    """(copy, the checksum of its range now: None when unmapped) of those of `copies` not reported: one
    probe and one sum a range (K downloads into one buffer cost one sum, not K)."""
    now: dict = {}
    for copy in copies:
        if not copy.reported:
            range_ = copy.range
            if range_ not in now:
                now[range_] = range_.now()
            yield copy, now[range_]


WIDE = 1 << 16  # bytes: longer host ranges are looked at one by one (few: large staging buffers)


class HostIndex:
    """The HostRanges of pending copies, by where they lie: the ranges that a copy's host memory meets
    are among the narrow ones starting less than the longest one's length before it (bisect on their
    sorted starts) and the wide ones, not among every pending copy (which cost a download O(K) with K
    copies pending: 8 M overlap tests for 2000 downloads into slices of one buffer)."""

    def __init__(self) -> None:
        self.ranges: dict = {}   # HostRange.key() -> HostRange
        self.starts: list = []   # the distinct starts of the narrow ranges, sorted
        self.at: dict = {}       # start -> the narrow ranges starting there
        self.lengths: dict = {}  # length -> how many narrow ranges have it
        self.reach = 0           # the longest narrow range
        self.wide: list = []

    def watch(self, copy: HostCopy, checksum: int) -> None:
        """`copy`, expecting its memory to hold `checksum`, joins the range of its memory."""
        key = copy.key()
        range_ = self.ranges.get(key)
        if range_ is None:
            range_ = self.ranges[key] = HostRange(*key)
            self._add(range_)
        range_.watch(copy, checksum)
        copy.range = range_

    def unwatch(self, copy: HostCopy) -> None:
        """`copy` is no longer checked (settled, dropped, or reported); an empty range leaves."""
        range_ = copy.range
        range_.unwatch(copy)
        if not range_.copies and self.ranges.get(range_.key()) is range_:
            del self.ranges[range_.key()]
            self._remove(range_)

    def meeting(self, memory: HostRows) -> list:
        """The ranges that share a byte with `memory`."""
        found = [range_ for range_ in self.wide if range_.overlaps(memory)]
        starts = self.starts
        for start in starts[bisect.bisect_right(starts, memory.start - self.reach):
                            bisect.bisect_left(starts, memory.end)]:
            found.extend(range_ for range_ in self.at[start] if range_.overlaps(memory))
        return found

    def _add(self, range_: HostRange) -> None:
        length = range_.end - range_.start
        if length > WIDE:
            self.wide.append(range_)
            return
        ranges = self.at.get(range_.start)
        if ranges is None:
            bisect.insort(self.starts, range_.start)
            ranges = self.at[range_.start] = []
        ranges.append(range_)
        self.lengths[length] = self.lengths.get(length, 0) + 1
        self.reach = max(self.reach, length)

    def _remove(self, range_: HostRange) -> None:
        length = range_.end - range_.start
        if length > WIDE:
            self.wide.remove(range_)
            return
        ranges = self.at[range_.start]
        ranges.remove(range_)
        if not ranges:
            del self.at[range_.start]
            del self.starts[bisect.bisect_left(self.starts, range_.start)]
        self.lengths[length] -= 1
        if not self.lengths[length]:
            del self.lengths[length]
            if length == self.reach:
                self.reach = max(self.lengths, default=0)


_readable: list = []  # emulator.memory.host_range_readable, once imported (memory imports this module)


def _mapped(address: int, nbytes: int) -> bool:
    if not _readable:  # (an import statement at each call cost 1.3 us, twice a copy)
        from .memory import host_range_readable
        _readable.append(host_range_readable)
    return _readable[0](address, nbytes)


SUMMED_WHOLE = 1 << 20   # host memory up to this size is summed whole; larger, SAMPLES pages of it
SAMPLES, SAMPLE = 256, 4096


def _checksum(address: int, nbytes: int, pitch: int = 0, width: int = 0) -> int:
    """CRC-32 of host memory [address, address+nbytes), or of a 2-D copy's rows there (`width` bytes
    `pitch` apart) one after the other: all of its bytes up to SUMMED_WHOLE of them, else SAMPLES evenly
    spread pages of them (a gigabyte upload is not read three times over; a refill is still found)."""
    if not pitch and nbytes <= SUMMED_WHOLE:  # the common case, at once (three times a copy: _at inline)
        return zlib.crc32((ctypes.c_char * nbytes).from_address(address))
    size, part = _parts(address, nbytes, pitch, width)
    if size <= SUMMED_WHOLE:
        return part(0, size, 0)
    crc = 0
    for page in range(SAMPLES):  # the first page starts the bytes, the last one ends them
        crc = part(page * (size - SAMPLE) // (SAMPLES - 1), SAMPLE, crc)
    return crc


def _at(address: int, nbytes: int):
    return (ctypes.c_char * nbytes).from_address(address)


def _parts(address: int, nbytes: int, pitch: int, width: int) -> tuple:
    """(size, part) of the bytes _checksum sums: their number, and part(offset, count, crc), the CRC-32
    `crc` carried on over `count` of them from `offset`."""
    if not pitch:
        return nbytes, lambda offset, count, crc: zlib.crc32(_at(address + offset, count), crc)
    rows = (nbytes - width) // pitch + 1  # one element a row: numpy gathers them at memcpy speed
    grid = np.ndarray((rows,), np.dtype((np.void, width)), buffer=_at(address, nbytes), strides=(pitch,))
    return rows * width, lambda offset, count, crc: _rows_crc(address, pitch, grid, offset, count, crc)


def _rows_crc(address: int, pitch: int, grid: np.ndarray, offset: int, count: int, crc: int) -> int:
    """The CRC-32 `crc` carried on over bytes [offset, offset+count) of the rows of `grid` one after the
    other (rows `pitch` apart from `address`): the piece of its first row and of its last as they are in
    memory, the rows between gathered into one buffer."""
    width = grid.dtype.itemsize
    (first, begin), (last, end) = divmod(offset, width), divmod(offset + count, width)
    if first == last:
        return zlib.crc32(_at(address + first * pitch + begin, end - begin), crc)
    crc = zlib.crc32(_at(address + first * pitch + begin, width - begin), crc)
    if last > first + 1:
        crc = zlib.crc32(np.ascontiguousarray(grid[first + 1:last]), crc)
    return zlib.crc32(_at(address + last * pitch, end), crc) if end else crc


class Tracker:
    """The sanitizer's state for the whole process."""

    def __init__(self) -> None:
        self.memory = True       # memcheck's reports
        self.hazards = True      # racecheck, synccheck, initcheck
        self.clocks: dict[int, StreamClock] = {}   # stream handle -> its clock
        self.busy: dict[int, StreamClock] = {}     # those with pending tasks: what a check looks at (idle
                                                   # streams, however many, cost nothing)
        self.events: dict[int, dict] = {}          # event handle -> the clock of its latest record
        self.host: dict = {}                       # what the host has seen complete (see _host_saw)
        self.host_copies: dict = {}                # HostCopy -> None: those pending, in the order handed
        self.host_copies_of: dict = {}             # id(task) -> its HostCopy list (a task looks up its own)
        self.unqueued: dict = {}                   # HostCopy -> None: handed, their task not (yet) queued
        self.settling: list[HostCopy] = []         # cut from their stream's pending tasks: settled at the
                                                   # next synchronisation (_settle_host_copies)
        self.host_index = HostIndex()              # their memory, by where it lies
        self.running = None                        # the task running now, if any (whose site an access has)
        self.written_by_running: list = []         # (allocation, start, nbytes, runs or None) it resolved to write
        self.calling: Optional[str] = None         # the synchronous host call touching device memory now
        self.holding = threading.local()           # .stream, .epoch: the blocking callback this thread runs

    def configure(self, config) -> None:
        self.memory = config.checks_memory
        self.hazards = config.checks_hazards

    # -- order ----------------------------------------------------------------------------------

    def _clock_of(self, stream) -> StreamClock:
        state = self.clocks.get(stream.handle)
        if state is None:
            state = self.clocks[stream.handle] = StreamClock(stream.handle)
        return state

    def enqueued(self, stream, task) -> None:
        """A task was queued on `stream`: check its accesses against unordered work of other streams."""
        state = self.clocks.get(stream.handle) or self._clock_of(stream)
        epoch = state.count = state.clock[state.handle] = state.count + 1
        state.last_task = task
        if self.busy and (len(self.busy) > 1 or state.handle not in self.busy):  # another stream has work
            reads, writes = task.ranges()
            if reads or writes:  # event records and waits touch no memory: nothing to race with
                for other in self.busy.values():  # (a check changes no stream's work)
                    if other is not state:
                        self._check_race(stream, state, other, epoch, task, reads, writes)
        if self.host_copies:
            copies = self.host_copies_of.get(id(task))
            if copies:
                self._host_memory_queued(stream, state, epoch, copies)
        state.pending.append((epoch, task))
        self.busy[state.handle] = state
        state.epochs.append(epoch)
        state.queued(epoch, task)
        if len(state.epochs) > PENDING:
            gone = state.cut(PENDING // 2)
            if gone:
                self.settling.extend(gone)

    def _check_race(self, stream, state: StreamClock, other: StreamClock, epoch: int, task,
                    reads: Sequence[tuple], writes: Sequence[tuple]) -> None:
        """The new task against the pending tasks of `other` that it is not ordered after: the oldest of
        them that it races with, found through `other`'s index (a look at the tasks whose ranges meet
        the new task's only), is reported."""
        ordered = state.clock.get(other.handle, 0)
        if not other.epochs or other.epochs[-1] <= ordered:
            return
        earlier_epoch = other.first_conflict(reads, writes, ordered)
        if earlier_epoch is None:
            return
        earlier_task = other.pending_task(earlier_epoch)
        earlier_reads, earlier_writes = earlier_task.ranges()
        for entry in writes:
            start, end = entry[0], entry[0] + entry[1]
            hit, hit_write = _conflict(earlier_writes, start, end), True
            if hit is None:
                hit, hit_write = _conflict(earlier_reads, start, end), False
            if hit is not None:
                return self._report_race(stream, other, _access(hit, hit_write, earlier_task, earlier_epoch),
                                         _access(entry, True, task, epoch))
        for entry in reads:
            hit = _conflict(earlier_writes, entry[0], entry[0] + entry[1])
            if hit is not None:
                return self._report_race(stream, other, _access(hit, True, earlier_task, earlier_epoch),
                                         _access(entry, False, task, epoch))

    def _host_memory_queued(self, stream, state: StreamClock, epoch: int, copies: list) -> None:
        """The host memory of a copy or memset queued now as task `epoch` of `stream`: checked against the
        host memory of other streams' pending tasks that it is not ordered after (racecheck: two DMA
        engines go through it in no fixed order), then kept with its stream's."""
        for copy in copies:
            copy.stream_handle, copy.epoch = state.handle, epoch
            self.unqueued.pop(copy, None)
        if self.busy:
            low, high = min(copy.start for copy in copies), max(copy.end for copy in copies)
            for other in list(self.busy.values()):
                if other is not state and other.host and other.host_box[0] < high and low < other.host_box[1]:
                    self._check_host_race(stream, state, other, copies)
        state.queued_host(copies)

    def _check_host_race(self, stream, state: StreamClock, other: StreamClock, copies: list) -> None:
        """The new task's host memory against that of `other`'s pending tasks it is not ordered after: a
        write (a download, a memset) and any other access of a byte is a race, two reads are not."""
        ordered = state.clock.get(other.handle, 0)
        for earlier in reversed(other.host):  # the newest first: those not ordered before come last
            if earlier.epoch <= ordered:
                return
            for copy in copies:
                if (copy.write or earlier.write) and copy.overlaps(earlier):
                    return self._report_race(stream, other, earlier.access(), copy.access())

    def _report_race(self, stream, other: StreamClock, earlier: Access, access: Access) -> None:
        from .resource import HANDLES
        other_stream = HANDLES.get(other.handle) or HANDLES.retired(other.handle)
        other_name = other_stream.describe() if other_stream is not None else "0x%x" % other.handle
        kind = "write/write" if earlier.write and access.write else "read/write"
        report.publish(
            "race", "racecheck",
            "%s on stream %s %ss %s, which %s on stream %s %ss (%s), and nothing orders them (no event recorded "
            "after one and waited for before the other, no synchronisation between them): a %s race"
            % (access.task.name, stream.describe(), access.verb(), access.what(), earlier.task.name, other_name,
               earlier.verb(), earlier.what(), kind),
            (( _task_role(earlier, other_name), earlier.task.site), (_task_role(access, stream.describe()), access.task.site)),
            _allocations(earlier.start, access.start))

    def recorded(self, event, stream, record) -> None:
        """aclrtRecordEvent: the event stands for everything queued on `stream` so far. The record keeps
        its clock, for the event to fall back to if a later record is dropped (fell_back)."""
        self.events[event.handle] = record.order = dict(self._clock_of(stream).clock)

    def reset_event(self, event) -> None:
        self.events.pop(event.handle, None)

    def fell_back(self, event, record) -> None:
        """aclrtDestroyStreamForce dropped the event's latest record: the event stands for `record`, the
        one before (None: none) again, not for what the dropped one's stream had waited for."""
        if record is None or record.order is None:
            self.events.pop(event.handle, None)
        else:  # without the entries of streams gone since (_forget)
            self.events[event.handle] = {key: value for key, value in record.order.items() if key in self.clocks}

    def waited(self, stream, event) -> None:
        """aclrtStreamWaitEvent: `stream`'s later work comes after the event's record."""
        recorded = self.events.get(event.handle)
        if recorded:
            state = self._clock_of(stream)
            _join(state.clock, recorded)
            state.waits.append((state.count, recorded))  # a record's clock is never changed afterwards

    def host_saw_stream(self, stream) -> None:
        """The host saw everything queued on `stream` complete (a synchronisation)."""
        state = self.clocks.get(stream.handle)
        if state is not None:
            self._host_saw(state.clock)

    def next_clock(self, stream) -> dict:
        """The clock the next task queued on `stream` will have (itself included), as enqueued() makes
        it: what a callback queued next has seen complete when it runs. Known before the task is queued,
        as eager execution may run it at once."""
        state = self._clock_of(stream)
        clock = dict(state.clock)
        clock[state.handle] = state.count + 1
        return clock

    def host_saw_clock(self, clock: dict) -> None:
        """The host saw the work of `clock` complete (a callback runs: the work before it on its stream
        is done, so what the callback does on the host comes after it)."""
        self._host_saw(clock)

    def hold(self, stream_handle: Optional[int], epoch: int = 0) -> None:
        """This thread runs the blocking callback of `stream_handle` queued as its task `epoch` (None: no
        longer): until it returns, that stream's later tasks cannot run, so the callback's host accesses
        do not conflict with them."""
        self.holding.stream, self.holding.epoch = stream_handle, epoch

    def callback_starts(self, stream_handle: int, epoch: int) -> None:
        """The blocking callback queued as task `epoch` of `stream_handle` starts: the copies behind it
        cannot have run, and a change the host made to their memory before now races with them (the
        program's other threads are not ordered with the callback)."""
        self._check_host_copies(self._copies_behind(stream_handle, epoch),
                                "when a blocking callback ahead of the copy started, in the call")

    def callback_returned(self, stream_handle: int, epoch: int) -> None:
        """That callback returned: the work behind it starts only now, so the memory handed to the copies
        behind it is what they see as it is now (a callback that refills a staging buffer for the next
        upload is the usual pipeline, not a race)."""
        for copy, now in _with_sums(self._copies_behind(stream_handle, epoch)):
            if now is not None:
                copy.range.expect(copy, now)

    def _copies_behind(self, stream_handle: int, epoch: int) -> list:
        """The host copies queued behind task `epoch` of `stream_handle`: later on that stream, or on a
        stream that waits for an event recorded behind it."""
        if not self.host_copies:
            return []
        behind = set()
        for state in self.busy.values():
            after = epoch if state.handle == stream_handle else state.after(stream_handle, epoch + 1)
            if after is not None:
                behind.update(id(task) for count, task in state.pending if count > after)
        return [copy for copy in self.host_copies if id(copy.task) in behind]

    def host_saw_event(self, event) -> None:
        recorded = self.events.get(event.handle)
        if recorded:
            self._host_saw(recorded)

    def _host_saw(self, clock: dict) -> None:
        """The host saw the work of `clock` complete: it is ordered before everything queued afterwards,
        on any stream. That order is kept here only, not joined into every stream's clock (which cost
        each enqueue after a synchronisation a walk of every stream's entry): a stream's pending tasks
        are those the host has not seen, so what a clock says of tasks the host saw tells nothing.
        Only the streams whose entry grew are looked at."""
        host = self.host
        for handle, seen in clock.items():
            if host.get(handle, 0) < seen:
                host[handle] = seen
                state = self.clocks.get(handle)
                if state is not None and state.epochs and state.epochs[0] <= seen:
                    gone = state.cut(bisect.bisect_right(state.epochs, seen))
                    if gone:
                        self.settling.extend(gone)
                    if not state.pending:
                        del self.busy[handle]
        if self.settling or self.unqueued:
            self._settle_host_copies()

    def _unsynchronised(self, start: int, end: int, write: bool):
        """(stream handle, access) of queued work the host has not seen complete that conflicts with a
        host access of [start, end) (any access if `write`, writes only if not)."""
        held = getattr(self.holding, "stream", None)
        access = ((start, end - start),)  # only unseen work is pending: all of it, after 0
        for state in list(self.busy.values()):
            epoch = state.first_conflict((), access, 0) if write else state.first_conflict(access, (), 0)
            if epoch is None:
                continue
            # behind the blocking callback this thread runs, on its stream or through a wait for an event
            # recorded behind it: such work cannot have run
            behind = None if held is None else (self.holding.epoch if state.handle == held
                                                else state.after(held, self.holding.epoch + 1))
            if behind is not None and epoch > behind:
                continue
            task = state.pending_task(epoch)
            reads, writes = task.ranges()
            hit = _conflict(writes, start, end)
            if hit is not None:
                yield state.handle, _access(hit, True, task, epoch)
            else:
                yield state.handle, _access(_conflict(reads, start, end), False, task, epoch)

    # -- the host's own accesses ----------------------------------------------------------------------

    def host_access(self, call: str, site: Site, reads: Sequence[tuple], writes: Sequence[tuple],
                    host: Sequence[tuple] = ()) -> None:
        """A synchronous host call reads and writes device ranges now, and host memory (`host`: (address,
        nbytes, role[, pitch, width]), as handed_to_copy takes it): conflicts with unsynchronised queued
        work are missing synchronisations; reads of never-written bytes are uninitialised."""
        for ranges, write in ((reads, False), (writes, True)):
            for start, nbytes, label in ranges:
                for handle, access in self._unsynchronised(start, start + nbytes, write):
                    self._report_missing_sync(call, site, start, nbytes, label, write, handle, access)
                    break
        if host and self.host_copies:
            for address, nbytes, role, *rows in host:
                self._check_host_memory(call, site, HostRows(address, address + nbytes, role, *rows))
        for start, nbytes, label in reads:
            self._read(start, nbytes, label, "%s, called" % call, site)
        for start, nbytes, _ in writes:
            self._write(start, nbytes)

    def _check_host_memory(self, call: str, site: Site, memory: HostRows) -> None:
        """A synchronous call's host memory against what unsynchronised copies write there (downloads,
        memsets of pinned memory): the call does not wait for them, so it reads what was there before, or
        its write and theirs land in either order. Such a write is this finding, not a change the copy
        would report again (host memory in flight)."""
        held = getattr(self.holding, "stream", None)  # what waits for the blocking callback it runs has not run
        behind = set(self._copies_behind(held, self.holding.epoch)) if held is not None else ()
        for state in self.busy.values():
            if not state.host or memory.end <= state.host_box[0] or state.host_box[1] <= memory.start:
                continue
            for copy in state.host:
                if copy.write and copy not in behind and copy.overlaps(memory):
                    self._report_missing_sync(call, site, memory.start, memory.end - memory.start, "host memory",
                                              memory.write, state.handle, copy.access())
                    copy.reported = copy.reported or memory.write
                    return

    def _report_missing_sync(self, call: str, site: Site, start: int, nbytes: int, label: str, write: bool,
                             handle: int, access: Access) -> None:
        stream_name = _stream_name(handle)
        report.publish(
            "missing synchronisation", "synccheck",
            "%s %s [0x%x, 0x%x) (%s) now, while %s, queued on stream %s and not synchronised, %ss %s: the host call "
            "does not wait for queued work (call aclrtSynchronizeStream or aclrtSynchronizeEvent first)"
            % (call, "writes" if write else "reads", start, start + nbytes, label, access.task.name, stream_name,
               access.verb(), access.what()),
            (("host call %s" % call, site), (_task_role(access, stream_name), access.task.site)),
            _allocations(start))

    # -- lifecycle -----------------------------------------------------------------------------------

    def freeing(self, allocation, call: str, site: Site) -> None:
        """aclrtFree: unsynchronised work that uses the allocation will read freed memory."""
        for handle, access in self._unsynchronised(allocation.address, allocation.end, True):
            stream_name = _stream_name(handle)
            report.publish(
                "memory freed while in use", "synccheck",
                "%s frees allocation #%d while %s, queued on stream %s and not synchronised, %ss %s"
                % (call, allocation.serial, access.task.name, stream_name, access.verb(), access.what()),
                (("host call %s" % call, site), (_task_role(access, stream_name), access.task.site),
                 ("allocation made", allocation.site)),
                (allocation.describe(),))
            break

    def destroying_stream(self, stream, call: str, site: Site) -> None:
        """A stream goes (aclrtDestroyStream, a reset, aclFinalize) with work never synchronised."""
        state = self.clocks.pop(stream.handle, None)
        self.busy.pop(stream.handle, None)
        # its work runs now (or is dropped, with Force): afterwards none of it needs host memory any more
        self._forget_host_copies([copy for copy in self.host_copies if copy.task.stream is stream])
        if state is None:
            return
        unseen = state.count - self.host.pop(state.handle, 0)
        self._forget(state.handle)
        if unseen > 0 and state.last_task is not None:
            report.publish(
                "pending work destroyed", "synccheck",
                "%s with %d task(s) queued on stream %s that the program never synchronised (the last one: %s); "
                "synchronise the stream before destroying it" % (call, unseen, stream.describe(), state.last_task.name),
                (("host call %s" % call, site), ("last unsynchronised task %s, launched" % state.last_task.name,
                                                 state.last_task.site)),
                (report.Described(lambda: "stream %s, made at %s" % (stream.describe(), stream.site), (stream.site,)),))

    def _forget(self, handle: int) -> None:
        """A gone stream has no task left to order anything after: its entry leaves every clock. (Kept,
        the entries of every stream a process ever made made each launch's join walk them all: after
        600 streams, a 4x4 call took 60 us more.)"""
        for state in self.clocks.values():
            state.clock.pop(handle, None)
        for recorded in self.events.values():
            recorded.pop(handle, None)

    def host_freeing(self, start: int, end: int, call: str, site: Site) -> None:
        """aclrtFreeHost: an async copy the host has not seen complete still needs the memory."""
        for copy in self.host_copies:
            if copy.start < end and start < copy.end:
                report.publish(
                    "host memory in flight", "synccheck",
                    "%s frees host memory [0x%x, 0x%x) that %s %s, and the program has not synchronised with the "
                    "copy: on the card it may not have run yet" % (call, start, end, copy.task.name, copy.role),
                    (("host call %s" % call, site), ("%s, launched" % copy.task.name, copy.task.site)), ())
                copy.reported = True
                break

    def handed_to_copy(self, task, start: int, nbytes: int, role: str, pitch: int = 0, width: int = 0) -> None:
        """Queued work (an async copy or memset) will read (`role` "reads") or write host memory [start,
        start+nbytes) when it runs (rows of `width` bytes `pitch` apart for a 2-D copy)."""
        if nbytes > 0:
            copy = HostCopy(task, start, start + nbytes, role, pitch, width)
            self.host_index.watch(copy, copy.sum())
            self.host_copies[copy] = self.unqueued[copy] = None
            self.host_copies_of.setdefault(id(task), []).append(copy)

    def copy_running(self, task) -> None:
        """The copy runs now: the host memory it was handed must be as it was when queued, and so must the
        memory of the other copies there that it is about to write over (copy_ran)."""
        for copy in self.host_copies_of.get(id(task), ()):
            self._check_host_copies((copy,), "when the copy ran, in the call")
            if copy.role == "writes":  # (the copy itself among them: checked just now)
                for range_ in self.host_index.meeting(copy):
                    self._check_range(range_, "when %s ran, in the call" % task.name)

    def copy_ran(self, task) -> None:
        """The copy wrote the host memory it was handed: what it wrote is what that memory must hold until
        synchronised, for it and for every other copy handed memory there (a copy of the same stream that
        reads back what this one wrote, an upload from the buffer a download refills: the device changed
        it in stream order, not the host)."""
        for copy in self.host_copies_of.get(id(task), ()):
            if copy.role == "writes" and copy.mapped():  # (its own range among those it meets)
                for range_ in self.host_index.meeting(copy):
                    range_.expect_all(range_.sum())

    def _check_host_copies(self, copies, when: str) -> None:
        """Report those of `copies` whose host memory no longer holds what they expect: one probe and one
        checksum a range; the caller's site is looked up only for a report."""
        site = None
        for copy, now in _with_sums(copies):
            if now is None or copy.range.expected(copy) != now:
                site = site or user_site()
                self._report_changed(copy, "freed" if now is None else "changed", when, site)

    def _check_range(self, range_: HostRange, when: str) -> None:
        """_check_host_copies of every copy watched in `range_`, with a look at those that differ only."""
        now, site = range_.now(), None
        for copy in range_.changed(now):
            if copy.reported:  # (reported by another check since: no longer watched)
                self.host_index.unwatch(copy)
                continue
            site = site or user_site()
            self._report_changed(copy, "freed" if now is None else "changed", when, site)

    def _report_changed(self, copy: HostCopy, how: str, when: str, site: Site) -> None:
        """The host `how` ("changed", "freed") the memory of `copy` before the program synchronised with it."""
        copy.reported = True
        self.host_index.unwatch(copy)
        effect = ("the copy may run after the free, on memory that is gone or has become something else; keep "
                  "the memory alive" if how == "freed" else
                  "the copy may see (or overwrite) the change, or not; keep the memory as it is")
        report.publish(
            "host memory in flight", "synccheck",
            "the host %s memory [0x%x, 0x%x) that %s %s before the program synchronised with the copy%s: on the "
            "card %s until the stream is synchronised"
            % (how, copy.start, copy.end, copy.task.name, copy.role,
               " (it is no longer mapped)" if how == "freed" else "", effect),
            (("%s, launched" % copy.task.name, copy.task.site), ("found %s %s" % (how, when), site)), ())

    def _settle_host_copies(self) -> None:
        """The copies the host has now seen complete: those cut from their stream's pending tasks since
        the last settlement (and any whose task was never queued), a last check, then they are forgotten.
        Only those are looked at, not every pending copy: a synchronisation of one stream cost O(K) with K
        copies pending on another (820 000 looks in 200 iterations)."""
        settled = [copy for copy in self.settling if copy in self.host_copies]  # (not a stream's destroyed since)
        settled.extend(self.unqueued)
        settled.sort(key=_serial_of)
        self.settling, self.unqueued = [], {}
        self._check_host_copies(settled, "by the synchronisation")
        self._forget_host_copies(settled)

    def _forget_host_copies(self, gone: list) -> None:
        """The copies of `gone` are no longer watched (each task's copies go together)."""
        for copy in gone:
            self.host_index.unwatch(copy)
            self.host_copies.pop(copy, None)
            self.unqueued.pop(copy, None)
            self.host_copies_of.pop(id(copy.task), None)

    # -- initcheck ----------------------------------------------------------------------------------

    def touched(self, allocation, start: int, nbytes: int, write: bool, what) -> None:
        """A running task resolves [start, start+nbytes) of `allocation` to write or read it (a kernel
        resolves each tensor as it runs: the check costs no lookup of its own). What it writes counts as
        written once it has run (task_ran): an output that is also an input (in place) is read first."""
        if write:  # a view with gaps writes its runs, not the bytes between them
            self.written_by_running.append((allocation, start, nbytes,
                                            _runs(what) if getattr(what, "gappy", False) else None))
            return
        bounds = allocation.written.bounds
        if len(bounds) == 2 and bounds[0] <= start and start + nbytes <= bounds[1]:
            return  # Written.covers() of the common case, one written range: inline, as every launch asks
        if not allocation.written.covers(start, start + nbytes):
            runs = _runs(what)
            if runs is not None and not allocation.written.uncovered(*runs).any():
                return  # a view with gaps reads its runs only
            task = self.running
            self._unwritten(allocation, start, nbytes, what, "%s, launched" % task.name if task is not None
                            else "host call", task.site if task is not None else user_site(), runs)

    def _read(self, start: int, nbytes: int, label, reader: str, site: Site) -> None:
        """A copy or a host call reads [start, start+nbytes): never-written bytes are reported."""
        allocation = _allocation(start)
        if allocation is not None and nbytes > 0 and not allocation.written.covers(start, start + nbytes):
            self._unwritten(allocation, start, nbytes, label, reader, site)

    def _write(self, start: int, nbytes: int) -> None:
        allocation = _allocation(start)
        if allocation is not None and nbytes > 0:
            _wrote(allocation, start, nbytes)

    def _unwritten(self, allocation, start: int, nbytes: int, what, reader: str, site: Site,
                   runs: Optional[tuple] = None) -> None:
        """Report a read of never-written bytes of `allocation` (`what`: the range's name, or what makes
        it; `runs`: (starts, ends) of the parts of the range read, when not all of it), and fill them with
        the poison pattern."""
        if runs is None:
            gaps = allocation.written.gaps(start, start + nbytes)
        else:  # the gaps of the runs not written whole, each run apart from the others
            unwritten = allocation.written.uncovered(*runs)
            gaps = [gap for begin, end in zip(runs[0][unwritten].tolist(), runs[1][unwritten].tolist())
                    for gap in allocation.written.gaps(begin, end)]
        if not gaps:
            return
        for gap_start, gap_end in gaps:
            offset = gap_start - allocation.address
            ctypes.memset(allocation.backing + offset, POISON, gap_end - gap_start)
        unwritten = sum(end - begin for begin, end in gaps)
        report.publish(
            "uninitialised read", "initcheck",
            "%s reads %s [0x%x, 0x%x), of which %d byte(s) from offset %d of allocation #%d were never written "
            "(by a copy, a memset or a kernel); they read as the poison pattern 0x%02X"
            % (reader.split(",")[0], what() if callable(what) else what, start, start + nbytes, unwritten,
               gaps[0][0] - allocation.address, allocation.serial, POISON),
            (("read by %s" % reader, site), ("allocation made", allocation.site)),
            (allocation.describe(),))

    def task_running(self, task) -> None:
        """Before a task runs: its device reads must be of written bytes (a task that resolves its
        ranges itself, a kernel, is checked as it resolves them: touched())."""
        if task.resolves_itself:
            self.written_by_running = []
            return
        for entry in task.ranges()[0]:
            self._read(entry[0], entry[1], entry[2] if len(entry) > 2 else "", "%s, launched" % task.name, task.site)

    def task_ran(self, task) -> None:
        """After a task ran: what it wrote is initialised."""
        if task.resolves_itself:
            for allocation, start, nbytes, runs in self.written_by_running:
                bounds = allocation.written.bounds
                if runs is not None:
                    allocation.written.add_runs(*runs)
                elif not (len(bounds) == 2 and bounds[0] <= start and start + nbytes <= bounds[1]):
                    _wrote(allocation, start, nbytes)  # (written again, in one range: nothing to add)
            self.written_by_running = []
            return
        for entry in task.ranges()[1]:
            self._write(entry[0], entry[1])

    # -- memcheck ------------------------------------------------------------------------------------

    def fault(self, fault) -> None:
        """A queued task faulted (the synchronisation returns it too): an access the card faults on is a
        memcheck report (a timeout or an internal error is not a finding of the program's memory use)."""
        if fault.code != status.ACL_ERROR_RT_AICORE_EXCEPTION or fault.kind == "injected fault":
            return
        allocation = fault.allocation
        sites = [("%s on stream %s, launched" % (fault.task, fault.stream.replace("stream ", "")), fault.launch_site)]
        if allocation is not None:
            sites.append(("allocation made", allocation.site))
            if isinstance(allocation.freed_site, Site):
                sites.append(("allocation freed", allocation.freed_site))
        report.publish("invalid device access", "memcheck", "%s: %s" % (fault.kind, fault.message), sites,
                       (_described(allocation),) if allocation is not None else ())

    def padding_overrun(self, allocation, address: int, nbytes: int, what) -> None:
        """An access within the allocation's padding: no fault on the card, but never the program's bytes."""
        text = what() if callable(what) else str(what)
        task = self.running
        if task is not None:
            role, site = "%s, launched" % task.name, task.site
        else:
            role, site = "host call %s" % (self.calling or "(a runtime call)"), user_site()
        report.publish(
            "padding overrun", "memcheck",
            "%s [0x%x, 0x%x) goes %d byte(s) past the %d bytes requested of allocation #%d, into its padding: the "
            "card does not fault there, but those bytes were never the program's"
            % (text, address, address + nbytes, address + nbytes - allocation.address - allocation.size,
               allocation.size, allocation.serial),
            ((role, site), ("allocation made", allocation.site)),
            (allocation.describe(),))

    def overlapping_copy(self, call: str, copy, where: int, site: Site) -> None:
        """A copy whose target shares the byte `where` with its source (other than a row onto itself)."""
        report.publish(
            "overlapping output", "memcheck",
            "%s copies src [0x%x, 0x%x) onto dst [0x%x, 0x%x), which overlap (both hold the byte at 0x%x): a copy "
            "engine of the card (or the host's memcpy) moves the bytes in no fixed order, so what the common bytes "
            "hold afterwards is not defined (npuemu copies as memmove does, as if the source were read whole first)"
            % (call, copy.src.address, copy.src.address + copy.src.nbytes, copy.dst.address,
               copy.dst.address + copy.dst.nbytes, where),
            (("host call %s" % call, site),), _allocations(copy.dst.address, copy.src.address))

    def launch_checks(self, op: str, tensors: Sequence[tuple], site: Site) -> None:
        """The second phase of `op`: each (parameter name, aclTensor) must be live and 32-byte aligned."""
        for name, tensor in tensors:
            if tensor.alive and not tensor.data % ALIGNMENT:
                continue
            if not tensor.alive:
                report.publish(
                    "destroyed tensor", "memcheck",
                    "%s is launched with its %s tensor %s destroyed before the launch: the executor reads a "
                    "freed descriptor on the card" % (op, name, tensor.describe()),
                    (("launch of %s" % op, site), ("tensor destroyed", tensor.released_site), ("tensor made", tensor.site)),
                    ())
            elif tensor.data % ALIGNMENT and tensor.view_nbytes:
                report.publish(
                    "misaligned tensor", "memcheck",
                    "%s's %s tensor has data address 0x%x, which is not %d-byte aligned as aclCreateTensor requires "
                    "(offset %d bytes)" % (op, name, tensor.data, ALIGNMENT, tensor.data % ALIGNMENT),
                    (("launch of %s" % op, site), ("tensor made", tensor.site)), ())

    def overlapping_output(self, op: str, output, other, where, site: Site, in_place_possible: bool = True) -> None:
        """An output view in which two indices are one element (other None, where the indices), or which
        shares the byte at `where` with another view of the launch without being that view (or, when
        not `in_place_possible`, at all): the card's cores write (and read) such memory in no fixed
        order, so what stays there is not defined."""
        sites = [("launch of %s" % op, site), ("%s made" % output.name, output.tensor.site)]
        if other is None:
            first, second = where
            element = output.offset + sum(i * stride for i, stride in zip(first, output.strides))
            message = ("%s writes its %s, in which indices %s and %s are one element, at 0x%x: the card's cores "
                       "write such elements in no fixed order, so which value stays there is not defined (npuemu "
                       "keeps one of them)" % (op, output.describe(), list(first), list(second),
                                               output.data + element * item_size(output.data_type)))
        else:
            if other.tensor is not output.tensor:
                sites.append(("%s made" % other.name, other.tensor.site))
            how = ("which is not the same view", ". An in-place call passes the very same view for both") \
                if in_place_possible else ("which it may not overlap at all (%s does not write its %s piece by piece "
                                           "as it reads its %s)" % (op, output.name, other.name), "")
            message = ("%s writes its %s over memory of its %s, %s (both hold the byte at 0x%x): the card's cores "
                       "go through the two views in no fixed order, so what stays there is not defined (npuemu "
                       "keeps one outcome)%s" % (op, output.describe(), other.describe(), how[0], where, how[1]))
        report.publish("overlapping output", "memcheck", message, tuple(sites), ())

    def overlapping_workspace(self, op: str, workspace: int, nbytes: int, other, where: int, site: Site) -> None:
        """The workspace handed to the second phase shares memory with a view of the launch: the kernel's
        scratch writes and its accesses of the view go in no fixed order."""
        report.publish(
            "overlapping output", "memcheck",
            "%s writes its workspace [0x%x, 0x%x) over memory of its %s (both hold the byte at 0x%x): the card's "
            "cores write their scratch there as they go through the view, in no fixed order, so what stays in "
            "either is not defined (npuemu keeps one outcome); the workspace must be memory no tensor of the call uses"
            % (op, workspace, workspace + nbytes, other.describe(), where),
            (("launch of %s" % op, site), ("%s made" % other.name, other.tensor.site)), _allocations(workspace))


class Written:
    """The byte ranges of one allocation that something wrote: sorted, disjoint [start, end) pairs kept
    flat in one list ([s0, e0, s1, e1, ...]), merged as they are added."""

    __slots__ = ("bounds", "_array")

    def __init__(self) -> None:
        self.bounds: list[int] = []
        self._array: Optional[np.ndarray] = None  # the bounds as an array, for many ranges at once

    def _bounds_array(self) -> np.ndarray:
        if self._array is None:
            self._array = np.asarray(self.bounds, dtype=np.int64)
        return self._array

    def covers(self, start: int, end: int) -> bool:
        """Whether all of [start, end) was written: inside one written range."""
        i = bisect.bisect_right(self.bounds, start)
        return i % 2 == 1 and end <= self.bounds[i]

    def add(self, start: int, end: int) -> None:
        if self.covers(start, end):
            return  # the common case: written again
        bounds = self.bounds
        i = bisect.bisect_left(bounds, start)
        j = bisect.bisect_right(bounds, end)
        if i % 2:        # start falls inside a range: extend from that range's start
            i -= 1
            start = bounds[i]
        if j % 2:        # end falls inside a range: extend to its end
            end = bounds[j]
            j += 1
        bounds[i:j] = [start, end]
        self._array = None

    def uncovered(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Which of the ranges [starts[i], ends[i]) (numpy arrays) were not written whole: covers(), for
        many ranges at once."""
        bounds = self._bounds_array()
        if not bounds.size:
            return np.ones(len(starts), dtype=bool)
        at = np.searchsorted(bounds, starts, side="right")
        return ~((at % 2 == 1) & (ends <= bounds[np.minimum(at, bounds.size - 1)]))

    def add_runs(self, starts: np.ndarray, ends: np.ndarray) -> None:
        """add() of many disjoint ranges in address order (a view's runs) at once."""
        if not self.uncovered(starts, ends).any():
            return  # written again: the usual case of a loop
        bounds = self._bounds_array()
        all_starts, all_ends = np.concatenate((bounds[0::2], starts)), np.concatenate((bounds[1::2], ends))
        order = np.argsort(all_starts, kind="stable")
        self._array = np.column_stack(merged_ranges(all_starts[order], all_ends[order])).ravel()
        self.bounds = self._array.tolist()

    def gaps(self, start: int, end: int) -> list[tuple]:
        """The parts of [start, end) never written."""
        if self.covers(start, end):
            return []  # the common case
        bounds, found, cursor = self.bounds, [], start
        i = bisect.bisect_right(bounds, start)
        if i % 2:   # start is inside a written range
            cursor = bounds[i]
            i += 1
        while cursor < end:
            if i >= len(bounds) or bounds[i] >= end:
                found.append((cursor, end))
                break
            if bounds[i] > cursor:
                found.append((cursor, bounds[i]))
            cursor = bounds[i + 1]
            i += 2
        return found


def merged_ranges(starts: np.ndarray, ends: np.ndarray) -> tuple:
    """[start, end) ranges sorted by start (numpy arrays), those that meet or overlap merged: (starts, ends)."""
    reach = np.maximum.accumulate(ends)
    first = np.ones(len(starts), dtype=bool)
    first[1:] = starts[1:] > reach[:-1]
    at = np.flatnonzero(first)
    return starts[at], np.maximum.reduceat(ends, at)


def _runs(what) -> Optional[tuple]:
    """The byte ranges a kernel's view with gaps reads or writes (a view tells them: byte_runs), else None."""
    runs = getattr(what, "byte_runs", None)
    return runs() if runs is not None else None


def _wrote(allocation, start: int, nbytes: int) -> None:
    allocation.written.add(start, min(start + nbytes, allocation.end))


_process: list = []  # emulator.state.PROCESS, once imported (it imports this module)


def _allocation(address: int):
    """The live allocation holding a device address, or None."""
    if not _process:
        from .state import PROCESS
        _process.append(PROCESS)
    space = _process[0].space
    if space is None or not space.base <= address < space.base + space.total:
        return None
    heap = space.heaps[(address - space.base) // space.span]
    return heap.live.get(address) or heap.find(address)


def _allocations(*addresses: int) -> tuple:
    """The allocations at `addresses` as a report's resources, each once."""
    found: list = []
    for address in addresses:
        allocation = _allocation(address)
        if allocation is not None and all(allocation is not other for other in found):
            found.append(allocation)
    return tuple(_described(allocation) for allocation in found)


def _described(allocation) -> report.Described:
    """An allocation as a report's resource: described with the report (its sites looked up with the
    report's)."""
    freed = allocation.freed_site  # a Site, or a Released (the runtime's release, with its site), or None
    return report.Described(allocation.describe, (allocation.site, getattr(freed, "site", freed)))


def _stream_name(handle: int) -> str:
    from .resource import HANDLES
    stream = HANDLES.get(handle) or HANDLES.retired(handle)
    return stream.describe() if stream is not None else "0x%x" % handle


TRACKER = Tracker()
