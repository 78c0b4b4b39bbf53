"""One live writer per metrics file: a second one takes its own file and segment; stale locks are taken over."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from monitor_cb.ingest import RunStore
from monitor_cb.train import writer_claim
from monitor_cb.train.writer import MetricsWriter, MonitorWarning
from monitor_cb.train.writer_claim import lock_path_for, writer_file

ROOT = Path(__file__).resolve().parents[2]

TWO_WRITERS = """
    import json, os, sys, warnings
    from monitor_cb import MetricsWriter
    warnings.simplefilter("always")
    sys.stdin.readline()  # both start together
    writer = MetricsWriter(sys.argv[1])
    print(json.dumps({"pid": os.getpid(), "file": writer.path.name, "segment": writer.segment}), flush=True)
    sys.stdin.readline()  # both live before either logs
    with writer:
        for step in range(1, 5001):
            writer.log(step=step, loss=float(os.getpid()))
"""


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def meta_of(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def test_two_processes_started_together_each_keep_their_records(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "exp"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(TWO_WRITERS), str(run)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for _ in range(2)
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    started = [json.loads(proc.stdout.readline()) for proc in procs]  # type: ignore[union-attr]
    for proc in procs:
        proc.stdin.write("log\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
    errors = [proc.communicate(timeout=120)[1] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], errors
    assert sorted(s["file"] for s in started) == ["metrics.jsonl", "metrics.writer2.jsonl"]
    assert sorted(s["segment"] for s in started) == [1, 2], "two writers never share a segment"
    second = next(i for i, s in enumerate(started) if s["file"] == "metrics.writer2.jsonl")
    first_pid = started[1 - second]["pid"]
    assert f"being written by another live writer (pid {first_pid} on {socket.gethostname()})" in errors[second]
    assert "metrics.writer2.jsonl (segment 2) instead" in errors[second]
    assert "another live writer" not in errors[1 - second]
    for info in started:
        records = lines(run / info["file"])
        assert [r["step"] for r in records] == list(range(1, 5001))
        assert {(r["seg"], r["loss"]) for r in records} == {(info["segment"], float(info["pid"]))}
        meta = meta_of(run / info["file"].replace(".jsonl", ".meta.json"))
        assert meta["pid"] == info["pid"] and meta["segment"] == info["segment"]
        assert meta["metrics_file"] == info["file"] and meta["status"] == "finished"
        assert meta["written_records"] == 5000 and meta["dropped_records"] == 0
    assert not list(run.glob(".*.lock")), "a closed writer removes its lock file"
    store = RunStore(tmp_path / "logs", cache=False)
    (info,) = store.list_runs()
    assert info.n_records == 10_000 and info.ranks == (0,) and info.status == "finished"
    frame = store.read("exp", all_segments=True).frame
    assert len(frame) == 10_000 and sorted(frame.groupby("seg").size().tolist()) == [5000, 5000]


def test_a_writer_in_the_same_process_takes_the_next_file_and_a_later_one_the_first(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = MetricsWriter(run)
        second = MetricsWriter(run)
        third = MetricsWriter(run)
    assert [w.path.name for w in (first, second, third)] == [
        "metrics.jsonl",
        "metrics.writer2.jsonl",
        "metrics.writer3.jsonl",
    ]
    assert [w.segment for w in (first, second, third)] == [1, 2, 3]
    assert sum("another live writer" in str(w.message) for w in caught) == 2
    for writer in (first, second, third):
        writer.log(step=1, loss=1.0)
        writer.close()
    again = MetricsWriter(run)
    assert again.path.name == "metrics.jsonl" and again.segment == 4, "the next segment of the whole rank"
    again.close()


def test_rank_files_keep_the_rank_in_the_name(tmp_path: Path) -> None:
    first = MetricsWriter(tmp_path / "run", rank=3, world_size=8)
    with pytest.warns(MonitorWarning, match="another live writer"):
        second = MetricsWriter(tmp_path / "run", rank=3, world_size=8)
    assert second.path.name == "metrics.writer2.rank3.jsonl"
    for writer in (first, second):
        writer.log(step=1, loss=1.0)
        writer.close()
    store = RunStore(tmp_path, cache=False)
    assert store.ranks_of("run") == [3] and len(store.read("run", rank=3, all_segments=True).frame) == 2


@pytest.mark.parametrize(
    ("name", "index", "expected"),
    [
        ("metrics.jsonl", 1, "metrics.jsonl"),
        ("metrics.jsonl", 2, "metrics.writer2.jsonl"),
        ("metrics.rank12.jsonl", 5, "metrics.writer5.rank12.jsonl"),
        ("train.jsonl", 2, "train.writer2.jsonl"),
        ("my.rankings.jsonl", 2, "my.rankings.writer2.jsonl"),
    ],
)
def test_writer_file_names(name: str, index: int, expected: str) -> None:
    assert writer_file(Path("/r") / name, index).name == expected


def test_a_lock_left_by_a_killed_writer_is_taken_over(tmp_path: Path) -> None:
    run = tmp_path / "run"
    code = """
        import os, signal, sys
        from monitor_cb import MetricsWriter
        writer = MetricsWriter(sys.argv[1])
        writer.log(step=1, loss=1.0)
        writer.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), str(run)], cwd=ROOT, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    lock = lock_path_for(run / "metrics.jsonl")
    assert json.loads(lock.read_text())["segment"] == 1, "the dead writer's lock is still there"
    with warnings.catch_warnings():
        warnings.simplefilter("error", MonitorWarning)
        with MetricsWriter(run) as writer:
            writer.log(step=2, loss=1.0)
    assert writer.path.name == "metrics.jsonl" and writer.segment == 2
    assert [r["seg"] for r in lines(run / "metrics.jsonl")] == [1, 2]


@pytest.fixture
def no_flock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system without flock (an NFS mount without a lock daemon answers ENOLCK)."""

    def refuse(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(writer_claim.fcntl, "flock", refuse)


def dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(proc.stdout)


def put_lock(run: Path, holder: dict[str, Any], age_s: float = 0.0) -> None:
    run.mkdir(parents=True, exist_ok=True)
    lock = lock_path_for(run / "metrics.jsonl")
    lock.write_text(json.dumps({"segment": 7, **holder}))
    if age_s:
        old = time.time() - age_s
        os.utime(lock, (old, old))


@pytest.mark.parametrize(
    ("holder", "age_s", "taken"),
    [
        ({"host": socket.gethostname(), "pid": "parent"}, 0.0, False),
        ({"host": socket.gethostname(), "pid": "dead"}, 0.0, True),
        ({"host": "another-node", "pid": 1}, 0.0, False),
        ({"host": "another-node", "pid": 1}, writer_claim.STALE_S + 60, True),
        ({"host": socket.gethostname(), "pid": "not a pid"}, 0.0, True),
    ],
    ids=["same-host-alive", "same-host-dead", "other-host-fresh", "other-host-stale", "garbage"],
)
def test_without_flock_the_lock_content_decides(
    tmp_path: Path, no_flock: None, holder: dict[str, Any], age_s: float, taken: bool
) -> None:
    holder = dict(holder, pid={"parent": os.getppid(), "dead": dead_pid()}.get(holder["pid"], holder["pid"]))
    run = tmp_path / "run"
    put_lock(run, holder, age_s)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with MetricsWriter(run) as writer:
            writer.log(step=1, loss=1.0)
    assert (writer.path.name == "metrics.jsonl") is taken
    if not taken:
        assert writer.segment == 8, "after the live holder's segment"
        assert any("another live writer" in str(w.message) for w in caught)


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink"])
def test_a_hostile_lock_path_never_stops_the_writer(tmp_path: Path, kind: str) -> None:
    run = tmp_path / "run"
    run.mkdir()
    lock = lock_path_for(run / "metrics.jsonl")
    if kind == "directory":
        lock.mkdir()
    elif kind == "fifo":
        os.mkfifo(lock)
    else:
        (tmp_path / "elsewhere").write_text("x")
        lock.symlink_to(tmp_path / "elsewhere")
    with MetricsWriter(run) as writer:
        writer.log(step=1, loss=1.0)
    assert writer.path.name == "metrics.jsonl" and len(lines(run / "metrics.jsonl")) == 1
    if kind == "symlink":
        assert (tmp_path / "elsewhere").read_text() == "x", "never written through a link"
    assert lock.is_symlink() or lock.exists(), "what was there is left alone"


def test_run_discovery_ignores_a_live_lock_file(tmp_path: Path) -> None:
    writer = MetricsWriter(tmp_path / "run")
    writer.log(step=1, loss=1.0)
    assert writer.flush()
    assert lock_path_for(writer.path).exists()
    store = RunStore(tmp_path, cache=False)
    (info,) = store.list_runs()
    assert info.id == "run" and info.n_records == 1 and info.status == "running"
    writer.close()


def test_an_idle_writer_keeps_its_lock_fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Other hosts without flock judge a lock by its age: a writer with nothing to log still touches it."""
    monkeypatch.setattr(writer_claim, "HEARTBEAT_S", 0.05)
    writer = MetricsWriter(tmp_path / "run")
    lock = lock_path_for(writer.path)
    old = time.time() - 3600
    os.utime(lock, (old, old))
    try:
        deadline = time.monotonic() + 10
        while lock.stat().st_mtime < time.time() - 60:
            assert time.monotonic() < deadline, "the idle writer never touched its lock"
            time.sleep(0.05)
    finally:
        writer.close()
