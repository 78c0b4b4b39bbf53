"""A large first read handed to polars as a file gives the rows the usual paths give, or is not used."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from pandas.testing import assert_frame_equal

from monitor_cb.ingest import parse as parse_module
from monitor_cb.ingest import tail as tail_module
from monitor_cb.ingest.source import MetricsSource
from tests.ingest.helpers import legacy_line, line


def lines(steps: range, **extra: object) -> bytes:
    out = []
    for s in steps:
        rec: dict[str, object] = {"step": s, "t": 100.0 + s, "loss": 1.0 / s, "lr": 1e-3, **extra}
        if s % 50 == 0:
            rec["eval_acc"] = 0.5  # a key a sample may miss
        if s % 7 == 0:
            rec["phase"] = "warm"
        out.append(line(rec))
    return b"".join(out)


def read(path: Path, **kwargs: object) -> MetricsSource:
    source = MetricsSource(path, **kwargs)  # type: ignore[arg-type]
    source.poll()
    return source


@pytest.mark.parametrize(
    ("data", "whole"),
    [
        (lines(range(1, 3000)), True),
        (lines(range(1, 3000)) + line({"step": 3000, "loss": float("nan")}), False),  # a NaN token
        (lines(range(1, 3000)) + b'{"step": 3000, "lo', False),  # a line still being written
        (lines(range(1, 3000)) + b"not json\n", False),  # a bad line: polars refuses the file
    ],
)
def test_whole_file_read_matches_the_line_path(tmp_path: Path, monkeypatch, data: bytes, whole: bool) -> None:
    monkeypatch.setattr(tail_module, "WHOLE_MIN_BYTES", 1)
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(data)
    fast = read(path, bulk_min_bytes=1)
    careful = read(path, bulk_min_bytes=1 << 40)
    if whole:
        assert fast.parser.bulk_chunks == 1
    _, frame, masks = fast.frame_and_masks()
    _, want, want_masks = careful.frame_and_masks()
    assert_frame_equal(frame, want)
    assert sorted(masks) == sorted(want_masks)
    for name, mask in want_masks.items():
        assert np.array_equal(masks[name], mask), name
    assert (fast.bad_count, fast.tail.offset, fast.tail.pending) == (
        careful.bad_count,
        careful.tail.offset,
        careful.tail.pending,
    )
    with open(path, "ab") as handle:  # and it goes on from where it stopped
        handle.write(lines(range(5000, 5010)))
    assert fast.poll() == careful.poll() > 0
    assert_frame_equal(fast.frame(), careful.frame())


def between(special: bytes) -> bytes:
    """``special`` (step 1500) in the middle of a file, where the key sample does not look."""
    return lines(range(1, 1500)) + special + lines(range(1501, 3000))


@pytest.mark.parametrize(
    ("special", "whole"),
    [
        (legacy_line({"step": 1500, "loss": float("-inf")}), False),  # a bare token
        (line({"step": 1500, "loss": float("nan")}), False),  # the collector's "NaN"
        (line({"step": 1500, "phase": float("inf")}), False),  # in a text column
        (b'{"step": 1500, "phase": "NaN"}\n', False),  # text that the other paths read as a number
        (b'{"step": 1500, "phase": "-Infinity"}\n', False),
        (line({"step": 1500, "rare": float("nan")}), False),  # under a key outside the schema
        (line({"step": 1500, "phase": "NaN at 1499"}), True),  # text that is text
    ],
)
def test_a_non_finite_value_the_sample_missed_reads_as_the_line_path_reads_it(
    tmp_path: Path, monkeypatch, special: bytes, whole: bool
) -> None:
    monkeypatch.setattr(parse_module, "_SAMPLE_POINTS", 0)  # the sample: the first lines and the last
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(between(special))
    careful = read(path, bulk_min_bytes=1 << 40)  # the line path (the file is below WHOLE_MIN_BYTES)
    monkeypatch.setattr(tail_module, "WHOLE_MIN_BYTES", 1)
    fast = read(path, bulk_min_bytes=1 << 40)  # the whole-file read, else the line path
    assert fast.parser.bulk_chunks == int(whole)
    assert careful.parser.bulk_chunks == 0
    assert_frame_equal(fast.frame(), careful.frame())
    assert fast.bad_count == careful.bad_count


def test_a_whole_file_read_is_used_for_a_large_first_read(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tail_module, "WHOLE_MIN_BYTES", 1)
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(lines(range(1, 3000)))
    calls = []
    original = tail_module.FileTail.read_whole

    def spy(self, parse, min_bytes=None):  # type: ignore[no-untyped-def]
        result = original(self, parse, min_bytes)
        calls.append(result is not None)
        return result

    monkeypatch.setattr(tail_module.FileTail, "read_whole", spy)
    source = read(path)
    assert calls == [True] and source.tail.offset == path.stat().st_size


def test_columns_converted_two_at_a_time_give_the_same_rows(tmp_path: Path, monkeypatch) -> None:
    """A long file's columns go to numpy in a small thread pool (bulk.PARALLEL_ROWS): same rows and masks."""
    from monitor_cb.ingest import bulk

    monkeypatch.setattr(tail_module, "WHOLE_MIN_BYTES", 1)
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(lines(range(1, 3000), grad_norm=2.5))
    serial = read(path, bulk_min_bytes=1)
    monkeypatch.setattr(bulk, "PARALLEL_ROWS", 1)
    monkeypatch.setattr(bulk, "_POOL", {})
    pooled = read(path, bulk_min_bytes=1)
    assert pooled.parser.bulk_chunks == serial.parser.bulk_chunks == 1
    assert bulk._POOL, "the pool was used"
    _, frame, masks = pooled.frame_and_masks()
    _, want, want_masks = serial.frame_and_masks()
    assert_frame_equal(frame, want)
    assert sorted(masks) == sorted(want_masks)
    for name, mask in want_masks.items():
        assert np.array_equal(masks[name], mask), name


def test_the_colon_count_waits_for_polars_and_a_failed_count_is_no_count() -> None:
    from monitor_cb.ingest.bulk import _CountWhile

    ran: list[str] = []
    counter = _CountWhile(lambda: ran.append("count") or 7)
    assert ran == []  # not before go(): it would hold the GIL the parse needs
    counter.go()
    assert counter() == 7 and ran == ["count"]
    assert _CountWhile(lambda: 1 // 0)() is None  # the caller then reads the file the usual way


REAL_RUNS = Path(
    os.environ.get("MONITOR_REAL_RUNS") or Path(__file__).resolve().parents[2] / ".." / "shared" / "real_runs"
)


def test_every_real_run_reads_the_same_through_the_whole_file_path(monkeypatch) -> None:
    """Runs written by others (evals merged into train steps, "NaN" strings, uneven steps, missing
    keys): the polars whole-file read and the line path give the same rows, or it stands aside."""
    files = sorted(REAL_RUNS.glob("*/metrics.jsonl"))
    if not files:
        pytest.skip(f"the real-runs corpus is not at {REAL_RUNS}")
    careful = {path: read(path, bulk_min_bytes=1 << 40) for path in files}  # below WHOLE_MIN_BYTES
    monkeypatch.setattr(tail_module, "WHOLE_MIN_BYTES", 1)
    whole = 0
    for path in files:
        fast = read(path, bulk_min_bytes=1 << 40)
        whole += fast.parser.bulk_chunks
        _, frame, masks = fast.frame_and_masks()
        _, want, want_masks = careful[path].frame_and_masks()
        assert_frame_equal(frame, want, obj=path.parent.name)
        assert {k: m.tolist() for k, m in masks.items()} == {k: m.tolist() for k, m in want_masks.items()}
        assert fast.bad_count == careful[path].bad_count, path.parent.name
    assert whole >= len(files) // 2, f"the whole-file path read only {whole} of {len(files)} real runs"
