"""Two nodes, one bucket, one dashboard: writers on two "hosts" ship ranks 0 and 1 of one run while the
network to the store is cut and restored; the dashboard (AppTest of the real pages) reads both ranks, and
the bucket ends with exactly the records of the local files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from monitor_cb.ingest import RunStore
from tests.app.conftest import DASHBOARD
from tests.app.helpers import assert_ok, charts, run_entry
from tests.objectstore import S3Env, TcpProxy, list_keys, wait_for
from tests.storage.helpers import assembled, bucket_matches_local

REPO = Path(__file__).resolve().parents[2]
STEPS = 1500
pytestmark = pytest.mark.slow


def lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_two_nodes_ship_through_a_network_cut(s3_env: S3Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    network = TcpProxy(s3_env.endpoint)  # the nodes' path to the store; the dashboard reads directly
    url = s3_env.url("job", "exp1")
    go = tmp_path / "go"
    cut = tmp_path / "cut"  # the nodes pause halfway until the network is cut
    nodes = {0: tmp_path / "node-a" / "exp1", 1: tmp_path / "node-b" / "exp1"}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(REPO / "tests/storage/node_writer.py"),
                str(local),
                url,
                str(rank),
                "2",
                f"node-{'ab'[rank]}",
                str(STEPS),
                network.endpoint,
                str(go),
                str(cut),
            ],
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank, local in nodes.items()
    ]
    monkeypatch.setenv("MONITOR_LOGDIR", s3_env.url("job"))
    monkeypatch.setattr(sys, "argv", ["dashboard.py"])
    try:
        store = RunStore(s3_env.url("job"))

        def both_ranks_visible() -> bool:
            runs = store.list_runs()
            return bool(runs) and runs[0].ranks == (0, 1) and runs[0].n_records > 0

        wait_for(both_ranks_visible, timeout=60, interval=0.2, message="both ranks in the bucket")
        at = run_entry(DASHBOARD, {"run": "exp1"})
        assert_ok(at)
        assert charts(at)
        network.cut()
        cut.touch()
        during = {rank: lines(local / f"metrics.rank{rank}.jsonl") for rank, local in nodes.items()}
        wait_for(
            lambda: all(
                lines(local / f"metrics.rank{rank}.jsonl") > during[rank] + 200 for rank, local in nodes.items()
            ),
            timeout=60,
            message="training going on while the network is down",
        )
        cut_off = list_keys(s3_env.endpoint, s3_env.bucket, "job")
        for rank, local in nodes.items():  # the bucket lags behind the local files while the network is down
            name = f"metrics.rank{rank}.jsonl"
            assert len(assembled(cut_off, f"job/exp1/{name}.chunks")) < (local / name).stat().st_size
        network.restore()
        go.touch()
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
        for rank, local in nodes.items():
            assert lines(local / f"metrics.rank{rank}.jsonl") == STEPS
            bucket_matches_local(s3_env.endpoint, s3_env.bucket, "job/exp1", local)

        def finished() -> bool:
            runs = store.list_runs()
            return runs[0].status == "finished" and runs[0].n_records == 2 * STEPS

        wait_for(finished, timeout=60, interval=0.5, message="the dashboard's store to see everything")
        at.run()
        assert_ok(at)
        assert {m.label: m.value for m in at.metric}["Step"] == f"{STEPS:,}"
        step_traces = [t for fig in charts(at) for t in fig["data"] if len(t.get("x", []))]
        assert step_traces
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        network.close()
