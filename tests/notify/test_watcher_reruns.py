"""Re-runs and alert ids (issue 34, item 6), on real runs and a real webhook receiver on 127.0.0.1.

Found by a probe: a run deleted and re-run under the same name, or re-run in place, that hit NaN again got no
NaN alert; a resumed run finishing again at the same step got no "finished" alert (NOTIFICATIONS.md promises
it); the same run name under two roots gave the same ``Idempotency-Key``, so a deduplicating receiver dropped
the second.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from monitor_cb.notify.watcher import Watcher
from monitor_cb.train.writer import MetricsWriter

from .test_watcher import NAN, make_config, sent, watch_once, write_run

pytest.importorskip("monitor_cb.ingest")
pytest.importorskip("monitor_cb.diagnosis")


def kinds(receiver) -> list[tuple[str, str]]:
    return [(a["run"], a["kind"]) for a in sent(receiver)]


def nan_run(root: Path, name: str = "exp1") -> None:
    """600 steps, NaN from step 101, stopped by the guard: the run the probe re-ran."""
    write_run(root, name, range(1, 601), nan_from=101, status="stopped", reason="stopped: non-finite loss at step 100")


def test_a_run_deleted_and_rerun_that_hits_nan_again_is_alerted_again(tmp_path: Path, http_receiver) -> None:
    root = tmp_path / "logs"
    rx = http_receiver()
    nan_run(root)
    watch_once(root, rx, skip_older=0)
    assert kinds(rx).count(("exp1", "nan")) == 1
    shutil.rmtree(root / "exp1")
    time.sleep(0.01)  # a new run starts later than the deleted one (its metadata's start time)
    nan_run(root)  # the same name, the same NaN at the same step: deterministic training
    watch_once(root, rx, skip_older=0)
    nans = [a for a in sent(rx) if a["kind"] == "nan"]
    assert len(nans) == 2, "the re-run's NaN is a new event"
    assert [a["step"] for a in nans] == [101, 101]
    assert len({a["id"] for a in nans}) == 2, "a receiver that deduplicates keeps both"
    watch_once(root, rx, skip_older=0)
    assert len([a for a in sent(rx) if a["kind"] == "nan"]) == 2, "and it is said once"


def test_a_run_rerun_in_place_that_hits_nan_again_is_alerted_again(tmp_path: Path, http_receiver) -> None:
    root = tmp_path / "logs"
    rx = http_receiver()
    nan_run(root)
    watch_once(root, rx, skip_older=0)
    nan_run(root)  # the same directory, not deleted: the writer takes the next segment
    watch_once(root, rx, skip_older=0)
    nans = [a for a in sent(rx) if a["kind"] == "nan"]
    assert len(nans) == 2 and len({a["id"] for a in nans}) == 2
    assert [a["kind"] for a in sent(rx)].count("stopped") == 2, "stopped again at the same step: said again"


def test_a_run_resumed_from_a_checkpoint_that_finishes_at_the_same_step_is_reported_again(
    tmp_path: Path, http_receiver
) -> None:
    root = tmp_path / "logs"
    rx = http_receiver()
    write_run(root, "exp1", range(1, 21), status="finished")
    watch_once(root, rx, skip_older=0)
    assert kinds(rx) == [("exp1", "finished")]
    resumed = MetricsWriter(root / "exp1", fsync_interval=0)  # resumed from the checkpoint at step 10
    for step in range(11, 21):
        resumed.log(step=step, loss=1.0 / step, lr=1e-3, grad_norm=1.0)
    resumed.close("finished")
    watch_once(root, rx, skip_older=0)
    finished = [a for a in sent(rx) if a["kind"] == "finished"]
    assert [a["step"] for a in finished] == [20, 20]
    assert len({a["id"] for a in finished}) == 2


def test_an_old_nan_left_in_view_after_a_resume_is_not_alerted_again(tmp_path: Path, http_receiver) -> None:
    """A resume from step 50 that has not yet reached the first run's NaN (step 101, still drawn): nothing new."""
    root = tmp_path / "logs"
    rx = http_receiver()
    nan_run(root)
    watcher = Watcher(root, make_config(rx), skip_older=0)
    assert [a.kind for a in watcher.poll()].count("nan") == 1
    resumed = MetricsWriter(root / "exp1", fsync_interval=0)
    for step in range(50, 81):
        resumed.log(step=step, loss=1.0 / step, lr=1e-3, grad_norm=1.0)
    assert resumed.flush()
    assert [a.kind for a in watcher.poll()].count("nan") == 0
    for step in range(81, 121):  # the resumed segment reaches NaN again
        resumed.log(step=step, loss=NAN if step >= 101 else 1.0 / step, lr=1e-3, grad_norm=1.0)
    assert resumed.flush()
    assert [(a.kind, a.step, a.segment) for a in watcher.poll() if a.kind == "nan"] == [("nan", 101, 2)]
    resumed.close("finished")
    assert watcher.deliver(timeout=10)


def test_the_same_run_name_under_two_roots_gives_two_idempotency_keys(tmp_path: Path, http_receiver) -> None:
    rx = http_receiver()
    for root in (tmp_path / "team_a", tmp_path / "team_b"):
        write_run(root, "exp1", range(1, 21), status="finished")
        watch_once(root, rx, skip_older=0)
    assert kinds(rx) == [("exp1", "finished"), ("exp1", "finished")]
    keys = [r.headers["Idempotency-Key"] for r in rx.requests]
    assert len(keys) == 2 and keys[0] != keys[1]
    assert len({a["id"] for a in sent(rx)}) == 2


def test_without_metadata_a_rerun_is_told_by_its_fewer_records(tmp_path: Path, http_receiver) -> None:
    """No start time to compare (the metadata file is gone): a run with fewer records than before is a re-run."""
    from monitor_cb.record import meta_path_for

    root = tmp_path / "logs"
    rx = http_receiver()
    nan_run(root)
    meta_path_for(root / "exp1" / "metrics.jsonl").unlink()
    watch_once(root, rx, skip_older=0)
    assert kinds(rx).count(("exp1", "nan")) == 1
    shutil.rmtree(root / "exp1")
    write_run(root, "exp1", range(1, 301), nan_from=101, status="stopped")
    meta_path_for(root / "exp1" / "metrics.jsonl").unlink()
    watch_once(root, rx, skip_older=0)
    assert kinds(rx).count(("exp1", "nan")) == 2


def test_a_tensorboard_run_rerun_in_place_that_hits_nan_again_is_alerted_with_a_new_id(
    tmp_path: Path, http_receiver
) -> None:
    """A TensorBoard run has no metadata segment: a later event file (a re-run in place) is the next segment."""
    pytest.importorskip("tensorboard")
    from tensorboardX import SummaryWriter

    def write(suffix: str, t0: float) -> None:
        writer = SummaryWriter(str(root / "tb" / "rank_0"), flush_secs=3600, max_queue=10_000, filename_suffix=suffix)
        for step in range(1, 201):
            writer.add_scalar("loss", NAN if step >= 101 else 2.0 / step, global_step=step, walltime=t0 + step)
        writer.close()

    root = tmp_path / "logs"
    rx = http_receiver()
    write(".a", time.time() - 400)
    watch_once(root, rx, skip_older=0)
    assert kinds(rx).count(("tb", "nan")) == 1
    write(".b", time.time() - 200)  # the same run again, in the same directory: a second event file
    watch_once(root, rx, skip_older=0)
    nans = [a for a in sent(rx) if a["kind"] == "nan"]
    assert [a["step"] for a in nans] == [101, 101] and len({a["id"] for a in nans}) == 2
