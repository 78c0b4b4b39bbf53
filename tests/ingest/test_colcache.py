"""The columnar cache: written once, read column by column, checked against its file, never trusted blindly."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest
from pandas.testing import assert_frame_equal

from monitor_cb.ingest import RunStore
from monitor_cb.ingest.colcache import FORMAT, ColumnarCache, Place, places_for
from monitor_cb.ingest.source import MetricsSource
from monitor_cb.ingest.tiered import OVERLAY
from tests.ingest.helpers import append, line, records, replace_file


def cache_at(tmp_path: Path, root: Path, min_bytes: int = 1) -> ColumnarCache:
    return ColumnarCache([Place(root / ".monitor" / "cache", root)], root, min_bytes=min_bytes)


def run_lines(first: int, last: int, seg: int = 1) -> bytes:
    """Steps with NaN/inf, a metric that appears late, an eval record merged into a step, an event."""
    out = []
    for s in range(first, last + 1):
        rec: dict[str, object] = {"step": s, "t": 1000.0 + s, "seg": seg, "loss": 1.0 / s, "lr": 1e-3}
        if s % 7 == 0:
            rec["loss"] = float("nan")
        if s % 11 == 0:
            rec["grad_norm"] = float("inf")
        if s > (first + last) // 2:
            rec["late"] = float(s)
        out.append(line(rec))
        if s % 5 == 0:
            out.append(line({"step": s, "seg": seg, "eval_loss": 2.0 / s}))
        if s % 13 == 0:
            out.append(line({"step": s, "seg": seg, "event": "note", "reason": f"at {s}"}))
    return b"".join(out)


def fresh(path: Path, all_segments: bool = False) -> tuple[object, dict[str, np.ndarray]]:
    source = MetricsSource(path)
    source.poll()
    _, frame, masks = source.frame_and_masks(all_segments)
    return frame, masks


def assert_same(source: MetricsSource, path: Path) -> None:
    """The source's rows (cache + tail) equal a plain parse of the whole file, masks, history and bad lines
    included."""
    plain = MetricsSource(path)
    plain.poll()
    assert (source.bad_count, source.bad_lines) == (plain.bad_count, plain.bad_lines)
    for all_segments in (False, True):
        _, frame, masks = source.frame_and_masks(all_segments)
        want_frame, want_masks = fresh(path, all_segments)
        assert_frame_equal(frame, want_frame)
        assert sorted(masks) == sorted(want_masks)
        for name, mask in want_masks.items():
            assert np.array_equal(masks[name], mask), name


def test_reopening_reads_the_cache_plus_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "run" / "metrics.jsonl"
    path.parent.mkdir()
    path.write_bytes(run_lines(1, 300) + b"not json\n")
    cache = cache_at(tmp_path, tmp_path)
    first = MetricsSource(path, cache=cache)
    first.poll()
    assert cache.writes == 1 and first.cached_offset == path.stat().st_size
    assert cache.path_for(path) == tmp_path / ".monitor" / "cache" / "run" / "metrics.jsonl.arrow"
    append(path, run_lines(301, 320))
    again = MetricsSource(path, cache=cache)
    assert again.poll() == len(run_lines(301, 320).splitlines())  # only the tail was parsed
    assert again.cache_hit and again.bad_count == 1 and again.bad_lines[0].reason.startswith("invalid JSON")
    assert again.parser.kinds == first.parser.kinds
    assert_same(again, path)


def test_resumed_segments_and_history_survive_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(run_lines(1, 200) + run_lines(150, 260, seg=2))
    cache = cache_at(tmp_path, tmp_path)
    MetricsSource(path, cache=cache).poll()
    append(path, run_lines(240, 300, seg=3))  # the tail replaces rows the cache holds
    again = MetricsSource(path, cache=cache)
    again.poll()
    assert again.cache_hit
    assert_same(again, path)


def test_a_lazy_table_keeps_rows_on_disk_until_asked(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(records(1, 3 * OVERLAY))
    cache = cache_at(tmp_path, tmp_path)
    MetricsSource(path, cache=cache).poll()
    append(path, records(3 * OVERLAY + 1, 3 * OVERLAY + 50))
    append(path, line({"step": 3 * OVERLAY - 5, "eval_loss": 0.5}))  # lands in the overlay: still lazy
    lazy = MetricsSource(path, cache=cache)
    lazy.poll()
    assert lazy.table.lazy and lazy.table.n == 3 * OVERLAY + 50
    assert (lazy.table.first_step, lazy.table.last_step) == (1, 3 * OVERLAY + 50)
    assert lazy.usual_interval() == 1.0
    append(path, line({"step": 10, "eval_loss": 0.25}))  # rewrites a row left on disk: loaded first
    lazy.poll()
    assert not lazy.table.lazy
    assert_same(lazy, path)


@pytest.mark.parametrize("change", ["truncate", "replace_same_ends", "replace", "shorter"])
def test_a_changed_file_is_read_from_scratch(tmp_path: Path, change: str) -> None:
    path = tmp_path / "metrics.jsonl"
    data = run_lines(1, 400)
    path.write_bytes(data)
    cache = cache_at(tmp_path, tmp_path)
    MetricsSource(path, cache=cache).poll()
    if change == "truncate":
        with open(path, "r+b") as handle:
            handle.truncate(0)
        append(path, run_lines(1, 20))
    elif change == "replace_same_ends":  # same first and last 4 KiB, other bytes in the middle
        middle = len(data) // 2
        changed = data[:middle] + data[middle:].replace(b'"lr":0.001', b'"lr":0.002', 1)
        assert len(changed) == len(data) and changed != data
        replace_file(path, changed)
    elif change == "replace":
        replace_file(path, run_lines(1000, 1400))
    else:
        replace_file(path, data[: len(data) // 2])
    again = MetricsSource(path, cache=cache)
    again.poll()
    assert not again.cache_hit
    assert_same(again, path)


@pytest.mark.parametrize("damage", ["delete", "garbage", "cut", "other_version"])
def test_a_damaged_or_missing_cache_only_costs_time(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(run_lines(1, 300))
    cache = cache_at(tmp_path, tmp_path)
    MetricsSource(path, cache=cache).poll()
    cached = cache.path_for(path)
    assert cached is not None
    if damage == "delete":
        cached.unlink()
    elif damage == "garbage":
        cached.write_bytes(b"\x00garbage" * 100)
    elif damage == "cut":
        cached.write_bytes(cached.read_bytes()[:-300])
    else:
        cached.write_bytes(cached.read_bytes().replace(f'"format": {FORMAT}'.encode(), b'"format": 9'))
    again = MetricsSource(path, cache=cache)
    again.poll()
    assert not again.cache_hit
    assert_same(again, path)


def test_store_writes_under_the_root_and_reopens_from_it(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "exp"
    run.mkdir(parents=True)
    for rank in range(3):
        data = run_lines(1, 200).replace(b'"seg"', f'"rank":{rank},"seg"'.encode())
        (run / f"metrics.rank{rank}.jsonl").write_bytes(data)
    places = [Place(tmp_path / "logs" / ".monitor" / "cache", tmp_path / "logs")]
    first = RunStore(tmp_path / "logs", cache=places)
    first.cache.min_bytes = 1
    want = first.read("exp").frame
    assert first.cache.wait()
    cached = sorted(p.name for p in (tmp_path / "logs" / ".monitor" / "cache" / "exp").iterdir())
    assert cached == [f"metrics.rank{r}.jsonl.arrow" for r in range(3)]
    second = RunStore(tmp_path / "logs", cache=places)
    assert [r.id for r in second.list_runs()] == ["exp"]  # the cache folder is hidden: not a run
    assert all(s.cache_hit for s in second._runs["exp"].sources.values())
    assert_frame_equal(second.read("exp").frame, want)


def test_an_unwritable_root_falls_back_to_the_state_folder(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    (root / "exp").mkdir(parents=True)
    (root / "exp" / "metrics.jsonl").write_bytes(run_lines(1, 100))
    (root / ".monitor").write_text("a file where the folder would go")  # mkdir fails as on a read-only root
    state = tmp_path / "state"
    places = places_for(root, {"MONITOR_STATE_DIR": str(state)})
    store = RunStore(root, cache=places)
    store.cache.min_bytes = 1
    store.read("exp")
    assert store.cache.wait()
    written = [p for p in state.rglob("*.arrow")]
    assert len(written) == 1 and written[0].name == "metrics.jsonl.arrow"
    assert sorted(p.name for p in root.rglob("*")) == [".monitor", "exp", "metrics.jsonl"]
    again = RunStore(root, cache=places)
    again.read("exp")
    assert next(iter(again._runs["exp"].sources.values())).cache_hit


def test_a_symlink_out_of_the_root_is_never_written_through(tmp_path: Path) -> None:
    root, outside = tmp_path / "logs", tmp_path / "outside"
    (root / "exp").mkdir(parents=True)
    outside.mkdir()
    (root / "exp" / "metrics.jsonl").write_bytes(run_lines(1, 100))
    (root / ".monitor").symlink_to(outside)
    cache = ColumnarCache([Place(root / ".monitor" / "cache", root)], root, min_bytes=1)
    source = MetricsSource(root / "exp" / "metrics.jsonl", cache=cache)
    source.poll()
    assert cache.writes == 0 and "outside" in (cache.last_error or "")
    assert not list(outside.rglob("*.arrow"))


def test_cache_off_by_environment(tmp_path: Path) -> None:
    assert places_for(tmp_path, {"MONITOR_CACHE": "off"}) == []
    assert places_for(tmp_path, {"MONITOR_CACHE": str(tmp_path / "c")}) == [Place(tmp_path / "c", tmp_path / "c")]


def test_concurrent_writers_never_leave_a_broken_file(tmp_path: Path) -> None:
    """Two servers (threads here, processes alike) rewriting one cache file while others open it."""
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(run_lines(1, 2000))
    want_frame, _ = fresh(path)
    cache = cache_at(tmp_path, tmp_path)
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        try:
            for _ in range(15):
                MetricsSource(path, cache=cache_at(tmp_path, tmp_path)).poll()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            while not stop.is_set():
                source = MetricsSource(path, cache=cache, lazy=False)
                source.poll()
                assert_frame_equal(source.frame(), want_frame)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    writers = [threading.Thread(target=writer) for _ in range(2)]
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for thread in writers + readers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    for thread in readers:
        thread.join()
    assert not errors, errors[0]
    leftovers = [p.name for p in (tmp_path / ".monitor" / "cache").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_remote_runs_are_cached_locally(s3_env: object, tmp_path: Path) -> None:
    from tests.ingest.test_remote import remote_store, ship, write

    run = tmp_path / "logs" / "exp1"
    write(run, 0, 1, range(1, 300))
    ship(tmp_path / "logs", s3_env.url("root"))  # type: ignore[attr-defined]
    store = remote_store(s3_env.url("root"))  # type: ignore[attr-defined]
    store.cache.min_bytes = 1
    want = store.read("exp1").frame
    assert store.cache.wait()
    state = Path(os.environ["MONITOR_STATE_DIR"])
    assert [p.name for p in state.rglob("*.arrow")] == ["metrics.jsonl.arrow"]
    again = remote_store(s3_env.url("root"))  # type: ignore[attr-defined]
    again.cache.min_bytes = 1
    assert_frame_equal(again.read("exp1").frame, want)
    (source,) = again._runs["exp1"].sources.values()
    assert source.cache_hit and source.tail.resets == 0


def test_a_finished_run_is_read_from_the_cache_without_a_copy(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(run_lines(1, 3 * OVERLAY))
    cache = cache_at(tmp_path, tmp_path)
    MetricsSource(path, cache=cache).poll()
    again = MetricsSource(path, cache=cache)
    again.poll()
    _, frame, _ = again.frame_and_masks()
    assert not frame["step"].to_numpy().flags.writeable  # the mapped cache file itself
    assert_same(again, path)
    append(path, run_lines(3 * OVERLAY + 1, 3 * OVERLAY + 5) + line({"step": 3, "seg": 1, "eval_loss": 1.0}))
    again.poll()  # grows and edits: the rows are copied first, the earlier frame keeps its values
    assert_same(again, path)
    assert frame["step"].iloc[-1] == 3 * OVERLAY


def _reopened(path: Path, cache: ColumnarCache) -> tuple[MetricsSource, int]:
    """A new source over the cached file, read; and the bytes Arrow allocated meanwhile (copies of columns)."""
    import pyarrow as pa

    again = MetricsSource(path, cache=cache)
    before = pa.total_allocated_bytes()
    again.poll()
    again.frame_and_masks()
    return again, pa.total_allocated_bytes() - before


def test_mapped_rows_are_views_of_the_file_unless_others_can_write_it(tmp_path: Path) -> None:
    """Issue 35: 20 runs x 1M steps held every cached column twice (Arrow's combine_chunks copies even one
    chunk): 1.1 GB of heap for rows already in the page cache. But a mapped file truncated in place kills the
    reader (SIGBUS), so a cache file another user could write is copied. The rank column is one value."""
    path = tmp_path / "metrics.jsonl"
    rows = 20 * OVERLAY
    path.write_bytes(run_lines(1, rows))
    cache = cache_at(tmp_path, tmp_path)
    MetricsSource(path, cache=cache).poll()
    cached = cache.open(path, 0)
    assert cached is not None and cached.mapped
    mapped, mapped_copies = _reopened(path, cache)
    os.chmod(cached.path, 0o664)
    copied, copies = _reopened(path, cache)
    assert mapped.cache_hit and copied.cache_hit
    numbers = 8 * rows * 8  # step, seg, t and the five float metrics (texts become objects either way)
    assert copies - mapped_copies >= numbers, (mapped_copies, copies)
    for source in (mapped, copied):
        _, frame, _ = source.frame_and_masks()
        assert frame["rank"].to_numpy().strides == (0,) and (frame["rank"] == 0).all()
        assert_same(source, path)


def test_a_key_turning_numeric_after_the_cache_is_read_again(tmp_path: Path) -> None:
    """Text values of a key went into the cache; the key turns numeric in the tail: the file is read again."""
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b"".join(line({"step": s, "loss": 1.0, "phase": f"p{s}"}) for s in range(1, 200)))
    cache = cache_at(tmp_path, tmp_path)
    MetricsSource(path, cache=cache).poll()
    append(path, b"".join(line({"step": s, "loss": 1.0, "phase": float(s)}) for s in range(200, 210)))
    again = MetricsSource(path, cache=cache)
    again.poll()
    assert again.cache_hit
    assert_same(again, path)
    assert again.parser.kinds["phase"] != "text"


def test_a_temporary_file_left_by_a_stopped_server_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(run_lines(1, 50))
    cache = cache_at(tmp_path, tmp_path)
    target = cache.path_for(path)
    assert target is not None
    target.parent.mkdir(parents=True)
    stale, fresh_tmp = target.with_name(f".{target.name}.1.2.tmp"), target.with_name(f".{target.name}.3.4.tmp")
    stale.write_bytes(b"half")
    fresh_tmp.write_bytes(b"another server writing")
    os.utime(stale, (1, 1))
    MetricsSource(path, cache=cache).poll()
    assert not stale.exists() and fresh_tmp.exists() and target.exists()


def test_a_store_with_a_cache_raises_a_low_open_files_limit(tmp_path: Path) -> None:
    """Cached rows keep their file open: 100 runs of 8 ranks would pass a soft limit of 1,024."""
    import subprocess
    import sys

    code = (
        "import resource, sys\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))\n"
        "from monitor_cb.ingest import RunStore\n"
        "RunStore(sys.argv[1])\n"
        "print(*resource.getrlimit(resource.RLIMIT_NOFILE))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    soft, hard = int(out[0]), int(out[1])
    assert soft == (65536 if hard == -1 else min(65536, hard)), (soft, hard)
