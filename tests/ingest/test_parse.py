"""ChunkParser: the polars fast path and the orjson path give the same batch."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monitor_cb.ingest import parse as parse_module
from monitor_cb.ingest.batch import Batch
from monitor_cb.ingest.bulk import substitute_nonfinite
from monitor_cb.ingest.parse import ChunkParser, _sample
from tests.ingest.helpers import legacy_line, line


def collector_lines(n: int) -> bytes:
    out = []
    for s in range(1, n + 1):
        rec = {"step": s, "t": 100.0 + s, "rank": 0, "seg": 1, "loss": math.nan if s % 7 == 0 else 1.0 / s}
        rec["grad_norm"] = math.inf if s % 11 == 0 else -math.inf if s % 13 == 0 else float(s)
        rec["overflow"] = s % 5 == 0
        if s % 10 == 0:
            out.append(line(rec))
            rec = {"step": s, "t": 100.5 + s, "rank": 0, "seg": 1, "eval_loss": 2.0 + s}
        out.append(line(rec))
    return b"".join(out)


def legacy_lines(n: int) -> bytes:
    return b"".join(
        legacy_line({"step": s, "loss": math.nan if s % 3 == 0 else float(s), "lr": 0.1, "ts": 5.0 + s})
        for s in range(1, n + 1)
    )


def assert_same(a: Batch, b: Batch) -> None:
    for name in ("step", "seg", "rank"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_array_equal(a.t, b.t)
    assert sorted(a.floats) == sorted(b.floats)
    for key in a.floats:
        np.testing.assert_array_equal(a.floats[key][0], b.floats[key][0])  # NaN == NaN here
        np.testing.assert_array_equal(a.floats[key][1], b.floats[key][1])
    assert sorted(a.texts) == sorted(b.texts)
    for key in a.texts:
        np.testing.assert_array_equal(a.texts[key][1], b.texts[key][1])
        assert list(a.texts[key][0][a.texts[key][1]]) == list(b.texts[key][0][b.texts[key][1]])


@pytest.mark.parametrize("kind", ["collector", "legacy"])
def test_fast_path_equals_slow_path(kind: str) -> None:
    data = collector_lines(3000) if kind == "collector" else legacy_lines(3000)
    fast, slow = ChunkParser(bulk_min_bytes=0), ChunkParser(bulk_min_bytes=1 << 40)
    fast_batch, fast_bad = fast.parse(data, 0)
    slow_batch, slow_bad = slow.parse(data, 0)
    assert fast.bulk_chunks == 1, "polars should have decoded this chunk"
    assert fast_bad == slow_bad == []
    assert_same(fast_batch, slow_batch)
    loss = fast_batch.floats["loss"]
    assert np.isnan(loss[0][loss[1]]).sum() > 0  # logged NaNs survived
    if kind == "legacy":
        assert fast_batch.t[0] == 6.0 and "ts" not in fast_batch.floats  # ts maps to t


def test_what_polars_declines_is_narrowed_down_and_decided_line_by_line() -> None:
    good = collector_lines(4000)
    data = good + b'{"step":5000,"surprise":1.5,"config":{"a":1}}\n' + b"garbage\n" + collector_lines(3000)
    fast, slow = ChunkParser(bulk_min_bytes=0), ChunkParser(bulk_min_bytes=1 << 40)
    batch, bad = fast.parse(data, 10)
    slow_batch, slow_bad = slow.parse(data, 10)
    assert fast.bulk_chunks >= 10  # most pieces still went through polars
    assert bad == slow_bad and len(bad) == 1 and bad[0].offset == 10 + data.index(b"garbage")
    assert_same(batch, slow_batch)
    assert batch.floats["surprise"][1].sum() == 1


def test_substitution_only_touches_values() -> None:
    data = b'{"a":"NaN","b": NaN ,"c":-Infinity,"d":"-Infinity","msg":"NaN is bad","e":"x NaN"}\n'
    out = substitute_nonfinite(data)
    assert b'"msg":"NaN is bad"' in out and b'"e":"x NaN"' in out
    assert b'"a":2.5e-323' in out and b'"d":3.5e-323' in out and b'"c":3.5e-323' in out


def test_a_rare_key_the_sample_missed_stays_on_the_fast_path() -> None:
    lines = collector_lines(6000).splitlines(keepends=True)
    lines[3001] = line({"step": 2701, "seg": 1, "eval_rare": math.nan, "note": 5})  # one line, far from samples
    data = b"".join(lines)
    assert b"eval_rare" not in _sample(data)
    fast, slow = ChunkParser(bulk_min_bytes=0), ChunkParser(bulk_min_bytes=1 << 40)
    fast_batch, _ = fast.parse(data, 0)
    slow_batch, _ = slow.parse(data, 0)
    assert fast.bulk_chunks == 1 and "eval_rare" in fast.kinds
    assert_same(fast_batch, slow_batch)
    assert fast_batch.floats["eval_rare"][1].sum() == 1


def test_the_sample_of_a_short_file_takes_each_line_once() -> None:
    """The 65 sample places of a short file overlap: each line was taken up to five times (and learned as often)."""
    data = collector_lines(300)
    assert _sample(data) == data


def wide_lines(keys: int, steps: int) -> bytes:
    names = [f"layer_{i:04d}/grad_norm" for i in range(keys)]
    return b"".join(line({"step": s, "t": 100.0 + s, **dict.fromkeys(names, s * 0.5)}) for s in range(1, steps + 1))


def test_a_wide_runs_kinds_are_learned_from_a_few_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Learning the kinds is a Python step per value sampled: a wide run's sample is one line per place
    (not 16, each 40 kB), so the values learned stay a fraction of the file's, and the batch is unchanged."""
    keys, steps = 2000, 300
    data = wide_lines(keys, steps)
    assert _sample(data).count(b"\n") <= parse_module._SAMPLE_POINTS + 2
    learned: list[int] = []
    learn = ChunkParser._learn
    monkeypatch.setattr(
        ChunkParser, "_learn", lambda self, records: (learned.append(sum(map(len, records))), learn(self, records))[1]
    )
    fast, slow = ChunkParser(bulk_min_bytes=0), ChunkParser(bulk_min_bytes=1 << 40)
    fast_batch, _ = fast.parse(data, 0)
    assert fast.bulk_chunks == 1
    assert sum(learned) <= (parse_module._SAMPLE_POINTS + 2) * (keys + 2) < keys * steps / 4
    slow_batch, _ = slow.parse(data, 0)
    assert_same(fast_batch, slow_batch)
