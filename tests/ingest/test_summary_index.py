"""The root's summary index: a fresh server lists unchanged files without reading them."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from pandas.testing import assert_frame_equal

from monitor_cb.ingest import RunStore
from monitor_cb.ingest.colcache import Place
from monitor_cb.ingest.summary_index import INDEX_NAME
from tests.ingest.helpers import append, line, records, replace_file


def make_root(tmp_path: Path, runs: int = 5) -> Path:
    root = tmp_path / "logs"
    for i in range(runs):
        run = root / f"run{i}"
        run.mkdir(parents=True)
        (run / "metrics.jsonl").write_bytes(records(1, 20 + i) + b"garbage\n" * (i % 2))
    (root / "run0" / "metrics.meta.json").write_text('{"status": "finished", "name": "zero"}')
    (root / "run1" / "metrics.jsonl").write_bytes(records(1, 5) + b'{"step": 6, "lo')  # a torn last line
    return root


def store_of(root: Path) -> RunStore:
    return RunStore(root, cache=[Place(root / ".monitor" / "cache", root)], rescan_interval_s=0)


def infos(store: RunStore) -> dict[str, object]:
    return {i.id: dataclasses.replace(i, meta={}) for i in store.list_runs()}


def read_sources(store: RunStore) -> list[str]:
    """Files whose bytes were read (a listed file has read nothing)."""
    return sorted(str(s.path) for run in store._runs.values() for s in run.sources.values() if s.tail.offset)


def test_a_fresh_store_lists_unchanged_files_without_reading_them(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    first = store_of(root)
    want = infos(first)
    first.index.flush(force=True)
    assert (root / ".monitor" / "cache" / INDEX_NAME).is_file()
    second = store_of(root)
    assert infos(second) == want
    assert read_sources(second) == []
    assert_frame_equal(second.read("run2").frame, first.read("run2").frame)  # rows: the file is read now
    assert read_sources(second) == [str(root / "run2" / "metrics.jsonl")]
    assert second.bad_lines("run3") == first.bad_lines("run3")


def test_a_changed_file_is_read_again(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    first = store_of(root)
    first.list_runs()
    first.index.flush(force=True)
    append(root / "run2" / "metrics.jsonl", records(23, 30))
    replace_file(root / "run3" / "metrics.jsonl", records(100, 105))
    second = store_of(root)
    got = infos(second)
    assert got["run2"].last_step == 30 and got["run3"].first_step == 100  # type: ignore[attr-defined]
    assert read_sources(second) == [str(root / f"run{i}" / "metrics.jsonl") for i in (2, 3)]
    append(root / "run4" / "metrics.jsonl", line({"step": 99, "loss": 1.0}))  # changes while listed
    assert infos(second)["run4"].last_step == 99  # type: ignore[attr-defined]


def test_a_damaged_index_is_no_index(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    first = store_of(root)
    want = infos(first)
    first.index.flush(force=True)
    (root / ".monitor" / "cache" / INDEX_NAME).write_bytes(b'{"format": 1, "files": {"run0/metrics.jsonl": 3}}')
    second = store_of(root)
    assert infos(second) == want
    assert len(read_sources(second)) == 5


def test_the_index_is_written_only_when_something_changed(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    first = store_of(root)
    first.list_runs()  # the first listing writes the index at once
    assert (root / ".monitor" / "cache" / INDEX_NAME).is_file()
    first.list_runs()
    assert not first.index.flush(force=True)
    mtime = os.stat(root / ".monitor" / "cache" / INDEX_NAME).st_mtime_ns
    second = store_of(root)
    second.list_runs()
    assert not second.index.flush(force=True)
    assert os.stat(root / ".monitor" / "cache" / INDEX_NAME).st_mtime_ns == mtime


def test_the_shortest_honest_lines_are_still_listed_from_the_index(tmp_path: Path) -> None:
    """The index's plausibility check (records and bad lines a file's bytes can hold) never refuses an honest
    entry: a file of the shortest records and the shortest bad lines is listed without reading it."""
    root = make_root(tmp_path, runs=2)
    (root / "run0" / "metrics.jsonl").write_bytes(b"{}\n" * 500 + b"x\n" * 500 + records(1, 3))
    first = store_of(root)
    want = infos(first)
    first.index.flush(force=True)
    second = store_of(root)
    assert infos(second) == want
    assert read_sources(second) == []
