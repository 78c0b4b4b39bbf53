"""monitor_cb.rootfile: a file of a shared root is opened as untrusted data (never hangs, never past a cap)."""

from __future__ import annotations

import json
import os

import pytest

from monitor_cb.rootfile import (
    UnsafeFileError,
    create_new,
    is_regular,
    open_regular,
    read_capped,
    read_json,
    read_tail,
    temp_beside,
    write_atomic,
)


def test_reads_a_small_regular_file(tmp_path):
    path = tmp_path / "meta.json"
    path.write_text(json.dumps({"status": "finished"}))
    assert read_json(path, 1024, root=tmp_path) == {"status": "finished"}
    assert is_regular(path)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "metrics.meta.json"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeFileError, match="FIFO"):
        read_capped(fifo, 1024, root=tmp_path)
    assert not is_regular(fifo)


def test_a_device_is_refused(tmp_path):
    link = tmp_path / "index.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(UnsafeFileError, match="outside the log root"):
        read_capped(link, 1024, root=tmp_path)
    with pytest.raises(UnsafeFileError, match="device"):
        read_capped("/dev/zero", 1024)


def test_a_file_past_its_cap_is_refused_before_reading(tmp_path):
    sparse = tmp_path / "diagnosis.json"
    with open(sparse, "wb") as f:
        f.truncate(3 * 1024**3)  # 3 GB, sparse: nothing is read
    with pytest.raises(UnsafeFileError, match="over the 1,024-byte cap"):
        read_capped(sparse, 1024, root=tmp_path)


def test_a_link_out_of_the_root_is_refused_and_one_inside_is_followed(tmp_path):
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    outside = tmp_path / "forged.json"
    outside.write_text('{"steps": 987654}')
    (root / "a" / "index.json").symlink_to(outside)
    with pytest.raises(UnsafeFileError, match="outside the log root"):
        read_json(root / "a" / "index.json", 1024, root=root)
    real = root / "a" / "real.json"
    real.write_text("{}")
    (root / "a" / "latest.json").symlink_to(real)
    assert read_json(root / "a" / "latest.json", 1024, root=root) == {}


def test_a_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_capped(tmp_path / "nope", 10, root=tmp_path)


def test_a_folder_is_refused(tmp_path):
    (tmp_path / "x.json").mkdir()
    with pytest.raises(UnsafeFileError, match="folder"), open_regular(tmp_path / "x.json", root=tmp_path):
        pass


def test_not_json_is_a_value_error(tmp_path):
    path = tmp_path / "bad.json"
    path.write_bytes(b"\xff\xfe not json")
    with pytest.raises(ValueError):
        read_json(path, 1024)


def test_write_atomic_replaces_a_planted_fifo_or_link_and_never_writes_through(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    os.mkfifo(root / "index.json")
    (root / "settings.json").symlink_to(victim)
    for name in ("index.json", "settings.json"):
        write_atomic(root / name, b"{}")  # a FIFO opened for writing would block; a link would be followed
        assert (root / name).is_file() and not (root / name).is_symlink()
        assert (root / name).read_bytes() == b"{}"
    assert victim.read_text() == "untouched"
    assert [p.name for p in root.iterdir() if p.name.endswith(".tmp")] == []


def test_temporary_names_cannot_be_planted(tmp_path):
    """The old temporary names were predictable (pid): a FIFO or a link planted there was written through."""
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    target = tmp_path / "diagnosis.json"
    (tmp_path / f".{target.name}.{os.getpid()}.tmp").symlink_to(victim)
    os.mkfifo(tmp_path / f".{target.name}.{os.getpid()}.0.tmp")
    fd, tmp = temp_beside(target)
    os.close(fd)
    assert tmp.is_file() and not tmp.is_symlink() and tmp.parent == tmp_path
    assert victim.read_text() == "untouched"


def test_create_new_replaces_a_fifo_or_link(tmp_path):
    victim = tmp_path / "victim.log"
    victim.write_text("untouched")
    log = tmp_path / "demo.log"
    for plant in (lambda: os.mkfifo(log), lambda: log.symlink_to(victim)):
        plant()
        fd = create_new(log)
        os.write(fd, b"out")
        os.close(fd)
        assert log.read_bytes() == b"out" and not log.is_symlink()
        log.unlink()
    assert victim.read_text() == "untouched"


def test_read_tail_gives_the_last_bytes_and_refuses_a_fifo(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"step":1}\n{"step":2}\n')
    assert read_tail(path, 11) == b'{"step":2}\n'
    assert read_tail(path, 1000) == path.read_bytes()
    os.mkfifo(tmp_path / "fifo.jsonl")
    with pytest.raises(UnsafeFileError, match="FIFO"):
        read_tail(tmp_path / "fifo.jsonl", 10)
