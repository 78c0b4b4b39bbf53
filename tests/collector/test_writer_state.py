"""MetricsWriter: whatever a previous run left on disk never raises into training; wrong arguments do, clearly."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from monitor_cb.train.writer import MetricsWriter, MonitorWarning


def lines(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def meta_of(run: Path) -> dict[str, Any]:
    return json.loads((run / "metrics.meta.json").read_text())


def put_meta(text: bytes) -> Callable[[Path], None]:
    def make(run: Path) -> None:
        (run / "metrics.meta.json").write_bytes(text)

    return make


def huge_meta(run: Path) -> None:
    with open(run / "metrics.meta.json", "wb") as handle:
        handle.write(b'{"segment": 3, "pad": "')
        handle.write(b"x" * (4 << 20))
        handle.write(b'"}')


def directory_meta(run: Path) -> None:
    (run / "metrics.meta.json").mkdir()


def fifo_meta(run: Path) -> None:
    os.mkfifo(run / "metrics.meta.json")


def symlink_to_fifo_meta(run: Path) -> None:
    os.mkfifo(run / "elsewhere")
    (run / "metrics.meta.json").symlink_to(run / "elsewhere")


def symlink_loop_meta(run: Path) -> None:
    (run / "metrics.meta.json").symlink_to(run / "metrics.meta.json")


def dangling_symlink_meta(run: Path) -> None:
    (run / "metrics.meta.json").symlink_to(run / "nowhere" / "meta.json")


HOSTILE_META: dict[str, Callable[[Path], None]] = {
    "segment-text": put_meta(b'{"segment": "abc"}'),
    "segment-list": put_meta(b'{"segment": [1]}'),
    "segment-1e400": put_meta(b'{"segment": 1e400}'),
    "segment-NaN": put_meta(b'{"segment": NaN}'),
    "segment-negative": put_meta(b'{"segment": -5}'),
    "segment-bool": put_meta(b'{"segment": true}'),
    "segment-float": put_meta(b'{"segment": 2.5}'),
    "segment-huge": put_meta(b'{"segment": 1e300}'),
    "segment-bigint": put_meta(b'{"segment": 123456789012345678901234567890}'),
    "first-start-text": put_meta(b'{"first_start_time": "yesterday"}'),
    "not-a-dict": put_meta(b"[1, 2, 3]"),
    "null": put_meta(b"null"),
    "empty": put_meta(b""),
    "binary": put_meta(bytes(range(256)) * 8),
    "invalid-utf8": put_meta(b'{"segment": "\xff\xfe"}'),
    "deep-nesting": put_meta(b"[" * 100_000 + b"]" * 100_000),
    "huge-file": huge_meta,
    "directory": directory_meta,
    "fifo": fifo_meta,
    "symlink-to-fifo": symlink_to_fifo_meta,
    "symlink-loop": symlink_loop_meta,
    "dangling-symlink": dangling_symlink_meta,
}


@pytest.mark.parametrize("name", list(HOSTILE_META))
def test_a_hostile_previous_metadata_file_never_raises(tmp_path: Path, name: str) -> None:
    run = tmp_path / "run"
    run.mkdir()
    HOSTILE_META[name](run)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MonitorWarning)  # a directory in its place cannot be replaced: warned
        writer = MetricsWriter(run)
        writer.log(step=1, loss=1.0)
        writer.close()
    assert writer.segment == 1
    assert [(r["seg"], r["step"], r["loss"]) for r in lines(run)] == [(1, 1, 1.0)], "the records are written"
    if name not in ("directory",):
        meta = meta_of(run)
        assert meta["segment"] == 1 and meta["status"] == "finished"
        assert isinstance(meta["first_start_time"], float)


def test_a_lost_metadata_file_still_starts_a_later_segment(tmp_path: Path) -> None:
    """Without a later segment the reader would file the new records under the old ones."""
    run = tmp_path / "run"
    for _ in range(3):
        with MetricsWriter(run) as writer:
            writer.log(step=1, loss=1.0)
    (run / "metrics.meta.json").write_text('{"segment": "abc"}')
    with MetricsWriter(run) as writer:
        writer.log(step=1, loss=2.0)
    assert [r["seg"] for r in lines(run)] == [1, 2, 3, 4]
    (run / "metrics.meta.json").unlink()
    with MetricsWriter(run) as writer:
        writer.log(step=1, loss=3.0)
    assert [r["seg"] for r in lines(run)][-1] == 5


def test_a_hostile_metrics_file_tail_is_ignored(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_bytes(
        b'{"seg": "x", "step": 1}\n{"seg": 1e400}\n{"seg": -3}\n\xff\xfe{"seg"\n' + b"[" * 50_000 + b'"seg"\n'
    )
    with MetricsWriter(run) as writer:
        writer.log(step=1, loss=1.0)
    assert lines_tail(run)["seg"] == 1


def lines_tail(run: Path) -> dict[str, Any]:
    return json.loads((run / "metrics.jsonl").read_bytes().splitlines()[-1])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"queue_size": 0}, "queue_size"),
        ({"queue_bytes": 0}, "queue_bytes"),
        ({"queue_bytes": 1.5}, "queue_bytes"),
        ({"rank": -1}, "rank"),
        ({"rank": "0"}, "rank"),
        ({"world_size": 0}, "world_size"),
        ({"fsync_interval": -1}, "fsync_interval"),
        ({"config": [1, 2]}, "config must be a mapping"),
        ({"extra_meta": "x"}, "extra_meta must be a mapping"),
    ],
)
def test_wrong_arguments_are_a_clear_value_error(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MetricsWriter(tmp_path / "run", **kwargs)
    assert not (tmp_path / "run").exists(), "nothing is created for a refused writer"
