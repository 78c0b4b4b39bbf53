"""The numpy event-file decoder against protobuf's own parser, on real tensorboardX files and hostile bytes."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
import pytest
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboardX import SummaryWriter

from monitor_cb.importers.event_scan import _candidates, scan
from monitor_cb.importers.f32 import shortest_f32
from tests.importers.tb_helpers import record_ends

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def frame(payload: bytes) -> bytes:
    """One TFRecord (CRCs left zero: the decoder does not check them)."""
    return struct.pack("<Q", len(payload)) + b"\0" * 4 + payload + b"\0" * 4


def scalar_event(step: int, tag: str, value: float, wall: float = 1.7e9) -> bytes:
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
    return event_pb2.Event(wall_time=wall, step=step, summary=summary).SerializeToString()


def decoded(data: bytes, start: int = 0) -> tuple[list[tuple[float, int, str, float]], int]:
    """(wall, step, tag, value) of every scalar, fast and protobuf-decoded ones merged in file order."""
    found = scan(np.frombuffer(data, np.uint8), start)
    columns = (found.order, found.wall.tolist(), found.step.tolist(), found.tag, found.value.tolist())
    rows = [(int(o), (w, s, found.tags[t], v)) for o, w, s, t, v in zip(*columns, strict=True)]
    for order, payload in found.others:
        event = event_pb2.Event.FromString(payload)
        for value in event.summary.value:
            if value.WhichOneof("value") == "simple_value":
                rows.append((order, (event.wall_time, event.step, value.tag, shortest_f32(value.simple_value))))
    return [row for _, row in sorted(rows, key=lambda item: item[0])], found.end


def reference(data: bytes) -> list[tuple[float, int, str, float]]:
    rows, offset = [], 0
    for end in record_ends(data):
        if end > len(data):
            break
        event = event_pb2.Event.FromString(data[offset + 12 : end - 4])
        offset = end
        for value in event.summary.value:
            if value.WhichOneof("value") == "simple_value":
                rows.append((event.wall_time, event.step, value.tag, shortest_f32(value.simple_value)))
    return rows


def same(a: list[tuple], b: list[tuple]) -> bool:
    return len(a) == len(b) and all(
        x[:3] == y[:3] and (x[3] == y[3] or (math.isnan(x[3]) and math.isnan(y[3]))) for x, y in zip(a, b, strict=True)
    )


@pytest.fixture
def tbx_file(tmp_path: Path) -> bytes:
    writer = SummaryWriter(str(tmp_path), flush_secs=3600)
    for step in range(1, 400):
        writer.add_scalar("loss", 1.0 / step if step != 7 else float("nan"), global_step=step)
        writer.add_scalar("grad-norm", float("inf") if step == 9 else step * 0.1, global_step=step)
        if step % 10 == 0:
            writer.add_scalar("learning-rate", 1e-4, global_step=step)
            writer.add_text("config", "lr: 1e-4", global_step=step)  # a record the fast path leaves to protobuf
        if step == 50:
            writer.add_scalar("a/" + "long_tag" * 20, 3.0, global_step=step)  # tag of 162 bytes
            writer.add_histogram("weights", np.arange(10), global_step=step)
    writer.close()
    (path,) = tmp_path.iterdir()
    return path.read_bytes()


def test_same_as_protobuf_on_a_tensorboardx_file(tbx_file: bytes) -> None:
    rows, end = decoded(tbx_file)
    assert end == len(tbx_file)
    assert same(rows, reference(tbx_file))
    assert len(rows) == 399 * 2 + 39 + 1
    assert math.isnan(rows[12][3]) and rows[17][3] == math.inf  # NaN and inf kept


def test_any_prefix_reads_the_complete_records_then_the_rest(tbx_file: bytes) -> None:
    ends = record_ends(tbx_file)
    for cut in (ends[3] + 5, ends[100] - 1, ends[200], len(tbx_file) - 3):
        first, end = decoded(tbx_file[:cut])
        assert end == max(e for e in ends if e <= cut)  # the torn record is "not yet"
        rest, end2 = decoded(tbx_file, end)
        assert end2 == len(tbx_file)
        assert same(first + rest, reference(tbx_file))


def test_max_records_bounds_one_scan(tbx_file: bytes) -> None:
    buf = np.frombuffer(tbx_file, np.uint8)
    pieces, start = 0, 0
    while start < len(tbx_file):
        found = scan(buf, start, max_records=50)
        assert 0 < found.n_records <= 50
        start = found.end
        pieces += 1
    assert pieces == math.ceil(len(record_ends(tbx_file)) / 50)


def test_a_record_hidden_inside_another_is_not_read() -> None:
    fake = frame(scalar_event(999, "evil", 6.66))
    text = summary_pb2.Summary.Value(tag="note", tensor={"dtype": 7, "string_val": [b"xy" + fake + b"z"]})
    hiding = event_pb2.Event(wall_time=1.7e9, step=2, summary=summary_pb2.Summary(value=[text]))
    data = frame(scalar_event(1, "loss", 1.0)) + frame(hiding.SerializeToString()) + frame(scalar_event(3, "loss", 3.0))
    buf = np.frombuffer(data, np.uint8)
    inside = data.index(fake)
    assert inside in _candidates(buf, 0, len(buf))[0].tolist()  # the fake looks like a record on its own
    rows, end = decoded(data)
    assert end == len(data)
    assert [(r[1], r[3]) for r in rows] == [(1, 1.0), (3, 3.0)]


def test_steps_the_fast_path_cannot_hold_go_to_protobuf() -> None:
    data = b"".join(frame(scalar_event(step, "loss", 0.5)) for step in (1, -5, 2**50, 2**40 - 1, 3))
    rows, _ = decoded(data)
    assert [r[1] for r in rows] == [1, -5, 2**50, 2**40 - 1, 3]


def test_damaged_length_stops_without_reading_further() -> None:
    good = frame(scalar_event(1, "loss", 1.0))
    damaged = struct.pack("<Q", 1 << 62) + b"\0" * 40
    rows, end = decoded(good + damaged + frame(scalar_event(2, "loss", 2.0)))
    assert [r[1] for r in rows] == [1] and end == len(good)


def test_garbage_is_not_an_error() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        junk = rng.integers(0, 256, 5000, dtype=np.uint8).tobytes()
        found = scan(np.frombuffer(junk, np.uint8))
        assert found.end <= len(junk)
