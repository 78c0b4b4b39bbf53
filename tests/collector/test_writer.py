"""MetricsWriter: the format it writes, and that I/O trouble never reaches the caller."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from monitor_cb.record import decode_record
from monitor_cb.train.run_meta import resolve_metrics_path
from monitor_cb.train.writer import MetricsWriter, MonitorWarning

ROOT = Path(__file__).resolve().parents[2]


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def read_meta(path: Path) -> dict:
    return json.loads(path.read_text())


def strict_loads(line: str) -> dict:
    """Parse like JavaScript's JSON.parse: bare NaN/Infinity tokens are errors."""

    def reject(token: str) -> None:
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(line, parse_constant=reject)


def test_records_round_trip_with_nonfinite_values(tmp_path: Path) -> None:
    with MetricsWriter(tmp_path / "run") as writer:
        writer.log(step=1, loss=float("nan"), lr=np.float32(0.5), grad_norm=np.float64("inf"), epoch=np.int64(2))
        writer.log(step=2, loss=-math.inf, overflow=np.bool_(True), note="ok")
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2
    first, second = (strict_loads(line) for line in lines)
    assert first["loss"] == "NaN" and first["grad_norm"] == "Infinity" and second["loss"] == "-Infinity"
    assert first["lr"] == 0.5 and first["epoch"] == 2 and second["overflow"] is True
    decoded = decode_record(first)
    assert math.isnan(decoded["loss"]) and decoded["grad_norm"] == math.inf
    assert first["step"] == 1 and first["rank"] == 0 and first["seg"] == 1 and first["t"] > 0


def test_metadata_lifecycle(tmp_path: Path) -> None:
    writer = MetricsWriter(tmp_path / "exp", config={"lr": 1e-3, "layers": [2, 4]}, run_name="my run")
    assert writer.flush()
    meta = read_meta(tmp_path / "exp" / "metrics.meta.json")
    assert meta["status"] == "running" and meta["pid"] == os.getpid() and meta["name"] == "my run"
    assert meta["config"] == {"lr": 1e-3, "layers": [2, 4]} and meta["schema"] == 1
    writer.close("stopped", reason="stopped: non-finite loss at step 3")
    meta = read_meta(tmp_path / "exp" / "metrics.meta.json")
    assert meta["status"] == "stopped" and meta["reason"] == "stopped: non-finite loss at step 3"
    assert meta["end_time"] >= meta["start_time"]


def test_exception_in_context_marks_run_failed(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), MetricsWriter(tmp_path / "exp") as writer:
        writer.log(step=1, loss=1.0)
        raise RuntimeError("boom")
    meta = read_meta(tmp_path / "exp" / "metrics.meta.json")
    assert meta["status"] == "failed" and "boom" in meta["reason"]


def test_resume_appends_new_segment_without_truncating(tmp_path: Path) -> None:
    for _ in range(2):
        with MetricsWriter(tmp_path / "exp") as writer:
            for step in (1, 2, 3):
                writer.log(step=step, loss=1.0 / step)
    records = read_lines(tmp_path / "exp" / "metrics.jsonl")
    assert [(r["seg"], r["step"]) for r in records] == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]
    assert read_meta(tmp_path / "exp" / "metrics.meta.json")["segment"] == 2


def test_torn_tail_from_a_killed_writer_is_not_glued_to_the_next_record(tmp_path: Path) -> None:
    path = tmp_path / "exp" / "metrics.jsonl"
    path.parent.mkdir()
    path.write_bytes(b'{"step":1,"loss":1.0}\n{"step":2,"lo')
    with MetricsWriter(tmp_path / "exp") as writer:
        writer.log(step=3, loss=0.5)
    lines = path.read_bytes().split(b"\n")
    assert lines[1] == b'{"step":2,"lo' and json.loads(lines[2])["step"] == 3


def test_reserved_keys_are_rejected(tmp_path: Path) -> None:
    with MetricsWriter(tmp_path / "exp") as writer, pytest.raises(ValueError, match="reserved"):
        writer.log(step=1, rank=3)


def test_article_spelling_and_rank_files() -> None:
    assert resolve_metrics_path(None, "logs/e/metrics.jsonl", 0, 1) == Path("logs/e/metrics.jsonl")
    assert resolve_metrics_path(None, "logs/e/train.jsonl", 2, 8) == Path("logs/e/train.rank2.jsonl")
    assert resolve_metrics_path("logs/e", None, 3, 8) == Path("logs/e/metrics.rank3.jsonl")
    with pytest.raises(ValueError, match="run directory"):
        resolve_metrics_path(None, None, 0, 1)


def test_unwritable_directory_warns_once_and_never_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the run directory should be")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer = MetricsWriter(blocker / "exp")
        for step in range(50):
            writer.log(step=step, loss=1.0)
        writer.close()
    messages = [str(w.message) for w in caught if issubclass(w.category, MonitorWarning)]
    assert any("cannot open" in m for m in messages)
    assert len([m for m in messages if "cannot open" in m]) == 1
    assert writer.dropped == 50


def test_special_file_in_place_of_metrics_file_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "exp"
    run.mkdir()
    os.mkfifo(run / "metrics.jsonl")
    started = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer = MetricsWriter(log_file=run / "metrics.jsonl")
        writer.log(step=1, loss=1.0)
        writer.close()
    assert time.monotonic() - started < 5, "opening a FIFO must not block"
    assert any("not a regular file" in str(w.message) or "cannot open" in str(w.message) for w in caught)


def test_dev_full_is_refused_with_a_warning() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer = MetricsWriter(log_file="/dev/full")
        writer.log(step=1, loss=1.0)
        writer.close()
    assert writer.dropped == 1
    assert any(issubclass(w.category, MonitorWarning) for w in caught)


def run_child(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def test_disk_full_mid_run_drops_records_and_training_goes_on(tmp_path: Path) -> None:
    """RLIMIT_FSIZE makes writes past a size fail (EFBIG), like a full disk."""
    code = """
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        from monitor_cb.train.writer import MetricsWriter
        writer = MetricsWriter(sys.argv[1])
        writer.flush()  # metadata written before the limit
        resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
        for step in range(1, 501):
            writer.log(step=step, loss=1.0 / step, note="x" * 20)
            if step % 50 == 0:
                writer.flush()
        writer.close()
        print("trained", step, "dropped", writer.dropped, "written", writer.written)
    """
    result = run_child(code, str(tmp_path / "exp"))
    assert result.returncode == 0, result.stderr
    assert "trained 500" in result.stdout
    assert "cannot write metrics" in result.stderr
    dropped = int(result.stdout.split("dropped")[1].split()[0])
    written = int(result.stdout.split("written")[1].split()[0])
    assert dropped > 0 and written > 0 and dropped + written == 500
    lines = (tmp_path / "exp" / "metrics.jsonl").read_bytes().split(b"\n")
    complete = [json.loads(line) for line in lines[:-1] if line]
    assert [r["step"] for r in complete] == list(range(1, len(complete) + 1)), "intact prefix, no gaps"
    assert len(complete) >= written - 1  # at most the record in flight is torn
    assert read_meta(tmp_path / "exp" / "metrics.meta.json")["dropped_records"] == dropped


def test_sigkill_keeps_every_flushed_record(tmp_path: Path) -> None:
    code = """
        import sys
        from monitor_cb.train.writer import MetricsWriter
        writer = MetricsWriter(sys.argv[1])
        step = 0
        while True:
            step += 1
            writer.log(step=step, loss=1.0 / step, lr=1e-3, payload="y" * 100)
            if step % 200 == 0:
                writer.flush()
                print(step, flush=True)
    """
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), str(tmp_path / "exp")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    flushed = 0
    assert proc.stdout is not None
    while flushed < 2000:
        flushed = int(proc.stdout.readline())
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    data = (tmp_path / "exp" / "metrics.jsonl").read_bytes()
    lines = data.split(b"\n")
    complete = [json.loads(line) for line in lines[:-1]]
    assert len(complete) >= flushed
    assert [r["step"] for r in complete] == list(range(1, len(complete) + 1))
    tail = lines[-1]
    assert tail == b"" or not tail.endswith(b"}"), "at most one partial final line"


def test_eight_processes_in_one_run_directory(tmp_path: Path) -> None:
    code = """
        import sys
        from monitor_cb.train.writer import MetricsWriter
        rank = int(sys.argv[2])
        with MetricsWriter(sys.argv[1], rank=rank, world_size=8) as writer:
            for step in range(1, 3001):
                writer.log(step=step, loss=rank + 1.0 / step)
    """
    procs = [
        subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), str(tmp_path / "job"), str(rank)], cwd=ROOT)
        for rank in range(8)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * 8
    for rank in range(8):
        records = read_lines(tmp_path / "job" / f"metrics.rank{rank}.jsonl")
        assert [r["step"] for r in records] == list(range(1, 3001))
        assert {r["rank"] for r in records} == {rank}
        meta = read_meta(tmp_path / "job" / f"metrics.rank{rank}.meta.json")
        assert meta["status"] == "finished" and meta["world_size"] == 8 and meta["written_records"] == 3000


def test_hung_disk_never_blocks_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that never returns fills the bounded queue; log() drops instead of waiting."""
    import threading

    from monitor_cb.train import writer as writer_module

    release = threading.Event()
    real_write = os.write

    def hanging_write(fd: int, data: bytes) -> int:
        release.wait(30)
        return real_write(fd, data)

    monkeypatch.setattr(writer_module.os, "write", hanging_write)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer = MetricsWriter(tmp_path / "exp", queue_size=100)
        worst = 0.0
        for step in range(2000):
            started = time.perf_counter()
            writer.log(step=step, loss=1.0)
            worst = max(worst, time.perf_counter() - started)
        release.set()
        writer.close()
    assert worst < 0.05, f"log() blocked for {worst * 1e3:.1f} ms"
    assert writer.dropped > 0
    assert any("queue full" in str(w.message) for w in caught)


def test_log_at_keeps_the_given_time(tmp_path: Path) -> None:
    with MetricsWriter(tmp_path / "exp") as writer:
        writer.log_at(1_700_000_000.5, step=7, loss=0.25)
    (record,) = read_lines(tmp_path / "exp" / "metrics.jsonl")
    assert record["t"] == 1_700_000_000.5 and record["step"] == 7 and record["loss"] == 0.25
