"""Synthetic runs: the files must look exactly like what the collector writes."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import orjson
import pytest

from monitor_cb.demo.samples import (
    EndRun,
    RunSpec,
    diverge_at,
    iter_records,
    nan_at,
    sample_specs,
    spike_at,
    stop_at,
    write_run,
    write_sample_runs,
)
from monitor_cb.record import KNOWN_KEYS, decode_record

NOW = 1_764_698_400.0
ALLOWED = set(KNOWN_KEYS) | {"reason", "eval_loss", "eval_accuracy", "loss_ce", "loss_aux"}


def read_lines(path: Path) -> list[dict]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    return [decode_record(orjson.loads(line)) for line in raw.splitlines()]


def _reject_bare_constant(token: str) -> None:
    pytest.fail(f"bare {token} token: the format writes non-finite floats as strings")


@pytest.fixture(scope="module")
def sample_root(tmp_path_factory) -> tuple[Path, list[Path]]:
    root = tmp_path_factory.mktemp("runs")
    return root, write_sample_runs(root, n_runs=4, steps=600, seed=3, now=NOW)


def test_files_parse_with_strict_parsers_and_known_keys(sample_root):
    _, runs = sample_root
    assert len(runs) == 4
    for run in runs:
        assert sorted(p.name for p in run.iterdir()) == ["metrics.jsonl", "metrics.meta.json"]
        text = (run / "metrics.jsonl").read_text()
        for line in text.splitlines():
            record = json.loads(line, parse_constant=_reject_bare_constant)
            assert {"step", "t", "rank", "seg"} <= record.keys()
            assert set(record) <= ALLOWED, set(record) - ALLOWED
            assert isinstance(record["step"], int) and record["seg"] == 1 and record["rank"] == 0


def test_metadata_is_final_and_matches_the_writer(sample_root):
    _, runs = sample_root
    statuses = []
    for run in runs:
        meta = json.loads((run / "metrics.meta.json").read_text())
        lines = read_lines(run / "metrics.jsonl")
        assert meta["schema"] == 1 and meta["name"] == run.name and meta["metrics_file"] == "metrics.jsonl"
        assert meta["status"] in ("finished", "failed", "stopped")
        assert meta["written_records"] == len(lines) and meta["dropped_records"] == 0
        assert meta["start_time"] <= lines[0]["t"] <= lines[-1]["t"] <= meta["end_time"] < NOW
        assert {"lr", "batch_size", "seed"} <= meta["config"].keys()
        statuses.append(meta["status"])
    assert statuses.count("finished") == 3 and statuses.count("stopped") == 1


def test_the_nan_run(sample_root):
    _, runs = sample_root
    nan_run = next(r for r in runs if json.loads((r / "metrics.meta.json").read_text())["status"] == "stopped")
    text = (nan_run / "metrics.jsonl").read_text()
    assert '"loss":"NaN"' in text and '"grad_norm":"Infinity"' in text
    meta = json.loads((nan_run / "metrics.meta.json").read_text())
    last = read_lines(nan_run / "metrics.jsonl")[-2:]
    assert math.isnan(last[0]["loss"])
    assert last[1]["event"] == "guard_stop" and meta["reason"] == last[1]["reason"]
    assert meta["reason"] == f"stopped: non-finite loss at step {last[0]['step']}"


def test_family_differs_in_config_and_runs_lie_in_the_past_in_order(sample_root):
    _, runs = sample_root
    metas = [json.loads((r / "metrics.meta.json").read_text()) for r in runs]
    assert len({(m["config"]["lr"], m["config"]["batch_size"], m["config"]["seed"]) for m in metas}) == 4
    for earlier, later in itertools.pairwise(metas):
        assert earlier["end_time"] < later["start_time"]
    assert metas[-1]["end_time"] <= NOW - 590


def test_curves_are_realistic():
    spec = RunSpec("r", steps=3000, lr=1e-3, warmup_steps=100, eval_every=500, seq_length=128)
    records = list(iter_records(spec, now=NOW))
    train = [r for r in records if "loss" in r]
    evals = [r for r in records if "eval_loss" in r]
    lr = np.array([r["lr"] for r in train])
    loss = np.array([r["loss"] for r in train])
    assert len(train) == 3000 and [r["step"] for r in evals] == [500, 1000, 1500, 2000, 2500, 3000]
    assert lr.argmax() == 99 and lr[99] == pytest.approx(1e-3) and lr[-1] == pytest.approx(1e-4, rel=0.01)
    assert loss[:50].mean() > 2 * loss[-50:].mean()  # it learns
    assert np.std(np.diff(loss[-500:])) > 0  # and is noisy
    t = np.array([r["t"] for r in records])
    assert (np.diff(t) >= 0).all()
    assert [r["samples"] for r in train[:3]] == [32, 64, 96]
    assert all(r["tokens_per_s"] == pytest.approx(r["throughput"] * 128) for r in train[:10])
    assert all(0 < r["data_time"] < r["step_time"] for r in train[:100])
    assert all(isinstance(r["mem_device"], int) and r["mem_device"] <= r["mem_device_peak"] for r in train)


def test_same_spec_same_records():
    spec = RunSpec("r", steps=200, seed=5)
    assert list(iter_records(spec, now=NOW)) == list(iter_records(spec, now=NOW))
    other = list(iter_records(RunSpec("r", steps=200, seed=6), now=NOW))
    assert other != list(iter_records(spec, now=NOW))


def test_log_every_and_components():
    spec = RunSpec("r", steps=100, log_every=10, eval_every=0, loss_components=("ce", "aux"))
    records = list(iter_records(spec, now=NOW))
    assert [r["step"] for r in records] == [1, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    for r in records:
        assert r["loss_ce"] + r["loss_aux"] == pytest.approx(r["loss"])


def test_faults_hook(tmp_path):
    def custom(step, record):
        if step == 30 and "loss" in record:
            return EndRun("failed", "RuntimeError: device lost", {**record, "loss": 1e9})
        return record

    spec = RunSpec("faulty", steps=100, eval_every=0, faults=(spike_at(10, factor=100.0), custom))
    run = write_run(tmp_path, spec, now=NOW)
    lines = read_lines(run / "metrics.jsonl")
    assert lines[-1]["step"] == 30 and lines[-1]["loss"] == 1e9
    by_step = {r["step"]: r["loss"] for r in lines}
    assert by_step[10] > 50 * by_step[9]
    meta = json.loads((run / "metrics.meta.json").read_text())
    assert (meta["status"], meta["reason"]) == ("failed", "RuntimeError: device lost")


def test_nan_without_stop_continues_and_stop_at(tmp_path):
    records = list(iter_records(RunSpec("r", steps=50, eval_every=0, faults=(nan_at(40, end=None),)), now=NOW))
    assert len(records) == 50 and all(math.isnan(r["loss"]) for r in records[39:])
    run = write_run(tmp_path, RunSpec("s", steps=50, eval_every=0, faults=(stop_at(20),)), now=NOW)
    meta = json.loads((run / "metrics.meta.json").read_text())
    assert meta["status"] == "stopped" and meta["reason"] == "KeyboardInterrupt"
    assert read_lines(run / "metrics.jsonl")[-1]["step"] == 20


def test_write_run_replaces_instead_of_appending(tmp_path):
    spec = RunSpec("again", steps=20, eval_every=0)
    write_run(tmp_path, spec, now=NOW)
    run = write_run(tmp_path, spec, now=NOW)
    assert len(read_lines(run / "metrics.jsonl")) == 20
    assert not [p for p in run.iterdir() if p.name.endswith(".tmp")]


def test_bad_arguments():
    with pytest.raises(ValueError, match="n_runs"):
        sample_specs(0)
    with pytest.raises(ValueError, match="end"):
        nan_at(5, end="exploded")
    with pytest.raises(ValueError, match=">= 1"):
        list(iter_records(RunSpec("r", steps=0)))


def test_same_layout_as_metrics_writer(tmp_path):
    """Metadata keys (in order) and line layout match a real MetricsWriter's files."""
    from monitor_cb.train.writer import MetricsWriter

    writer = MetricsWriter(tmp_path / "real", config={"lr": 1e-3}, world_size=1, rank=0, extra_meta={"x": 1})
    writer.log(step=1, loss=float("nan"), lr=1e-3)
    writer.close("stopped", reason="why")
    real_meta = json.loads((tmp_path / "real" / "metrics.meta.json").read_text())
    real_line = (tmp_path / "real" / "metrics.jsonl").read_bytes()

    run = write_run(tmp_path, RunSpec("fake", steps=5, eval_every=0, faults=(stop_at(3, "why"),)), now=NOW)
    meta = json.loads((run / "metrics.meta.json").read_text())
    core = [k for k in real_meta if k not in ("x", "written_records")]
    assert [k for k in meta if k in core] == core
    assert list(meta)[-1] == list(real_meta)[-1] == "written_records"
    line = (run / "metrics.jsonl").read_bytes().splitlines()[0]
    assert list(orjson.loads(line))[:4] == list(orjson.loads(real_line))[:4] == ["step", "t", "rank", "seg"]
    assert b'"loss":"NaN"' in real_line  # the same NaN encoding as ours


def test_diverge_has_a_precursor_then_nan():
    spec = RunSpec("d", steps=400, eval_every=0, faults=(diverge_at(300, ramp=50),))
    train = list(iter_records(spec, now=NOW))
    plain = {r["step"]: r for r in iter_records(RunSpec("d", steps=400, eval_every=0), now=NOW)}
    assert train[-2]["step"] == 300 and math.isnan(train[-2]["loss"]) and train[-1]["event"] == "guard_stop"
    assert train[239] == plain[240]  # untouched before the ramp
    assert train[295]["grad_norm"] > 15 * plain[296]["grad_norm"]
    assert train[295]["loss"] > plain[296]["loss"]
    with pytest.raises(ValueError, match="ramp"):
        diverge_at(10, ramp=0)
