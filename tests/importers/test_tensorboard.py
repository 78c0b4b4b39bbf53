"""The incremental reader against real event files written by tensorboardX with MindFormers' tags."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import pytest
from tensorboardX import SummaryWriter

from monitor_cb.importers.tensorboard import (
    TENSORBOARD_MISSING,
    TensorBoardRun,
    TensorBoardUnavailable,
    is_tensorboard_run,
    tensorboard_available,
)
from tests.importers.tb_helpers import GBS, SyncedWriter, loss_at, mindformers_step, record_ends, write_run

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def by_rank_step(records: list[dict]) -> dict[tuple[int, int], dict]:
    return {(r["rank"], r["step"]): r for r in records}


@pytest.fixture
def two_ranks(tmp_path: Path):
    root = tmp_path / "tensorboard"
    writers = write_run(root, (0, 1), range(1, 5))
    yield root, writers
    for writer in writers.values():
        writer.close()


def test_recognises_runs(tmp_path: Path, two_ranks) -> None:
    root, _ = two_ranks
    assert is_tensorboard_run(root)
    assert is_tensorboard_run(root / "rank_0")
    assert not is_tensorboard_run(tmp_path)  # events are two levels down, not in rank_* directly
    assert not is_tensorboard_run(tmp_path / "missing")
    (tmp_path / "empty" / "rank_0").mkdir(parents=True)
    assert not is_tensorboard_run(tmp_path / "empty")


def test_mindformers_tags_map_to_our_metrics(two_ranks) -> None:
    root, _ = two_ranks
    run = TensorBoardRun(root)
    records = run.poll()
    assert run.ranks == [0, 1]
    assert len(records) == 8  # one record per (rank, step)
    rows = by_rank_step(records)
    row = rows[(1, 2)]
    assert row == {
        "step": 2,
        "t": row["t"],
        "rank": 1,
        "seg": 1,
        "tflops_per_npu": 55.5,
        "lr": 0.0002,
        "samples": 2 * GBS,
        "batch_size": GBS,
        "loss": loss_at(2, 1),
        "loss_scale": 1024.0,
        "grad_norm": 2.5,
        "step_time": 0.25,
        "throughput": 32.0,
        "b_samples_per_day": 0.0055,
    }
    assert isinstance(row["t"], float) and row["t"] > 1.7e9
    assert rows[(0, 1)]["loss"] == 2.4 and rows[(1, 4)]["loss"] == 3.1  # float32 shown as its shortest decimal
    for rank in (0, 1):
        nan = rows[(rank, 3)]["loss"]
        assert isinstance(nan, float) and math.isnan(nan)  # NaN kept, not dropped
        assert rows[(rank, 3)]["samples"] == 3 * GBS
    assert run.texts == {"runner_config": "{'batch_size': 4, 'epochs': 1}"}
    assert run.unaligned == 0
    meta = run.meta()
    assert meta["world_size"] == 2 and meta["config"]["runner_config"].startswith("{")


def test_poll_returns_only_new_records(two_ranks) -> None:
    root, writers = two_ranks
    run = TensorBoardRun(root)
    assert len(run.poll()) == 8
    assert run.poll() == []  # nothing new
    mindformers_step(writers[0], 5, float("nan"))
    mindformers_step(writers[0], 6, 1.25)
    writers[0].sync()
    new = run.poll()
    assert [(r["rank"], r["step"]) for r in new] == [(0, 5), (0, 6)]
    assert math.isnan(new[0]["loss"]) and new[1]["loss"] == 1.25 and new[1]["samples"] == 6 * GBS
    assert run.poll() == []
    mindformers_step(writers[1], 5, 0.5)
    writers[1].sync()
    grouped = run.poll_by_rank()
    assert list(grouped) == [1] and [(r["step"], r["loss"]) for r in grouped[1]] == [(5, 0.5)]
    assert run.poll_by_rank() == {}


def test_new_rank_directory_and_new_event_file(two_ranks) -> None:
    root, writers = two_ranks
    run = TensorBoardRun(root)
    run.poll()
    late = SyncedWriter(root / "rank_2")
    mindformers_step(late, 1, 9.0)
    late.sync()
    assert [(r["rank"], r["step"], r["loss"]) for r in run.poll()] == [(2, 1, 9.0)]
    assert run.ranks == [0, 1, 2]
    late.close()
    # A relaunch (resume) writes a new file into the same rank directory: a new segment.
    writers[0].close()
    resumed = SyncedWriter(root / "rank_0", filename_suffix=".resumed")
    mindformers_step(resumed, 4, 0.75)  # step 4 again, after a resume from step 3's checkpoint
    mindformers_step(resumed, 5, 0.7)
    resumed.sync()
    new = run.poll()
    assert [(r["rank"], r["seg"], r["step"], r["loss"]) for r in new] == [(0, 2, 4, 0.75), (0, 2, 5, 0.7)]
    resumed.close()
    assert len(run.files) == 4


def test_full_resolution_beyond_tensorboard_sampling(tmp_path: Path) -> None:
    writer = SummaryWriter(str(tmp_path / "run"), flush_secs=3600)
    for step in range(1, 1501):
        writer.add_scalar("loss", 1.0 / step, global_step=step)
    writer.close()
    records = TensorBoardRun(tmp_path / "run").poll()
    assert [r["step"] for r in records] == list(range(1, 1501))  # TensorBoard's reservoir keeps 1,000
    assert records[0]["rank"] == 0


def test_torn_record_is_not_yet(tmp_path: Path) -> None:
    source = tmp_path / "source"
    write_run(source, (0,), range(1, 3))[0].close()
    (event_file,) = (source / "rank_0").iterdir()
    data = event_file.read_bytes()
    ends = record_ends(data)
    assert ends[-1] == len(data)
    target = tmp_path / "live" / "rank_0" / event_file.name
    target.parent.mkdir(parents=True)
    # Everything up to the middle of the last record's payload, then 5 bytes into its header.
    cut = ends[-2] + (ends[-1] - ends[-2]) // 2
    target.write_bytes(data[:cut])
    run = TensorBoardRun(tmp_path / "live")
    first = run.poll()
    assert [r["step"] for r in first] == [1, 2]
    assert "throughput_vs_samples" not in first[-1] and "samples" in first[-1]
    assert run.poll() == []  # still torn
    with open(target, "ab") as handle:
        handle.write(data[cut:])
    last = run.poll()
    assert len(last) == 1 and last[0]["step"] == 2 and last[0]["samples"] == 2 * GBS
    assert run.poll() == []


def test_torn_header(tmp_path: Path) -> None:
    writer = SummaryWriter(str(tmp_path / "src"), flush_secs=3600)
    for step in (1, 2):
        writer.add_scalar("loss", float(step), global_step=step)
    writer.close()
    (event_file,) = (tmp_path / "src").iterdir()
    data = event_file.read_bytes()
    ends = record_ends(data)
    target = tmp_path / "live" / event_file.name
    target.parent.mkdir()
    target.write_bytes(data[: ends[-2] + 5])
    run = TensorBoardRun(tmp_path / "live")
    assert [(r["step"], r["loss"]) for r in run.poll()] == [(1, 1.0)]
    with open(target, "ab") as handle:
        handle.write(data[ends[-2] + 5 :])
    assert [(r["step"], r["loss"]) for r in run.poll()] == [(2, 2.0)]


def test_max_events_splits_work_without_losing_records(two_ranks) -> None:
    root, _ = two_ranks
    whole = TensorBoardRun(root).poll()
    run = TensorBoardRun(root)
    merged: dict[tuple[int, int, int], dict] = {}
    for _ in range(200):
        batch = run.poll(max_events=7)
        if not batch:
            break
        for record in batch:
            merged.setdefault((record["rank"], record["seg"], record["step"]), {}).update(record)
    assert len(merged) == len(whole)
    for record in whole:
        got = merged[(record["rank"], record["seg"], record["step"])]
        assert set(got) == set(record)
        assert all(got[k] == v or (v != v and got[k] != got[k]) for k, v in record.items() if k != "t")


def test_add_scalars_subdirectories_are_series_of_the_rank(tmp_path: Path) -> None:
    writer = SummaryWriter(str(tmp_path / "tb" / "rank_0"), flush_secs=3600)
    writer.add_scalar("loss", 2.0, global_step=1)
    writer.add_scalars("max_attention_logit/layer.0", {"head_0": 1.5, "head_1": 2.5}, global_step=1)
    writer.close()
    assert is_tensorboard_run(tmp_path / "tb")
    run = TensorBoardRun(tmp_path / "tb")
    (record,) = run.poll()
    assert record["loss"] == 2.0 and record["rank"] == 0 and record["seg"] == 1
    assert record["max_attention_logit/layer.0/head_0"] == 1.5
    assert record["max_attention_logit/layer.0/head_1"] == 2.5
    assert run.ranks == [0]


def test_vanished_run_directory_is_an_error(tmp_path: Path) -> None:
    writer = SummaryWriter(str(tmp_path / "gone"), flush_secs=3600)
    writer.add_scalar("loss", 1.0, global_step=1)
    writer.close()
    run = TensorBoardRun(tmp_path / "gone")
    assert len(run.poll()) == 1
    for path in (tmp_path / "gone").iterdir():
        path.unlink()
    (tmp_path / "gone").rmdir()
    with pytest.raises(FileNotFoundError, match="gone"):
        run.poll()


def test_missing_tensorboard_package_gives_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "tensorboard.compat.proto.event_pb2", None)
    assert not tensorboard_available()
    with pytest.raises(TensorBoardUnavailable, match="pip install tensorboard") as caught:
        TensorBoardRun(tmp_path)
    assert isinstance(caught.value, ImportError)
    assert str(caught.value) == TENSORBOARD_MISSING


def test_a_rank_directory_opened_alone_keeps_its_rank(two_ranks) -> None:
    root, _ = two_ranks
    run = TensorBoardRun(root / "rank_1")
    records = run.poll()
    assert run.ranks == [1] and {r["rank"] for r in records} == {1} and len(records) == 4


def test_links_and_hidden_entries_are_not_followed(tmp_path: Path, two_ranks) -> None:
    root, _ = two_ranks
    outside = tmp_path / "outside"
    write_run(outside, (5,), range(1, 2))[5].close()
    (root / "rank_9").symlink_to(outside / "rank_5", target_is_directory=True)
    (root / ".rank_7").mkdir()
    run = TensorBoardRun(root)
    run.poll()
    assert run.ranks == [0, 1]


@pytest.mark.mindspore
def test_events_written_by_mindformers_itself(tmp_path: Path) -> None:
    """MindFormers 1.9's own MFLossMonitor writes the events (tags, order, units as in a real run)."""
    if importlib.util.find_spec("mindformers") is None:  # not importorskip: importing it here would break it
        pytest.skip("mindformers is not installed")
    script = Path(__file__).with_name("mf_tensorboard_script.py")
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "tensorboard")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0 and "wrote" in done.stdout, done.stderr[-3000:]
    run = TensorBoardRun(tmp_path / "tensorboard")
    records = run.poll()
    assert run.ranks == [0, 1] and len(records) == 10 and run.unaligned == 0
    rows = by_rank_step(records)
    row = rows[(1, 2)]
    assert {k: v for k, v in row.items() if k != "t"} == {
        "step": 2,
        "rank": 1,
        "seg": 1,
        "lr": 0.001,
        "samples": 16,
        "batch_size": 8,
        "loss": 2.8,
        "loss_scale": 1024.0,
        "grad_norm": 2.5,
        "step_time": 0.252,  # iteration-time 252 ms
        "throughput": pytest.approx(8 / 0.252, rel=1e-6),
        "b_samples_per_day": pytest.approx(8 / 0.252 * 86400 / 1e9, rel=1e-6),
    }
    assert math.isnan(rows[(0, 3)]["loss"]) and math.isnan(rows[(1, 3)]["loss"])
    assert [rows[(0, s)]["samples"] for s in range(1, 6)] == [8, 16, 24, 32, 40]


def write_bad_steps(logdir: Path) -> None:
    """Scalars at steps 1..3, then at a negative and a huge step (what a buggy global_step gives)."""
    writer = SummaryWriter(str(logdir), flush_secs=3600)
    for step in (1, 2, 3):
        writer.add_scalar("loss", 1.0 / step, global_step=step)
    writer.add_scalar("loss", 1.23e32, global_step=-5)
    writer.add_scalar("loss", 4.56e32, global_step=2**62)
    writer.add_scalar("loss", 0.25, global_step=4)
    writer.close()


def test_steps_out_of_range_are_dropped_and_counted(tmp_path: Path) -> None:
    write_bad_steps(tmp_path / "run")
    run = TensorBoardRun(tmp_path / "run")
    records = run.poll()
    assert [(r["step"], r["loss"]) for r in records] == [(1, 1.0), (2, 0.5), (3, pytest.approx(1 / 3)), (4, 0.25)]
    assert run.bad_steps == {0: 2} and run.meta()["bad_step_values"] == 2


def test_hostile_event_files_neither_hang_nor_stop_the_others(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import os
    import time

    run_dir = tmp_path / "tb" / "rank_0"
    writer = SummaryWriter(str(run_dir), flush_secs=3600)
    writer.add_scalar("loss", 1.5, global_step=1)
    writer.close()
    os.mkfifo(run_dir / "events.out.tfevents.1.fifo")  # an open() of it would wait for a writer forever
    with open(run_dir / "events.out.tfevents.2.sparse", "wb") as sparse:  # 3 GB of zeros, no disk used
        sparse.truncate(3 << 30)
    other = tmp_path / "tb" / "rank_1"
    other.mkdir()
    (other / "events.out.tfevents.3.junk").write_bytes(os.urandom(100_000))
    started = time.monotonic()
    run = TensorBoardRun(tmp_path / "tb")
    records = run.poll()
    assert [(r["rank"], r["step"], r["loss"]) for r in records] == [(0, 1, 1.5)]
    assert run.poll() == []
    assert time.monotonic() - started < 20
    assert "not a regular file" in caplog.text and "damaged at byte 0" in caplog.text


def test_a_file_read_in_small_windows_reads_the_same(two_ranks, monkeypatch: pytest.MonkeyPatch) -> None:
    import monitor_cb.importers.tensorboard as tensorboard

    root, _ = two_ranks
    whole = TensorBoardRun(root).poll()
    monkeypatch.setattr(tensorboard, "SCAN_WINDOW", 700)  # records cross every window's end
    pieces = TensorBoardRun(root).poll()
    assert len(pieces) == len(whole)
    for got, want in zip(pieces, whole, strict=True):
        assert got.keys() == want.keys()
        assert all(got[k] == v or (v != v and got[k] != got[k]) for k, v in want.items())


def test_a_run_with_many_tags_is_grouped_by_one_sort_not_a_pass_per_tag(tmp_path: Path, monkeypatch) -> None:
    """Issue #31: 1,000 tags x 200 steps took seconds, each tag's events found by a pass over all events
    (in the tag grouping, the rows and the batch). Now each poll sorts once: the helpers run a few times
    per poll whatever the number of tags, and every value lands where tensorboard's own reader puts it."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    import monitor_cb.importers.event_scan as event_scan_module
    import monitor_cb.importers.tensorboard as tensorboard_module

    tags = [f"layer_{i:03d}/grad_norm" for i in range(300)] + ["loss"]
    writer = SummaryWriter(str(tmp_path / "run"), flush_secs=3600)
    for step in range(1, 21):
        for k, tag in enumerate(tags):
            writer.add_scalar(tag, k + step * 0.5, global_step=step, walltime=1_700_000_000.0 + step)
    writer.close()
    calls = {"positions": 0, "sorted_ids": 0}

    def counted(name: str, function):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(tensorboard_module, "_positions", counted("positions", tensorboard_module._positions))
    monkeypatch.setattr(event_scan_module, "_sorted_ids", counted("sorted_ids", event_scan_module._sorted_ids))
    batches = TensorBoardRun(tmp_path / "run").poll_batches()
    assert 1 <= calls["sorted_ids"] <= 4 and 2 <= calls["positions"] <= 8, calls  # not ~300 each
    (batch,) = batches.values()
    accumulator = EventAccumulator(str(tmp_path / "run"), size_guidance={"scalars": 0})
    accumulator.Reload()
    assert sorted(accumulator.Tags()["scalars"]) == sorted(tags)
    for tag in (tags[0], tags[137], tags[-2], "loss"):
        column = tag.replace("/", "_") if tag != "loss" else "loss"
        values, logged = batch.floats[column] if column in batch.floats else batch.floats[tag]
        want = {e.step: e.value for e in accumulator.Scalars(tag)}
        got = {int(s): float(v) for s, v, lg in zip(batch.step, values, logged, strict=True) if lg}
        assert got.keys() == want.keys()
        assert all(got[s] == pytest.approx(want[s], rel=1e-6) for s in want)
