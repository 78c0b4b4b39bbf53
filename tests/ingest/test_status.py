"""Run status: what the metadata says, and what a dead process or a silent file tells."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from monitor_cb.ingest import RunStore, StatusPolicy
from tests.ingest.helpers import append, line


def make_run(root: Path, meta: dict | None, tail: bytes = b"", interval: float = 1.0) -> Path:
    run = root / "r"
    run.mkdir()
    now = time.time()
    data = b"".join(line({"step": s, "t": now - 20 * interval + s * interval, "loss": 1.0}) for s in range(1, 21))
    append(run / "metrics.jsonl", data + tail)
    if meta is not None:
        full = {"status": "running", "host": socket.gethostname(), "pid": os.getpid(), "start_time": now, **meta}
        (run / "metrics.meta.json").write_text(json.dumps(full))
    return run


def status_at(root: Path, seconds_later: float) -> tuple[str, str | None]:
    mtime = (root / "r" / "metrics.jsonl").stat().st_mtime
    store = RunStore(root, rescan_interval_s=0, clock=lambda: mtime + seconds_later)
    info = store.run_info("r")
    return info.status, info.reason


@pytest.mark.parametrize("said", ["finished", "failed", "stopped"])
def test_final_status_comes_from_metadata(tmp_path: Path, said: str) -> None:
    make_run(tmp_path, {"status": said, "reason": "why" if said != "finished" else None})
    assert status_at(tmp_path, 10_000)[0] == said


def test_running_when_recent(tmp_path: Path) -> None:
    make_run(tmp_path, {})
    assert status_at(tmp_path, 1.0) == ("running", None)


def test_crashed_when_the_pid_is_gone_on_this_host(tmp_path: Path) -> None:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    make_run(tmp_path, {"pid": int(child.stdout)})
    status, reason = status_at(tmp_path, 1.0)
    assert status == "crashed" and str(int(child.stdout)) in (reason or "")


def test_pid_on_another_host_is_not_judged(tmp_path: Path) -> None:
    make_run(tmp_path, {"pid": 2**22 + 12345, "host": "some-other-node"})
    assert status_at(tmp_path, 1.0)[0] == "running"


def test_crashed_when_the_file_ends_torn_and_stays_so(tmp_path: Path) -> None:
    make_run(tmp_path, {}, tail=b'{"step":21,"lo')
    assert status_at(tmp_path, 5.0)[0] == "running"  # a line being written: not yet
    status, reason = status_at(tmp_path, StatusPolicy().torn_grace_s + 5)
    assert status == "crashed" and "torn" in (reason or "")


def test_stalled_after_several_usual_intervals(tmp_path: Path) -> None:
    make_run(tmp_path, {}, interval=30.0)  # one record every 30 s: threshold 5 x 30 = 150 s
    assert status_at(tmp_path, 100.0)[0] == "running"
    status, reason = status_at(tmp_path, 200.0)
    assert status == "stalled" and "150" in (reason or "")


def test_stall_minimum_applies_to_fast_runs(tmp_path: Path) -> None:
    make_run(tmp_path, {}, interval=0.1)
    assert status_at(tmp_path, 30.0)[0] == "running"
    assert status_at(tmp_path, 61.0)[0] == "stalled"


@pytest.mark.parametrize("seconds_later", [1.0, 120.0, 7200.0, 2 * 86400.0])
def test_file_without_metadata_not_seen_growing_has_ended(tmp_path: Path, seconds_later: float) -> None:
    # its mtime says nothing (cp sets it to now, cp -p and rsync -a keep it): never running, never stalled
    make_run(tmp_path, None)
    assert status_at(tmp_path, seconds_later) == ("ended", "no status recorded")


def test_file_without_metadata_seen_growing_is_running_then_stalled_then_ended(tmp_path: Path) -> None:
    run = make_run(tmp_path, None)
    clock = [time.time()]
    store = RunStore(tmp_path, rescan_interval_s=0, clock=lambda: clock[0])
    assert store.run_info("r").status == "ended"
    append(run / "metrics.jsonl", line({"step": 21, "t": time.time(), "loss": 1.0}))
    assert store.run_info("r").status == "running"
    grew = clock[0]
    clock[0] = grew + 120.0
    info = store.run_info("r")
    status, reason = info.status, info.reason
    assert status == "stalled" and "no status recorded" in (reason or "")
    clock[0] = grew + 7200.0
    assert store.run_info("r").status == "ended"


def test_torn_file_without_metadata_is_crashed_only_when_seen_growing(tmp_path: Path) -> None:
    run = make_run(tmp_path, None, tail=b'{"step": 21, "loss": Na')
    assert status_at(tmp_path, 120.0)[0] == "ended"  # nobody saw it written: no made-up crash
    clock = [time.time()]
    store = RunStore(tmp_path, rescan_interval_s=0, clock=lambda: clock[0])
    store.run_info("r")
    append(run / "metrics.jsonl", b'N, "x": 1')  # still torn, but it grew while we watched
    store.run_info("r")
    clock[0] += StatusPolicy().torn_grace_s + 5
    assert store.run_info("r").status == "crashed"


def test_span_from_relative_times_never_meets_the_clock() -> None:
    from monitor_cb.ingest.status import run_span

    now = 1.8e9
    # t counting from 0 (LLaMA-Factory's elapsed_time): its own span, whatever the status or the clock
    assert run_span(None, None, 0.0, 3600.0, active=True, now=now) == 3600.0
    assert run_span(None, None, 0.0, 3600.0, active=False, now=now) == 3600.0
    # dates: now while active, else the last record
    assert run_span(None, None, 1.7e9, 1.7e9 + 60, active=True, now=now) == now - 1.7e9
    assert run_span(None, None, 1.7e9, 1.7e9 + 60, active=False, now=now) == 60.0
    assert run_span(1.7e9, 1.7e9 + 90, 1.7e9, 1.7e9 + 60, active=False, now=now) == 90.0  # metadata first
    assert run_span(None, None, None, None, active=True, now=now) is None


def test_implausible_times_count_as_none() -> None:
    """A time past 2100 (or before -2100 years' worth of seconds) is no date and no span: #34 item 11."""
    import numpy as np

    from monitor_cb.ingest.status import TIME_MAX, plausible_time, run_span, time_bounds

    t0 = 1_760_000_000.0
    assert plausible_time(t0) and plausible_time(0.0) and plausible_time(TIME_MAX)
    for bad in (1e300, -1e300, TIME_MAX * 1.001, float("nan"), float("inf"), None):
        assert not plausible_time(bad), bad
    assert run_span(t0, 1e300, t0, t0 + 100, False, t0 + 200) == 100.0  # the records' end, not 1e300
    assert run_span(1e300, None, t0, t0 + 100, False, t0 + 200) == 100.0
    assert run_span(None, None, 1e300, 1e300, False, t0) is None
    t = np.array([np.nan, -1e300, t0, t0 + 5, 1e300, np.inf])
    assert time_bounds(t) == (t0, t0 + 5)
    assert time_bounds(np.array([1e300, np.nan])) == (None, None)
