"""A cache file with its genuine header and forged rows is not shown: the JSONL's values are (cacheproof)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from monitor_cb.ingest import RunStore
from monitor_cb.ingest.cacheproof import rows_checksum
from monitor_cb.ingest.colcache import _META_KEY, ColumnarCache, Place
from monitor_cb.ingest.source import MetricsSource
from tests.ingest.helpers import line

STEPS = 3000


def write_run(root: Path) -> Path:
    path = root / "run" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    rows = [{"step": s, "t": 1000.0 + s, "loss": 3.0 / (1 + s / 100), "lr": 1e-3} for s in range(1, STEPS + 1)]
    path.write_bytes(b"".join(line(r) for r in rows))
    return path


def cache_for(root: Path) -> ColumnarCache:
    return ColumnarCache([Place(root / ".monitor" / "cache", root)], root, min_bytes=1)


def forge(cache_file: Path, change: Callable[[pa.Table, dict[str, Any]], pa.Table], recompute: bool) -> None:
    """Rewrite the rows of ``cache_file`` keeping its header; with ``recompute`` the forger also fixes the
    header's row count, summary and checksum (everything a reader could check without the JSONL)."""
    table = pa.ipc.open_file(pa.BufferReader(cache_file.read_bytes())).read_all()  # a copy: the file is rewritten
    header = json.loads(table.schema.metadata[_META_KEY])
    forged = change(table.replace_schema_metadata(None), header)
    if recompute:
        steps = forged.column("step").to_numpy()
        n = min(header["n_main"], forged.num_rows)
        header.update(rows=forged.num_rows, rows_crc=rows_checksum(forged), n_main=n)
        header["summary"].update(n=n, first=int(steps[0]), last=int(steps[n - 1]))
    schema = forged.schema.with_metadata({_META_KEY: json.dumps(header).encode()})
    with pa.OSFile(str(cache_file), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        writer.write_table(forged.replace_schema_metadata(schema.metadata))


def set_column(table: pa.Table, name: str, values: np.ndarray) -> pa.Table:
    return table.set_column(table.column_names.index(name), name, pa.array(values))


def tiny_loss(table: pa.Table, header: dict[str, Any]) -> pa.Table:
    return set_column(table, "f:loss", np.full(table.num_rows, 0.001))


def half_rows(table: pa.Table, header: dict[str, Any]) -> pa.Table:
    return table.slice(0, table.num_rows // 2)


def reversed_steps(table: pa.Table, header: dict[str, Any]) -> pa.Table:
    return set_column(table, "step", table.column("step").to_numpy()[::-1].copy())


def negative_n_main(table: pa.Table, header: dict[str, Any]) -> pa.Table:
    header["n_main"] = -5
    return table


def int32_steps(table: pa.Table, header: dict[str, Any]) -> pa.Table:
    return set_column(table, "step", table.column("step").to_numpy().astype(np.int32))


FORGERIES = {
    "loss all 0.001": (tiny_loss, False),
    "loss all 0.001, checksum recomputed": (tiny_loss, True),
    "half the rows": (half_rows, False),
    "half the rows, header recomputed": (half_rows, True),
    "reversed steps": (reversed_steps, False),
    "reversed steps, checksum recomputed": (reversed_steps, True),
    "negative n_main": (negative_n_main, False),
    "steps of another type": (int32_steps, True),
}


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_forged_rows_behind_a_genuine_header_fall_back_to_the_jsonl(tmp_path: Path, forgery: str) -> None:
    path = write_run(tmp_path)
    writer = MetricsSource(path, root=tmp_path, cache=cache_for(tmp_path))
    writer.poll()
    cache_file = writer.cache.path_for(path)
    assert cache_file is not None and cache_file.exists()
    change, recompute = FORGERIES[forgery]
    forge(cache_file, change, recompute)

    store = RunStore(tmp_path, cache=[Place(tmp_path / ".monitor" / "cache", tmp_path)])
    frame = store.read("run").frame
    source = next(iter(store._runs["run"].sources.values()))
    assert not source.cache_hit
    steps = np.arange(1, STEPS + 1)
    assert frame["step"].tolist() == steps.tolist()
    np.testing.assert_allclose(frame["loss"].to_numpy(), 3.0 / (1 + steps / 100))
    notes = store.skipped_files()
    assert any(str(cache_file) in note and "JSONL" in note for note in notes), notes


def test_a_genuine_cache_is_used_and_noted_nowhere(tmp_path: Path) -> None:
    path = write_run(tmp_path)
    MetricsSource(path, root=tmp_path, cache=cache_for(tmp_path)).poll()
    store = RunStore(tmp_path, cache=[Place(tmp_path / ".monitor" / "cache", tmp_path)])
    assert len(store.read("run").frame) == STEPS
    assert next(iter(store._runs["run"].sources.values())).cache_hit
    assert store.skipped_files() == []


def test_a_forged_cache_is_replaced_by_an_honest_one(tmp_path: Path) -> None:
    path = write_run(tmp_path)
    writer = MetricsSource(path, root=tmp_path, cache=cache_for(tmp_path))
    writer.poll()
    cache_file = writer.cache.path_for(path)
    assert cache_file is not None
    forge(cache_file, tiny_loss, True)
    again = MetricsSource(path, root=tmp_path, cache=cache_for(tmp_path))
    again.poll()  # read from the JSONL, and the cache written again from it
    assert not again.cache_hit
    third = MetricsSource(path, root=tmp_path, cache=cache_for(tmp_path))
    third.poll()
    assert third.cache_hit
    assert third.frame()["loss"].iloc[0] == pytest.approx(3.0 / 1.01)


REAL_RUNS = Path(
    os.environ.get("MONITOR_REAL_RUNS") or Path(__file__).resolve().parents[2] / ".." / "shared" / "real_runs"
)


@pytest.mark.slow
def test_every_real_runs_honest_cache_passes_its_proof(tmp_path: Path) -> None:
    """Runs written by others (merged evals, "NaN" strings, uneven steps, bad lines): the cache written from
    each is accepted on reopening (no false alarm), and reads as the file does."""
    root = REAL_RUNS.resolve()
    files = sorted(root.glob("*/metrics.jsonl"))
    if not files:
        pytest.skip(f"the real-runs corpus is not at {REAL_RUNS}")
    refused = []
    for path in files:
        cache = ColumnarCache([Place(tmp_path / path.parent.name, tmp_path)], root, min_bytes=1)
        MetricsSource(path, root=root, cache=cache).poll()
        assert cache.writes == 1, (path.parent.name, cache.last_error)
        again = MetricsSource(path, root=root, cache=cache)
        again.poll()
        if not again.cache_hit:
            refused.append((path.parent.name, cache.last_error))
            continue
        plain = MetricsSource(path, root=root)
        plain.poll()
        assert again.frame().equals(plain.frame()), path.parent.name
    assert not refused, refused
