"""``python -m monitor_cb import-tb SRC DEST`` on real MindFormers-style event files."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from monitor_cb.cli import main
from monitor_cb.record import decode_record
from tests.importers.tb_helpers import GBS, SyncedWriter, loss_at, mindformers_step, write_run


def strict_lines(path: Path) -> list[dict]:
    """Parse as strict RFC 8259 JSON: a bare NaN token would raise."""

    def reject(token: str) -> None:
        raise ValueError(f"bare {token} in {path}")

    return [json.loads(line, parse_constant=reject) for line in path.read_text().splitlines()]


def test_two_ranks_become_rank_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "output" / "tensorboard"
    for writer in write_run(src, (0, 1), range(1, 5)).values():
        writer.close()
    dest = tmp_path / "logs" / "imported"
    assert main(["import-tb", str(src), str(dest)]) == 0
    assert "imported 8 records" in capsys.readouterr().out
    assert sorted(p.name for p in dest.iterdir()) == [
        "metrics.rank0.jsonl",
        "metrics.rank0.meta.json",
        "metrics.rank1.jsonl",
        "metrics.rank1.meta.json",
    ]
    for rank in (0, 1):
        lines = strict_lines(dest / f"metrics.rank{rank}.jsonl")
        assert [line["step"] for line in lines] == [1, 2, 3, 4]
        assert lines[2]["loss"] == "NaN"  # the proto3 string, not a bare token, not dropped
        assert {line["rank"] for line in lines} == {rank} and {line["seg"] for line in lines} == {1}
        decoded = decode_record(lines[2])
        assert math.isnan(decoded["loss"]) and decoded["samples"] == 3 * GBS and decoded["step_time"] == 0.25
        assert lines[0]["loss"] == loss_at(1, rank) and lines[0]["lr"] == 0.0001 and lines[0]["batch_size"] == GBS
        meta = json.loads((dest / f"metrics.rank{rank}.meta.json").read_text())
        assert meta["status"] == "finished" and meta["world_size"] == 2 and meta["rank"] == rank
        assert meta["config"]["source"] == str(src.resolve())
        assert meta["config"]["source_format"] == "tensorboard"
        assert meta["config"]["tensorboard_text"]["runner_config"].startswith("{'batch_size'")
        assert meta["start_time"] == lines[0]["t"] and meta["end_time"] == lines[-1]["t"]
        assert meta["written_records"] == 4 and meta["dropped_records"] == 0


def test_single_rank_with_resume_becomes_metrics_jsonl_with_segments(tmp_path: Path) -> None:
    src = tmp_path / "tb"
    first = SyncedWriter(src / "rank_0")
    for step in (1, 2, 3):
        mindformers_step(first, step, float(step))
    first.close()
    second = SyncedWriter(src / "rank_0", filename_suffix=".resumed")
    for step in (3, 4):
        mindformers_step(second, step, 10.0 + step)
    second.close()
    dest = tmp_path / "run"
    assert main(["import-tb", str(src), str(dest), "--name", "llama-7b"]) == 0
    lines = strict_lines(dest / "metrics.jsonl")
    assert [(line["seg"], line["step"], line["loss"]) for line in lines] == [
        (1, 1, 1.0),
        (1, 2, 2.0),
        (1, 3, 3.0),
        (2, 3, 13.0),
        (2, 4, 14.0),
    ]
    meta = json.loads((dest / "metrics.meta.json").read_text())
    assert meta["segment"] == 2 and meta["name"] == "llama-7b" and meta["world_size"] == 1
    assert meta["first_start_time"] == lines[0]["t"] and meta["start_time"] == lines[3]["t"]


def test_refuses_bad_source_and_existing_destination(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import-tb", str(tmp_path / "nope"), str(tmp_path / "out")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert main(["import-tb", str(tmp_path), str(tmp_path / "out")]) == 2
    assert "no TensorBoard event files" in capsys.readouterr().err
    src = tmp_path / "tb"
    write_run(src, (0,), range(1, 2))[0].close()
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "metrics.jsonl").write_text("")
    assert main(["import-tb", str(src), str(dest)]) == 2
    assert "already holds metrics files" in capsys.readouterr().err


def test_missing_tensorboard_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    src = tmp_path / "tb"
    write_run(src, (0,), range(1, 2))[0].close()
    monkeypatch.setitem(sys.modules, "tensorboard.compat.proto.event_pb2", None)
    assert main(["import-tb", str(src), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "optional 'tensorboard' package" in err and "pip install tensorboard" in err
    assert not (tmp_path / "out").exists()


def test_steps_out_of_range_are_skipped_and_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.importers.test_tensorboard import write_bad_steps

    write_bad_steps(tmp_path / "tb")
    dest = tmp_path / "logs" / "imported"
    assert main(["import-tb", str(tmp_path / "tb"), str(dest)]) == 0
    assert "skipped 2 scalar value(s)" in capsys.readouterr().err
    lines = strict_lines(dest / "metrics.jsonl")
    assert [(line["step"], line["loss"]) for line in lines][-1] == (4, 0.25) and len(lines) == 4
