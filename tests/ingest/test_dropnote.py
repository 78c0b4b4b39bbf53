"""Records the writer dropped reach every reader: the note, RunInfo, ``summary`` (text and JSON).

The count is the metadata's; a reader never shows another one. Metadata comes from disk: a count that
is not a non-negative integer is ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from monitor_cb.cli import main
from monitor_cb.ingest import RunStore
from monitor_cb.ingest.dropnote import WriterDrops, drop_note, writer_drops
from monitor_cb.train.writer import MetricsWriter


@pytest.mark.parametrize(
    ("drops", "note"),
    [
        (WriterDrops(), None),
        (WriterDrops(1, (("disk_error", 1),)), "1 record was dropped by the writer (disk errors: 1)"),
        (
            WriterDrops(1500, (("queue_full_producer", 1000), ("unwritten_at_close", 500))),
            "1,500 records were dropped by the writer (queue full: logged faster than the writer thread could "
            "write: 1,000; not written at close: the disk hung: 500)",
        ),
        (WriterDrops(7), "7 records were dropped by the writer (queue full or disk errors)"),
        (
            WriterDrops(9, (("queue_full_disk", 4),)),
            "9 records were dropped by the writer (queue full: the disk was slow or hung: 4; cause not recorded: 5)",
        ),
    ],
)
def test_drop_note(drops: WriterDrops, note: str | None) -> None:
    assert drop_note(drops) == note


def test_every_ranks_metadata_is_summed_and_garbage_ignored() -> None:
    metas: list[dict[str, Any]] = [
        {"dropped_records": 10, "drop_causes": {"queue_full_disk": 10, "made_up": 99}},
        {"dropped_records": 5, "drop_causes": {"disk_error": 5}},
        {"dropped_records": "5"},
        {"dropped_records": True},
        {"dropped_records": -3},
        {"dropped_records": 10**30},
        {"dropped_records": 2, "drop_causes": ["disk_error"]},
        {"dropped_records": 1, "drop_causes": {"disk_error": 1.5, "after_close": None}},
        {},
    ]
    assert writer_drops(metas) == WriterDrops(18, (("queue_full_disk", 10), ("disk_error", 5)))


def lossy_run(root: Path, name: str = "lossy") -> dict[str, Any]:
    """A run whose writer really dropped records: a 100-record queue and a 50,000-record burst."""
    with pytest.warns(UserWarning, match="queue full"), MetricsWriter(root / name, queue_size=100) as writer:
        for step in range(50_000):
            writer.log(step=step, loss=1.0)
    meta = json.loads((root / name / "metrics.meta.json").read_text())
    assert meta["dropped_records"] > 0 and meta["written_records"] + meta["dropped_records"] == 50_000
    return meta


def test_summary_says_what_the_metadata_says(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    meta = lossy_run(tmp_path)
    store = RunStore(tmp_path, cache=False)
    (info,) = store.list_runs()
    assert info.drops.total == meta["dropped_records"]
    assert info.n_records == meta["written_records"], "the reader's records are the writer's written ones"
    assert main(["summary", "lossy", "--root", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    dropped = meta["dropped_records"]
    expected = drop_note(WriterDrops(dropped, tuple((k, v) for k, v in meta["drop_causes"].items() if v)))
    assert f"dropped    {expected}\n" in text and f"{dropped:,} records were dropped by the writer" in text
    assert main(["summary", "lossy", "--root", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dropped_records"] == dropped and out["records"] == meta["written_records"]
    assert out["drop_causes"] == {k: v for k, v in meta["drop_causes"].items() if v}


def test_a_clean_run_says_nothing_of_drops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with MetricsWriter(tmp_path / "clean") as writer:
        writer.log(step=1, loss=1.0)
    assert main(["summary", "clean", "--root", str(tmp_path)]) == 0
    assert "dropped" not in capsys.readouterr().out
    assert main(["summary", "clean", "--root", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dropped_records"] == 0 and out["drop_causes"] == {}


def test_a_second_writers_drops_count_too(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step":1,"seg":1,"loss":1}\n')
    (run / "metrics.meta.json").write_text(json.dumps({"status": "finished", "dropped_records": 3}))
    (run / "metrics.writer2.jsonl").write_text('{"step":1,"seg":2,"loss":2}\n')
    (run / "metrics.writer2.meta.json").write_text(
        json.dumps({"status": "finished", "dropped_records": 4, "drop_causes": {"disk_error": 4}})
    )
    (info,) = RunStore(tmp_path, cache=False).list_runs()
    assert info.drops == WriterDrops(7, (("disk_error", 4),)) and info.n_records == 2
