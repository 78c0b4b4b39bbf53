"""MindFormers TensorBoard directories and article-style JSONL files show up as runs in the store."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from monitor_cb.ingest import RunStore
from tests.importers.tb_helpers import loss_at, mindformers_step, write_run

pytest.importorskip("tensorboard")


def test_event_directory_is_one_run_with_its_ranks(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    writers = write_run(root / "mf" / "tensorboard", ranks=(0, 1), steps=range(1, 6))
    store = RunStore(root, rescan_interval_s=0)
    (info,) = store.list_runs()
    assert info.id == "mf/tensorboard" and info.ranks == (0, 1) and info.n_records == 10
    assert (info.first_step, info.last_step) == (1, 5)
    data = store.read(info.id, rank=1)
    frame = data.frame
    assert list(frame["step"]) == [1, 2, 3, 4, 5]
    assert math.isnan(frame.loc[frame["step"] == 3, "loss"].item()), "NaN kept, not dropped"
    assert data.logged("loss")[2], "the NaN was logged"
    assert frame.loc[frame["step"] == 2, "loss"].item() == pytest.approx(loss_at(2, 1))
    assert frame["step_time"].iloc[0] == pytest.approx(0.25)  # iteration-time is in ms
    assert np.allclose(frame["grad_norm"], [1.5, 2.5, 3.5, 4.5, 5.5])

    for rank, writer in writers.items():  # training goes on: the next poll brings only the new steps
        for step in (6, 7):
            mindformers_step(writer, step, loss_at(step, rank))
        writer.sync()
    frame = store.read(info.id, rank=0).frame
    assert list(frame["step"]) == [1, 2, 3, 4, 5, 6, 7]
    assert store.run_info(info.id).n_records == 14
    for writer in writers.values():
        writer.close()


def test_article_jsonl_with_bare_nan_is_a_run(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "article" / "exp1"
    run.mkdir(parents=True)
    lines = [
        json.dumps({"step": s, "loss": v, "lr": 1e-3, "throughput": 100.0, "ts": 1.7e9 + s})
        for s, v in [(20, 2.0), (40, float("nan")), (60, float("inf"))]
    ]
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert "NaN" in (run / "metrics.jsonl").read_text()  # a bare token, as json.dumps writes it
    store = RunStore(tmp_path / "logs")
    (info,) = store.list_runs()
    frame = store.read(info.id).frame
    assert info.id == "article/exp1" and list(frame["step"]) == [20, 40, 60]
    assert math.isnan(frame["loss"].iloc[1]) and frame["loss"].iloc[2] == math.inf
    assert frame["t"].iloc[0] == 1.7e9 + 20


def test_tensorboard_steps_out_of_range_are_bad_not_merged(tmp_path: Path) -> None:
    from tests.importers.test_tensorboard import write_bad_steps

    write_bad_steps(tmp_path / "logs" / "tb")
    store = RunStore(tmp_path / "logs", rescan_interval_s=0)
    frame = store.read("tb").frame
    assert frame["step"].tolist() == [1, 2, 3, 4] and frame["loss"].max() <= 1.0, "no row overwritten"
    assert store.run_info("tb").bad_lines == 2


def _frames_equal(a, b) -> None:
    assert list(a.columns) == list(b.columns)
    for column in a.columns:
        left, right = a[column].to_numpy(), b[column].to_numpy()
        if left.dtype.kind == "f":
            assert np.array_equal(left, right, equal_nan=True), column
        else:
            assert list(left) == list(right), column


def test_event_directory_reopens_from_the_columnar_cache(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    writers = write_run(root / "mf", ranks=(0, 1), steps=range(1, 40))
    first = RunStore(root, rescan_interval_s=0, cache=True)
    first.cache.min_bytes = 1  # these files are small: cache them anyway
    (info,) = first.list_runs()
    before = first.read(info.id).frame
    assert first.cache.wait()  # written in the background: a refresh never waits for it
    for rank, writer in writers.items():  # the run goes on after the first server wrote its cache
        for step in range(40, 45):
            mindformers_step(writer, step, loss_at(step, rank))
        writer.sync()
    reopened = RunStore(root, rescan_interval_s=0, cache=True)
    (info,) = reopened.list_runs()
    group = reopened._runs[info.id].tensorboard
    assert group.cache_hits == 2, "both ranks start from their cache file"
    fresh = RunStore(root, rescan_interval_s=0, cache=False)
    fresh.list_runs()
    _frames_equal(reopened.read(info.id).frame, fresh.read(info.id).frame)
    assert len(reopened.read(info.id).frame) == len(before) + 10
    assert reopened.run_info(info.id).meta["config"] == fresh.run_info(info.id).meta["config"]  # add_text kept
    for writer in writers.values():
        writer.close()


def test_a_rewritten_event_file_is_not_taken_from_the_cache(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    write_run(root / "mf", ranks=(0,), steps=range(1, 30))[0].close()
    first = RunStore(root, rescan_interval_s=0, cache=True)
    first.cache.min_bytes = 1
    first.list_runs()
    assert first.cache.wait()
    (event_file,) = (root / "mf" / "rank_0").iterdir()
    data = bytearray(event_file.read_bytes())
    at = data.index(b"loss\x15") + 5  # the first loss value's float32, in the middle of the file
    data[at : at + 4] = np.float32(123.5).tobytes()
    event_file.write_bytes(bytes(data))
    reopened = RunStore(root, rescan_interval_s=0, cache=True)
    (info,) = reopened.list_runs()
    frame = reopened.read(info.id).frame
    assert 123.5 in set(frame["loss"].tolist())
