"""decode_lines: every bad line is skipped and counted at its offset; its neighbours are kept."""

from __future__ import annotations

import math

import pytest

from monitor_cb.ingest.lines import decode_lines
from tests.ingest.helpers import legacy_line, line

GOOD_A = line({"step": 1, "loss": 1.0})
GOOD_B = line({"step": 2, "loss": 2.0})


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (b'{"step": 3, "loss": \n', "invalid JSON"),
        (b'{"step":3,"loss":1}\x00\n', "NUL byte"),
        (b'{"step":3,"event":"\xff\xfe"}\n', "invalid UTF-8"),
        (b"[1, 2, 3]\n", "not a JSON object"),
        (b'"just a string"\n', "not a JSON object"),
        (b'{"step":3,"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n", "invalid JSON"),
        (b'{"step":3,"x":' + b"9" * 100_000 + b"}\n", "invalid JSON"),
        (b'{"step":3,"x":"' + b"z" * (2 << 20) + b'"}\n', "line longer than"),
    ],
    ids=["truncated", "nul", "utf8", "array", "string", "deep-nesting", "huge-int", "too-long"],
)
def test_bad_line_is_skipped_with_its_offset(bad: bytes, reason: str) -> None:
    records, bad_lines = decode_lines(GOOD_A + bad + GOOD_B, base_offset=100)
    assert [r["step"] for r in records] == [1, 2]
    assert len(bad_lines) == 1
    assert bad_lines[0].offset == 100 + len(GOOD_A)
    assert bad_lines[0].reason.startswith(reason)


def test_both_nan_spellings_decode() -> None:
    data = line({"step": 1, "loss": math.nan, "g": math.inf}) + legacy_line(
        {"step": 2, "loss": math.nan, "g": -math.inf}
    )
    assert b'"NaN"' in data and b": NaN" in data
    records, bad = decode_lines(data, 0)
    assert bad == []
    assert records[0]["loss"] == "NaN" and records[0]["g"] == "Infinity"  # decoded to floats by the batch
    assert math.isnan(records[1]["loss"]) and records[1]["g"] == -math.inf


def test_blank_lines_are_ignored_not_counted() -> None:
    records, bad = decode_lines(GOOD_A + b"\n  \n" + GOOD_B, 0)
    assert len(records) == 2 and bad == []
