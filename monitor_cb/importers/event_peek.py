"""One TensorBoard event file listed from its two ends, without decoding the bytes between them.

Why: a fresh root's first listing decoded every event file in full (about 1.1 s per 1M-step
MindFormers run), so a shared root of twenty runs took twenty seconds before anything was drawn.
TensorBoard lists runs by their directories and reads the one being looked at; this does the same
from the ends: the first 64 kB of a file (from offset 0, a known record boundary) give its first step
and wall time, the last 64 kB (up to 1 MiB when rows are wide) its last step and the times of its last
64 rows, and the file is listed from them only when both ends show rows at one stride and the file's
size agrees (within 3%) with that many rows of the records seen. The row count is the stride's: a few
steps off the stride between the ends are counted once the file is decoded. Anything else (text or
histograms near the end, a stride change, a resumed run in the same file, a tail that cannot be framed
with certainty) means "decode it", as before.

Framing the tail: a record is ``u64 length | u32 masked CRC-32C of those 8 bytes | payload | u32
masked CRC-32C of the payload``. Inside the last window the scanner's vectorised shape test
(:mod:`monitor_cb.importers.event_scan`) proposes scalar records; the chain of them that ends exactly
at the end of the file (or at a record cut short there) is walked backwards, and its records' CRCs
are checked: bytes that only look like a record do not chain to the end and do not carry the CRCs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from monitor_cb.importers.event_scan import ScanResult, _candidates, scan
from monitor_cb.importers.tags import TEXT_SUFFIX, samples_base
from monitor_cb.record import STEP_LIMIT
from monitor_cb.rootfile import MIB, FileIdentity, identity, open_regular

EVENT_PEEK_MIN_BYTES = 4 * MIB  # smaller event files are decoded at once (milliseconds)
EDGE_BYTES = 64 * 1024  # read at each end of the file
RECENT = 64  # the last rows whose times give the usual interval (as a decoded rank's)
SIZE_TOLERANCE = 0.03  # the file's size may differ this much from what its rows imply (partial edge rows)
MAX_TAIL_BYTES = 1024 * 1024  # the longest tail read to find the last RECENT rows
_HEADER, _FOOTER = 12, 4
_TOO_FEW = object()  # the tail holds fewer rows than the interval needs: read a longer one
_MAX_SKIP = 512  # the tail's chain must start this close to its window's start (a scalar record is shorter)
_CRC_EVERY = 32  # every this many records of a chain (and its first and last) have their CRCs checked


@dataclass(frozen=True)
class EventPeek:
    """What a listing knows of an event file it did not decode: the numbers its rank's table would show."""

    ident: FileIdentity  # when peeked
    rows: int
    first_step: int
    last_step: int
    first_wall: float  # the earliest event time at the ends (a decode's when times only grow)
    last_wall: float  # the latest (the file_version event's when the writer set older times on the rest)
    times: tuple[float, ...]  # the last rows' times (each row's first event), oldest first
    texts: dict[str, str] = field(default_factory=dict)  # text summaries in the head (MindFormers' config)


def peek_events(
    path: str | os.PathLike[str], root: Path | None = None, min_bytes: int = EVENT_PEEK_MIN_BYTES
) -> EventPeek | None:
    """The listing of an event file of at least ``min_bytes`` from its ends; None when it must be decoded.

    Never raises: any doubt (unsafe or unreadable file, records the peek cannot place) means "decode it".
    """
    try:
        with open_regular(path, root=root) as (fd, st):
            size = st.st_size
            if size < max(min_bytes, 2 * EDGE_BYTES):
                return None
            head = os.pread(fd, EDGE_BYTES, 0)
            ident = identity(st)
            window = EDGE_BYTES
            while window <= min(MAX_TAIL_BYTES, size // 2):  # wide rows: a longer tail, for the last rows' times
                found = _peek(head, os.pread(fd, window, size - window), size, ident)
                if found is not _TOO_FEW:
                    return found  # type: ignore[return-value]
                window *= 4
            return None
    except Exception:  # noqa: BLE001 - a FIFO, a link out, a vanished file, odd bytes: the decode says why
        return None


def _peek(head: bytes, tail: bytes, size: int, ident: tuple[int, int, int, int, int]) -> EventPeek | object | None:
    if len(head) != EDGE_BYTES or len(tail) < EDGE_BYTES:
        return None  # the file shrank while being peeked
    head_buf = np.frombuffer(head, np.uint8)
    found = scan(head_buf, 0)
    if found.damaged or found.n_fast == 0:
        return None
    others = _head_others(found)
    if others is None:
        return None
    texts, other_walls, other_bytes, scalars = others
    first = _rows(_Events.of(found, scalars), found.end - other_bytes, head=True)
    tail_buf = np.frombuffer(tail, np.uint8)
    start = _tail_start(tail_buf)
    if start is None:
        return None
    tail_found = scan(tail_buf, start)
    if tail_found.damaged or tail_found.others or tail_found.n_fast == 0:
        return None
    last = _rows(_Events.of(tail_found, []), tail_found.end - start, head=False)
    if first is None or last is None or first.stride != last.stride:
        return None
    if len(last.times) <= RECENT:
        return _TOO_FEW
    span = last.steps[-1] - first.steps[0]
    if span < 0 or span % first.stride:
        return None
    rows = span // first.stride + 1
    expected = other_bytes + _bytes_of_rows(first, last, rows)
    pending = len(tail) - tail_found.end
    if abs((size - pending) / expected - 1) > SIZE_TOLERANCE:
        return None  # gaps, a resumed run in the same file, other records in the middle: decode it
    walls = [*first.walls, *other_walls]
    return EventPeek(
        ident=ident,
        rows=rows,
        first_step=first.steps[0],
        last_step=last.steps[-1],
        first_wall=min(walls),
        last_wall=max([*walls, *last.walls]),
        times=tuple(last.times[-RECENT:]),  # (not the window's first row: it may have begun before it)
        texts=texts,
    )


_Scalar = tuple[int, float, int, str, float]  # (order in the scan, wall time, step, tag, value)


def _head_others(found: ScanResult) -> tuple[dict[str, str], list[float], int, list[_Scalar]] | None:
    """The head's records that are not scalars of the usual shape, as a decode reads them: the texts
    (add_text), their times, the bytes of those that hold no scalar (file_version, texts) and the plain
    scalars among them (a step 0, which protobuf leaves out, changes a record's shape); None when one holds
    anything else (a TF2 tensor scalar, a histogram)."""
    from monitor_cb.importers.f32 import shortest_f32
    from monitor_cb.importers.tensorboard import load_event_proto

    event_class = load_event_proto()
    texts: dict[str, str] = {}
    walls: list[float] = []
    scalars: list[_Scalar] = []
    used = 0
    for order, payload in found.others:
        event: Any = event_class.FromString(payload)
        wall = float(event.wall_time)
        walls.append(wall)
        if not event.HasField("summary"):
            used += _HEADER + len(payload) + _FOOTER
            continue  # file_version, graph, session_log
        for value in event.summary.value:
            kind = value.WhichOneof("value")
            if kind == "simple_value":
                scalars.append((order, wall, int(event.step), value.tag, shortest_f32(value.simple_value)))
            elif kind == "tensor" and value.tensor.string_val:
                tag = value.tag[: -len(TEXT_SUFFIX)] if value.tag.endswith(TEXT_SUFFIX) else value.tag
                texts.setdefault(tag, value.tensor.string_val[0].decode("utf-8", "replace"))
                used += _HEADER + len(payload) + _FOOTER
            else:
                return None
    return texts, [w for w in walls if np.isfinite(w)], used, scalars


@dataclass(frozen=True)
class _Events:
    """The scalar events of one end of a file, in file order."""

    step: np.ndarray
    wall: np.ndarray
    tag: np.ndarray  # index into tags
    value: np.ndarray
    tags: list[str]

    @staticmethod
    def of(found: ScanResult, scalars: list[_Scalar]) -> _Events:
        """The scan's fast scalars with the protobuf-decoded ones, merged by their order in the file."""
        if not scalars:
            return _Events(found.step, found.wall, found.tag, found.value, list(found.tags))
        tags = list(found.tags)
        for scalar in scalars:
            if scalar[3] not in tags:
                tags.append(scalar[3])
        order = np.concatenate([found.order, np.array([s[0] for s in scalars], np.int64)])
        by_order = np.argsort(order, kind="stable")
        extra_tag = np.array([tags.index(s[3]) for s in scalars], np.int32)
        return _Events(
            step=np.concatenate([found.step, np.array([s[2] for s in scalars], np.int64)])[by_order],
            wall=np.concatenate([found.wall, np.array([s[1] for s in scalars], np.float64)])[by_order],
            tag=np.concatenate([found.tag, extra_tag])[by_order],
            value=np.concatenate([found.value, np.array([s[4] for s in scalars], np.float64)])[by_order],
            tags=tags,
        )


@dataclass(frozen=True)
class _Edge:
    """The rows of the scalar records at one end of a file."""

    steps: list[int]  # distinct steps, in order
    times: list[float]  # each row's first event time
    walls: list[float]  # every finite event time
    stride: int
    fixed_per_row: float  # bytes per row besides the steps' varints
    plain_per_row: float  # events per row at the row's step
    samples_per_row: float  # "vs samples" events per row
    samples_factor: int  # their step over the row's (the global batch size); 0 without any


def _rows(found: _Events, nbytes: int, head: bool) -> _Edge | None:
    """The edge's rows as a decode would make them; None unless plain steps only grow, at one stride, in
    range, and every "vs samples" value lands on one of them."""
    tags = found.tags
    plain = np.array([samples_base(tag) is None for tag in tags], bool)[found.tag]
    step, wall = found.step, found.wall
    if np.any((step < 0) | (step >= STEP_LIMIT)) or not plain.any():
        return None
    plain_steps = step[plain]
    if np.any(np.diff(plain_steps) < 0):
        return None
    steps = np.unique(plain_steps)
    if len(steps) < 2:
        return None
    strides = {int(b - a) for a, b in pairwise(steps.tolist())}
    if len(strides) != 1:
        return None
    factor = _samples_factor(found, plain, set(steps.tolist()), head)
    if factor is None:
        return None
    firsts = np.flatnonzero(plain & np.r_[True, step[1:] != step[:-1]])
    times = wall[firsts][np.r_[True, np.diff(step[firsts]) != 0]]
    n = len(steps)
    varints = _varint_len(step).sum()
    return _Edge(
        steps=steps.tolist(),
        times=times.tolist(),
        walls=wall[np.isfinite(wall)].tolist(),
        stride=strides.pop(),
        fixed_per_row=(nbytes - varints) / n,
        plain_per_row=int(plain.sum()) / n,
        samples_per_row=int((~plain).sum()) / n,
        samples_factor=factor,
    )


def _samples_factor(found: _Events, plain: np.ndarray, steps: set[int], head: bool) -> int | None:
    """The usual ratio of "vs samples" steps to their row's step (MindFormers': the global batch size), 0
    without such values; None when one would land off the edge's rows. Each value is placed as the
    reader's alignment does: by the ``batch-size`` written before it, else by the latest value of its base
    tag; in the tail, values with neither before them belong to a row that began before the window."""
    if plain.all():
        return 0
    ratios: dict[int, int] = {}
    batch_size: float | None = None
    latest: dict[str, int] = {}
    names = found.tags
    for i in range(len(found.step)):
        tag, step = names[found.tag[i]], int(found.step[i])
        base = samples_base(tag)
        if base is None:
            latest[tag] = step
            if tag == "batch-size":
                batch_size = float(found.value[i])
            continue
        if batch_size is not None and np.isfinite(batch_size) and batch_size >= 1 and step % batch_size == 0:
            row = int(step // batch_size)
        elif base in latest:
            row = latest[base]
        elif head:
            continue  # a decode drops it as unaligned: no row
        elif latest:
            return None  # a decode would align it by a value before the window
        else:
            continue  # the tail's first values, of a row that began before the window
        if row not in steps:
            return None
        if row > 0:
            ratios[step // row] = ratios.get(step // row, 0) + 1
    return max(ratios, key=ratios.__getitem__) if ratios else 0


def _varint_len(values: np.ndarray) -> np.ndarray:
    out = np.ones(len(values), np.int64)
    for j in range(1, 9):  # steps stay below 2**56
        out += values >= (1 << (7 * j))
    return out


def _varint_sum(first: int, last: int, stride: int, factor: int) -> int:
    """The bytes of the varints of ``factor * s`` for s in first, first+stride, ..., last."""
    rows = (last - first) // stride + 1
    total = rows
    for j in range(1, 10):
        low = -(-(1 << (7 * j)) // factor)  # the smallest s whose value needs more than j bytes
        if low > last:
            break
        from_row = max(0, -(-(low - first) // stride))
        total += rows - from_row
    return total


def _bytes_of_rows(first: _Edge, last: _Edge, rows: int) -> float:
    """The bytes ``rows`` rows from the first to the last step take, at the edges' average row shape."""
    start, end, stride = first.steps[0], last.steps[-1], first.stride
    plain = (first.plain_per_row + last.plain_per_row) / 2
    samples = (first.samples_per_row + last.samples_per_row) / 2
    fixed = (first.fixed_per_row + last.fixed_per_row) / 2
    total = rows * fixed + plain * _varint_sum(start, end, stride, 1)
    factor = last.samples_factor or first.samples_factor
    if samples and factor:
        total += samples * _varint_sum(start, end, stride, factor)
    return total


def _tail_start(buf: np.ndarray) -> int | None:
    """The offset of the first whole record of a chain of scalar records that ends exactly at the end of
    ``buf`` or at a record cut short there, checked by CRC; None when there is no such chain."""
    cand, nxt, *_ = _candidates(buf, 0, len(buf))
    if not len(cand):
        return None
    by_end = {int(e): i for i, e in enumerate(nxt.tolist())}
    end = len(buf)
    last = by_end.get(end)
    if last is None:  # a record cut short at the end: the last whole one ends where it begins
        last = next((i for i in range(len(cand) - 1, -1, -1) if _torn_at(buf, int(nxt[i]))), None)
        if last is None:
            return None
    chain = [last]
    while True:
        before = by_end.get(int(cand[chain[-1]]))
        if before is None:
            break
        chain.append(before)
    start = int(cand[chain[-1]])
    if start > _MAX_SKIP or len(chain) < 2:
        return None
    checked = [*chain[::_CRC_EVERY], chain[-1]]
    if not all(_crcs_hold(buf, int(cand[i]), int(nxt[i])) for i in checked):
        return None
    return start


def _torn_at(buf: np.ndarray, pos: int) -> bool:
    """Whether the bytes from ``pos`` to the end are the start of one record, cut short."""
    left = len(buf) - pos
    if left <= 0:
        return False
    if left < _HEADER:
        return True  # too short to check: the chain before it was
    header = buf[pos : pos + _HEADER].tobytes()
    length = int.from_bytes(header[:8], "little")
    return masked_crc32c(header[:8]) == int.from_bytes(header[8:], "little") and _HEADER + length + _FOOTER > left


def _crcs_hold(buf: np.ndarray, start: int, end: int) -> bool:
    record = buf[start:end].tobytes()
    length, payload = record[:8], record[_HEADER:-_FOOTER]
    return masked_crc32c(length) == int.from_bytes(record[8:12], "little") and masked_crc32c(payload) == int.from_bytes(
        record[-_FOOTER:], "little"
    )


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


_TABLE = _crc_table()


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C (Castagnoli), rotated right by 15 bits plus a constant."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
