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
