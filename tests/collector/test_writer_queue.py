"""WriteMeter blames the disk for time a write was blocked, never for time its thread waited for a CPU."""

from __future__ import annotations

import threading
import time

import pytest

from monitor_cb.train.writer_queue import STUCK_WRITE_S, WriteMeter, thread_sched_s

TID = threading.get_native_id()
pytestmark = pytest.mark.skipif(thread_sched_s(TID) is None, reason="no per-thread schedstat (Linux's /proc)")


def spin(seconds: float) -> None:
    """On a CPU or waiting for one the whole time: what a starved thread does on a loaded machine."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_a_write_that_only_waited_for_a_cpu_is_not_a_stuck_disk() -> None:
    # On a machine at load 25 the writer thread's write() took over 0.25 s of wall time on a healthy disk,
    # and a burst's drops were blamed on the disk; by schedstat, that time was not blocked.
    meter = WriteMeter()
    meter.tid = TID
    meter.begin_write()
    spin(2 * STUCK_WRITE_S)
    elapsed, blocked = meter.write_in_progress(time.monotonic())
    assert elapsed >= 2 * STUCK_WRITE_S and blocked < STUCK_WRITE_S
    assert meter.diagnose().cause == "producer"


def test_a_write_that_is_blocked_is_a_stuck_disk() -> None:
    # Blocked, as in a write() to a hung disk, until the meter says so: a wait for a CPU between the meter's
    # clock and schedstat reads counts against the blocked time (under two busy loops and a full suite, once,
    # a 0.5 s block read as under 0.25 s), so what holds at any load is that blocking long enough is a stuck
    # disk, not that 2 x STUCK_WRITE_S always is. A hung disk stays blocked: the verdict comes at most later.
    meter = WriteMeter()
    meter.tid = TID
    meter.begin_write()
    deadline = time.monotonic() + 40 * STUCK_WRITE_S
    verdict = meter.diagnose()
    while verdict.cause != "disk" and time.monotonic() < deadline:
        time.sleep(STUCK_WRITE_S)
        verdict = meter.diagnose()
    assert verdict.cause == "disk" and "has not returned for" in verdict.detail
    meter.end_write()
    assert meter.write_in_progress(time.monotonic()) is None


def test_the_disk_share_counts_blocked_time_only() -> None:
    meter = WriteMeter()
    meter.add(1000, encode_s=0.1, write_s=0.9, blocked_s=0.0)  # long writes, all of it on or waiting for a CPU
    assert meter.diagnose().cause == "producer"
    slow = WriteMeter()
    slow.add(1000, encode_s=0.1, write_s=0.9, blocked_s=0.8)
    assert slow.diagnose().cause == "disk"
    unknown = WriteMeter()  # no schedstat: the wall time is all there is
    unknown.add(1000, encode_s=0.1, write_s=0.9)
    assert unknown.diagnose().cause == "disk"
