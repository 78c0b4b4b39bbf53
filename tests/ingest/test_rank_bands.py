"""Bands across ranks at ingest: equal to the statistics of the merged frame, extended as ranks grow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from monitor_cb.analysis.rank_matrix import rank_matrix, row_nanmedian
from monitor_cb.ingest import RunStore
from monitor_cb.ingest import rank_bands as bands_module
from monitor_cb.ingest.colcache import Place
from monitor_cb.ingest.tiered import OVERLAY
from tests.ingest.helpers import append, line


def write_rank(run: Path, rank: int, steps: range, seed: int, skip: int = 0) -> None:
    rng = np.random.default_rng(seed * 100 + rank)
    out = []
    for s in steps:
        if skip and s % skip == rank % skip:
            continue  # ranks that do not log every step: the steps differ between ranks
        value = float(rng.normal(1.0 + 0.1 * rank, 0.05))
        if s % 37 == 0 and rank == 2:
            value = float("nan")
        if s % 53 == 0 and rank == 1:
            value = float("inf")
        out.append(line({"step": s, "rank": rank, "t": 100.0 + s + 0.01 * rank, "step_time": value}))
    append(run / f"metrics.rank{rank}.jsonl", b"".join(out))


def expected(store: RunStore, run_id: str) -> dict[str, np.ndarray]:
    """The same statistics from the merged frame (the slow way)."""
    data = store.read(run_id)
    m = rank_matrix(data.frame, "step_time", data.masks)
    assert m is not None
    finite = np.isfinite(m.values) & m.logged
    clean = np.where(finite, m.values, np.nan)
    keep = m.logged.any(axis=1)
    hi = np.fmax.reduce(clean, axis=1)
    hi_rank = np.where(finite.any(axis=1), m.ranks[np.argmax(np.where(finite, m.values, -np.inf), axis=1)], -1)
    others = clean.copy()
    others[np.arange(len(others)), np.argmax(np.where(finite, m.values, -np.inf), axis=1)] = np.nan
    with np.errstate(invalid="ignore"):
        mean = np.nanmean(clean, axis=1)
    return {
        "steps": m.steps[keep],
        "lo": np.fmin.reduce(clean, axis=1)[keep],
        "hi": hi[keep],
        "median": row_nanmedian(clean)[keep],
        "mean": mean[keep],
        "hi_rank": hi_rank[keep],
        "others_median": row_nanmedian(others)[keep],
        "finite": finite.sum(axis=1)[keep],
    }


def check(store: RunStore, run_id: str) -> None:
    got = store.bands(run_id, "step_time")
    want = expected(store, run_id)
    for name, values in want.items():
        np.testing.assert_allclose(getattr(got, name), values, rtol=0, atol=1e-12, err_msg=name, equal_nan=True)
    data = store.read(run_id)
    bad = data.frame[data.masks["step_time"] & ~np.isfinite(data.frame["step_time"])]
    assert list(zip(got.bad_steps, got.bad_ranks, strict=True)) == list(zip(bad["step"], bad["rank"], strict=True))


@pytest.mark.parametrize("skip", [0, 3])
def test_bands_equal_the_merged_frame_and_grow_incrementally(tmp_path: Path, skip: int, monkeypatch) -> None:
    monkeypatch.setattr(bands_module, "BLOCK_ROWS", 64)  # several blocks
    run = tmp_path / "logs" / "run"
    run.mkdir(parents=True)
    for rank in range(5):
        write_rank(run, rank, range(1, 400), 1, skip)
    store = RunStore(tmp_path / "logs", cache=False)
    check(store, "run")
    agg = store._runs["run"].aggregates[("bands", "step_time")]
    for rank in range(5):  # ranks progress unevenly
        write_rank(run, rank, range(400, 420 + 7 * rank), 2, skip)
    check(store, "run")
    assert agg.recomputed == 1  # only the new steps were computed
    append(run / "metrics.rank3.jsonl", line({"step": 10, "rank": 3, "step_time": 99.0, "t": 0.0}))  # an edit
    check(store, "run")
    assert agg.recomputed == 2


def test_bands_of_ranks_left_on_disk(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    run = root / "run"
    run.mkdir(parents=True)
    for rank in range(3):
        write_rank(run, rank, range(1, 3 * OVERLAY), 3)
    places = [Place(root / ".monitor" / "cache", root)]
    first = RunStore(root, cache=places)
    first.cache.min_bytes = 1
    first.read("run")
    assert first.cache.wait()
    store = RunStore(root, cache=places)
    got = store.bands("run", "step_time")
    assert all(s.table.lazy for s in store._runs["run"].sources.values())  # bands need no rows in memory
    for rank in range(3):
        write_rank(run, rank, range(3 * OVERLAY, 3 * OVERLAY + 10), 4)
    got = store.bands("run", "step_time")
    assert all(s.table.lazy for s in store._runs["run"].sources.values())
    assert got.steps[-1] == 3 * OVERLAY + 9
    check(store, "run")


def test_rank_matrix_of_the_last_steps(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "run"
    run.mkdir(parents=True)
    for rank in range(4):
        write_rank(run, rank, range(1, 300), 5)
    store = RunStore(tmp_path / "logs", cache=False)
    got = store.rank_matrix("run", "step_time", last=50)
    data = store.read("run")
    want = rank_matrix(data.frame, "step_time", data.masks)
    assert want is not None
    np.testing.assert_array_equal(got.steps, want.steps[-50:])
    np.testing.assert_array_equal(got.values, want.values[-50:])
    np.testing.assert_array_equal(got.ranks, want.ranks)


def test_nonfinite_cells_of_ranks_left_on_disk(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    run = root / "run"
    run.mkdir(parents=True)
    for rank in range(3):
        write_rank(run, rank, range(1, 3 * OVERLAY), 6)
    places = [Place(root / ".monitor" / "cache", root)]
    first = RunStore(root, cache=places)
    first.cache.min_bytes = 1
    first.list_runs()  # reads and writes the cache; the rows go back to disk
    assert first.cache.wait()
    assert all(s.table.lazy for s in first._runs["run"].sources.values())
    store = RunStore(root, cache=places)
    for rank in range(3):
        write_rank(run, rank, range(3 * OVERLAY, 3 * OVERLAY + 40), 7)
    cells = store.nonfinite("run", "step_time")
    assert all(s.table.lazy for s in store._runs["run"].sources.values())  # from the cache files' lists
    data = RunStore(root, cache=False).read("run")
    bad = data.frame[data.masks["step_time"] & ~np.isfinite(data.frame["step_time"])]
    assert list(zip(cells.steps, cells.ranks, strict=True)) == list(zip(bad["step"], bad["rank"], strict=True))
    assert np.array_equal(np.isnan(cells.values), np.isnan(bad["step_time"].to_numpy()))
