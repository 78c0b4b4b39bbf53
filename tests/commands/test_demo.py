"""``python -m monitor_cb demo``: real training, fault injection, argument checks."""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import pytest

from monitor_cb.commands import demo
from monitor_cb.train.writer import MonitorWarning
from tests.collector.ms_helpers import read_meta, read_records


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.mindspore
def test_demo_trains_evaluates_and_stops_on_an_injected_nan(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    args = parse("--steps", "40", "--logdir", "runs", "--name", "nan", "--log-interval", "5")
    args.inject, args.on_nan = ["nan@33", "slow_data@38"], "stop"
    with pytest.warns(MonitorWarning, match="non-finite loss at step 33: stopping training"):
        assert demo.run(args) == 0
    assert "stopped: non-finite loss at step 33" in capsys.readouterr().out
    run_dir = tmp_path / "runs" / "nan"
    records = read_records(run_dir / "metrics.jsonl")
    train = [r for r in records if "loss" in r]
    assert [r["step"] for r in train] == [5, 10, 15, 20, 25, 30, 33]
    assert all(r["grad_norm"] > 0 and r["tokens_per_s"] > r["throughput"] > 0 for r in train[:-1])
    assert [r["step"] for r in records if "eval_loss" in r] == [20, 33]  # fit still evaluates the stopped epoch
    meta = read_meta(run_dir)
    assert meta["status"] == "stopped" and meta["reason"] == "stopped: non-finite loss at step 33"
    assert meta["config"]["inject"] == {"nan": 33, "slow_data": 38} and meta["seq_length"] == 16


def test_steps_default() -> None:
    assert parse().steps == 2000


def test_the_cli_dispatches_demo_with_its_flags() -> None:
    from monitor_cb.cli import build_parser

    args = build_parser().parse_args(["demo", "--steps", "50", "--inject", "nan@7", "--inject", "overfit@9"])
    assert args._module == "monitor_cb.commands.demo" and args.steps == 50 and args.inject == ["nan@7", "overfit@9"]
    assert args.on_nan == "warn" and args.log_interval == 10 and args.logdir is None


@pytest.mark.mindspore
@pytest.mark.slow
def test_a_paced_demo_can_be_watched_and_stopped(tmp_path: Path) -> None:
    """``--pace`` spreads the steps out in time; SIGTERM (the dashboard's Stop) closes the run as stopped."""
    import os
    import signal
    import subprocess
    import sys
    import time

    run_dir = tmp_path / "paced"
    cmd = [sys.executable, "-m", "monitor_cb", "demo", "--logdir", str(tmp_path), "--name", "paced"]
    cmd += ["--steps", "200", "--pace", "0.1", "--log-interval", "2"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(_train_records(run_dir)) < 8:
            assert proc.poll() is None, proc.stdout.read().decode()
            assert time.monotonic() < deadline, "the demo wrote no records"
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out.decode()
    train = _train_records(run_dir)
    gaps = [b["t"] - a["t"] for a, b in itertools.pairwise(train)]
    # Paced by deadlines (a late step is caught up), so single gaps jitter around 0.2 s; the rate holds.
    # A record's time is taken before its step's sleep, so n steps span at least (n - 1) paces.
    steps = train[-1]["step"] - train[1]["step"]
    rate = (train[-1]["t"] - train[1]["t"]) / steps
    assert rate >= 0.1 * (steps - 1) / steps - 1e-3, gaps  # about 0.1 s a step on average
    assert min(gaps[1:]) >= 0.1, gaps
    assert train[-1]["step"] < 200  # stopped early
    meta = read_meta(run_dir)
    assert meta["status"] == "stopped" and "SIGTERM" in meta["reason"]


def _train_records(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [r for r in read_records(path) if "loss" in r]


def test_pace_must_be_seconds() -> None:
    assert parse("--pace", "0.2").pace == 0.2 and parse().pace == 0.0
    for bad in ("-1", "nan", "inf"):
        with pytest.raises(SystemExit):
            parse("--pace", bad)
