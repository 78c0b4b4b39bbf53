"""``python -m monitor_cb demo``: real training, fault injection, argument checks."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from monitor_cb import demo
from monitor_cb.writer import MonitorWarning
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


@pytest.mark.parametrize(
    ("specs", "message"),
    [(["nan"], "FAULT@STEP"), (["fire@3"], "FAULT@STEP"), (["nan@0"], "between 1"), (["nan@x"], "between 1")],
)
def test_bad_injections_are_explained(specs: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        demo.parse_injections(specs, steps=10)


def test_injections_and_epochs() -> None:
    assert demo.parse_injections(["nan@4", "overfit@9"], steps=10) == {"nan": 4, "overfit": 9}
    assert demo.epochs_for(2000) == (10, 200) and demo.epochs_for(10) == (1, 10)
    assert parse().steps == 2000


def test_the_cli_dispatches_demo_with_its_flags() -> None:
    from monitor_cb.cli import build_parser

    args = build_parser().parse_args(["demo", "--steps", "50", "--inject", "nan@7", "--inject", "overfit@9"])
    assert args._module == "monitor_cb.demo" and args.steps == 50 and args.inject == ["nan@7", "overfit@9"]
    assert args.on_nan == "warn" and args.log_interval == 10 and args.logdir is None
