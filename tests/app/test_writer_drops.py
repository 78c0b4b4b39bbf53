"""The Runs and Live pages say how many records the writer dropped, as the metadata counts them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from monitor_cb.ingest.dropnote import WriterDrops, drop_note
from monitor_cb.train.writer import MetricsWriter
from monitor_cb.views.escape import escape_markdown
from tests.app.conftest import DASHBOARD, write_run
from tests.app.helpers import assert_ok, run_entry, texts

RUNS_ENTRY = str(Path(__file__).with_name("runs_app.py"))
HOSTILE = "**bold** [link](http://x) <b>tag</b>"


def lossy_run(root: Path, name: str, run_name: str | None = None) -> str:
    """A run whose writer really dropped records (a 100-record queue, a 20,000-record burst); its note."""
    with pytest.warns(UserWarning, match="queue full"):
        writer = MetricsWriter(root / name, queue_size=100, run_name=run_name)
        for step in range(1, 20_001):
            writer.log(step=step, loss=1.0 / step)
        writer.close()
    meta: dict[str, Any] = json.loads((root / name / "metrics.meta.json").read_text())
    assert meta["dropped_records"] > 0
    causes = tuple((k, v) for k, v in meta["drop_causes"].items() if v)
    note = drop_note(WriterDrops(meta["dropped_records"], causes))
    assert note is not None and f"{meta['dropped_records']:,} records were dropped by the writer" in note
    return note


def test_live_page_says_the_writer_dropped_records(log_root: Path) -> None:
    note = lossy_run(log_root, "lossy")
    at = run_entry(DASHBOARD, {"run": "lossy"})
    assert_ok(at)
    assert escape_markdown(f"{note}.") in [w.value for w in at.warning]


def test_live_page_of_a_clean_run_says_nothing_of_drops(log_root: Path) -> None:
    write_run(log_root, "clean", steps=50)
    at = run_entry(DASHBOARD, {"run": "clean"})
    assert_ok(at)
    assert "dropped by the writer" not in texts(at)


def test_runs_page_shows_the_dropped_column_and_names_the_runs(log_root: Path) -> None:
    note = lossy_run(log_root, "lossy", run_name=HOSTILE)
    write_run(log_root, "clean", steps=50)
    at = run_entry(RUNS_ENTRY)
    assert_ok(at)
    table = at.dataframe(key="runs_table").value
    dropped = dict(zip(table["id"], table["dropped"], strict=True))
    meta = json.loads((log_root / "lossy" / "metrics.meta.json").read_text())
    assert dropped == {"lossy": f"{meta['dropped_records']:,}", "clean": "0"}
    (warning,) = [w.value for w in at.warning if "dropped by the writer" in w.value]
    assert warning == f"{escape_markdown(HOSTILE)}: {escape_markdown(note)}", "the run's name is inert text"


def test_runs_page_without_drops_has_no_dropped_column(log_root: Path) -> None:
    write_run(log_root, "clean", steps=50)
    at = run_entry(RUNS_ENTRY)
    assert_ok(at)
    assert "dropped" not in at.dataframe(key="runs_table").value.columns
    assert "dropped by the writer" not in texts(at)
