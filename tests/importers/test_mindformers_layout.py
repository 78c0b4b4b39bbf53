"""Where a MindFormers job's logs are: ``output/log/rank_N/info.log``, msrun's ``worker_N.log``, or both."""

from __future__ import annotations

import os
from pathlib import Path

from monitor_cb.importers.mindformers_layout import (
    is_mindformers_log_dir,
    is_shadowed_msrun_dir,
    rank_logs,
    rotated_logs,
    run_name,
)
from monitor_cb.ingest.discover import discover_runs

LINE = "2026-12-05 09:22:03,997 - mindformers[x] - INFO - { step:[    1/  100], loss:   2.3, per_step_time:   12ms }\n"


def msrun_job(root: Path, workers: int = 2) -> Path:
    msrun = root / "job" / "output" / "msrun_log"
    msrun.mkdir(parents=True)
    (msrun / "scheduler.log").write_text("scheduler started\n")
    for rank in range(workers):
        (msrun / f"worker_{rank}.log").write_text(LINE)
    return msrun


def test_msrun_worker_logs_are_the_ranks_and_the_scheduler_log_is_not(tmp_path: Path) -> None:
    msrun = msrun_job(tmp_path, workers=3)
    assert rank_logs(msrun) == {r: msrun / f"worker_{r}.log" for r in range(3)}
    assert is_mindformers_log_dir(msrun) and run_name(msrun) == "job"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "scheduler.log").write_text("x\n")
    (tmp_path / "other" / "worker_x.log").write_text("x\n")
    assert not is_mindformers_log_dir(tmp_path / "other")
    assert {run.id: run.kind for run in discover_runs(tmp_path).values()} == {"job/output/msrun_log": "mindformers_log"}


def test_a_job_with_both_layouts_is_one_run(tmp_path: Path) -> None:
    msrun = msrun_job(tmp_path, workers=2)
    log = msrun.parent / "log"
    (log / "rank_0").mkdir(parents=True)
    (log / "rank_0" / "info.log").write_text(LINE)
    runs = discover_runs(tmp_path)
    assert list(runs) == ["job/output/log"], "msrun_log beside log/ is the same job"
    assert is_shadowed_msrun_dir(msrun)
    assert rank_logs(log, tmp_path) == {0: log / "rank_0" / "info.log", 1: msrun / "worker_1.log"}
    assert rank_logs(log, log) == {0: log / "rank_0" / "info.log"}, "a sibling outside the root is not read"
    assert list(discover_runs(msrun)) == ["."], "msrun_log opened as its own root is a run"


def test_rotated_files_of_a_log_file_oldest_first(tmp_path: Path) -> None:
    (tmp_path / "info.log").write_text("x\n")
    (tmp_path / "info.log.2").write_text("x\n")
    os.symlink("/nonexistent", tmp_path / "info.log.1")  # a link is listed: the reader names why it skips it
    assert [p.name for p in rotated_logs(tmp_path / "info.log")] == ["info.log.2", "info.log.1"]
    assert rotated_logs(tmp_path / "worker_0.log") == []
