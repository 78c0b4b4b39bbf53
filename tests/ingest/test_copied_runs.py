"""Runs we did not write, copied three ways: the same truthful status every time (issue 25).

The 79 real runs of ``../shared/real_runs`` (article-format ``metrics.jsonl``, no metadata) copied with
``cp -r`` (mtime now), ``cp -p -r`` and ``rsync -a`` (mtime kept): a file's mtime must not decide the
status, nobody saw them written, so each is "ended (no status recorded)", never running, stalled or
crashed, and no finding comes from status alone.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from monitor_cb.diagnosis.engine import diagnose
from monitor_cb.ingest import RunStore

REAL_RUNS = Path(__file__).resolve().parents[2] / ".." / "shared" / "real_runs"
pytestmark = pytest.mark.skipif(not REAL_RUNS.is_dir(), reason="../shared/real_runs is not here")

COPIES = {
    "cp": ["cp", "-r"],
    "cp-p": ["cp", "-p", "-r"],
    "rsync": ["rsync", "-a"],
}


def run_dirs() -> list[Path]:
    return sorted(p for p in REAL_RUNS.iterdir() if (p / "metrics.jsonl").is_file())


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    roots = {}
    for how, command in COPIES.items():
        if shutil.which(command[0]) is None:
            continue
        root = tmp_path_factory.mktemp(how)
        for run in run_dirs():
            subprocess.run([*command, str(run), str(root)], check=True)
        roots[how] = root
    return roots


def statuses(root: Path) -> dict[str, tuple[str, str | None]]:
    store = RunStore(root, cache=False)
    return {info.id: (info.status, info.reason) for info in store.list_runs()}


def test_every_copy_gives_every_run_the_same_status(copies: dict[str, Path]) -> None:
    if "rsync" not in copies:
        pytest.skip("rsync is not installed")
    seen = {how: statuses(root) for how, root in copies.items()}
    names = {p.name for p in run_dirs()}
    assert len(names) == 79
    for how, found in seen.items():
        assert set(found) == names, how
    assert seen["cp"] == seen["cp-p"] == seen["rsync"]
    assert set(seen["cp"].values()) == {("ended", "no status recorded")}


def test_no_finding_comes_from_status_alone(copies: dict[str, Path]) -> None:
    root = copies["cp-p"]  # mtimes of years ago: the copy that read as "stalled" before
    store = RunStore(root, cache=False)
    for info in store.list_runs():
        data = store.read(info.id)
        found = diagnose(data.frame, status=info.status, last_write=info.last_write, logged=data.masks)
        silent = [f for f in found if f.kind == "stalled" and (f.details or {}).get("variant") != "gap"]
        assert not silent, (info.id, [f.message for f in silent])


def test_a_run_copied_while_watched_is_running(copies: dict[str, Path], tmp_path: Path) -> None:
    source = run_dirs()[0]
    root = tmp_path / "root"
    root.mkdir()
    shutil.copytree(source, root / source.name)
    store = RunStore(root, cache=False, rescan_interval_s=0)
    assert store.run_info(source.name).status == "ended"
    with open(root / source.name / "metrics.jsonl", "ab") as handle:
        handle.write(b'{"step": 99999999, "loss": 1.0}\n')
    assert store.run_info(source.name).status == "running"
