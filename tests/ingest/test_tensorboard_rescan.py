"""A rescan of a TensorBoard run costs what changed: a stat per file, never a re-open or decode of an
unchanged one (issue 34, item 9: 5,000 small event files made every rescan of the root take 3-6 s).

Work is counted (event files opened, events decoded), not timed: ``bench/bench_tb_rescan.py`` has the figure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor_cb.ingest import RunStore
from monitor_cb.testing.event_files import STEPS, small_event_file, write_many

pytest.importorskip("tensorboard")

FILES = 300


class OpenCounter:
    """Counts every ``os.open`` of an event file in this process (whatever module opens it)."""

    def __init__(self) -> None:
        self.opened: list[str] = []

    def __call__(self, real):
        def counting(path, *args, **kwargs):
            if "tfevents" in os.fspath(path):
                self.opened.append(os.fspath(path))
            return real(path, *args, **kwargs)

        return counting


@pytest.fixture
def opens(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenCounter]:
    counter = OpenCounter()
    monkeypatch.setattr(os, "open", counter(os.open))
    yield counter


def decoded(store: RunStore) -> int:
    reader = store._runs["many"].tensorboard._reader
    return reader.n_events if reader is not None else 0


@pytest.mark.parametrize("layout", ["segments", "series"])
def test_a_rescan_of_an_unchanged_run_opens_and_decodes_nothing(
    tmp_path: Path, layout: str, opens: OpenCounter
) -> None:
    data = small_event_file()
    paths = write_many(tmp_path / "many", FILES, layout, data)
    store = RunStore(tmp_path, rescan_interval_s=0, cache=False)
    (info,) = store.list_runs()
    assert info.n_records == STEPS
    every = store.read("many", all_segments=True).frame
    assert len(every) == (FILES * STEPS if layout == "segments" else STEPS), "every file's rows"
    assert len(every.columns) >= (FILES if layout == "series" else 1), "every series' column"
    first = decoded(store)
    assert len(opens.opened) >= FILES, "the first listing reads every file"
    opens.opened.clear()
    for _ in range(3):
        store.list_runs()
        store.read("many")
    assert opens.opened == [], "nothing changed: no event file opened"
    assert decoded(store) == first, "nothing changed: nothing decoded"

    with open(paths[FILES // 2], "ab") as grown:  # one file gains records (the same ones again: later events)
        grown.write(data)
    opens.opened.clear()
    store.list_runs()
    assert opens.opened == [str(paths[FILES // 2])], "only the file that grew is opened"
    assert decoded(store) - first == STEPS + 1, "only its new events are decoded (file_version and the steps)"


def test_a_listing_of_a_run_of_eight_ranks_lists_each_rank_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every rank source polls the run's one reader: a listing (refresh, then each rank) looks at the files once."""
    data = small_event_file()
    for rank in range(8):
        (tmp_path / "many" / f"rank_{rank}").mkdir(parents=True)
        (tmp_path / "many" / f"rank_{rank}" / "events.out.tfevents.1700000000.host").write_bytes(data)
    store = RunStore(tmp_path, rescan_interval_s=0, cache=False, peek_min_bytes=None)
    store.list_runs()
    real, listed = os.scandir, []

    def counting(path=".", *args, **kwargs):
        listed.append(os.fspath(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", counting)
    (info,) = store.list_runs()
    assert list(info.ranks) == list(range(8))
    assert sum(path.endswith("rank_5") for path in listed) <= 2, "discovery and the reader: once each"
    for call in (lambda: store.run_info("many"), lambda: store.read("many")):
        listed.clear()
        call()
        assert sum(path.endswith("rank_5") for path in listed) <= 2
