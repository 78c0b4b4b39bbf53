"""A root with one poisoned run (FIFOs and links where the product reads) still shows the others, and says
which files it skipped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.app.conftest import DASHBOARD, write_run
from tests.app.helpers import assert_ok, charts, run_entry

RUNS_ENTRY = str(Path(__file__).with_name("runs_app.py"))


@pytest.fixture
def poisoned_root(log_root: Path) -> Path:
    """``good`` and ``other``, and ``poisoned`` whose metadata is a FIFO; the root's summary index and
    diagnosis settings are FIFOs too, and a second rank's metrics file is a link to ``/dev/zero``."""
    write_run(log_root, "good", steps=120)
    write_run(log_root, "other", steps=80)
    write_run(log_root, "poisoned", steps=60, close=None)
    meta = log_root / "poisoned" / "metrics.meta.json"
    meta.unlink()
    os.mkfifo(meta)
    (log_root / "poisoned" / "metrics.rank1.jsonl").symlink_to("/dev/zero")
    cache = log_root / ".monitor" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    os.mkfifo(cache / "index.json")
    os.mkfifo(log_root / ".monitor" / "diagnosis.json")
    return log_root


def sidebar_text(at: object) -> str:
    return "\n".join(str(t.value) for t in at.sidebar.text)  # type: ignore[attr-defined]


def test_the_live_page_shows_a_good_run_and_names_the_skipped_files(poisoned_root: Path) -> None:
    at = run_entry(DASHBOARD, {"run": "good"})  # a hang here fails at AppTest's timeout
    assert_ok(at)
    assert charts(at)
    shown = sidebar_text(at)
    assert f"skipped {poisoned_root / 'poisoned' / 'metrics.meta.json'}: is not a regular file (a FIFO)" in shown
    assert "index.json: is not a regular file (a FIFO)" in shown


def test_the_poisoned_run_itself_is_shown_from_its_metrics(poisoned_root: Path) -> None:
    at = run_entry(DASHBOARD, {"run": "poisoned"})
    assert_ok(at)
    assert charts(at)


def test_the_runs_page_lists_every_run(poisoned_root: Path) -> None:
    at = run_entry(RUNS_ENTRY)
    assert_ok(at)
    table = at.dataframe(key="runs_table").value
    assert {"good", "other", "poisoned"} <= set(table["id"]), table
    assert "metrics.meta.json: is not a regular file (a FIFO)" in sidebar_text(at)
