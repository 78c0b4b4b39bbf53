"""MindSpore summary directories in the store: listed, read, live, and through summary / export / diagnose.

The files are real MindSpore 2.9 output (``tests/importers/ms_summary_script.py``: SummaryCollector in
``Model.train`` and SummaryRecord in a custom loop), copied into a log root.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from monitor_cb.cli import main
from monitor_cb.importers.ms_proto import encode_event
from monitor_cb.importers.tfrecord import encode
from monitor_cb.ingest.store import RunStore
from tests.importers.ms_summary_files import only, write_real_summaries

NAME = "events.out.events.summary.1700000000.{rank}.host_MS"


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("ms") / "summaries"
    out.mkdir()
    return out, write_real_summaries(out)


@pytest.fixture
def root(written: tuple[Path, dict], tmp_path: Path) -> Path:
    out, _ = written
    root = tmp_path / "logs"
    root.mkdir()
    shutil.copytree(out / "collector", root / "collector", ignore=shutil.ignore_patterns("ckpt_dir"))
    shutil.copytree(out / "record", root / "record")
    return root


def test_summary_directories_are_listed_and_read_as_runs(root: Path, written: tuple[Path, dict]) -> None:
    _, expected = written
    store = RunStore(root, cache=False)
    infos = {info.id: info for info in store.list_runs()}
    assert set(infos) == {"collector", "record"}
    collector = infos["collector"]
    assert collector.ranks == (0,) and collector.first_step == 1 and collector.last_step == 10
    assert collector.status.startswith("ended") and collector.bad_lines == 0
    assert collector.meta["source_format"] == "ms_summary" and collector.meta["config"]["optimizer"] == "Momentum"
    frame = store.read("collector").frame
    _, events = only(expected, "collector")
    losses = {e["step"]: v["scalar"] for e in events for v in e["values"] if "scalar" in v}
    assert frame["step"].tolist() == sorted(losses)
    theirs = np.array([losses[s] for s in sorted(losses)], np.float32)
    assert np.array_equal(frame["loss/auto"].to_numpy(np.float32), theirs)
    record = store.read("record").frame
    assert record["acc"].tolist() == [0.1, 0.2, 0.3, 0.4, 0.5]


def test_summary_export_and_diagnose_work_on_them(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", "collector", "--logdir", str(root)]) == 0
    shown = capsys.readouterr().out
    assert "loss" in shown and "steps 1 .. 10" in shown
    target = root.parent / "record.csv"
    assert main(["export", "record", "--logdir", str(root), "-o", str(target)]) == 0
    lines = target.read_text().splitlines()
    assert lines[0].split(",")[-2:] == ["loss", "acc"] and len(lines) == 6
    assert main(["diagnose", str(root / "collector")]) == 0
    assert "ended" in capsys.readouterr().out
    assert main(["summary", "record", "--logdir", str(root), "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["last_step"] == 5
    (file,) = (root / "record").glob("*_MS")
    assert main(["summary", str(file), "--logdir", str(root.parent)]) == 0  # a summary file: its folder is the run
    assert "steps 1 .. 5" in capsys.readouterr().out


def test_a_growing_summary_file_is_live(tmp_path: Path) -> None:
    run_dir = tmp_path / "logs" / "live"
    run_dir.mkdir(parents=True)
    path = run_dir / NAME.format(rank=0)
    records = [encode(encode_event(1.7e9, 0, version="MindSpore.Event:1"))]
    records += [encode(encode_event(1.7e9 + s, s, [("loss/auto", 1.0 / s)])) for s in range(1, 11)]
    data = b"".join(records)
    half = sum(len(r) for r in records[:6]) + 9  # five steps and a torn sixth record
    path.write_bytes(data[:half])
    store = RunStore(tmp_path / "logs", cache=False, rescan_interval_s=0)
    assert store.read("live").frame["step"].tolist() == [1, 2, 3, 4, 5]
    assert store.run_info("live").last_step == 5
    path.write_bytes(data)
    frame = store.read("live").frame
    assert frame["step"].tolist() == list(range(1, 11)) and frame["loss/auto"].iloc[-1] == 0.1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_unsafe_summary_files_are_named_as_skipped(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    run_dir = root / "run"
    run_dir.mkdir(parents=True)
    (run_dir / NAME.format(rank=0)).write_bytes(encode(encode_event(1.7e9 + 1, 1, [("loss", 2.0)])))
    os.mkfifo(run_dir / NAME.format(rank=1))
    outside = tmp_path / "elsewhere.bin"
    outside.write_bytes(encode(encode_event(1.7e9 + 1, 1, [("loss", 2.0)])))
    os.symlink(outside, run_dir / NAME.format(rank=2))
    os.mkfifo(run_dir / "events.out.events.summary.1700000000.0.host_lineage")
    store = RunStore(root, cache=False)
    (info,) = store.list_runs()
    assert info.ranks == (0,) and store.read("run").frame["loss"].tolist() == [2.0]
    notes = store.skipped_files()
    assert len(notes) == 3 and all(note.startswith("skipped ") for note in notes)
    assert any(NAME.format(rank=1) in note for note in notes) and any(NAME.format(rank=2) in note for note in notes)
    assert info.meta["config"] == {}
    lineage = run_dir / "events.out.events.summary.1700000000.0.host_lineage"
    assert any(note.startswith(f"skipped {lineage}: ") for note in notes)


def test_histograms_through_the_store_and_export(root: Path, written: tuple[Path, dict]) -> None:
    _, expected = written
    store = RunStore(root, cache=False)
    store.list_runs()
    series = store.histograms("record")["w"]
    assert series.steps.tolist() == [1, 2, 3, 4, 5] and series.count.tolist() == [10] * 5
    assert store.histograms("record", rank=7) == {}
    target = root.parent / "hist.csv"
    assert main(["export", "collector", "--logdir", str(root), "--histograms", "-o", str(target)]) == 0
    import pandas as pd

    table = pd.read_csv(target)
    _, events = only(expected, "collector")
    buckets = sum(len(v["histogram"]["counts"]) for e in events[:-1] for v in e["values"] if "histogram" in v)
    assert len(table) == buckets  # the last event repeats the last step: kept once
    assert set(table["tag"]) == {"hidden.weight/auto", "hidden.bias/auto", "out.weight/auto", "out.bias/auto"}
    one = table[(table["tag"] == "out.bias/auto") & (table["step"] == 1)]
    assert one["bucket_count"].sum() == one["count"].iloc[0] == 2
    assert (one["right"].to_numpy() > one["left"].to_numpy()).all()
    assert main(["export", "record", "--logdir", str(root), "--histograms"]) == 0
    assert main(["export", "nope", "--logdir", str(root), "--histograms"]) == 2
