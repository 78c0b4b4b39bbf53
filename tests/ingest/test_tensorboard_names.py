"""TensorBoard tags are read, cached and listed under their names as written (docs/FORMAT.md, "Metric names")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from monitor_cb.ingest import RunStore, tensorboard_source
from monitor_cb.testing.event_writer import Scalar, write_scalars

pytest.importorskip("tensorboard")

T0 = 1_700_000_000.0
HOSTILE = (
    "train/loss",  # HF Trainer
    "Losses/Policy Loss",  # ML-Agents: a space
    "val/Loss",
    "val/loss",  # differs from the one above only in case
    "VAL/LOSS",
    "line\nbreak",  # a newline
    "x" * 10_000,  # a 10 kB name
    "step",  # a key the reader fills itself: set aside as tb_step
    "lr-AdamW",
)


def _write(run: Path, tags: tuple[str, ...], steps: int = 50) -> None:
    scalars = [
        Scalar(tag, step, T0 + step, float(i * 1000 + step))
        for step in range(1, steps + 1)
        for i, tag in enumerate(tags)
    ]
    write_scalars(run, scalars)


def _stored(tag: str) -> str:
    return "tb_step" if tag == "step" else tag


def test_hostile_tags_are_columns_as_written_and_nothing_is_lost(tmp_path: Path) -> None:
    _write(tmp_path / "logs" / "hf", HOSTILE)
    store = RunStore(tmp_path / "logs", rescan_interval_s=0, cache=False)
    (info,) = store.list_runs()
    frame = store.read(info.id).frame
    assert len(frame) == 50
    for i, tag in enumerate(HOSTILE):
        column = frame[_stored(tag)].to_numpy(float)
        assert np.array_equal(column, i * 1000 + np.arange(1, 51)), tag
    assert frame["step"].tolist() == list(range(1, 51)), "a tag named step never overwrites the steps"


def test_the_cache_keeps_the_names_and_an_old_naming_cache_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path / "logs" / "hf", HOSTILE)

    def cached_store() -> RunStore:
        store = RunStore(tmp_path / "logs", rescan_interval_s=0, cache=True, peek_min_bytes=None)
        store.cache.min_bytes = 1  # a small file: cache it anyway
        return store

    # A cache written by a reader of the old naming (its state under the old key) ...
    monkeypatch.setattr(tensorboard_source, "_STATE_KEY", "tensorboard_reader")
    old = cached_store()
    old.read(old.list_runs()[0].id)
    old.cache.wait()
    monkeypatch.undo()
    # ... is not used: the run is decoded again, and that read writes a cache of this naming.
    fresh = cached_store()
    (info,) = fresh.list_runs()
    assert fresh._runs[info.id].tensorboard.cache_hits == 0
    fresh.read(info.id)
    fresh.cache.wait()
    again = cached_store()
    (info,) = again.list_runs()
    assert again._runs[info.id].tensorboard.cache_hits == 1
    frame = again.read(info.id).frame
    metrics = [c for c in frame.columns if c not in ("step", "t", "rank", "seg")]
    assert sorted(metrics) == sorted(_stored(t) for t in HOSTILE)
    assert frame["x" * 10_000].iloc[-1] == 6 * 1000 + 50


def test_ten_thousand_tags_are_all_read(tmp_path: Path) -> None:
    tags = tuple(f"layer.{i}/weight" for i in range(10_000))
    write_scalars(tmp_path / "logs" / "wide", [Scalar(tag, 1, T0, float(i)) for i, tag in enumerate(tags)])
    store = RunStore(tmp_path / "logs", rescan_interval_s=0, cache=False)
    frame = store.read(store.list_runs()[0].id).frame
    assert len(frame) == 1
    assert frame["layer.9999/weight"].iloc[0] == 9999.0 and frame["layer.0/weight"].iloc[0] == 0.0
    assert sum(c.startswith("layer.") for c in frame.columns) == 10_000
