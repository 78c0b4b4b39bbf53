"""Property: whatever happens to the file, nothing invented, nothing doubled, nothing lost."""

from __future__ import annotations

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
