"""MindSpore's summary protos (proto2, package ``mindspore.irpb``) decoded by hand from the wire format.

Why by hand: the reading side never imports MindSpore, and MindSpore's generated ``summary_pb2`` aborts
the process when it is imported after TensorBoard's event reader (both register protos under clashing
names in protobuf's default pool). Only the fields below are read; every other field is skipped by its
wire type. Checked against MindSpore 2.9's ``mindspore/train/summary_pb2.py`` and ``lineage_pb2.py``::

    Event          wall_time=1 double, step=2 int64, version=3 string, graph_def=4, summary=5, explain=6
    Summary        value=1 (repeated Value)
    Value          tag=1 string, scalar_value=3 float, image=4, tensor=8, histogram=9, loss_landscape=10
    Histogram      buckets=1 (repeated {left=1 double, width=2 double, count=3 int64}), nan_count=2,
                   pos_inf_count=3, neg_inf_count=4 (int64), max=5, min=6, sum=7 (double), count=8 int64
    LineageEvent   wall_time=1, step=2, version=3, train_lineage=6, evaluation_lineage=7, dataset_graph=9,
                   user_defined_info=10
    TrainLineage   hyper_parameters=1 {optimizer=1 string, learning_rate=2 float, loss_function=3 string,
                   epoch=4 int32, parallel_mode=5 string, device_num=6 int32, batch_size=8 int32},
                   train_dataset=2 {train_dataset_path=1 string, train_dataset_size=2 int32},
                   algorithm=3 {network=1 string, loss=2 float}, model=4 {path=3 string, size=4 int64}

Images, tensors, graphs, explanations and loss landscapes are skipped (counted per kind).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

_F64 = struct.Struct("<d")
_F32 = struct.Struct("<f")
_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5


class ProtoError(ValueError):
    """Bytes that are not the message they should be (truncated, a wrong wire type, a bad varint)."""


@dataclass(frozen=True)
class Histogram:
    """One histogram as MindSpore writes it: buckets as (left edge, width, count), and the totals."""

    lefts: tuple[float, ...]
    widths: tuple[float, ...]
    counts: tuple[int, ...]
    nan_count: int = 0
    pos_inf_count: int = 0
    neg_inf_count: int = 0
    max: float = 0.0
    min: float = 0.0
    sum: float = 0.0
    count: int = 0


@dataclass
class Event:
    """What one summary record holds that the reader keeps."""

    wall_time: float = 0.0
    step: int = 0
    version: str | None = None
    scalars: list[tuple[str, float]] = field(default_factory=list)  # (tag, value as the float32 written)
    histograms: list[tuple[str, Histogram]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)  # kind -> values not read (image, tensor, graph...)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtoError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtoError("varint longer than 10 bytes")


def _int64(value: int) -> int:
    """A varint read as proto's int64 (two's complement)."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def _fields(data: bytes) -> Any:
    """(field number, wire type, value) of every field: ints for varints, bytes for the rest."""
    pos, size = 0, len(data)
    while pos < size:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtoError("field number 0")
        if wire == _VARINT:
            value, pos = _varint(data, pos)
            yield number, wire, value
        elif wire == _FIXED64:
            if pos + 8 > size:
                raise ProtoError("truncated fixed64")
            yield number, wire, data[pos : pos + 8]
            pos += 8
        elif wire == _LEN:
            length, pos = _varint(data, pos)
            if pos + length > size:
                raise ProtoError("length past the end of the message")
            yield number, wire, data[pos : pos + length]
            pos += length
        elif wire == _FIXED32:
            if pos + 4 > size:
                raise ProtoError("truncated fixed32")
            yield number, wire, data[pos : pos + 4]
            pos += 4
        else:
            raise ProtoError(f"wire type {wire} (groups and unknown types are not in these protos)")


def _expect(wire: int, want: int, what: str) -> None:
    if wire != want:
        raise ProtoError(f"{what} has wire type {wire}, not {want}")


def _double(wire: int, raw: Any, what: str) -> float:
    _expect(wire, _FIXED64, what)
    return _F64.unpack(raw)[0]


def _float(wire: int, raw: Any, what: str) -> float:
    _expect(wire, _FIXED32, what)
    return _F32.unpack(raw)[0]


def _int(wire: int, raw: Any, what: str) -> int:
    _expect(wire, _VARINT, what)
    return _int64(raw)


def _text(wire: int, raw: Any, what: str) -> str:
    _expect(wire, _LEN, what)
    return bytes(raw).decode("utf-8", "replace")


def decode_event(data: bytes) -> Event:
    """A summary ``Event`` (raises :class:`ProtoError` on bytes that are not one)."""
    event = Event()
    has_time = False
    for number, wire, raw in _fields(data):
        if number == 1:
            event.wall_time, has_time = _double(wire, raw, "wall_time"), True
        elif number == 2:
            event.step = _int(wire, raw, "step")
        elif number == 3:
            event.version = _text(wire, raw, "version")
        elif number == 4:
            event.skipped["graph"] = event.skipped.get("graph", 0) + 1
        elif number == 5:
            _expect(wire, _LEN, "summary")
            _summary(raw, event)
        elif number == 6:
            event.skipped["explain"] = event.skipped.get("explain", 0) + 1
    if not has_time:
        raise ProtoError("an event without its wall_time (a required field)")
    return event


_SKIPPED_VALUES = {4: "image", 8: "tensor", 10: "loss_landscape"}


def _summary(data: bytes, event: Event) -> None:
    for number, wire, raw in _fields(data):
        if number != 1:
            continue
        _expect(wire, _LEN, "value")
        tag: str | None = None
        scalar: float | None = None
        histogram: Histogram | None = None
        kind: str | None = None
        for vnum, vwire, vraw in _fields(raw):
            if vnum == 1:
                tag = _text(vwire, vraw, "tag")
            elif vnum == 3:
                scalar = _float(vwire, vraw, "scalar_value")
            elif vnum == 9:
                _expect(vwire, _LEN, "histogram")
                histogram = decode_histogram(vraw)
            elif vnum in _SKIPPED_VALUES:
                kind = _SKIPPED_VALUES[vnum]
        if tag is None:
            raise ProtoError("a summary value without its tag (a required field)")
        if scalar is not None:
            event.scalars.append((tag, scalar))
        elif histogram is not None:
            event.histograms.append((tag, histogram))
        elif kind is not None:
            event.skipped[kind] = event.skipped.get(kind, 0) + 1


def decode_histogram(data: bytes) -> Histogram:
    lefts: list[float] = []
    widths: list[float] = []
    counts: list[int] = []
    totals: dict[int, Any] = {}
    for number, wire, raw in _fields(data):
        if number == 1:
            _expect(wire, _LEN, "bucket")
            left = width = 0.0
            count = 0
            for bnum, bwire, braw in _fields(raw):
                if bnum == 1:
                    left = _double(bwire, braw, "bucket.left")
                elif bnum == 2:
                    width = _double(bwire, braw, "bucket.width")
                elif bnum == 3:
                    count = _int(bwire, braw, "bucket.count")
            lefts.append(left)
            widths.append(width)
            counts.append(count)
        elif number in (2, 3, 4, 8):
            totals[number] = _int(wire, raw, "histogram count")
        elif number in (5, 6, 7):
            totals[number] = _double(wire, raw, "histogram max/min/sum")
    return Histogram(
        lefts=tuple(lefts),
        widths=tuple(widths),
        counts=tuple(counts),
        nan_count=totals.get(2, 0),
        pos_inf_count=totals.get(3, 0),
        neg_inf_count=totals.get(4, 0),
        max=totals.get(5, 0.0),
        min=totals.get(6, 0.0),
        sum=totals.get(7, 0.0),
        count=totals.get(8, 0),
    )


# ---------------------------------------------------------------------- lineage
_HYPER = {
    1: ("optimizer", "text"),
    2: ("learning_rate", "float"),
    3: ("loss_function", "text"),
    4: ("epochs", "int"),
    5: ("parallel_mode", "text"),
    6: ("device_num", "int"),
    8: ("batch_size", "int"),
}
_DATASET = {1: ("train_dataset_path", "text"), 2: ("train_dataset_size", "int")}
_ALGORITHM = {1: ("network", "text"), 2: ("final_loss", "float")}
_MODEL = {3: ("model_path", "text"), 4: ("model_size", "int")}
_TRAIN_PARTS = {1: _HYPER, 2: _DATASET, 3: _ALGORITHM, 4: _MODEL}


def decode_lineage(data: bytes) -> dict[str, Any]:
    """The train lineage of one ``LineageEvent`` as a flat dict (empty for other lineage events).

    Keys: optimizer, learning_rate, loss_function, epochs, batch_size, parallel_mode, device_num,
    train_dataset_path, train_dataset_size, network, final_loss, model_path, model_size (those present).
    """
    out: dict[str, Any] = {}
    for number, wire, raw in _fields(data):
        if number != 6:
            continue
        _expect(wire, _LEN, "train_lineage")
        for part, pwire, praw in _fields(raw):
            table = _TRAIN_PARTS.get(part)
            if table is None:
                continue
            _expect(pwire, _LEN, "train_lineage part")
            for key, kwire, kraw in _fields(praw):
                if key not in table:
                    continue
                name, kind = table[key]
                if kind == "text":
                    out[name] = _text(kwire, kraw, name)
                elif kind == "float":
                    out[name] = _float(kwire, kraw, name)
                else:
                    out[name] = _int(kwire, kraw, name)
    return out


# ---------------------------------------------------------------------- writing (tests and benchmarks)
def _key(number: int, wire: int) -> bytes:
    return _encode_varint(number << 3 | wire)


def _encode_varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _len_field(number: int, payload: bytes) -> bytes:
    return _key(number, _LEN) + _encode_varint(len(payload)) + payload


def encode_event(
    wall_time: float,
    step: int,
    scalars: list[tuple[str, float]] = (),  # type: ignore[assignment]
    histograms: list[tuple[str, Histogram]] = (),  # type: ignore[assignment]
    version: str | None = None,
) -> bytes:
    """An ``Event`` laid out as MindSpore's serializer lays it out (field order, float32 scalars)."""
    out = _key(1, _FIXED64) + _F64.pack(wall_time)
    if step:
        out += _key(2, _VARINT) + _encode_varint(step)
    if version is not None:
        out += _len_field(3, version.encode())
    values = b""
    for tag, value in scalars:
        values += _len_field(1, _len_field(1, tag.encode()) + _key(3, _FIXED32) + _F32.pack(value))
    for tag, hist in histograms:
        body = b""
        for left, width, count in zip(hist.lefts, hist.widths, hist.counts, strict=True):
            bucket = _key(1, _FIXED64) + _F64.pack(left) + _key(2, _FIXED64) + _F64.pack(width)
            bucket += _key(3, _VARINT) + _encode_varint(count)
            body += _len_field(1, bucket)
        for number, value in ((2, hist.nan_count), (3, hist.pos_inf_count), (4, hist.neg_inf_count)):
            body += _key(number, _VARINT) + _encode_varint(value)
        for number, value in ((5, hist.max), (6, hist.min), (7, hist.sum)):
            body += _key(number, _FIXED64) + _F64.pack(value)
        body += _key(8, _VARINT) + _encode_varint(hist.count)
        values += _len_field(1, _len_field(1, tag.encode()) + _len_field(9, body))
    if values:
        out += _len_field(5, values)
    return out
