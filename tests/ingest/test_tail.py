"""FileTail: TensorBoard's directory-loader cycle and each way a file can change under it."""

from __future__ import annotations

import os
from pathlib import Path

from monitor_cb.ingest.tail import FileTail, Skipped
from tests.ingest.helpers import append, drain, line, records, replace_file


def steps(lines: list[bytes]) -> list[int]:
    import orjson

    return [orjson.loads(x)["step"] for x in lines]


def test_load_cycle_yields_only_new_records(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    tail = FileTail(path)
    assert drain(tail) == ([], 0)  # no file yet: nothing, no error
    append(path, records(1, 3))
    assert steps(drain(tail)[0]) == [1, 2, 3]
    assert drain(tail) == ([], 0)
    append(path, records(4, 4))
    assert steps(drain(tail)[0]) == [4]
    assert drain(tail) == ([], 0)
    append(path, records(5, 7))
    assert steps(drain(tail)[0]) == [5, 6, 7]
    assert drain(tail) == ([], 0)


def test_partial_line_is_not_yet_then_read_once_completed(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    whole = line({"step": 2, "loss": 0.5})
    append(path, records(1, 1) + whole[:10])
    assert steps(drain(tail := FileTail(path))[0]) == [1]
    assert tail.pending == 10
    assert drain(tail) == ([], 0)
    append(path, whole[10:-1])  # still no newline
    assert drain(tail) == ([], 0)
    append(path, b"\n")
    assert steps(drain(tail)[0]) == [2]
    assert tail.pending == 0


def test_truncation_restarts_from_zero(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    append(path, records(1, 5))
    tail = FileTail(path)
    drain(tail)
    path.write_bytes(records(1, 2))  # shorter than what was read
    lines, resets = drain(tail)
    assert resets == 1
    assert steps(lines) == [1, 2]


def test_truncate_then_regrow_past_old_offset(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    append(path, records(1, 3))
    tail = FileTail(path)
    drain(tail)
    old_size = path.stat().st_size
    path.write_bytes(records(100, 110))  # same inode, now longer than the old offset
    assert path.stat().st_size > old_size
    lines, resets = drain(tail)
    assert resets == 1
    assert steps(lines) == list(range(100, 111))


def test_rename_replace_is_a_new_file(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    append(path, records(1, 3))
    tail = FileTail(path)
    drain(tail)
    replace_file(path, records(50, 60))
    lines, resets = drain(tail)
    assert resets == 1
    assert steps(lines) == list(range(50, 61))


def test_delete_and_recreate_with_the_same_inode(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    append(path, records(1, 3))
    tail = FileTail(path)
    drain(tail)
    path.unlink()
    assert drain(tail) == ([], 0) and tail.missing
    append(path, records(7, 20))  # filesystems hand the freed inode straight back, usually
    lines, resets = drain(tail)
    assert resets == 1 and steps(lines) == list(range(7, 21))
    # The same inode for certain: new bytes written over the old ones, the file only growing.
    tail = FileTail(path)
    drain(tail)
    inode = os.stat(path).st_ino
    with open(path, "r+b") as handle:
        handle.write(records(300, 330))
    assert os.stat(path).st_ino == inode
    lines, resets = drain(tail)
    assert resets == 1 and steps(lines) == list(range(300, 331))


def test_overlong_partial_line_is_skipped_not_buffered(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    tail = FileTail(path, line_cap=1 << 20)
    append(path, records(1, 1) + b'{"step":2,"blob":"' + b"x" * (5 << 20))
    items = list(tail.poll())
    skipped = [item for item in items if isinstance(item, Skipped)]
    assert len(skipped) == 1 and skipped[0].offset == len(records(1, 1))
    assert tail.offset == path.stat().st_size  # the giant partial was not kept in memory
    append(path, b"y" * 1000 + b'"}\n' + records(3, 4))
    lines, _ = drain(tail)
    assert steps(lines) == [3, 4]


def test_symlink_leaving_the_root_is_never_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(records(1, 3))
    root = tmp_path / "root"
    root.mkdir()
    link = root / "metrics.jsonl"
    link.symlink_to(outside)
    assert drain(FileTail(link, root=root)) == ([], 0)
    inside = root / "real.jsonl"
    inside.write_bytes(records(1, 2))
    (root / "alias.jsonl").symlink_to(inside)
    assert steps(drain(FileTail(root / "alias.jsonl", root=root))[0]) == [1, 2]


def test_rewrite_behind_the_offset_with_the_same_start_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    start = records(1, 200)  # well over the 4 KiB fingerprinted at the head
    assert len(start) > 2 * 4096
    path.write_bytes(start + records(201, 210))
    tail = FileTail(path)
    drain(tail)
    path.write_bytes(start + records(500, 530))  # same head, different bytes before the old offset
    lines, resets = drain(tail)
    assert resets == 1
    assert steps(lines) == list(range(1, 201)) + list(range(500, 531))


def test_a_whole_file_read_reads_the_file_checked_even_if_its_name_is_swapped(tmp_path: Path) -> None:
    """polars opens the whole file by name: it is given the descriptor's own name, so a link out of the root
    (or a FIFO) swapped in after the check is never what it reads."""
    import polars as pl

    from monitor_cb.ingest.tail import _by_descriptor

    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"step": 1, "loss": 0.5}\n')
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_bytes(b'{"step": 1, "loss": 999.0}\n')
    fd = os.open(path, os.O_RDONLY)
    try:
        path.unlink()
        path.symlink_to(outside)  # swapped after the open
        assert pl.read_ndjson(_by_descriptor(fd, path))["loss"].to_list() == [0.5]
    finally:
        os.close(fd)
