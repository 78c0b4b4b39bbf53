"""The shipper against a real S3 API server (moto on 127.0.0.1): exactly the local bytes, whatever happens."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

from monitor_cb.storage.chunks import chunk_name
from monitor_cb.storage.objects import ObjectStore
from monitor_cb.storage.shipper import Shipper, UploadOptions, UploadWarning
from monitor_cb.storage.urls import StorageError
from monitor_cb.train.writer import MetricsWriter
from tests.objectstore import SECRET, S3Env, TcpProxy, list_keys, wait_for
from tests.storage.helpers import assembled, bucket_matches_local, chunk_spans

PREFIX = "runs/exp1"


def _log(writer: MetricsWriter, first: int, last: int) -> None:
    for step in range(first, last + 1):
        writer.log(step=step, loss=1.0 / step, lr=1e-3, note="x" * (step % 7))


def test_writer_upload_ships_exactly_the_local_bytes(s3_env: S3Env, tmp_path: Path) -> None:
    run = tmp_path / "exp1"
    options = UploadOptions(s3_env.url(PREFIX), interval_s=0.2, max_records=40)
    writer = MetricsWriter(run, rank=1, world_size=2, fsync_interval=0, upload=options)
    _log(writer, 1, 150)
    assert writer.flush()
    assert writer.shipper.flush(20)
    _log(writer, 151, 300)
    writer.close()
    bucket_matches_local(s3_env.endpoint, s3_env.bucket, PREFIX, run)
    objects = list_keys(s3_env.endpoint, s3_env.bucket, PREFIX)
    assert json.loads(objects[f"{PREFIX}/metrics.rank1.meta.json"])["status"] == "finished"
    assert len(chunk_spans(objects, f"{PREFIX}/metrics.rank1.jsonl.chunks")) >= 2  # shipped as it grew


def test_max_records_ships_before_the_interval(s3_env: S3Env, tmp_path: Path) -> None:
    options = UploadOptions(s3_env.url(PREFIX), interval_s=3600, max_records=20)
    writer = MetricsWriter(tmp_path / "exp1", rank=0, world_size=1, fsync_interval=0, upload=options)
    try:
        wait_for(lambda: writer.shipper.stats.metas, message="the first metadata upload")
        _log(writer, 1, 25)
        spans = wait_for(
            lambda: chunk_spans(list_keys(s3_env.endpoint, s3_env.bucket, PREFIX), f"{PREFIX}/metrics.jsonl.chunks"),
            message="a chunk shipped on the record count alone",
        )
        assert spans[0][0] == 0
    finally:
        writer.close()


def test_network_cut_and_recovery_lose_nothing(s3_env: S3Env, tmp_path: Path) -> None:
    proxy = TcpProxy(s3_env.endpoint)
    run = tmp_path / "exp1"
    options = UploadOptions(
        s3_env.url(PREFIX), interval_s=0.1, max_records=10, endpoint_url=proxy.endpoint, retry_max_s=0.5
    )
    writer = MetricsWriter(run, rank=0, world_size=1, fsync_interval=0, upload=options)
    try:
        _log(writer, 1, 50)
        assert writer.flush() and writer.shipper.flush(20)
        proxy.cut()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _log(writer, 51, 400)
            assert writer.flush(), "the local file must not wait for the network"
            wait_for(lambda: writer.shipper.stats.failures >= 2, message="failed uploads while cut")
        assert any(issubclass(w.category, UploadWarning) for w in caught)
        assert writer.written == 400 and writer.dropped == 0
        proxy.restore()
        assert writer.shipper.flush(30)
    finally:
        writer.close()
        proxy.close()
    bucket_matches_local(s3_env.endpoint, s3_env.bucket, PREFIX, run)


class _LostReply(ObjectStore):
    """The object is written, then the reply is lost once: the shipper must retry the very same range."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner.fs, inner.protocol)
        self.lost = 0

    def put(self, path: str, data: bytes) -> None:
        super().put(path, data)
        if ".chunks/" in path and not self.lost:
            self.lost += 1
            raise StorageError(f"connection reset after writing {path}")


def test_retry_after_a_lost_reply_rewrites_the_same_object(s3_env: S3Env, tmp_path: Path) -> None:
    run = tmp_path / "exp1"
    with MetricsWriter(run, rank=0, world_size=1, fsync_interval=0) as writer:
        _log(writer, 1, 10)
    store, _ = ObjectStore.open(s3_env.url(PREFIX))
    shipper = Shipper(run, UploadOptions(s3_env.url(PREFIX)), store=_LostReply(store))
    local = run / "metrics.jsonl"
    with pytest.warns(UploadWarning, match="connection reset"):
        assert not shipper._cycle()  # the whole file went up as one chunk, but the shipper cannot know
    with open(local, "ab") as handle:  # the file grows before the retry
        handle.write(b'{"step":11,"loss":0.5}\n')
    assert shipper.ship_all(10)
    # The retry rewrote [0, end) and shipped the new line on its own: no chunk overlaps another.
    assert assembled(list_keys(s3_env.endpoint, s3_env.bucket, PREFIX), f"{PREFIX}/metrics.jsonl.chunks") == (
        local.read_bytes()
    )


def test_restart_resumes_where_the_bucket_stands(s3_env: S3Env, tmp_path: Path) -> None:
    run = tmp_path / "exp1"
    writer = MetricsWriter(run, rank=0, world_size=1, fsync_interval=0)
    _log(writer, 1, 100)
    writer.flush()
    first = Shipper(run, UploadOptions(s3_env.url(PREFIX)))
    assert first.ship_all(10)
    shipped = first.stats.bytes
    _log(writer, 101, 200)
    writer.close()
    second = Shipper(run, UploadOptions(s3_env.url(PREFIX)))  # a restarted sync: no memory of the first
    assert second.ship_all(10)
    assert second.stats.bytes == (run / "metrics.jsonl").stat().st_size - shipped
    third = Shipper(run, UploadOptions(s3_env.url(PREFIX)))
    assert third.ship_all(10) and third.stats.chunks == 0  # nothing new: nothing sent
    bucket_matches_local(s3_env.endpoint, s3_env.bucket, PREFIX, run)


def test_a_replaced_local_file_is_shipped_again(s3_env: S3Env, tmp_path: Path) -> None:
    run = tmp_path / "exp1"
    run.mkdir()
    local = run / "metrics.jsonl"
    local.write_bytes(b'{"step":1,"loss":1}\n{"step":2,"loss":2}\n')
    shipper = Shipper(run, UploadOptions(s3_env.url(PREFIX)))
    assert shipper.ship_all(10)
    replacement = run / "new.tmp"
    replacement.write_bytes(b'{"step":1,"loss":9}\n')
    os.replace(replacement, local)
    with pytest.warns(UploadWarning, match="truncated or replaced"):
        assert shipper.ship_all(10)
    objects = list_keys(s3_env.endpoint, s3_env.bucket, PREFIX)
    assert assembled(objects, f"{PREFIX}/metrics.jsonl.chunks") == local.read_bytes()


def test_chunks_of_another_file_are_replaced_on_restart(s3_env: S3Env, tmp_path: Path) -> None:
    store, _ = ObjectStore.open(s3_env.url(PREFIX))
    stale = b'{"step":1,"loss":"old"}\n'
    store.put(f"{s3_env.bucket}/{PREFIX}/metrics.jsonl.chunks/{chunk_name(0, len(stale))}", stale)
    run = tmp_path / "exp1"
    run.mkdir()
    (run / "metrics.jsonl").write_bytes(b'{"step":1,"loss":1.0}\n{"step":2,"loss":0.5}\n')
    with pytest.warns(UploadWarning, match="another file"):
        assert Shipper(run, UploadOptions(s3_env.url(PREFIX))).ship_all(10)
    objects = list_keys(s3_env.endpoint, s3_env.bucket, PREFIX)
    assert assembled(objects, f"{PREFIX}/metrics.jsonl.chunks") == (run / "metrics.jsonl").read_bytes()


def test_a_partial_last_line_waits(s3_env: S3Env, tmp_path: Path) -> None:
    run = tmp_path / "exp1"
    run.mkdir()
    (run / "metrics.jsonl").write_bytes(b'{"step":1}\n{"step":2,"lo')
    shipper = Shipper(run, UploadOptions(s3_env.url(PREFIX)))
    shipper.ship_all(1)
    assert shipper.backlog() == 0
    objects = list_keys(s3_env.endpoint, s3_env.bucket, PREFIX)
    assert assembled(objects, f"{PREFIX}/metrics.jsonl.chunks") == b'{"step":1}\n'


def test_close_with_the_network_down_warns_how_to_finish(s3_env: S3Env, tmp_path: Path) -> None:
    proxy = TcpProxy(s3_env.endpoint)
    proxy.cut()
    run = tmp_path / "exp1"
    options = UploadOptions(s3_env.url(PREFIX), endpoint_url=proxy.endpoint, close_timeout_s=0.5, retry_max_s=0.2)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with MetricsWriter(run, rank=0, world_size=1, fsync_interval=0, upload=options) as writer:
                _log(writer, 1, 30)
        text = "\n".join(str(w.message) for w in caught if issubclass(w.category, UploadWarning))
        assert "python -m monitor_cb sync" in text and "not uploaded" in text
        assert (run / "metrics.jsonl").read_bytes().count(b"\n") == 30  # the local file is complete
    finally:
        proxy.close()


def test_credentials_never_reach_files_metadata_or_warnings(
    s3_env: S3Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url_secret = "UrlSecretValue-777-xyz"
    url = f"s3://AKIDURLKEY0001:{url_secret}@{s3_env.bucket}/{PREFIX}"
    monkeypatch.setattr("sys.argv", ["train.py", "--upload", url, "--key", SECRET])
    run = tmp_path / "exp1"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer = MetricsWriter(run, rank=0, world_size=1, fsync_interval=0, upload=url)
        assert url_secret not in repr(writer.shipper.options)
        _log(writer, 1, 20)
        writer.close()
    written = b"".join(p.read_bytes() for p in run.rglob("*") if p.is_file())
    written += b"".join(list_keys(s3_env.endpoint, s3_env.bucket).values())
    written += "\n".join(str(w.message) for w in caught).encode()
    for secret in (url_secret, SECRET, "AKIDURLKEY0001"):
        assert secret.encode() not in written
    meta = json.loads((run / "metrics.meta.json").read_bytes())
    assert meta["argv"][2] == f"s3://***@{s3_env.bucket}/{PREFIX}"


def test_a_bad_upload_url_fails_before_training(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no bucket"):
        MetricsWriter(tmp_path / "exp1", upload="s3:///nobucket")
    assert not (tmp_path / "exp1").exists()
