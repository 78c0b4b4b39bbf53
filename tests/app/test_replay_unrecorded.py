"""Replay opens runs that recorded no status: the 79 real runs of ``../shared/real_runs``, copied with ``cp -p``.

Before, these were "running" or "stalled" (their files' mtime decided) and Replay refused them all.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.app.helpers import assert_ok, charts, run_entry

REAL_RUNS = Path(__file__).resolve().parents[2] / ".." / "shared" / "real_runs"
ENTRY = str(Path(__file__).with_name("compare_app.py"))
pytestmark = pytest.mark.skipif(not REAL_RUNS.is_dir(), reason="../shared/real_runs is not here")


@pytest.fixture(autouse=True)
def _replay_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_TEST_PAGE", "replay")


@pytest.fixture
def real_root(log_root: Path) -> Path:
    for run in sorted(REAL_RUNS.iterdir()):
        if (run / "metrics.jsonl").is_file():
            shutil.copytree(run, log_root / run.name)  # copy2: mtimes kept, as cp -p does
    return log_root


def names(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def open_each(root: Path, chosen: list[str]) -> None:
    at = run_entry(ENTRY, {"run": chosen[0]}, 120)
    assert_ok(at)
    box = at.sidebar.selectbox(key="rp_run")
    assert sorted(str(o).split(" · ")[0] for o in box.options) == names(root), "every run is replayable"
    assert all(" · ended · " in str(o) for o in box.options)
    for name in chosen:
        box.set_value(name).run()
        assert_ok(at)
        assert at.sidebar.selectbox(key="rp_run").value == name
        assert charts(at), f"{name}: nothing drawn"
        box = at.sidebar.selectbox(key="rp_run")


def test_replay_lists_and_opens_every_run(real_root: Path) -> None:
    all_runs = names(real_root)
    assert len(all_runs) == 79
    open_each(real_root, all_runs)
