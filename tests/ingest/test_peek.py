"""A fresh root's first listing from the files' ends (monitor_cb.ingest.peek): the same run list as a full
read, without parsing the files, which are read when their rows are asked for."""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading
from pathlib import Path

import pytest
from pandas.testing import assert_frame_equal

from monitor_cb.ingest import RunStore
from monitor_cb.ingest.colcache import Place
from monitor_cb.ingest.peek import EDGE_BYTES, peek_file
from monitor_cb.ingest.source import MetricsSource
from monitor_cb.ingest.summary_index import INDEX_NAME
from monitor_cb.train.writer import MetricsWriter
from tests.ingest.helpers import append, line, records

STEPS = 4_000  # ~270 kB of lines: past the two 64 kB edges


def full_summary(path: Path, root: Path) -> object:
    source = MetricsSource(path, 0, root)
    source.poll()
    return source.summary()


def big_run(root: Path, name: str = "run", last: int = STEPS) -> Path:
    run = root / name
    run.mkdir(parents=True)
    path = run / "metrics.jsonl"
    path.write_bytes(records(1, last))
    return path


def test_the_peek_of_a_writer_made_file_is_what_a_full_read_lists(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    writer = MetricsWriter(root / "w", rank=0, world_size=1, fsync_interval=0)
    for step in range(1, STEPS + 1):
        writer.log(step=step, loss=3.0 - step / STEPS, lr=1e-3, grad_norm=0.5, throughput=1234.5)
    writer.close("finished")
    path = root / "w" / "metrics.jsonl"
    assert path.stat().st_size > 2 * EDGE_BYTES
    peek = peek_file(path, 0, root, min_bytes=0)
    assert peek is not None
    want = full_summary(path, root)
    assert dataclasses.replace(peek.summary, interval=None) == dataclasses.replace(want, interval=None)  # type: ignore[type-var]
    assert peek.summary.interval == pytest.approx(want.interval, rel=1e-6, abs=1e-9)  # type: ignore[attr-defined]
    assert peek.ident[2] == path.stat().st_size


def test_a_torn_last_line(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    path = big_run(root)
    append(path, b'{"step": 99999, "lo')
    peek = peek_file(path, 0, root, min_bytes=0)
    assert peek is not None
    assert peek.summary == full_summary(path, root)
    assert peek.summary.pending == len(b'{"step": 99999, "lo') and peek.summary.last_step == STEPS


def test_every_tenth_step_with_evals_lists_as_the_read_does(tmp_path: Path) -> None:
    """Records of one step (train, then eval) are one row; a stride of 10 is 1/10 the rows."""
    root = tmp_path / "logs"
    writer = MetricsWriter(root / "w", rank=0, world_size=1, fsync_interval=0)
    for step in range(10, 10 * STEPS + 1, 10):
        writer.log(step=step, loss=1.0 / step, lr=1e-3)
        if step % 500 == 0:
            writer.log(step=step, eval_loss=2.0 / step)
    writer.close("finished")
    path = root / "w" / "metrics.jsonl"
    peek = peek_file(path, 0, root, min_bytes=0)
    assert peek is not None
    want = full_summary(path, root)
    assert peek.summary.n == want.n == STEPS  # type: ignore[attr-defined]
    assert dataclasses.replace(peek.summary, interval=None) == dataclasses.replace(want, interval=None)  # type: ignore[type-var]


def test_steps_that_jump_or_change_stride_are_parsed(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    path = big_run(root)
    append(path, records(1_000_000, 1_000_000 + STEPS))  # the same stride at both ends, a jump between
    assert peek_file(path, 0, root, min_bytes=0) is None, "the size does not fit a million rows"
    path.write_bytes(
        records(1, STEPS) + b"".join(line({"step": s, "loss": 1.0}) for s in range(STEPS + 2, 3 * STEPS, 2))
    )
    assert peek_file(path, 0, root, min_bytes=0) is None, "stride 1 at the start, 2 at the end"


@pytest.mark.parametrize(
    "edge",
    [
        b'{"loss": 1.0}\n',  # no step: its step comes from the lines before it, which only a read knows
        b"garbage\n",  # a bad line: the read counts it
        b'{"step": "12", "loss": 1.0}\n',  # a step as text
        b"\n",  # a blank line
    ],
)
def test_edge_lines_only_a_read_can_place_make_it_read(tmp_path: Path, edge: bytes) -> None:
    root = tmp_path / "logs"
    path = big_run(root)
    append(path, edge)
    assert peek_file(path, 0, root, min_bytes=0) is None
    path.write_bytes(edge + records(1, STEPS))
    assert peek_file(path, 0, root, min_bytes=0) is None


def test_small_unsafe_and_missing_files_are_read_instead(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    path = big_run(root)
    assert peek_file(path, 0, root) is None, "under the 4 MiB default: parsed at once"
    assert peek_file(root / "none" / "metrics.jsonl", 0, root, min_bytes=0) is None
    fifo = root / "fifo" / "metrics.jsonl"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    done = threading.Event()
    result: list[object] = []
    threading.Thread(
        target=lambda: (result.append(peek_file(fifo, 0, root, min_bytes=0)), done.set()), daemon=True
    ).start()
    assert done.wait(10), "a FIFO must not hang the listing"
    assert result == [None]
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(records(1, STEPS))
    link = root / "link" / "metrics.jsonl"
    link.parent.mkdir()
    link.symlink_to(outside)
    assert peek_file(link, 0, root, min_bytes=0) is None


def store_of(root: Path, peek_min_bytes: int | None) -> RunStore:
    cache = [Place(root / ".monitor" / "cache", root)]
    return RunStore(root, cache=cache, rescan_interval_s=0, peek_min_bytes=peek_min_bytes)


def bytes_read(store: RunStore) -> int:
    return sum(s.tail.offset for run in store._runs.values() for s in run.sources.values())


def test_a_fresh_store_lists_long_files_from_their_ends_and_reads_the_one_asked_for(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    for i in range(3):
        big_run(root, f"run{i}", STEPS + i)
    (root / "run0" / "metrics.meta.json").write_text('{"status": "finished", "name": "zero"}')
    peeking = store_of(root, 0)
    got = {i.id: i for i in peeking.list_runs()}
    assert bytes_read(peeking) == 0, "nothing parsed by the listing"
    index = root / ".monitor" / "cache" / INDEX_NAME
    peeking.index.flush(force=True)  # type: ignore[union-attr]
    assert not index.exists() or b"run1" not in index.read_bytes(), "a peek is never written to the index"
    reading = RunStore(root, cache=False, rescan_interval_s=0, peek_min_bytes=None)
    want = {i.id: i for i in reading.list_runs()}
    assert got == want, "the same run list: records, first and last step, status, last write"
    assert got["run0"].status == "finished" and got["run2"].n_records == STEPS + 2
    assert_frame_equal(peeking.read("run1").frame, reading.read("run1").frame)
    assert bytes_read(peeking) == (root / "run1" / "metrics.jsonl").stat().st_size, "only the run asked for is read"


def test_a_peeked_file_that_grows_is_read_and_seen_growing(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    path = big_run(root)  # no metadata: its status comes from growth this process saw
    store = store_of(root, 0)
    assert store.list_runs()[0].status == "ended"
    append(path, records(STEPS + 1, STEPS + 10))
    info = store.list_runs()[0]
    assert info.last_step == STEPS + 10 and info.n_records == STEPS + 10
    assert info.status == "running", "seen growing by this process"


REAL_RUNS = Path(__file__).resolve().parents[2] / ".." / "shared" / "real_runs"


@pytest.mark.skipif(not REAL_RUNS.is_dir(), reason="../shared/real_runs is not here")
def test_real_runs_are_peeked_close_to_a_full_read_and_exact_once_read(tmp_path: Path) -> None:
    """Curves other people logged (article-format lines, odd strides, relative ``t``): each file past the two
    edges is either parsed, or listed from its ends with a full read's steps, times and state, and its row
    count from the steps' stride. That count is an estimate: ratos_nan logs every 10th step but adds one at
    each of its 9 epoch ends (111,327 from the stride, 111,336 rows); the store's listing is exact once read."""
    peeked = parsed = 0
    for path in sorted(REAL_RUNS.glob("*/metrics.jsonl")):
        if path.stat().st_size < 2 * EDGE_BYTES:
            continue
        peek = peek_file(path, 0, REAL_RUNS, min_bytes=0)
        if peek is None:
            parsed += 1
            continue
        peeked += 1
        want = full_summary(path, REAL_RUNS)
        same = dataclasses.replace(peek.summary, interval=None, n=want.n)  # type: ignore[attr-defined]
        assert same == dataclasses.replace(want, interval=None), path  # type: ignore[type-var]
        assert abs(peek.summary.n - want.n) <= 1e-3 * want.n, (path, peek.summary.n, want.n)  # type: ignore[attr-defined]
        assert (peek.summary.interval is None) == (want.interval is None), path  # type: ignore[attr-defined]
        if want.interval is not None:  # type: ignore[attr-defined]
            assert peek.summary.interval == pytest.approx(want.interval, rel=1e-6, abs=1e-9), path  # type: ignore[attr-defined]
    assert peeked and parsed + peeked >= 10, (peeked, parsed)
    root = tmp_path / "logs"
    (root / "ratos_nan").mkdir(parents=True)
    shutil.copy(REAL_RUNS / "ratos_nan" / "metrics.jsonl", root / "ratos_nan" / "metrics.jsonl")
    store = RunStore(root, cache=False, rescan_interval_s=0, peek_min_bytes=0)
    assert store.list_runs()[0].n_records == 111_327, "from the stride"
    store.read("ratos_nan")
    assert store.list_runs()[0].n_records == 111_336, "exact once read"


def test_a_wide_run_is_listed_from_its_ends_without_parsing_it(tmp_path: Path) -> None:
    """Issue #31: a run with thousands of metrics writes lines longer than an edge; its listing used to
    parse the whole file (34 s for 5,000 metrics x 200 steps). The ends grow until they hold whole lines."""
    root = tmp_path / "logs"
    names = [f"layer_{i:04d}/grad_norm" for i in range(2500)]
    writer = MetricsWriter(root / "wide", rank=0, world_size=1, fsync_interval=0, queue_size=100)
    for step in range(1, 41):
        writer.log_at(1_700_000_000.0 + step, step, loss=1.0 / step, **dict.fromkeys(names, step * 0.5))
    writer.close("finished")
    path = root / "wide" / "metrics.jsonl"
    assert path.stat().st_size / 40 > EDGE_BYTES, "each line is longer than an edge"
    peeking = store_of(root, 0)
    (got,) = peeking.list_runs()
    assert bytes_read(peeking) == 0, "nothing parsed by the listing"
    reading = RunStore(root, cache=False, rescan_interval_s=0, peek_min_bytes=None)
    assert [got] == reading.list_runs()
    assert got.n_records == 40 and got.last_step == 40
    assert_frame_equal(peeking.read("wide").frame, reading.read("wide").frame)
