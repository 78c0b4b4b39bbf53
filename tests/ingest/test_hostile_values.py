"""Text under a numeric key and steps out of range: counted as bad in both parse paths, never merged silently."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from monitor_cb.ingest.batch import records_to_batch
from monitor_cb.ingest.parse import ChunkParser
from monitor_cb.ingest.source import MetricsSource
from monitor_cb.record import STEP_LIMIT
from tests.ingest.helpers import append, line
from tests.ingest.test_parse import assert_same

N = 4000  # lines: large enough that the polars path takes the chunk in pieces
PATHS = {"line-path": 1 << 40, "polars-path": 0}


def parsers() -> tuple[ChunkParser, ChunkParser]:
    return ChunkParser(bulk_min_bytes=PATHS["polars-path"]), ChunkParser(bulk_min_bytes=PATHS["line-path"])


def good(step: int) -> dict[str, object]:
    return {"step": step, "t": 100.0 + step, "rank": 0, "seg": 1, "loss": 1.0 / step, "lr": 0.001, "acc": step / N}


def lines_with(bad: dict[int, bytes]) -> bytes:
    """N collector lines; the line of each step in ``bad`` replaced by the raw bytes given."""
    return b"".join(bad.get(s, line(good(s))) for s in range(1, N + 1))


def line_start(data: bytes, needle: bytes) -> int:
    at = data.index(needle)
    return data.rfind(b"\n", 0, at) + 1


# ----------------------------------------------------------------------------- text under a numeric key
TEXTS = {
    "word": b'"oops"',
    "decimal-as-string": b'"1.2345"',
    "empty": b'""',
    "number-as-text-with-space": b'" 5"',
}


@pytest.mark.parametrize("text", list(TEXTS))
def test_a_text_value_under_a_numeric_key_is_one_bad_value_in_both_paths(text: str) -> None:
    bad_line = b'{"step":2000,"t":2100.0,"rank":0,"seg":1,"loss":' + TEXTS[text] + b',"lr":0.5,"acc":0.5}\n'
    data = lines_with({2000: bad_line})
    fast, slow = parsers()
    fast_batch, fast_bad = fast.parse(data, 0)
    slow_batch, slow_bad = slow.parse(data, 0)
    assert_same(fast_batch, slow_batch)
    assert fast_bad == slow_bad and len(fast_bad) == 1
    assert fast_bad[0].offset == line_start(data, b'"step":2000,') and "'loss'" in fast_bad[0].reason
    assert fast.bulk_chunks >= 1, "the rest of the chunk stays on the polars path"
    assert not fast_batch.texts, "no text column: loss stays numeric"
    values, logged = fast_batch.floats["loss"]
    assert len(values) == N and logged.sum() == N - 1 and not logged[1999]
    expected = np.array([1.0 / s for s in range(1, N + 1)])
    np.testing.assert_array_equal(values[logged], expected[logged])
    lr_values, lr_logged = fast_batch.floats["lr"]
    assert lr_logged[1999] and lr_values[1999] == 0.5, "the bad line's other values are kept"


def test_a_user_key_that_held_text_first_turns_numeric_in_a_live_file(tmp_path: Path) -> None:
    """Text before any number (in an earlier poll): the file is read again, the text counted as bad."""
    path = tmp_path / "metrics.jsonl"
    append(path, line({"step": 1, "seg": 1, "loss": 1.0, "acc": "n/a"}) + line({"step": 2, "seg": 1, "acc": "n/a"}))
    source = MetricsSource(path, bulk_min_bytes=1 << 40)
    source.poll()
    assert source.frame()["acc"].tolist() == ["n/a", "n/a"] and source.bad_count == 0  # only text so far: a text column
    append(path, b"".join(line({"step": s, "seg": 1, "loss": 1.0 / s, "acc": s / 10}) for s in range(3, 10)))
    source.poll()
    frame = source.frame()
    assert frame["acc"].dtype == np.float64 and frame["step"].tolist() == list(range(1, 10))
    np.testing.assert_array_equal(frame["acc"].to_numpy()[2:], [s / 10 for s in range(3, 10)])
    assert not source.logged("acc")[:2].any() and source.bad_count == 2
    assert [bad.offset for bad in source.bad_lines] == [0, len(line({"step": 1, "seg": 1, "loss": 1.0, "acc": "n/a"}))]
    source.poll()
    assert source.bad_count == 2, "an idle poll counts nothing twice"


def test_a_format_numeric_key_never_becomes_a_text_column(tmp_path: Path) -> None:
    """A file whose only loss so far is text: loss is still a numeric column (and the value is bad)."""
    path = tmp_path / "metrics.jsonl"
    append(path, line({"step": 1, "seg": 1, "loss": "oops", "lr": 0.1}))
    source = MetricsSource(path)
    source.poll()
    assert "loss" not in source.frame() and source.bad_count == 1, "no loss logged yet: no column, not a text one"
    append(path, line({"step": 2, "seg": 1, "loss": 0.5, "lr": 0.1}))
    source.poll()
    frame = source.frame()
    assert source.bad_count == 1 and frame["loss"].dtype == np.float64 and frame["loss"].tolist()[1] == 0.5


def test_a_text_column_stays_text_and_numbers_turned_to_text_by_polars_are_caught() -> None:
    """``event`` is text; a number under a text key in the polars path must not come back as the text "5"."""
    rows = []
    for s in range(1, N + 1):
        rec = good(s)
        rec["phase"] = "warmup" if s < 100 else "main"
        rows.append(line(rec))
    rows[3000] = line({**good(3001), "phase": 5})
    data = b"".join(rows)
    fast, slow = parsers()
    fast_batch, fast_bad = fast.parse(data, 0)
    slow_batch, slow_bad = slow.parse(data, 0)
    assert_same(fast_batch, slow_batch)
    assert fast_bad == slow_bad
    assert fast_batch.floats["phase"][1].sum() == 1 and fast_batch.floats["phase"][0][3000] == 5.0
    assert len(fast_bad) == N - 1, "once numbers show up under phase, its text values are the bad ones"


def test_text_only_keys_stay_text_columns_in_both_paths() -> None:
    rows = [line(good(s)) for s in range(1, N + 1)]
    rows[10] = line({"step": 11, "seg": 1, "event": "guard_stop", "reason": "2024-01-01 loss NaN"})
    data = b"".join(rows)
    fast, slow = parsers()
    fast_batch, fast_bad = fast.parse(data, 0)
    slow_batch, _ = slow.parse(data, 0)
    assert_same(fast_batch, slow_batch)
    assert fast_bad == [] and fast_batch.texts["event"][0][10] == "guard_stop"


def test_ranks_disagreeing_on_a_key_keep_it_numeric(tmp_path: Path) -> None:
    from monitor_cb.ingest import RunStore

    run = tmp_path / "logs" / "r"
    run.mkdir(parents=True)
    append(run / "metrics.rank0.jsonl", b"".join(line({"step": s, "seg": 1, "note": s * 1.5}) for s in (1, 2)))
    append(run / "metrics.rank1.jsonl", b"".join(line({"step": s, "seg": 1, "note": "x"}) for s in (1, 2)))
    store = RunStore(tmp_path / "logs")
    data = store.read("r")
    frame = data.frame
    assert frame["note"].dtype == np.float64
    assert data.logged("note").tolist() == [True, False, True, False]


# ----------------------------------------------------------------------------- steps out of range
BAD_STEPS = {
    "fraction": b"7.5",
    "negative": b"-5",
    "overflow": b"1e400",
    "text": b'"7"',
    "bool": b"true",
    "above-2^62": str(2**62 + 1).encode(),
    "above-limit": str(STEP_LIMIT).encode(),
    "huge-float": b"1e20",
    "list": b"[7]",
    "NaN-token": b"NaN",
}


@pytest.mark.parametrize("kind", list(BAD_STEPS))
def test_a_step_out_of_range_is_a_bad_line_in_both_paths(kind: str) -> None:
    bad_line = b'{"step":' + BAD_STEPS[kind] + b',"seg":1,"loss":1.23e32,"lr":9.0}\n'
    data = lines_with({2000: bad_line})
    fast, slow = parsers()
    fast_batch, fast_bad = fast.parse(data, 0)
    slow_batch, slow_bad = slow.parse(data, 0)
    assert_same(fast_batch, slow_batch)
    assert fast_bad == slow_bad and len(fast_bad) == 1
    assert fast_bad[0].offset == line_start(data, b'"loss":1.23e32') and "step" in fast_bad[0].reason
    assert len(fast_batch) == N - 1 and 2000 not in fast_batch.step.tolist()
    loss = fast_batch.floats["loss"][0]
    assert loss.max() < 1e30, "the bad line merged nowhere"


@pytest.mark.parametrize("kind", list(BAD_STEPS))
def test_a_bad_step_in_a_live_poll_does_not_overwrite_the_row_before(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "metrics.jsonl"
    append(path, b"".join(line({"step": s, "seg": 1, "loss": 1.0}) for s in (1, 2, 3)))
    source = MetricsSource(path)
    source.poll()
    bad_line = b'{"step":' + BAD_STEPS[kind] + b',"seg":1,"loss":1.23e32}\n'
    append(path, bad_line + line({"step": 4, "seg": 1, "loss": 2.0}))
    source.poll()
    frame = source.frame()
    assert frame["step"].tolist() == [1, 2, 3, 4] and frame["loss"].tolist() == [1.0, 1.0, 1.0, 2.0]
    assert source.bad_count == 1


def test_steps_in_range_and_absent_steps_are_kept(tmp_path: Path) -> None:
    """0, integral floats and the largest step are steps; an absent or null step is an event between steps."""
    data = b"".join(
        [
            b'{"step":0,"seg":1,"loss":1.0}\n',
            b'{"step":5.0,"seg":1,"loss":2.0}\n',
            b'{"seg":1,"event":"note"}\n',
            b'{"step":null,"seg":1,"event":"null step"}\n',
            b'{"step":' + str(STEP_LIMIT - 1).encode() + b',"seg":1,"loss":3.0}\n',
        ]
    )
    for bulk in PATHS.values():
        batch, bad = ChunkParser(bulk_min_bytes=bulk).parse(data, 0)
        assert bad == []
        assert batch.step.tolist() == [0, 5, -1, -1, STEP_LIMIT - 1]


def test_records_to_batch_reports_what_it_leaves_out() -> None:
    problems: list[tuple[int, str, bool]] = []
    batch = records_to_batch(
        [{"step": 1, "loss": 1.0}, {"step": -5, "loss": 9.0}, {"step": 2, "loss": "x", "t": "noon"}],
        problems=problems,
    )
    assert batch.step.tolist() == [1, 2] and not batch.texts
    assert [(index, partial) for index, _, partial in problems] == [(1, False), (2, True), (2, True)]
    assert math.isnan(batch.t[1])
