"""A run directory deleted while training (issue 34, item 8), with the real writer.

Found by a probe: the writer went on writing steps 1,001-3,000 into the deleted file with no warning, then
wrote metadata saying finished, 3,000 written, 0 dropped, and the run was not listed at all. Now the writer
notices (within GONE_CHECK_S, and at every flush and close), warns once, counts the records the deleted file
held as dropped (``file_deleted``) and writes on into a new file at its path: the metadata never claims what
is not on disk.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

from monitor_cb.ingest import RunStore
from monitor_cb.record import meta_path_for
from monitor_cb.train.writer import MetricsWriter, MonitorWarning

T0 = 1_700_000_000.0


def log_steps(writer: MetricsWriter, steps: range) -> None:
    for step in steps:
        writer.log_at(T0 + step, step=step, loss=1.0 / step)


def on_disk(path: Path) -> list[int]:
    return [json.loads(line).get("step") for line in path.read_text().splitlines()] if path.exists() else []


def gone_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, MonitorWarning) and "deleted" in str(w.message)]


def test_a_run_directory_deleted_between_two_flushes_goes_on_in_a_new_file(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "exp1"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer = MetricsWriter(run, fsync_interval=0)
        log_steps(writer, range(1, 1001))
        assert writer.flush()
        shutil.rmtree(run)
        assert writer.flush()  # a flush checks the file is still there
        log_steps(writer, range(1001, 3001))
        writer.close("finished")
    assert on_disk(writer.path) == list(range(1001, 3001)), "the rest is in a new file in the recreated directory"
    meta = json.loads(meta_path_for(writer.path).read_text())
    assert meta["status"] == "finished"
    assert meta["written_records"] == 2000 == len(on_disk(writer.path))
    assert meta["dropped_records"] == 1000 and meta["drop_causes"]["file_deleted"] == 1000
    assert len(gone_warnings(caught)) == 1 and "1,000 records" in gone_warnings(caught)[0]
    (info,) = RunStore(tmp_path / "logs", rescan_interval_s=0, cache=False).list_runs()
    assert (info.id, info.n_records, info.status) == ("exp1", 2000, "finished"), "the run is listed"
    assert info.drops.total == 1000 and dict(info.drops.causes) == {"file_deleted": 1000}


def test_the_probe_deleting_the_directory_mid_stream_never_gets_metadata_claiming_lost_records(tmp_path: Path) -> None:
    """As found: no flush after the deletion; whatever the timing, what the metadata counts is what is on disk."""
    run = tmp_path / "logs" / "exp1"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer = MetricsWriter(run, fsync_interval=0)
        log_steps(writer, range(1, 1001))
        assert writer.flush()
        shutil.rmtree(run)
        log_steps(writer, range(1001, 3001))
        writer.close("finished")
    steps = on_disk(writer.path)
    meta = json.loads(meta_path_for(writer.path).read_text())
    assert meta["written_records"] == len(steps) == writer.written
    assert meta["written_records"] + meta["drop_causes"]["file_deleted"] == 3000
    assert meta["dropped_records"] == meta["drop_causes"]["file_deleted"] >= 1000
    assert steps == list(range(3001 - len(steps), 3001)), "a tail of the steps, each once"
    assert len(gone_warnings(caught)) == 1


def test_a_file_deleted_and_put_back_by_someone_else_is_not_written_into(tmp_path: Path) -> None:
    """Another file at the path (a new inode) is not the one written: the writer's records so far are lost
    with the old one, and it goes on in a file of its own (the name's next writer file when that one is taken)."""
    run = tmp_path / "logs" / "exp1"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer = MetricsWriter(run, fsync_interval=0)
        log_steps(writer, range(1, 101))
        assert writer.flush()
        first = writer.path
        first.unlink()
        first.write_text("")  # someone's new, empty file with the same name
        assert writer.flush()
        log_steps(writer, range(101, 201))
        writer.close("finished")
    meta = json.loads(meta_path_for(writer.path).read_text())
    assert meta["written_records"] == len(on_disk(writer.path)) == 100
    assert meta["drop_causes"]["file_deleted"] == 100
    assert len(gone_warnings(caught)) == 1


def test_a_healthy_run_is_never_taken_for_a_deleted_one(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "exp1"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer = MetricsWriter(run, fsync_interval=0)
        for chunk in range(5):
            log_steps(writer, range(1 + 200 * chunk, 201 + 200 * chunk))
            assert writer.flush()
        writer.close("finished")
    meta = json.loads(meta_path_for(writer.path).read_text())
    assert meta["written_records"] == 1000 and meta["dropped_records"] == 0
    assert gone_warnings(caught) == []


def test_real_training_whose_run_directory_is_deleted_midway(tmp_path: Path, monkeypatch) -> None:
    """LiveMonitor under a real ``Model.train`` (CPU); the run directory is removed at step 40 of 100."""
    ms = __import__("pytest").importorskip("mindspore")
    from mindspore import nn
    from mindspore.train import Callback, Model

    from monitor_cb import LiveMonitor
    from tests.collector.ms_helpers import Net, ce, dataset

    monkeypatch.chdir(tmp_path)  # MindSpore drops rank_0/ and kernel_meta/ into the cwd
    for name in ("RANK_ID", "RANK_SIZE", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    run = tmp_path / "logs" / "exp1"

    class DeleteRunAt(Callback):
        def on_train_step_end(self, run_context) -> None:
            if run_context.original_args().cur_step_num == 40:
                shutil.rmtree(run)

    net = Net()
    model = Model(net, ce(), nn.SGD(net.trainable_params(), learning_rate=0.01))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.train(
            1, dataset(100), callbacks=[LiveMonitor(run, log_interval=1), DeleteRunAt()], dataset_sink_mode=False
        )
    assert ms is not None
    path = run / "metrics.jsonl"
    steps = on_disk(path)
    meta = json.loads(meta_path_for(path).read_text())
    assert meta["status"] == "finished"
    assert meta["written_records"] == len(steps), "the metadata counts what is on disk"
    # every record the monitor logged (100 steps and its own) is on disk or counted as lost with the file
    assert (
        meta["written_records"] + meta["drop_causes"]["file_deleted"] >= 100
        and meta["dropped_records"] == (meta["drop_causes"]["file_deleted"])
    )
    assert meta["drop_causes"]["file_deleted"] >= 40, "the 40 steps in the deleted file at least"
    # A step's loss is on disk at most once, in order. Other records may share a step: the telemetry sampler
    # logs CPU/memory samples at the last logged step every second, so how many there are depends on how long
    # the training took on this machine (on a loaded one, a sample at step 98 made "98" appear twice). How many
    # losses reach the new file depends on it too: a quick training ends before the writer's next look at its
    # file, and every step after 40 went to the deleted one (counted above as file_deleted).
    loss_steps = [json.loads(line)["step"] for line in path.read_text().splitlines() if '"loss"' in line]
    assert loss_steps == sorted(set(loss_steps))
    assert len(gone_warnings(caught)) == 1
    (info,) = RunStore(tmp_path / "logs", rescan_interval_s=0, cache=False).list_runs()
    # The store's count is of rows: records in a row at one step (a telemetry sample at a loss's step, as on a
    # loaded machine: 38 records on disk, 37 rows) fill in one row.
    rows = sum(1 for i, step in enumerate(steps) if i == 0 or step != steps[i - 1])
    assert info.n_records == rows and info.drops.total == meta["dropped_records"]
