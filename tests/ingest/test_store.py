"""RunStore: discovery, run info, frames across ranks, safety and sharing between threads."""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from monitor_cb.ingest import RunStore
from monitor_cb.train.writer import MetricsWriter
from tests.ingest.helpers import append, legacy_line, records


def store_of(root: Path, **kw: object) -> RunStore:
    return RunStore(root, rescan_interval_s=0.0, **kw)  # type: ignore[arg-type]


def write_run(run_dir: Path, steps: int = 5, rank: int = 0, world: int = 1, close: bool = True) -> MetricsWriter:
    writer = MetricsWriter(run_dir, rank=rank, world_size=world, config={"lr": 0.1})
    for s in range(1, steps + 1):
        writer.log(step=s, loss=1.0 / s + rank, lr=0.1)
    writer.flush()
    if close:
        writer.close()
    return writer


def test_nested_groups_hidden_dirs_and_odd_names(tmp_path: Path) -> None:
    write_run(tmp_path / "exp001")
    write_run(tmp_path / "bert" / "exp 002 ünïcødé")
    write_run(tmp_path / "bert" / "sub" / "deep")
    write_run(tmp_path / ".hidden" / "run")
    (tmp_path / "bert" / ".tmp.jsonl").write_bytes(records(1, 2))
    ids = {info.id for info in store_of(tmp_path).list_runs()}
    assert ids == {"exp001", "bert/exp 002 ünïcødé", "bert/sub/deep"}


def test_run_info_fields(tmp_path: Path) -> None:
    write_run(tmp_path / "exp001", steps=7)
    (info,) = store_of(tmp_path).list_runs()
    assert (info.name, info.ranks, info.n_records, info.first_step, info.last_step) == ("exp001", (0,), 7, 1, 7)
    assert info.status == "finished" and info.bad_lines == 0
    assert info.meta["config"] == {"lr": 0.1}
    assert info.path == tmp_path / "exp001" and info.last_write > 0


def test_has_listed_tells_a_first_listing_apart(tmp_path: Path) -> None:
    write_run(tmp_path / "exp001")
    store = store_of(tmp_path)
    assert store.has_listed is False  # the dashboard says what a fresh root's first listing is doing
    store.list_runs()
    assert store.has_listed is True


def test_symlinks_and_dotdot_never_leave_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_run(tmp_path / "secret")
    root.mkdir()
    (root / "escape").symlink_to(tmp_path / "secret")
    (root / "file.jsonl").symlink_to(tmp_path / "secret" / "metrics.jsonl")
    write_run(root / "ok")
    (root / "inner").symlink_to(root / "ok")  # an alias: the run shows once, under its real path
    store = store_of(root)
    assert {info.id for info in store.list_runs()} == {"ok"}
    for hostile in ("escape", "../secret", "ok/../../secret", "/etc", "."):
        with pytest.raises(KeyError):
            store.read(hostile)


def test_late_appearing_directory_is_found(tmp_path: Path) -> None:
    store = store_of(tmp_path)
    assert store.list_runs() == []
    write_run(tmp_path / "late")
    assert [info.id for info in store.list_runs()] == ["late"]
    assert len(store.read("late")) == 5


def test_deleted_run_disappears(tmp_path: Path) -> None:
    write_run(tmp_path / "gone")
    store = store_of(tmp_path)
    assert len(store.read("gone")) == 5
    for child in (tmp_path / "gone").iterdir():
        child.unlink()
    (tmp_path / "gone").rmdir()
    assert store.list_runs() == []
    with pytest.raises(KeyError):
        store.read("gone")


def test_eight_ranks(tmp_path: Path) -> None:
    for rank in range(8):
        write_run(tmp_path / "dp", steps=10, rank=rank, world=8)
    store = store_of(tmp_path)
    (info,) = store.list_runs()
    assert info.ranks == tuple(range(8)) and info.n_records == 80
    merged = store.read("dp").frame
    assert len(merged) == 80
    assert list(merged["step"]) == sorted(merged["step"])
    assert list(merged["rank"][:8]) == list(range(8))
    three = store.read("dp", rank=3).frame
    assert set(three["rank"]) == {3} and three["loss"].iloc[0] == 4.0
    assert store.read("dp").logged("loss").all()
    with pytest.raises(KeyError):
        store.read("dp", rank=8)


def test_legacy_json_dumps_run_without_metadata(tmp_path: Path) -> None:
    run = tmp_path / "article"
    run.mkdir()
    lines = [
        {"step": s, "loss": math.nan if s == 2 else 1.0, "lr": 0.1, "throughput": 9.0, "ts": 50.0 + s}
        for s in (1, 2, 3)
    ]
    append(run / "metrics.jsonl", b"".join(legacy_line(r) for r in lines))
    store = store_of(tmp_path)
    (info,) = store.list_runs()
    assert (info.status, info.reason) == ("ended", "no status recorded") and info.meta == {}
    data = store.read("article")
    frame = data.frame
    assert list(frame["t"]) == [51.0, 52.0, 53.0] and "ts" not in frame
    assert math.isnan(frame["loss"].iloc[1]) and data.logged("loss").all()


def test_bad_lines_are_counted_with_offsets(tmp_path: Path) -> None:
    run = tmp_path / "r"
    run.mkdir()
    good = records(1, 2)
    append(run / "metrics.jsonl", good + b"{oops\n" + records(3, 3))
    store = store_of(tmp_path)
    (info,) = store.list_runs()
    assert info.bad_lines == 1 and info.n_records == 3
    ((path, bad),) = store.bad_lines("r")
    assert bad.offset == len(good) and path.name == "metrics.jsonl"


def test_threads_share_one_read_and_lose_nothing(tmp_path: Path) -> None:
    writer = write_run(tmp_path / "live", steps=1, close=False)
    store = store_of(tmp_path)
    store.list_runs()
    stop = threading.Event()
    errors: list[BaseException] = []

    def viewer() -> None:
        try:
            while not stop.is_set():
                frame = store.read("live").frame
                steps = frame["step"].to_numpy()
                assert (np.diff(steps) > 0).all()  # sorted, never a duplicate
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=viewer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for s in range(2, 2001):
        writer.log(step=s, loss=1.0)
        if s % 100 == 0:
            writer.flush()
    writer.close()
    stop.set()
    for thread in threads:
        thread.join(10)
    assert errors == []
    assert list(store.read("live").frame["step"]) == list(range(1, 2001))


def test_root_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_run(tmp_path / "envrun")
    monkeypatch.setenv("MONITOR_LOGDIR", str(tmp_path))
    assert [info.id for info in RunStore().list_runs()] == ["envrun"]
    assert json.loads((tmp_path / "envrun" / "metrics.meta.json").read_text())["status"] == "finished"
    assert os.path.isdir(RunStore().root)


def test_writer_load_cycle_through_the_store(tmp_path: Path) -> None:
    writer = MetricsWriter(tmp_path / "cycle")
    assert writer.flush()  # the file exists, still empty
    store = store_of(tmp_path)
    assert [(info.id, info.n_records) for info in store.list_runs()] == [("cycle", 0)]
    for first, last in ((1, 3), (4, 4), (5, 9)):
        for s in range(first, last + 1):
            writer.log(step=s, loss=float(s))
        assert writer.flush()
        assert store.poll() == last - first + 1  # only the new records
        assert store.poll() == 0  # and nothing twice
        assert list(store.read("cycle").frame["step"]) == list(range(1, last + 1))
    writer.close()


def test_resumed_writer_latest_segment_wins(tmp_path: Path) -> None:
    with MetricsWriter(tmp_path / "resume") as first:
        for s in range(1, 11):
            first.log(step=s, loss=1.0)
    with MetricsWriter(tmp_path / "resume") as second:  # restarts from a checkpoint at step 5
        for s in range(6, 13):
            second.log(step=s, loss=2.0)
    store = store_of(tmp_path)
    frame = store.read("resume").frame
    assert list(frame["step"]) == list(range(1, 13))
    assert list(frame["seg"]) == [1] * 5 + [2] * 7 and list(frame["loss"]) == [1.0] * 5 + [2.0] * 7
    every = store.read("resume", all_segments=True).frame
    assert len(every) == 17 and set(every.loc[every["step"] == 8, "loss"]) == {1.0, 2.0}
    assert store.run_info("resume").meta["segment"] == 2


def test_a_read_keeps_its_masks_after_other_threads_poll(tmp_path: Path) -> None:
    """Frame, masks and version travel together: nothing a later poll (any thread) reads changes a read."""
    for rank in (0, 1):
        write_run(tmp_path / "two", steps=5, rank=rank, world=2)
    write_run(tmp_path / "one", steps=5)
    store = store_of(tmp_path)
    mine = {run: store.read(run) for run in ("two", "one")}
    for run in ("two", "one"):
        path = next((tmp_path / run).glob("*.jsonl"))
        append(path, records(6, 9, eval_acc=0.5))
        other = threading.Thread(target=store.read, args=(run,))  # another session polls
        other.start()
        other.join()
        old = mine[run]
        assert len(old.logged("loss")) == len(old.frame) and old.logged("loss").all()
        assert "eval_acc" not in old.masks and "eval_acc" not in old.frame
        new = store.read(run)
        assert len(new) == len(old) + 4 and len(new.logged("loss")) == len(new)  # a new read sees the new rows
        assert new.version != old.version and new.key != old.key
        assert new.logged("eval_acc")[-4:].all() and not new.logged("eval_acc")[: len(old)].any()


def test_version_changes_exactly_when_the_rows_do(tmp_path: Path) -> None:
    for rank in (0, 1):
        write_run(tmp_path / "dp", steps=5, rank=rank, world=2)
    store = store_of(tmp_path)
    first, again = store.read("dp"), store.read("dp")
    assert first.key == again.key  # nothing new: the same data version
    assert first.frame is not again.frame  # but each reader has its own frame object
    first.frame["mine"] = 1.0  # so a reader adding a column touches nobody else
    assert "mine" not in store.read("dp").frame
    assert store.read("dp", rank=1).key != first.key != store.read("dp", all_segments=True).key
    append(next((tmp_path / "dp").glob("*rank1*.jsonl")), records(6, 6))
    assert store.read("dp").version != first.version


def test_masks_mapping_is_lazy_read_only_and_names_every_logged_column(tmp_path: Path) -> None:
    for rank in (0, 1):
        write_run(tmp_path / "dp", steps=5, rank=rank, world=2)
    data = store_of(tmp_path).read("dp")
    assert list(data.masks) == ["t", "loss", "lr"] and len(data.masks) == 3
    assert "step" not in data.masks and data.logged("step").all()  # step/rank/seg: always logged, not listed
    mask = data.masks["loss"]
    assert mask is data.masks["loss"]  # built once, then shared
    with pytest.raises(ValueError):
        mask[0] = False  # read-only: nobody can change what other readers see
    with pytest.raises(KeyError, match="no column 'nope'"):
        data.logged("nope")


def test_a_recent_listing_is_shared(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    append(tmp_path / "run" / "metrics.jsonl", records(1, 5))
    store = RunStore(tmp_path, rescan_interval_s=0)
    assert store.list_runs()[0].last_step == 5
    append(tmp_path / "run" / "metrics.jsonl", records(6, 7))
    assert store.list_runs(max_age=3600)[0].last_step == 5  # the listing of a moment ago
    assert store.list_runs()[0].last_step == 7  # a fresh one
    assert store.list_runs(max_age=3600)[0].last_step == 7


def test_rows_read_a_moment_ago_are_shared(tmp_path: Path) -> None:
    """read(max_age=): thirty viewers refreshing every second share a few data versions a second."""
    (tmp_path / "run").mkdir()
    append(tmp_path / "run" / "metrics.jsonl", records(1, 5))
    store = RunStore(tmp_path, rescan_interval_s=0)
    first = store.read("run")
    append(tmp_path / "run" / "metrics.jsonl", records(6, 7))
    shared = store.read("run", max_age=3600)
    assert shared.key == first.key and len(shared) == 5  # rows as read a moment ago, not read again
    fresh = store.read("run")
    assert len(fresh) == 7 and fresh.key != first.key
    assert store.read("run", max_age=3600).key == fresh.key
