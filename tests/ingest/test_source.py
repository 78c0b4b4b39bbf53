"""MetricsSource: file faults end to end (tail + both parsers + table)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from monitor_cb.ingest.source import MetricsSource
from tests.ingest.helpers import append, legacy_line, line, records

PATHS = pytest.mark.parametrize("bulk", [True, False], ids=["polars", "orjson"])


def source(path: Path, bulk: bool) -> MetricsSource:
    return MetricsSource(path, bulk_min_bytes=0 if bulk else 1 << 40)


@PATHS
def test_five_megabyte_line_is_skipped_and_counted(tmp_path: Path, bulk: bool) -> None:
    path = tmp_path / "metrics.jsonl"
    before = records(1, 3)
    append(path, before + line({"step": 4, "blob": "x" * (5 << 20)}) + records(5, 6))
    src = source(path, bulk)
    assert src.poll() == 5
    assert list(src.frame()["step"]) == [1, 2, 3, 5, 6]
    assert src.bad_count == 1 and src.bad_lines[0].offset == len(before)


@PATHS
def test_invalid_utf8_line_is_skipped_and_counted(tmp_path: Path, bulk: bool) -> None:
    path = tmp_path / "metrics.jsonl"
    before = records(1, 2)
    append(path, before + b'{"step":3,"event":"caf\xe9"}\n' + records(4, 4))
    src = source(path, bulk)
    src.poll()
    assert list(src.frame()["step"]) == [1, 2, 4]
    assert src.bad_count == 1 and src.bad_lines[0].offset == len(before)


@PATHS
def test_bare_and_string_nan_in_one_file(tmp_path: Path, bulk: bool) -> None:
    path = tmp_path / "metrics.jsonl"
    append(path, line({"step": 1, "loss": math.nan, "g": math.inf}))
    append(path, legacy_line({"step": 2, "loss": math.nan, "g": -math.inf}))
    append(path, line({"step": 3, "g": 1.0}))
    src = source(path, bulk)
    src.poll()
    frame = src.frame()
    assert np.isnan(frame["loss"][:3]).all()
    assert list(frame["g"]) == [math.inf, -math.inf, 1.0]
    assert list(src.logged("loss")) == [True, True, False]
    assert src.bad_count == 0


def test_truncation_replaces_the_rows_never_mixes(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    append(path, records(1, 10))
    src = source(path, False)
    src.poll()
    path.write_bytes(records(1, 3, extra=7.0))
    src.poll()
    frame = src.frame()
    assert list(frame["step"]) == [1, 2, 3] and list(frame["extra"]) == [7.0] * 3
