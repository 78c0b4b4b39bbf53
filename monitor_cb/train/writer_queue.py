"""How many records the writer may hold, and which side is slow when it holds too many.

A burst much larger than the writer thread's pace is normal (a converter, a loop replaying a log:
a million ``log()`` calls in a few seconds), so the queue is sized by memory, not by a record count:
a fraction of the memory available when the writer starts, capped, divided by the measured size of a
queued record. When records are dropped anyway, :class:`WriteMeter` (kept by the writer thread) says
whose fault it is: a disk whose writes are slow or do not return, or a producer logging faster than a
healthy writer thread encodes and writes.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Any

MEMORY_FRACTION = 0.25  # of the memory available when the writer starts, shared by the ranks of a node
RANKS_PER_NODE = 8  # ranks assumed to share a node's memory, at most (world sizes above are several nodes)
MEMORY_CAP = 768 << 20  # bytes: enough for a million-record burst of ~8 metrics, never more
MEMORY_FLOOR = 16 << 20
MIN_RECORDS = 1024
FIRST_GUESS = 1024  # bytes per record until the writer thread has measured one
STUCK_WRITE_S = 0.25  # a write (at most 256 KiB) this slow means a slow or hung disk; a healthy one takes ~1 ms
DISK_SHARE = 0.5  # the writer thread spending more of its time than this in write(): the disk is slow


def available_memory() -> int | None:
    """Bytes of memory available now (Linux ``MemAvailable``, else free pages), None when unknown."""
    try:
        with open("/proc/meminfo", "rb") as handle:
            for line in handle:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def queue_budget(available: int | None = None, world_size: int = 1) -> int:
    """The queue's memory budget in bytes: :data:`MEMORY_FRACTION` of ``available``, split between the
    ranks likely to share the node (``min(world_size, RANKS_PER_NODE)``), within floor and cap."""
    available = available_memory() if available is None else available
    if available is None:
        return MEMORY_CAP // 2
    share = available * MEMORY_FRACTION / max(1, min(world_size, RANKS_PER_NODE))
    return int(min(max(share, MEMORY_FLOOR), MEMORY_CAP))


def record_bytes(record: tuple[Any, float, dict[str, Any]]) -> int:
    """Memory one queued record holds: its tuple, time, step, kwargs dict and values (each counted,
    though the caller may share some), plus the deque's slot."""
    step, _, metrics = record
    size = sys.getsizeof(record) + 8 + 24 + (sys.getsizeof(step) if step is not None else 0)
    size += sys.getsizeof(metrics)
    for value in metrics.values():
        try:
            size += min(sys.getsizeof(value), 1 << 20)
        except Exception:  # noqa: BLE001 - a hostile __sizeof__
            size += 64
    return size


def capacity(budget: int, per_record: float) -> int:
    """Records that fit the budget, at least :data:`MIN_RECORDS`."""
    return max(MIN_RECORDS, int(budget // max(per_record, 1.0)))


@dataclass(frozen=True)
class Bottleneck:
    """Who made the queue overflow: ``"disk"`` or ``"producer"``, and the figures that say so."""

    cause: str
    detail: str


def thread_sched_s(tid: int | None) -> float | None:
    """Seconds a thread of this process has spent on a CPU or waiting for one (Linux's schedstat), None
    where that is not known.

    Wall time minus this is the time the thread was blocked (in ``write()``: the disk). Without it a
    thread merely starved of CPU on a loaded machine looks like one waiting on a slow disk.
    """
    if tid is None:
        return None
    try:
        with open(f"/proc/self/task/{tid}/schedstat", "rb") as handle:
            on_cpu, waiting, _ = handle.read().split()
        return (int(on_cpu) + int(waiting)) / 1e9
    except (OSError, ValueError):
        return None


class WriteMeter:
    """The writer thread's recent pace: records, seconds encoding, seconds in ``write()``.

    Recent, not cumulative: each batch's figures are added to the previous ones decayed, so a disk
    that turns slow late in a long run is seen as slow. The disk is judged on the time ``write()`` was
    blocked, not on its wall time: on a loaded machine a thread waits for a CPU inside any call, and
    that wait is no disk's (Linux's per-thread schedstat tells the two apart; elsewhere wall time).
    """

    DECAY = 0.9

    def __init__(self) -> None:
        self.records = 0.0
        self.encode_s = 0.0
        self.write_s = 0.0
        self.blocked_s = 0.0  # of write_s, the time the thread was neither on a CPU nor waiting for one
        self.write_started: float | None = None  # time.monotonic() of the write in progress
        self.tid: int | None = None  # the writer thread's native id, set by the thread itself
        self._sched_at_start: float | None = None

    def begin_write(self) -> None:
        """Called by the writer thread before a batch's writes."""
        self._sched_at_start = thread_sched_s(self.tid)
        self.write_started = time.monotonic()

    def end_write(self) -> None:
        self.write_started = None

    def add(self, records: int, encode_s: float, write_s: float, blocked_s: float | None = None) -> None:
        decay = self.DECAY
        self.records = self.records * decay + records
        self.encode_s = self.encode_s * decay + encode_s
        self.write_s = self.write_s * decay + write_s
        self.blocked_s = self.blocked_s * decay + (write_s if blocked_s is None else blocked_s)

    def write_in_progress(self, now: float) -> tuple[float, float] | None:
        """(seconds since :meth:`begin_write`, of them blocked) of the write in progress; None when none is."""
        started = self.write_started  # read once: the writer thread clears it when the write returns
        if started is None:
            return None
        elapsed = now - started
        before, after = self._sched_at_start, thread_sched_s(self.tid)
        if before is None or after is None:
            return elapsed, elapsed
        return elapsed, max(0.0, elapsed - (after - before))

    def rate(self) -> float | None:
        """Records per second the writer thread handles while busy; None before its first batch."""
        busy = self.encode_s + self.write_s
        return self.records / busy if busy > 0 and self.records >= 1 else None

    def diagnose(self, now: float | None = None) -> Bottleneck:
        """Whether the disk or the producer is the bottleneck now."""
        now = time.monotonic() if now is None else now
        write = self.write_in_progress(now)
        if write is not None and write[1] > STUCK_WRITE_S:
            return Bottleneck("disk", f"a write to the disk has not returned for {write[0]:.1f} s")
        rate = self.rate()
        busy = self.encode_s + self.write_s
        share = self.blocked_s / busy if busy > 0 else 0.0
        if rate is not None and share > DISK_SHARE:
            return Bottleneck(
                "disk", f"the writer thread spends {share:.0%} of its time in write() ({rate:,.0f} records/s)"
            )
        pace = f"{rate:,.0f} records/s, {share:.0%} of its time in write()" if rate is not None else "just started"
        return Bottleneck("producer", f"the disk keeps up; the writer thread encodes and writes {pace}")
