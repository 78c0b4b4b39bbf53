"""A fresh TensorBoard run is listed from its event files' ends, with the numbers a full decode gives."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from monitor_cb.ingest import RunStore
from monitor_cb.ingest.store import RunInfo
from tests.importers.tb_helpers import SyncedWriter, loss_at, mindformers_step

pytest.importorskip("tensorboard")

STEPS = 200  # ~180 kB a rank: past the two 64 kB ends the peek reads
PEEK = 0  # the peek's size threshold here (the default, 4 MiB, is for real runs)
LISTED = ("id", "name", "ranks", "n_records", "first_step", "last_step", "last_write", "status", "reason")


def write_ranks(run: Path, ranks: tuple[int, ...] = (0, 1), steps: int = STEPS) -> dict[int, SyncedWriter]:
    """MindFormers' layout, writers left open with every event on disk."""
    writers = {}
    for rank in ranks:
        writer = SyncedWriter(run / f"rank_{rank}", max_queue=100_000)
        writer.add_text("runner_config", "{'batch_size': 8}", global_step=1)
        for step in range(1, steps + 1):
            mindformers_step(writer, step, loss_at(step, rank))
        writer.sync()
        writers[rank] = writer
    return writers


def listed(info: RunInfo) -> tuple[object, ...]:
    return tuple(getattr(info, name) for name in LISTED)


def decoded(store: RunStore) -> int:
    """Events the store's TensorBoard readers decoded so far (0: listed from the files' ends)."""
    total = 0
    for run in store._runs.values():
        group = run.tensorboard
        if group is not None and group._reader is not None:
            total += group._reader.n_events
    return total


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("logs")
    for writer in write_ranks(root / "mf" / "tensorboard").values():
        writer.close()
    return root


def test_the_listing_equals_a_full_decode_and_decodes_nothing(root: Path) -> None:
    clock = lambda: 2e9  # noqa: E731 - one "now" for both stores: the same status
    peeked = RunStore(root, rescan_interval_s=0, cache=False, peek_min_bytes=PEEK, clock=clock)
    full = RunStore(root, rescan_interval_s=0, cache=False, peek_min_bytes=None, clock=clock)
    (info,) = peeked.list_runs()
    (want,) = full.list_runs()
    assert decoded(peeked) == 0 and decoded(full) > 2 * STEPS * 16
    assert listed(info) == listed(want)
    assert (info.n_records, info.ranks, info.first_step, info.last_step) == (2 * STEPS, (0, 1), 1, STEPS)
    assert info.meta["config"] == want.meta["config"] == {"runner_config": "{'batch_size': 8}"}
    assert (info.meta["start_time"], info.meta["last_event_time"]) == (
        want.meta["start_time"],
        want.meta["last_event_time"],
    )
    assert listed(peeked.list_runs()[0]) == listed(want)
    assert decoded(peeked) == 0, "listing again decodes nothing either"

    frame = peeked.read(info.id).frame  # the first chart: now the files are decoded
    assert len(frame) == 2 * STEPS and decoded(peeked) == decoded(full)
    assert listed(peeked.list_runs()[0]) == listed(want)


def test_statuses_and_intervals_match_at_any_time(root: Path) -> None:
    """The status of an unchanged run, now and an hour later, is the one a decode gives."""
    for now in (os.stat(root).st_mtime + 5, os.stat(root).st_mtime + 3600):
        stores = [
            RunStore(root, rescan_interval_s=0, cache=False, peek_min_bytes=p, clock=lambda now=now: now)
            for p in (PEEK, None)
        ]
        infos = [store.list_runs()[0] for store in stores]
        assert listed(infos[0]) == listed(infos[1])
        sources = [store._runs["mf/tensorboard"].sources.values() for store in stores]
        assert [s.summary() for s in sources[0]] == [s.summary() for s in sources[1]]


def test_a_growing_run_is_read_and_seen_growing(tmp_path: Path) -> None:
    writers = write_ranks(tmp_path / "logs" / "tb", ranks=(0,))
    store = RunStore(tmp_path / "logs", rescan_interval_s=0, cache=False, peek_min_bytes=PEEK)
    (info,) = store.list_runs()
    assert info.n_records == STEPS and decoded(store) == 0
    for step in range(STEPS + 1, STEPS + 11):
        mindformers_step(writers[0], step, 1.0)
    writers[0].sync()
    (info,) = store.list_runs()
    assert info.n_records == STEPS + 10 and info.last_step == STEPS + 10 and decoded(store) > 0
    source = next(iter(store._runs["tb"].sources.values()))
    assert source.growth.grew_at is not None, "the growth since the listing was seen"
    writers[0].close()


def test_a_cached_run_is_read_from_its_cache_not_peeked(tmp_path: Path) -> None:
    for writer in write_ranks(tmp_path / "logs" / "tb", ranks=(0,)).values():
        writer.close()
    first = RunStore(tmp_path / "logs", rescan_interval_s=0, cache=True, peek_min_bytes=PEEK)
    first.cache.min_bytes = 1  # a small file: cache it anyway
    first.list_runs()
    first.read("tb")  # decoded: its cache file is written
    first.cache.wait()
    second = RunStore(tmp_path / "logs", rescan_interval_s=0, cache=True, peek_min_bytes=PEEK)
    (info,) = second.list_runs()
    group = second._runs["tb"].tensorboard
    assert group is not None and group.cache_hits == 1 and group.listed is None and info.n_records == STEPS


def test_a_cached_run_is_listed_without_its_rows_and_read_without_a_copy(tmp_path: Path) -> None:
    """Issue 35: listing 20 cached runs of 1M steps copied every row into memory (1.4 GB) before any page
    asked for one; now the rows stay in the mapped cache file and a read of a finished run copies none."""
    import pyarrow as pa
    from pandas.testing import assert_frame_equal
    from tensorboardX import SummaryWriter

    from monitor_cb.ingest.tiered import OVERLAY

    steps = 3 * OVERLAY
    writer = SummaryWriter(str(tmp_path / "logs" / "tb"))
    for step in range(1, steps + 1):
        writer.add_scalar("loss", 2.0 / step, step)
        writer.add_scalar("grad-norm", 1.0 + step % 7, step)
    writer.close()
    first = RunStore(tmp_path / "logs", rescan_interval_s=0, cache=True, peek_min_bytes=PEEK)
    first.cache.min_bytes = 1
    first.list_runs()
    decoded = first.read("tb").frame
    first.cache.wait()
    second = RunStore(tmp_path / "logs", rescan_interval_s=0, cache=True, peek_min_bytes=PEEK)
    (info,) = second.list_runs()
    group = second._runs["tb"].tensorboard
    assert group is not None and group.cache_hits == 1 and info.n_records == steps
    (source,) = second._runs["tb"].sources.values()
    assert source.table.lazy, "the listing loaded the rows"
    before = pa.total_allocated_bytes()
    frame = second.read("tb").frame
    assert pa.total_allocated_bytes() - before < 8 * steps, "the read copied a column out of the mapping"
    assert_frame_equal(frame, decoded, check_dtype=True)


def test_decoded_rows_leave_the_heap_once_their_cache_is_written(tmp_path: Path) -> None:
    """Issue 35: 20 runs of 1M steps read with no cache kept 1.5 GB of decoded rows until the server stopped;
    once a rank's cache file is written its rows are the file's (as for JSONL files), and the run reads the
    same, new events included."""
    from pandas.testing import assert_frame_equal
    from tensorboardX import SummaryWriter

    from monitor_cb.ingest import heap
    from monitor_cb.ingest.tiered import OVERLAY

    steps = 3 * OVERLAY
    writer = SummaryWriter(str(tmp_path / "logs" / "tb"), flush_secs=3600)
    for step in range(1, steps + 1):
        writer.add_scalar("loss", 2.0 / step, step)
    writer.flush()
    store = RunStore(tmp_path / "logs", rescan_interval_s=0, cache=True, peek_min_bytes=PEEK)
    store.cache.min_bytes = 1
    store.list_runs()
    trims = heap.released
    decoded = store.read("tb").frame
    store.cache.wait()
    (source,) = store._runs["tb"].sources.values()
    assert getattr(source.table, "lazy", False), "the decoded rows are still in the heap"
    assert heap.released > trims or not heap.release_free_memory(), "the freed rows were not given back"
    assert_frame_equal(store.read("tb").frame, decoded)
    for step in range(steps + 1, steps + 11):
        writer.add_scalar("loss", 2.0 / step, step)
    writer.close()
    frame = store.read("tb").frame
    assert frame["step"].iloc[-1] == steps + 10 and len(frame) == steps + 10
    assert_frame_equal(frame.head(len(decoded)), decoded)  # (the flush may have left the last few queued)


def test_a_rank_with_two_files_is_decoded(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "tb"
    for writer in write_ranks(run, ranks=(0,)).values():
        writer.close()
    relaunch = SyncedWriter(run / "rank_0", filename_suffix=".second")
    mindformers_step(relaunch, STEPS + 1, 1.0)
    relaunch.sync()
    relaunch.close()
    store = RunStore(tmp_path / "logs", rescan_interval_s=0, cache=False, peek_min_bytes=PEEK)
    (info,) = store.list_runs()
    assert decoded(store) > 0 and info.n_records == STEPS + 1


def test_a_fifo_among_the_files_never_hangs_the_listing(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "tb"
    for writer in write_ranks(run, ranks=(0,)).values():
        writer.close()
    (run / "rank_1").mkdir()
    os.mkfifo(run / "rank_1" / "events.out.tfevents.1.fifo")
    outside = next((run / "rank_0").iterdir())
    (run / "rank_2").mkdir()
    (run / "rank_2" / "events.out.tfevents.2.link").symlink_to(outside)
    store = RunStore(tmp_path / "logs", rescan_interval_s=0, cache=False, peek_min_bytes=PEEK)
    found: list[RunInfo] = []
    thread = threading.Thread(target=lambda: found.extend(store.list_runs()))
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the listing hung on a FIFO"
    (info,) = found
    assert info.n_records == STEPS, "the FIFO has no rows and the link is not followed"
    assert info.ranks == (0, 1), "the FIFO's rank is listed, with no rows (as a decode lists it)"
    assert store._runs["tb"].tensorboard.listed is None and decoded(store) > 0, "a FIFO: decoded as before"


def test_the_run_asked_for_is_the_only_one_decoded(tmp_path: Path) -> None:
    for name in ("a", "b"):
        for writer in write_ranks(tmp_path / "logs" / name, ranks=(0,)).values():
            writer.close()
    store = RunStore(tmp_path / "logs", rescan_interval_s=0, cache=False, peek_min_bytes=PEEK)
    assert {info.id: info.n_records for info in store.list_runs()} == {"a": STEPS, "b": STEPS}
    assert len(store.read("b").frame) == STEPS
    groups = {name: store._runs[name].tensorboard for name in ("a", "b")}
    assert groups["a"].listed is not None and groups["a"]._reader is None, "run a is still only listed"
    assert groups["b"].listed is None and groups["b"]._reader.n_events > 0
    assert {info.id: info.n_records for info in store.list_runs()} == {"a": STEPS, "b": STEPS}
    assert groups["a"]._reader is None, "listing again leaves it so"


def test_tensorboard_on_the_same_root_does_not_take_cache_files_for_runs(tmp_path: Path) -> None:
    """A cache file named after its event file held ``tfevents``: TensorBoard listed every one as a run and
    logged a CRC error for each on every reload. A cache file under the old name is removed when rewritten."""
    from tensorboard.backend.event_processing import io_wrapper
    from tensorboardX import SummaryWriter

    root = tmp_path / "logs"
    writer = SummaryWriter(str(root / "tb"))
    for step in range(1, 200):
        writer.add_scalar("loss", 2.0 / step, step)
    writer.close()
    (event_file,) = (root / "tb").iterdir()
    legacy = root / ".monitor" / "cache" / "tb" / (event_file.name + ".arrow")
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(b"an earlier version's cache file")
    store = RunStore(root, rescan_interval_s=0, cache=True, peek_min_bytes=PEEK)
    store.cache.min_bytes = 1
    store.list_runs()
    assert store.read("tb").frame["step"].iloc[-1] == 199
    store.cache.wait()
    written = [p for p in (root / ".monitor").rglob("*") if p.is_file()]
    assert written and not legacy.exists()
    assert not [p for p in written if io_wrapper.IsSummaryEventsFile(str(p))], written
    again = RunStore(root, rescan_interval_s=0, cache=True, peek_min_bytes=PEEK)
    again.list_runs()
    assert again._runs["tb"].tensorboard.cache_hits == 1
