"""MetricsWriter.close finishes what was accepted, and the metadata's counts match the file.

A hung disk is a real blocking file: the writer's descriptor is replaced (dup2) by the write end of a
pipe nobody reads, so its next write blocks in the kernel as a write to a hung NFS mount does. A slow
disk is the same pipe drained at a fixed pace by a reader thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monitor_cb.train import writer as writer_module
from monitor_cb.train.writer import MetricsWriter, MonitorWarning

ROOT = Path(__file__).resolve().parents[2]
F_SETPIPE_SZ = 1031  # Linux fcntl: the pipe's buffer size (rounded up to a page)


def meta_of(run: Path, name: str = "metrics.meta.json") -> dict[str, Any]:
    return json.loads((run / name).read_text())


def line_count(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def wait_until(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


class Pipe:
    """A pipe standing in for the disk under a writer: its descriptor takes the writer's file's place."""

    def __init__(self, writer: MetricsWriter, size: int = 4096) -> None:
        assert writer.flush(), "the writer is idle before its disk is swapped"
        self.read_fd, self.write_fd = os.pipe()
        fcntl.fcntl(self.write_fd, F_SETPIPE_SZ, size)
        assert writer._fd is not None
        os.dup2(self.write_fd, writer._fd)  # the writer now writes into the pipe

    def drain(self, chunk: int, pause: float, until: threading.Event) -> bytes:
        """Read ``chunk`` bytes every ``pause`` seconds (a slow disk) until ``until`` is set and nothing is left."""
        got = bytearray()
        os.set_blocking(self.read_fd, False)
        while True:
            try:
                data = os.read(self.read_fd, chunk)
            except BlockingIOError:
                data = b""
            got += data
            if not data and until.is_set():
                return bytes(got)
            time.sleep(pause)  # the slow device's pace, not a wait for a condition

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


@pytest.fixture
def quiet() -> Iterator[list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


@pytest.mark.slow  # 3 s alone, 10 s on a busy 2-core machine (1M: bench/bench_writer_burst.py)
def test_a_burst_larger_than_any_fixed_queue_is_written_whole(tmp_path: Path) -> None:
    """200,000 log() calls in a plain ``with`` block, in a real process: every one is written."""
    code = """
        import sys, time
        from monitor_cb import MetricsWriter
        n = int(sys.argv[2])
        with MetricsWriter(sys.argv[1]) as writer:
            for step in range(n):
                writer.log(step=step, loss=1.0 / (step + 1), lr=1e-3, grad_norm=1.5)
        print(writer.written, writer.dropped)
    """
    run = tmp_path / "burst"
    result = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", textwrap.dedent(code), str(run), "200000"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["200000", "0"]
    assert line_count(run / "metrics.jsonl") == 200_000
    meta = meta_of(run)
    assert meta["status"] == "finished" and meta["written_records"] == 200_000 and meta["dropped_records"] == 0
    assert meta["writer_note"] is None and set(meta["drop_causes"].values()) == {0}


def test_close_gives_up_on_a_hung_disk_and_the_metadata_says_what_was_not_written(
    tmp_path: Path, quiet: list[warnings.WarningMessage]
) -> None:
    run = tmp_path / "hung"
    writer = MetricsWriter(run, fsync_interval=0)
    writer.log(step=0, loss=1.0)
    pipe = Pipe(writer)
    try:
        for step in range(1, 51):
            writer.log(step=step, loss=1.0, payload="x" * 8192)  # each line is larger than the pipe: it blocks
        wait_until(lambda: writer._inflight > 0)
        started = time.monotonic()
        writer.close(timeout=0.5)
        took = time.monotonic() - started
        # at least the timeout; the upper bound only says it returned at all (a hung disk held it forever),
        # loose enough for a loaded machine's scheduling
        assert 0.5 <= took < 30, f"close() took {took:.2f} s"
        meta = meta_of(run)
        assert meta["status"] == "finished", "the final status is written although the thread is stuck"
        assert meta["written_records"] == 1 == line_count(run / "metrics.jsonl")
        assert meta["dropped_records"] == 50 and meta["drop_causes"]["unwritten_at_close"] == 50
        assert "50 records were not written" in meta["writer_note"] and "0.5 s without progress" in meta["writer_note"]
        assert writer.dropped == 50 and writer.written == 1
        assert any("made no progress for 0.5s; 50 records were not written" in str(w.message) for w in quiet)
        # The disk comes back (here: the write fails): the thread writes no record more, and corrects the counts.
        os.close(pipe.read_fd)
        pipe.read_fd = -1
        wait_until(lambda: not writer._thread.is_alive())
        meta = meta_of(run)
        assert meta["written_records"] == 1 == line_count(run / "metrics.jsonl")
        causes = meta["drop_causes"]
        assert meta["dropped_records"] == 50 and causes["disk_error"] >= 1, "the stuck write failed"
        assert causes["disk_error"] + causes["unwritten_at_close"] == 50
        note = meta["writer_note"]
        assert "0.5 s without progress (it then finished its write)" in note
        assert f"{causes['unwritten_at_close']} records left in the queue were not written" in note
        assert meta["status"] == "finished"
    finally:
        pipe.close()


def test_close_keeps_waiting_while_a_slow_disk_makes_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """2 MB through a disk taking 32 kB every 20 ms (~1.3 s) with a 0.3 s no-progress timeout: all written.

    Writes of 64 kB (not 256) each finish in ~40 ms, well within the timeout on a loaded machine."""
    monkeypatch.setattr(writer_module, "WRITE_CHUNK", 64 << 10)
    run = tmp_path / "slow"
    writer = MetricsWriter(run, fsync_interval=0)
    pipe = Pipe(writer, 64 << 10)
    done = threading.Event()
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(pipe.drain(32 << 10, 0.02, done)))
    try:
        for step in range(2000):
            writer.log(step=step, payload="y" * 1000)
        reader.start()
        started = time.monotonic()
        writer.close(timeout=0.3)
        took = time.monotonic() - started
    finally:
        done.set()
        reader.join(30)
        pipe.close()
    lines = received[0].splitlines()
    assert len(lines) == 2000 and json.loads(lines[-1])["step"] == 1999
    assert took > 0.3, "the drain outlasted the timeout, and close() waited for it"
    meta = meta_of(run)
    assert meta["status"] == "finished" and meta["written_records"] == 2000 and meta["dropped_records"] == 0


def test_a_full_queue_on_a_healthy_disk_blames_the_producer(tmp_path: Path, quiet: list) -> None:
    run = tmp_path / "producer"
    writer = MetricsWriter(run, queue_bytes=1)  # the smallest queue there is (1024 records)
    for step in range(100_000):
        writer.log(step=step, loss=1.0)
    writer.close()
    messages = [str(w.message) for w in quiet if issubclass(w.category, MonitorWarning)]
    assert any("logged faster than the writer thread can write them" in m for m in messages), messages
    assert not any("slow or hung" in m for m in messages)
    meta = meta_of(run)
    causes = meta["drop_causes"]
    assert causes["queue_full_producer"] > 0 and causes["queue_full_disk"] == 0
    assert meta["written_records"] + meta["dropped_records"] == 100_000
    assert meta["written_records"] == line_count(run / "metrics.jsonl") and meta["status"] == "finished"


def test_a_full_queue_on_a_hung_disk_blames_the_disk(tmp_path: Path, quiet: list) -> None:
    run = tmp_path / "disk"
    writer = MetricsWriter(run, queue_size=100, fsync_interval=0)
    pipe = Pipe(writer)
    try:
        writer.log(step=0, payload="z" * 8192)
        wait_until(lambda: writer._meter.diagnose().cause == "disk")  # stuck longer than a healthy write takes
        for step in range(1, 1001):
            writer.log(step=step, loss=1.0)
        messages = [str(w.message) for w in quiet if issubclass(w.category, MonitorWarning)]
        assert any("queue full (100 records): the disk under" in m and "has not returned" in m for m in messages)
        assert writer.drop_causes()["queue_full_disk"] == 900
    finally:
        os.close(pipe.read_fd)  # the stuck write fails: the writer ends normally
        pipe.read_fd = -1
        writer.close()
        pipe.close()
    meta = meta_of(run)
    assert meta["drop_causes"]["queue_full_disk"] == 900 and meta["dropped_records"] == 1001


def test_the_queue_is_sized_by_memory(tmp_path: Path) -> None:
    """A 4 MiB budget holds fewer records of 40 metrics than of one."""
    sizes = {}
    for keys in (1, 40):
        writer = MetricsWriter(tmp_path / f"k{keys}", queue_bytes=4 << 20)
        writer.log(step=0, **{f"m{i}": float(i) for i in range(keys)})
        assert writer.flush()
        sizes[keys] = writer._max_pending
        writer.close()
    assert 8_000 < sizes[1] < 20_000 and sizes[40] < sizes[1] / 3, sizes


def test_a_queue_of_records_counts_records_as_before(tmp_path: Path) -> None:
    writer = MetricsWriter(tmp_path / "r", queue_size=10)
    assert writer._max_pending == 10
    writer.close()


def test_ctrl_c_during_a_long_drain_stops_it_and_the_metadata_counts_what_was_left(tmp_path: Path) -> None:
    code = """
        import sys
        from monitor_cb import MetricsWriter
        with MetricsWriter(sys.argv[1]) as writer:
            for step in range(150_000):
                writer.log(step=step, loss=1.0, note="x" * 100)
            drain = writer._wait_for_thread

            def announced(timeout):  # said from inside close(), so the Ctrl-C lands in the drain
                print("closing", flush=True)
                return drain(timeout)

            writer._wait_for_thread = announced
    """
    run = tmp_path / "interrupted"
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), str(run)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "closing\n"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err and "close() was interrupted" in err
    meta = meta_of(run)
    lines = line_count(run / "metrics.jsonl")
    assert meta["written_records"] == lines < 150_000, "the drain stopped, and the count is the file's"
    assert meta["drop_causes"]["unwritten_at_close"] == meta["dropped_records"] == 150_000 - lines
    assert "when interrupted" in meta["writer_note"] and meta["status"] == "finished"


def test_the_memory_budget() -> None:
    from monitor_cb.train.writer_queue import MEMORY_CAP, MEMORY_FLOOR, queue_budget

    gib = 1 << 30
    assert queue_budget(64 * gib) == MEMORY_CAP, "capped"
    assert queue_budget(2 * gib) == gib // 2, "a quarter of what is available"
    assert queue_budget(2 * gib, world_size=8) == gib // 16 == queue_budget(2 * gib, world_size=512)
    assert queue_budget(10 << 20) == MEMORY_FLOOR
