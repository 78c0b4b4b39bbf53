"""Property: whatever happens to the file, nothing invented, nothing doubled, nothing lost."""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor_cb.ingest.parse import ChunkParser
from monitor_cb.ingest.tail import Chunk, FileTail
from tests.ingest.helpers import line

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 5)),
        st.tuples(st.just("partial"), st.floats(0.05, 0.95)),
        st.tuples(st.just("truncate"), st.just(0)),
        st.tuples(st.just("replace"), st.integers(0, 4)),
        st.tuples(st.just("delete"), st.just(0)),
        st.tuples(st.just("poll"), st.just(0)),
    ),
    max_size=40,
)


class Model:
    """The file as written: complete ids in order, plus a partial line being written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.next_id = 1
        self.ids: list[int] = []
        self.partial: tuple[int, bytes, int] | None = None  # id, full line, bytes written
        self.ever: set[int] = set()

    def new_line(self) -> tuple[int, bytes]:
        i = self.next_id
        self.next_id += 1
        self.ever.add(i)
        return i, line({"step": i, "id": i, "pad": "p" * (i * 37 % 300)})

    def complete_partial(self) -> bytes:
        if self.partial is None:
            return b""
        i, full, done = self.partial
        self.partial = None
        self.ids.append(i)
        return full[done:]

    def append(self, count: int) -> None:
        data = self.complete_partial()
        for _ in range(count):
            i, full = self.new_line()
            self.ids.append(i)
            data += full
        with open(self.path, "ab") as handle:
            handle.write(data)

    def write_partial(self, fraction: float) -> None:
        data = self.complete_partial()
        i, full = self.new_line()
        done = max(1, int(len(full) * fraction))
        self.partial = (i, full, done)
        with open(self.path, "ab") as handle:
            handle.write(data + full[:done])

    def truncate(self) -> None:
        self.ids, self.partial = [], None
        if self.path.exists():
            with open(self.path, "r+b") as handle:
                handle.truncate(0)

    def replace(self, count: int) -> None:
        self.ids, self.partial = [], None
        data = b""
        for _ in range(count):
            i, full = self.new_line()
            self.ids.append(i)
            data += full
        tmp = self.path.with_name("next.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, self.path)

    def delete(self) -> None:
        self.ids, self.partial = [], None
        if self.path.exists():
            self.path.unlink()


def poll(tail: FileTail, parser: ChunkParser, since_reset: list[int]) -> tuple[list[int], bool]:
    got: list[int] = []
    reset = False
    for item in tail.poll():
        if isinstance(item, Chunk):
            if item.reset:
                reset = True
                since_reset.clear()
            if item.data:
                batch, bad = parser.parse(item.data, item.offset)
                assert bad == []
                values, logged = batch.floats["id"]
                got.extend(int(v) for v in values[logged])
    since_reset.extend(got)
    return got, reset


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, bulk=st.booleans())
def test_tail_never_invents_doubles_or_loses(ops: list[tuple[str, float]], bulk: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        model = Model(Path(tmp) / "metrics.jsonl")
        tail = FileTail(model.path)
        parser = ChunkParser(bulk_min_bytes=0 if bulk else 1 << 30)
        seen: dict[int, int] = {}
        resets = 0
        since_reset: list[int] = []
        for op, arg in ops:
            if op == "append":
                model.append(int(arg))
            elif op == "partial":
                model.write_partial(float(arg))
            elif op == "truncate":
                model.truncate()
            elif op == "replace":
                model.replace(int(arg))
            elif op == "delete":
                model.delete()
            else:
                got, reset = poll(tail, parser, since_reset)
                resets += reset
                for i in got:
                    assert i in model.ever, "read a record that was never written"
                    seen[i] = seen.get(i, 0) + 1
                    assert seen[i] <= 1 + resets, "a record read twice without a truncation"
                if model.path.exists():  # a deleted file keeps its data until a new one appears
                    assert since_reset == model.ids[: len(since_reset)], "not the file's records, in order"
        model.append(1)  # completes any partial line, so every record is complete
        poll(tail, parser, since_reset)
        assert since_reset == model.ids, "a complete record was never read"


RECORDS = st.lists(
    st.tuples(
        st.integers(0, 2),  # segment increment before this record
        st.integers(1, 30),  # step
        st.sampled_from(["loss", "acc", "lr"]),
        st.floats(allow_nan=True, allow_infinity=True),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(rows=RECORDS, cuts=st.lists(st.integers(1, 60), max_size=5))
def test_table_matches_a_naive_model(rows: list[tuple[int, int, str, float]], cuts: list[int]) -> None:
    import math

    from monitor_cb.ingest.batch import records_to_batch
    from monitor_cb.ingest.table import RankTable

    seg, records = 1, []
    for bump, step, key, value in rows:
        seg += 1 if bump == 2 else 0  # resumes are rarer than steps
        records.append({"step": step, "seg": seg, key: value})
    expected: dict[int, tuple[int, dict[str, float]]] = {}  # step -> (seg, merged values)
    for rec in records:
        current = expected.get(rec["step"])
        if current is None or current[0] < rec["seg"]:
            expected[rec["step"]] = (rec["seg"], {})
        values = expected[rec["step"]][1]
        values.update({k: v for k, v in rec.items() if k not in ("step", "seg")})
    table = RankTable()
    bounds = sorted({0, len(records), *(c for c in cuts if c < len(records))})
    for lo, hi in itertools.pairwise(bounds):
        table.append(records_to_batch(records[lo:hi]))
    frame = table.frame()
    assert list(frame["step"]) == sorted(expected)
    for i, step in enumerate(frame["step"]):
        seg_expected, values = expected[step]
        assert frame["seg"].iloc[i] == seg_expected
        for key in ("loss", "acc", "lr"):
            logged = key in frame and bool(table.logged(key)[i])
            assert logged == (key in values)
            if logged:
                got, want = frame[key].iloc[i], values[key]
                assert got == want or (math.isnan(got) and math.isnan(want))
    assert len(table.frame(all_segments=True)) == len({(r["seg"], r["step"]) for r in records})


# ----------------------------------------------------------------------------- the columnar cache
CACHE_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 6)),
        st.tuples(st.just("resume"), st.integers(1, 8)),  # a restarted writer: back some steps, next segment
        st.tuples(st.just("eval"), st.integers(0, 20)),  # a record merged into an earlier step
        st.tuples(st.just("partial"), st.integers(1, 3)),
        st.tuples(st.just("truncate"), st.just(0)),
        st.tuples(st.just("replace"), st.integers(1, 6)),
        st.tuples(st.just("reopen"), st.just(0)),  # a new server: cache file + tail
        st.tuples(st.just("poll"), st.just(0)),
    ),
    max_size=30,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=CACHE_OPS, overlay=st.sampled_from([1, 3, 1024]))
def test_cache_and_jsonl_give_the_same_frame(ops: list[tuple[str, int]], overlay: int) -> None:
    """Whatever happens to the file between servers, the cache plus the tail reads as the file does."""
    import numpy as np
    from pandas.testing import assert_frame_equal

    from monitor_cb.ingest import tiered
    from monitor_cb.ingest.colcache import ColumnarCache, Place
    from monitor_cb.ingest.source import MetricsSource

    saved, tiered.OVERLAY = tiered.OVERLAY, overlay
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            path = root / "metrics.jsonl"
            path.write_bytes(b"")
            cache = ColumnarCache([Place(root / ".monitor", root)], root, min_bytes=1, growth=1)
            state = {"step": 0, "seg": 1, "partial": b""}

            def rec(step: int, **extra: object) -> bytes:
                value = float("nan") if step % 5 == 0 else 1.0 / step
                return line({"step": step, "seg": state["seg"], "t": float(step), "loss": value, **extra})

            def write(data: bytes) -> None:
                with open(path, "ab") as handle:
                    handle.write(state["partial"] + data)  # a partial line is completed first
                state["partial"] = b""

            source = MetricsSource(path, cache=cache)
            for op, arg in ops:
                if op == "append":
                    data = b""
                    for _ in range(arg):
                        state["step"] += 1
                        data += rec(state["step"], **({"acc": 0.5} if state["step"] % 3 == 0 else {}))
                    write(data)
                elif op == "resume":
                    state["seg"] += 1
                    state["step"] = max(state["step"] - arg, 0)
                elif op == "eval" and state["step"]:
                    write(line({"step": max(state["step"] - arg, 1), "seg": state["seg"], "eval_loss": 0.1 * arg}))
                elif op == "partial":
                    state["step"] += 1
                    full = rec(state["step"])
                    write(full[: len(full) // (arg + 1)])
                    state["partial"] = full[len(full) // (arg + 1) :]
                    with open(path, "ab"):
                        pass
                elif op == "truncate":
                    with open(path, "r+b") as handle:
                        handle.truncate(0)
                    state.update(step=0, seg=1, partial=b"")
                elif op == "replace":
                    state.update(step=0, seg=1, partial=b"")
                    data = b""
                    for _ in range(arg):
                        state["step"] += 1
                        data += rec(state["step"], other=1.0)
                    tmp_file = path.with_name("next.tmp")
                    tmp_file.write_bytes(data)
                    os.replace(tmp_file, path)
                elif op == "reopen":
                    source = MetricsSource(path, cache=cache)
                else:
                    reopened = MetricsSource(path, cache=cache)  # another server: the last cache file + the tail
                    reopened.poll()
                    source.poll()  # (writes the next cache file)
                    want = MetricsSource(path)
                    want.poll()
                    for got in (source, reopened):
                        for all_segments in (False, True):
                            _, frame, masks = got.frame_and_masks(all_segments)
                            _, want_frame, want_masks = want.frame_and_masks(all_segments)
                            assert_frame_equal(frame, want_frame)
                            assert sorted(masks) == sorted(want_masks)
                            for name, mask in want_masks.items():
                                assert np.array_equal(masks[name], mask), name
                        assert got.bad_count == want.bad_count
    finally:
        tiered.OVERLAY = saved
