"""``summary`` and ``export`` through the real CLI entry point."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from monitor_cb.cli import main
from monitor_cb.train.writer import MetricsWriter


@pytest.fixture
def root(tmp_path: Path) -> Path:
    with MetricsWriter(tmp_path / "grp" / "exp1", config={"bs": 8}) as writer:
        for s in range(1, 6):
            writer.log(step=s, loss=math.nan if s == 3 else 1.0 / s, lr=0.01)
        writer.log(step=5, eval_acc=0.9)
    return tmp_path


def test_summary_json(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", "grp/exp1", "--root", str(root), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "finished" and out["last_step"] == 5 and out["records"] == 5
    assert out["last_values"]["loss"] == {"step": 5, "value": 0.2}
    assert out["last_values"]["eval_acc"]["value"] == 0.9 and out["bad_lines"] == 0


def test_summary_text_accepts_a_run_directory(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(root / "grp" / "exp1")]) == 0
    text = capsys.readouterr().out
    assert "finished" in text and "loss" in text


def test_unknown_run_is_a_clear_error(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", "../../etc", "--logdir", str(root)]) == 2
    assert "error: no run '../../etc'" in capsys.readouterr().err


def test_parquet_without_output_is_a_usage_error(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "grp/exp1", "--logdir", str(root), "--format", "parquet"]) == 2
    assert "error: --format parquet needs -o FILE" in capsys.readouterr().err


def test_export_csv_keeps_nan_and_blank_for_not_logged(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "grp/exp1", "--root", str(root), "--format", "csv"]) == 0
    text = capsys.readouterr().out
    frame = pd.read_csv(io.StringIO(text), keep_default_na=False)
    assert list(frame["step"]) == [1, 2, 3, 4, 5]
    assert frame["loss"][2] == "NaN" and frame["eval_acc"][0] == "" and frame["eval_acc"][4] == "0.9"


def test_export_parquet_nan_versus_null(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.parquet"
    assert main(["export", "grp/exp1", "--root", str(root), "--format", "parquet", "-o", str(out)]) == 0
    table = pq.read_table(out)
    loss = table.column("loss").to_pylist()
    assert math.isnan(loss[2]) and loss[0] == 1.0
    assert table.column("eval_acc").to_pylist() == [None, None, None, None, 0.9]


def test_a_text_value_under_loss_is_counted_and_the_column_stays_numeric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "r"
    run.mkdir()
    lines = [json.dumps({"step": s, "loss": "oops" if s == 50 else 1.0 / s}) for s in range(1, 101)]
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["summary", "r", "--root", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["last_values"]["loss"] == {"step": 100, "value": 0.01} and out["bad_lines"] == 1
    assert main(["export", "r", "--root", str(tmp_path)]) == 0
    frame = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert frame["loss"].dtype == float and frame["loss"].notna().sum() == 99
    assert math.isnan(frame["loss"].iloc[49])


BIG = "1" + "0" * 400  # a JSON integer no double holds
HOSTILE_META = (
    '{"name": 5, "status": "finished", "reason": 1e400, "pid": BIG, "start_time": BIG, "first_start_time": [1],'
    ' "end_time": "abc", "config": [1], "batch_size": BIG, "world_size": "x", "total_steps": 1e400, "rank": {}}'
).replace("BIG", BIG)


def test_hostile_metadata_values_never_break_summary_or_export(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "grp" / "exp1" / "metrics.meta.json").write_text(HOSTILE_META)
    assert main(["summary", "grp/exp1", "--root", str(root), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "finished" and out["reason"] == "inf" and out["name"] == "5"
    assert main(["summary", "grp/exp1", "--root", str(root)]) == 0
    assert main(["export", "grp/exp1", "--root", str(root)]) == 0


def test_summary_accepts_one_of_a_runs_files(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``summary …/metrics.jsonl`` or ``…/rank_0/info.log``, as people paste them: the file's folder is the run."""
    from tests.ingest.test_mindformers_source import write

    assert main(["summary", str(root / "grp" / "exp1" / "metrics.jsonl"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "finished" and out["last_step"] == 5
    log = tmp_path / "job" / "output" / "log" / "rank_0" / "info.log"
    log.parent.mkdir(parents=True)
    write(log, range(1, 21))
    assert main(["summary", str(log), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["last_step"] == 20
    (tmp_path / "notes.txt").write_text("not a run\n")
    assert main(["summary", str(tmp_path / "notes.txt")]) == 2
    said = capsys.readouterr().err
    assert "TensorBoard event files, MindFormers' info.log" in said and "MindSpore summary files" in said


def test_summary_and_diagnose_accept_an_msrun_worker_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``summary …/msrun_log/worker_0.log`` (what people share of a job): its folder's workers are the ranks."""
    from tests.ingest.test_mindformers_source import write

    msrun = tmp_path / "job" / "output" / "msrun_log"
    msrun.mkdir(parents=True)
    (msrun / "scheduler.log").write_text("msrun scheduler\n")
    for rank in (0, 1):
        write(msrun / f"worker_{rank}.log", range(1, 21))
    assert main(["summary", str(msrun / "worker_0.log"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["last_step"] == 20 and out["ranks"] == [0, 1]
    assert main(["diagnose", str(msrun / "worker_1.log")]) == 0
    assert main(["summary", "job/output/msrun_log", "--root", str(tmp_path), "--json"]) == 0
