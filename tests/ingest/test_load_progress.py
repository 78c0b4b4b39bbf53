"""A long first read goes in the background, in steps, with progress; the rows end as a plain read gives."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from pandas.testing import assert_frame_equal

from monitor_cb.ingest import RunStore
from monitor_cb.ingest import store as store_module
from monitor_cb.ingest.colcache import Place
from tests.ingest.helpers import records


def test_a_long_first_read_reports_progress_then_reads_as_usual(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(store_module, "LOAD_STEP_BYTES", 2_000)
    root = tmp_path / "logs"
    (root / "run").mkdir(parents=True)
    for rank in range(2):
        (root / "run" / f"metrics.rank{rank}.jsonl").write_bytes(records(1, 3000, rank=rank))
    places = [Place(root / ".monitor" / "cache", root)]
    store = RunStore(root, cache=places)
    store.cache.min_bytes = 1
    seen = []
    deadline = time.monotonic() + 60
    while (progress := store.load_progress("run")) is not None:
        seen.append(progress)
        assert 0 <= progress.fraction <= 1 and progress.bytes_total > 0
        assert [r.id for r in store.list_runs()] == ["run"]  # the page stays usable meanwhile
        assert time.monotonic() < deadline, "the background read never finished"
    assert seen and seen[0].fraction < 1
    assert [p.bytes_read for p in seen] == sorted(p.bytes_read for p in seen)
    assert store.cache.wait()
    plain = RunStore(root, cache=False).read("run")
    assert_frame_equal(store.read("run").frame, plain.frame)
    assert len(list((root / ".monitor" / "cache" / "run").glob("*.arrow"))) == 2  # written once, at the end
    assert store.load_progress("run") is None


@pytest.mark.parametrize("size", [10, 1000])
def test_a_short_read_needs_no_background(tmp_path: Path, size: int) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_bytes(records(1, size))
    store = RunStore(tmp_path, cache=False)
    assert store.load_progress("run") is None


def test_wait_loaded_waits_for_the_background_read(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(store_module, "LOAD_STEP_BYTES", 2_000)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_bytes(records(1, 3000))
    store = RunStore(tmp_path, cache=False)
    assert store.wait_loaded("run", 0.0), "no read in the background: nothing to wait for"
    release = threading.Event()
    real = store_module._read_in_steps
    monkeypatch.setattr(store_module, "_read_in_steps", lambda sources: (release.wait(60), real(sources)))
    assert store.load_progress("run") is not None
    assert not store.wait_loaded("run", 0.05), "held: still reading"
    release.set()
    assert store.wait_loaded("run", 60)
    assert store.load_progress("run") is None and len(store.read("run")) == 3000
