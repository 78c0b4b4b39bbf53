"""A log root on a real S3 API server (moto on 127.0.0.1): the store reads it as it reads a directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pandas.testing import assert_frame_equal

from monitor_cb.ingest import RunStore
from monitor_cb.ingest.remote import RemotePath, RemoteReadOptions, RemoteRoot
from monitor_cb.storage.objects import ObjectStore
from monitor_cb.storage.shipper import Shipper, UploadOptions
from monitor_cb.train.writer import MetricsWriter
from tests.objectstore import SECRET, S3Env, TcpProxy

EAGER = RemoteReadOptions(poll_interval_s=0, idle_poll_s=0, final_poll_s=0, active_relist_s=0, idle_relist_s=0)
REAL_RUNS = Path(
    os.environ.get("MONITOR_REAL_RUNS") or Path(__file__).resolve().parents[2] / ".." / "shared" / "real_runs"
)


def remote_store(url: str, read: RemoteReadOptions = EAGER, **kwargs: object) -> RunStore:
    return RunStore(RemoteRoot(url, read=read, **kwargs), rescan_interval_s=0)  # type: ignore[arg-type]


def write(run: Path, rank: int, world: int, steps: range, close: bool = True) -> MetricsWriter:
    writer = MetricsWriter(run, rank=rank, world_size=world, fsync_interval=0)
    for step in steps:
        writer.log_at(1.7e9 + step, step=step, loss=1.0 / step if step % 17 else float("nan"), lr=1e-3)
    writer.flush()
    if close:
        writer.close()
    return writer


def ship(local: Path, url: str) -> Shipper:
    shipper = Shipper(local, UploadOptions(url))
    assert shipper.ship_all(20)
    return shipper


def test_remote_runs_read_as_local_ones(s3_env: S3Env, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    write(logs / "exp1", 0, 1, range(1, 120))
    write(logs / "group" / "exp2", 0, 2, range(1, 80))
    write(logs / "group" / "exp2", 1, 2, range(1, 80))
    ship(logs, s3_env.url("root"))
    local, remote = RunStore(logs), remote_store(s3_env.url("root"))
    local_runs = {r.id: r for r in local.list_runs()}
    remote_runs = {r.id: r for r in remote.list_runs()}
    assert set(remote_runs) == {"exp1", "group/exp2"} == set(local_runs)
    for run_id, info in remote_runs.items():
        mine = local_runs[run_id]
        assert (info.name, info.status, info.ranks, info.n_records, info.first_step, info.last_step) == (
            mine.name,
            mine.status,
            mine.ranks,
            mine.n_records,
            mine.first_step,
            mine.last_step,
        )
        assert str(info.path) == f"s3://{s3_env.bucket}/root/{run_id}"
        assert_frame_equal(remote.read(run_id).frame, local.read(run_id).frame)
        assert (remote.read(run_id).logged("loss") == local.read(run_id).logged("loss")).all()


def test_a_run_url_as_its_own_root(s3_env: S3Env, tmp_path: Path) -> None:
    write(tmp_path / "exp1", 0, 1, range(1, 30))
    ship(tmp_path / "exp1", s3_env.url("runs", "exp1"))
    store = remote_store(s3_env.url("runs", "exp1"))
    (info,) = store.list_runs()
    assert (info.id, info.name, info.n_records) == (".", "exp1", 29)


def test_live_reads_only_new_chunks_and_counts_requests(s3_env: S3Env, tmp_path: Path) -> None:
    run = tmp_path / "exp1"
    writer = write(run, 0, 1, range(1, 50), close=False)
    shipper = ship(run, s3_env.url("root", "exp1"))
    store = remote_store(s3_env.url("root"))
    root = store.remote
    assert store.list_runs()[0].n_records == 49
    before = root.requests
    assert store.list_runs()[0].n_records == 49
    idle = root.requests - before
    assert idle <= 3, f"{idle} requests for a poll that found nothing new (root, run directory, one file)"
    for step in range(50, 60):
        writer.log_at(1.7e9 + step, step=step, loss=0.1)
    writer.flush()
    assert shipper.ship_all(10)
    before = root.requests
    (info,) = store.list_runs()
    assert (info.n_records, info.last_step) == (59, 59)
    assert root.requests - before <= idle + 1  # plus the one new chunk, read once
    writer.close()
    assert shipper.ship_all(10)
    assert store.list_runs()[0].status == "finished"


def test_polls_are_spaced_by_the_read_options(s3_env: S3Env, tmp_path: Path) -> None:
    for name in ("exp1", "exp2", "exp3"):
        write(tmp_path / name, 0, 1, range(1, 20))
    ship(tmp_path, s3_env.url("root"))
    now = [0.0]
    read = RemoteReadOptions(idle_relists_per_scan=2)
    store = RunStore(RemoteRoot(s3_env.url("root"), read=read, clock=lambda: now[0]), rescan_interval_s=1e9)
    store.list_runs()
    root = store.remote
    before = root.requests
    for _ in range(5):
        store.list_runs()
    assert root.requests == before  # within poll_interval_s: no request at all
    now[0] += read.final_poll_s + 1  # finished files are looked at again after final_poll_s...
    store.list_runs()
    assert root.requests == before + 2  # ...but only idle_relists_per_scan of them per rescan
    store.list_runs()
    assert root.requests == before + 2
    store.refresh(force=True)  # a rescan: one root listing, and budget for the third file
    store.list_runs()
    assert root.requests == before + 2 + 1 + 1


def test_resets_when_the_chunks_are_replaced_by_another_file(s3_env: S3Env, tmp_path: Path) -> None:
    run = tmp_path / "exp1"
    write(run, 0, 1, range(1, 40))
    ship(tmp_path, s3_env.url("root"))
    store = remote_store(s3_env.url("root"))
    assert store.list_runs()[0].n_records == 39
    store_ops, _ = ObjectStore.open(s3_env.url("root"))
    chunk_dir = f"{s3_env.bucket}/root/exp1/metrics.jsonl.chunks"
    store_ops.delete([e.path for e in store_ops.list_prefix(chunk_dir + "/")])
    for path in run.iterdir():
        path.unlink()
    write(run, 0, 1, range(100, 110))  # a new run under the same name
    ship(tmp_path, s3_env.url("root"))
    (info,) = store.list_runs()
    assert (info.n_records, info.first_step) == (10, 100)
    (source,) = store._runs["exp1"].sources.values()
    assert source.tail.resets == 1
    assert_frame_equal(store.read("exp1").frame, RunStore(tmp_path).read("exp1").frame)


def test_compacted_chunks_are_not_read_twice(s3_env: S3Env, tmp_path: Path) -> None:
    run = tmp_path / "exp1"
    writer = write(run, 0, 1, range(1, 30), close=False)
    shipper = ship(run, s3_env.url("root", "exp1"))
    for step in range(30, 60):
        writer.log_at(1.7e9 + step, step=step, loss=0.5)
    writer.close()
    shipper.ship_all(10)
    store = remote_store(s3_env.url("root"))
    assert store.list_runs()[0].n_records == 59
    # Merge every chunk into one object covering the same bytes, then delete the small ones.
    ops, _ = ObjectStore.open(s3_env.url("root"))
    chunk_dir = f"{s3_env.bucket}/root/exp1/metrics.jsonl.chunks"
    old = [e.path for e in ops.list_prefix(chunk_dir + "/")]
    data = (run / "metrics.jsonl").read_bytes()
    ops.put(f"{chunk_dir}/{0:016d}-{len(data):016d}.jsonl", data)
    ops.delete(old)
    (info,) = store.list_runs()
    (source,) = store._runs["exp1"].sources.values()
    assert info.n_records == 59 and source.tail.resets == 0
    fresh = remote_store(s3_env.url("root"))
    assert_frame_equal(fresh.read("exp1").frame, store.read("exp1").frame)


def test_a_chunk_cut_short_waits_until_complete(s3_env: S3Env, tmp_path: Path) -> None:
    ops, _ = ObjectStore.open(s3_env.url("root"))
    base = f"{s3_env.bucket}/root/exp1/metrics.jsonl.chunks"
    first, second = b'{"step":1,"loss":1}\n', b'{"step":2,"loss":2}\n'
    ops.put(f"{base}/{0:016d}-{len(first):016d}.jsonl", first)
    name = f"{base}/{len(first):016d}-{len(first) + len(second):016d}.jsonl"
    ops.put(name, second[:7])  # a store that shows an object before all its bytes
    store = remote_store(s3_env.url("root"))
    (info,) = store.list_runs()
    assert info.n_records == 1
    (source,) = store._runs["exp1"].sources.values()
    assert source.tail.pending == 7
    ops.put(name, second)
    assert store.list_runs()[0].n_records == 2


def test_a_plain_object_replaced_as_it_grows(s3_env: S3Env, tmp_path: Path) -> None:
    """``aws s3 sync`` uploads the whole file again each time: only the new bytes are read."""
    ops, _ = ObjectStore.open(s3_env.url("root"))
    key = f"{s3_env.bucket}/root/exp1/metrics.jsonl"
    lines = [f'{{"step":{s},"loss":{1 / s}}}\n'.encode() for s in range(1, 200)]
    ops.put(key, b"".join(lines[:100]) + b'{"step":101,')  # a torn last line
    store = remote_store(s3_env.url("root"))
    assert store.list_runs()[0].n_records == 100
    (source,) = store._runs["exp1"].sources.values()
    assert source.tail.pending > 0
    ops.put(key, b"".join(lines))
    assert store.list_runs()[0].n_records == 199 and source.tail.resets == 0
    ops.put(key, b"".join(lines[:50]))  # cut short: as a truncated local file
    assert store.list_runs()[0].n_records == 50 and source.tail.resets == 1
    ops.put(key, b'{"step":1000,"loss":7}\n' + b"".join(lines[1:60]))  # longer, other bytes at the start
    info = store.list_runs()[0]
    assert source.tail.resets == 2 and (info.n_records, info.first_step, info.last_step) == (60, 2, 1000)


def test_lost_network_keeps_what_was_read_and_recovers(s3_env: S3Env, tmp_path: Path) -> None:
    proxy = TcpProxy(s3_env.endpoint)
    try:
        run = tmp_path / "exp1"
        writer = write(run, 0, 1, range(1, 20), close=False)
        shipper = ship(run, s3_env.url("root", "exp1"))
        store = remote_store(s3_env.url("root"), endpoint_url=proxy.endpoint)
        assert store.list_runs()[0].n_records == 19
        proxy.cut()
        runs = store.list_runs()  # no exception: the last listing stands
        assert runs[0].n_records == 19
        error = store.remote.last_error
        assert error and s3_env.bucket in error and SECRET not in error
        for step in range(20, 30):
            writer.log_at(1.7e9 + step, step=step, loss=0.1)
        writer.close()
        shipper.ship_all(10)
        proxy.restore()
        assert store.list_runs()[0].n_records == 29
    finally:
        proxy.close()


def test_an_unreachable_root_is_a_clear_error(s3_env: S3Env) -> None:
    proxy = TcpProxy(s3_env.endpoint)
    proxy.cut()
    try:
        with pytest.raises(OSError) as info:
            RunStore(RemoteRoot(s3_env.url("root"), endpoint_url=proxy.endpoint)).list_runs()
        assert f"s3://{s3_env.bucket}/root" in str(info.value) and SECRET not in str(info.value)
    finally:
        proxy.close()


def test_remote_path_prints_as_its_url() -> None:
    path = RemotePath.for_protocol("s3")("bucket/root/exp1")
    assert str(path) == "s3://bucket/root/exp1" and path.key == "bucket/root/exp1"
    assert str(path / "metrics.jsonl") == "s3://bucket/root/exp1/metrics.jsonl"
    assert path.name == "exp1" and isinstance(path.parent, RemotePath)


@pytest.mark.skipif(not REAL_RUNS.is_dir(), reason="the real_runs corpus is not here")
def test_real_runs_read_back_identical(s3_env: S3Env) -> None:
    """Every run of the corpus, shipped by ``sync``'s shipper and read from the bucket, equals the local read."""
    runs = sorted(p for p in REAL_RUNS.iterdir() if p.is_dir())[::5]  # 16 of the 81: a spread, in seconds
    for run in runs:
        ship(run, s3_env.url("real", run.name))
    remote = remote_store(s3_env.url("real"))
    found = {info.id: info for info in remote.list_runs()}
    local = RunStore(REAL_RUNS)
    local_ids = {info.id for info in local.list_runs()}
    checked = 0
    for run in runs:
        if run.name not in local_ids:
            continue
        assert run.name in found
        assert_frame_equal(remote.read(run.name).frame, local.read(run.name).frame)
        assert found[run.name].bad_lines == local.run_info(run.name).bad_lines
        checked += 1
    assert checked >= 8


def test_a_key_turning_numeric_is_read_again_from_the_bucket(s3_env: S3Env, tmp_path: Path) -> None:
    """Text first, numbers in a later poll: the remote file is read again, the text counted as bad."""
    run = tmp_path / "exp1"
    writer = MetricsWriter(run, rank=0, world_size=1, fsync_interval=0)
    writer.log_at(1.7e9 + 1, step=1, loss=1.0, acc="n/a")
    writer.flush()
    shipper = ship(run, s3_env.url("root", "exp1"))
    store = remote_store(s3_env.url("root"))
    assert store.read("exp1").frame["acc"].tolist() == ["n/a"]
    for step in range(2, 6):
        writer.log_at(1.7e9 + step, step=step, loss=1.0 / step, acc=step / 10)
    writer.close()
    assert shipper.ship_all(20)
    frame = store.read("exp1").frame
    assert frame["acc"].dtype == float and frame["acc"].tolist()[1:] == [0.2, 0.3, 0.4, 0.5]
    assert store.run_info("exp1").bad_lines == 1 and frame["step"].tolist() == [1, 2, 3, 4, 5]
