"""Attaching to a MindFormers job by its log: the real run's ``info.log`` read as a live run.

The lines are the ones the real MindFormers 1.9 Trainer wrote moments ago (the session's
trainings), never hand-written: every value read from them equals LiveMonitor's record of the same
step; then the same lines are replayed into a growing, rotated and truncated log.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import pytest

from monitor_cb.cli import main
from monitor_cb.ingest.store import RunStore
from tests.app.conftest import DASHBOARD
from tests.app.helpers import assert_ok, run_entry
from tests.mindformers.harness import TrainedRun
from tests.notify.conftest import http_receiver  # noqa: F401  (the fixture: a real HTTP receiver)

pytestmark = [pytest.mark.mindspore, pytest.mark.slow]

LOG_RUN = "output/log"
METRICS = ("loss", "lr", "grad_norm", "loss_scale", "overflow")


def by_step(frame) -> dict[int, dict[str, float]]:
    return {int(row["step"]): row for row in frame.to_dict("records")}


def assert_same(value: float, recorded: float, name: str, step: int) -> None:
    if math.isnan(recorded):
        assert math.isnan(value), (name, step)
        return
    tolerance = 5e-7 if name == "loss" else 0.0  # the log prints the loss with six decimals
    assert value == pytest.approx(recorded, rel=1e-6, abs=tolerance), (name, step, value, recorded)


@pytest.mark.parametrize("fixture", ["yaml_run", "overflow_run"])
def test_every_value_read_from_the_log_equals_livemonitors(fixture: str, request: pytest.FixtureRequest) -> None:
    run: TrainedRun = request.getfixturevalue(fixture)
    store = RunStore(run.cwd, cache=False)
    info = {i.id: i for i in store.list_runs()}[LOG_RUN]
    assert info.ranks == (0,) and info.last_step == 20 and info.bad_lines == 0
    assert info.status == "finished" and info.meta["total_steps"] == 20 and info.name == run.cwd.name
    read = by_step(store.read(LOG_RUN).frame)
    records = run.records()
    assert sorted(read) == [r["step"] for r in records]
    for record in records:
        row = read[record["step"]]
        for name in METRICS:
            assert_same(row[name], float(record[name]), name, record["step"])
        assert row["step_time"] > 0 and row["throughput"] > 0 and row["epoch"] == 1


def replay(lines: list[str], path: Path) -> None:
    with path.open("a") as out:
        out.write("".join(f"{line}\n" for line in lines))


def test_a_growing_log_is_tailed_and_rotation_and_truncation_lose_nothing(yaml_run: TrainedRun, tmp_path: Path) -> None:
    real = yaml_run.info_log.read_text().splitlines()
    step_rows = [i for i, line in enumerate(real) if "Epoch:[" in line]
    cut = [step_rows[k] + 2 for k in (4, 9, 14)]  # after steps 5, 10, 15 and their progress lines
    rank_dir = tmp_path / "job" / "output" / "log" / "rank_0"
    rank_dir.mkdir(parents=True)
    log = rank_dir / "info.log"
    store = RunStore(tmp_path, cache=False)

    def steps() -> list[int]:
        store.refresh(force=True)
        return [int(s) for s in store.read("job/output/log").frame["step"]]

    replay(real[: cut[0]], log)
    assert steps() == list(range(1, 6))
    assert steps() == list(range(1, 6)), "nothing new, nothing twice"
    replay(real[cut[0] : cut[1]], log)  # steps 6-10 written, then the handler rotates before we look
    os.rename(log, rank_dir / "info.log.1")
    replay(real[cut[1] : cut[2]], log)  # steps 11-15 in the new info.log
    assert steps() == list(range(1, 16)), "the rest of info.log.1 is read before the new file"
    log.write_text("")  # truncated in place (copytruncate): the job goes on
    replay(real[cut[2] :], log)
    assert steps() == list(range(1, 21))
    info = store.list_runs()[0]
    assert info.name == "job" and info.bad_lines == 0 and info.status == "finished"


def test_a_job_restarted_from_its_rotated_logs(yaml_run: TrainedRun, tmp_path: Path) -> None:
    """A dashboard started while a job runs reads info.log.2, info.log.1 and info.log in order."""
    real = yaml_run.info_log.read_text().splitlines()
    thirds = [real[: len(real) // 3], real[len(real) // 3 : 2 * len(real) // 3], real[2 * len(real) // 3 :]]
    rank_dir = tmp_path / "output" / "log" / "rank_0"
    rank_dir.mkdir(parents=True)
    for name, part in zip(("info.log.2", "info.log.1", "info.log"), thirds, strict=True):
        replay(part, rank_dir / name)
    frame = RunStore(tmp_path, cache=False).read(LOG_RUN).frame
    assert [int(s) for s in frame["step"]] == list(range(1, 21))


def test_ranks_appear_as_one_run_and_a_link_out_of_the_root_is_refused(yaml_run: TrainedRun, tmp_path: Path) -> None:
    log = tmp_path / "root" / "output" / "log"
    for rank in (0, 1):
        (log / f"rank_{rank}").mkdir(parents=True)
        shutil.copy(yaml_run.info_log, log / f"rank_{rank}" / "info.log")
    outside = tmp_path / "outside" / "rank_2"
    outside.mkdir(parents=True)
    shutil.copy(yaml_run.info_log, outside / "info.log")
    (log / "rank_2").mkdir()
    (log / "rank_2" / "info.log").symlink_to(outside / "info.log")
    store = RunStore(tmp_path / "root", cache=False)
    info = store.list_runs()[0]
    assert info.ranks == (0, 1, 2)
    frame = store.read(LOG_RUN, rank=2).frame
    assert len(frame) == 0, "rank 2's file resolves outside the root: never read"
    assert len(store.read(LOG_RUN, rank=1).frame) == 20


def test_summary_and_diagnose_read_the_log(overflow_run: TrainedRun, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", LOG_RUN, "--logdir", str(overflow_run.cwd)]) == 0
    out = capsys.readouterr().out
    assert "finished (MindFormers logged 'Training Over')" in out and "steps 1 .. 20" in out
    assert main(["diagnose", str(overflow_run.cwd / "output" / "log")]) == 0
    out = capsys.readouterr().out
    assert "steps with a non-finite grad norm and a finite loss" in out, "the overflow steps, as from our JSONL"


def test_the_dashboard_opens_the_log_as_a_run(
    yaml_run: TrainedRun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    shutil.copytree(yaml_run.cwd / "output", root / "job" / "output")
    monkeypatch.setenv("MONITOR_LOGDIR", str(root))
    at = run_entry(DASHBOARD, {"run": "job/output/log"})
    assert_ok(at)
    values = {m.label: m.value for m in at.metric}
    assert values["Step of 20"] == "20", values


def test_a_nan_loss_in_the_log_is_alerted_like_ours(
    yaml_run: TrainedRun,
    tmp_path: Path,
    http_receiver,  # noqa: F811 - the imported fixture
) -> None:
    """The real lines with the loss of steps 15-20 turned into MindFormers' ``nan``: one error alert."""
    from tests.notify.test_watcher import sent, watch_once

    lines = []
    for line in yaml_run.info_log.read_text().splitlines():
        if "Epoch:[" in line and int(line.split("step:[")[1].split("/")[0]) >= 15:
            head, rest = line.split("loss:[", 1)
            line = head + "loss:[nan/nan]" + rest.split("]", 1)[1]
        lines.append(line)
    rank_dir = tmp_path / "logs" / "job" / "output" / "log" / "rank_0"
    rank_dir.mkdir(parents=True)
    replay(lines, rank_dir / "info.log")
    rx = http_receiver()
    watch_once(tmp_path / "logs", rx)
    alerts = {a["kind"]: a for a in sent(rx)}
    assert alerts["nan"]["run"] == "job/output/log" and alerts["nan"]["step"] == 15
    assert alerts["nan"]["severity"] == "error"


def test_the_real_jobs_output_as_msrun_writes_it_and_with_both_layouts(yaml_run: TrainedRun, tmp_path: Path) -> None:
    """msrun sends a worker's stdout and stderr to ``output/msrun_log/worker_N.log``: the real job's
    output (the stdout handler's prefix) laid out so is one rank of a run whose values equal
    LiveMonitor's; with ``output/log`` beside it, the job is one run, not two."""
    stderr = (yaml_run.cwd / "stderr.txt").read_text(errors="replace")
    job = tmp_path / "job" / "output"
    (job / "msrun_log").mkdir(parents=True)
    (job / "msrun_log" / "worker_0.log").write_text(yaml_run.stdout + stderr)
    (job / "msrun_log" / "scheduler.log").write_text("msrun scheduler\n")
    store = RunStore(tmp_path, cache=False)
    (info,) = store.list_runs()
    assert info.id == "job/output/msrun_log" and info.name == "job" and info.ranks == (0,)
    assert info.last_step == 20 and info.bad_lines == 0 and info.status == "finished"
    read = by_step(store.read(info.id).frame)
    for record in yaml_run.records():
        for name in METRICS:
            assert_same(read[record["step"]][name], float(record[name]), name, record["step"])
    (job / "log" / "rank_0").mkdir(parents=True)
    shutil.copy(yaml_run.info_log, job / "log" / "rank_0" / "info.log")
    store = RunStore(tmp_path, cache=False)
    assert [i.id for i in store.list_runs()] == ["job/output/log"]
