"""Scalar-only summary events decoded with numpy, all records of a read at once.

Decoding a million events field by field in Python (:mod:`monitor_cb.importers.ms_proto`) costs
about 15 µs each. Nearly every record of a long summary file is one step's scalars, which
MindSpore's serializer lays out the same way::

    Event   = 0x09 f64 wall_time | [0x10 varint step] | 0x2a varint len Summary
    Summary = (0x0a varint len Value)+
    Value   = 0x0a varint len tag | 0x1d f32 scalar_value

so every record is walked in parallel, one field at a time over all of them (a cursor per record).
A record that is anything else (the version event, a histogram, an image, a graph, a longer varint, a
value past its record) is left to the field-by-field decoder: it decides what such bytes mean. Only
records whose framing and checksum are already verified (:mod:`monitor_cb.importers.tfrecord`) come here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

MAX_VALUES = 256  # scalars one event may hold on this path (more: the field-by-field decoder)
MAX_TAG = 1024  # longer tags go the slow way too
_VARINT_BYTES = 9  # up to 2**63 - 1: a negative step (10 bytes) is the slow path's to reject


@dataclass(frozen=True)
class ScalarScan:
    """The scalar values of the records the fast path understood, in record order."""

    handled: np.ndarray  # bool per record given: decoded here (the rest need the slow path)
    record: np.ndarray  # int64: the record (index into the records given) of each value
    slot: np.ndarray  # int64: the value's place within its event
    wall: np.ndarray  # float64 per value
    step: np.ndarray  # int64 per value (uint64 steps past 2**63 never get here)
    tag: np.ndarray  # int32 per value: index into ``tags``
    value: np.ndarray  # float32 per value, as written
    tags: list[str]


def scan_scalars(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> ScalarScan:
    """Decode the scalar-only events among the payloads ``buf[starts[i] : starts[i] + lengths[i]]``.

    Records of one length that share the first one's layout byte for byte (keys, lengths, tags: all
    but the wall time, the step's bytes and the values) are read as fixed columns (:func:`_by_template`);
    the others are walked field by field in parallel (:func:`_scan_general`).
    """
    templated = _by_template(buf, starts, lengths)
    rest = np.flatnonzero(~templated.handled)
    if not len(rest):
        return templated
    general = _scan_general(buf, starts[rest], lengths[rest])
    return _merge(templated, general, rest)


TEMPLATE_MIN = 16  # records of one length worth reading as columns


@dataclass(frozen=True)
class _Layout:
    """Where the fields of one scalar-only event are: what records of its length are checked against."""

    step_cols: list[int]  # the step varint's bytes
    values: list[tuple[str, int]]  # (tag, offset of its float32)
    fixed: np.ndarray  # offsets every record of the group must have exactly as the template does


def _layout(payload: bytes) -> _Layout | None:
    """The layout of a scalar-only event (None for anything else)."""
    size = len(payload)

    def varint(pos: int) -> tuple[int, int] | None:
        value = shift = 0
        while pos < size and shift < 63:
            byte = payload[pos]
            value |= (byte & 0x7F) << shift
            pos += 1
            if byte < 0x80:
                return value, pos
            shift += 7
        return None

    if size < 11 or payload[0] != 0x09:
        return None
    pos = 9
    step_cols: list[int] = []
    if payload[pos] == 0x10:
        got = varint(pos + 1)
        if got is None:
            return None
        step_cols = list(range(pos + 1, got[1]))
        pos = got[1]
    if pos >= size or payload[pos] != 0x2A:
        return None
    got = varint(pos + 1)
    if got is None or got[1] + got[0] != size:
        return None
    pos = got[1]
    values: list[tuple[str, int]] = []
    while pos < size:
        head = varint(pos + 1) if payload[pos] == 0x0A else None
        if head is None:
            return None
        vend = head[1] + head[0]
        tag = varint(head[1] + 1) if head[1] < size and payload[head[1]] == 0x0A else None
        if tag is None:
            return None
        tend = tag[1] + tag[0]
        if tend + 5 != vend or vend > size or payload[tend] != 0x1D:
            return None
        values.append((payload[tag[1] : tend].decode("utf-8", "replace"), tend + 1))
        pos = vend
    if not values:
        return None
    free = set(range(1, 9)) | set(step_cols) | {at + j for _, at in values for j in range(4)}
    return _Layout(step_cols, values, np.array([i for i in range(size) if i not in free], np.int64))


def _by_template(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> ScalarScan:
    """The records whose length group shares its first record's layout, read as fixed columns."""
    n = len(starts)
    handled = np.zeros(n, bool)
    parts: list[tuple[np.ndarray, int, np.ndarray, np.ndarray, str, np.ndarray]] = []
    if n:
        counts = np.bincount(np.minimum(lengths, MAX_TEMPLATE_LENGTH + 1))
        for length in np.flatnonzero(counts[: MAX_TEMPLATE_LENGTH + 1] >= TEMPLATE_MIN).tolist():
            rows = np.flatnonzero(lengths == length)
            found = _template(buf, starts[rows[:_TRIES]], length)
            if found is None:
                continue
            layout, template = found
            windows = as_strided(buf, shape=(len(buf) - length + 1, length), strides=(1, 1), writeable=False)
            block = windows[starts[rows]]
            same = (block[:, layout.fixed] == template[layout.fixed]).all(axis=1)
            step = np.zeros(len(rows), np.uint64)
            for j, col in enumerate(layout.step_cols):
                byte = block[:, col]
                last = j == len(layout.step_cols) - 1
                same &= (byte < 0x80) if last else (byte >= 0x80)
                step |= (byte & np.uint8(0x7F)).astype(np.uint64) << np.uint64(7 * j)
            rows, block, step = rows[same], block[same], step[same]
            handled[rows] = True
            wall = np.ascontiguousarray(block[:, 1:9]).view("<f8").ravel()
            for slot, (tag, at) in enumerate(layout.values):
                value = np.ascontiguousarray(block[:, at : at + 4]).view("<f4").ravel()
                parts.append((rows, slot, wall, step.astype(np.int64), tag, value))
    return _assemble(handled, parts)


_TRIES = 8  # records of a group tried as its template (the first may be another kind: the version event)


def _template(buf: np.ndarray, starts: np.ndarray, length: int) -> tuple[_Layout, np.ndarray] | None:
    """The layout of the first of ``starts`` that is a scalar-only event, and its bytes."""
    for start in starts.tolist():
        payload = buf[start : start + length]
        layout = _layout(payload.tobytes())
        if layout is not None:
            return layout, payload
    return None


MAX_TEMPLATE_LENGTH = 4096  # longer records (many scalars in one event) are walked field by field


def _assemble(
    handled: np.ndarray, parts: list[tuple[np.ndarray, int, np.ndarray, np.ndarray, str, np.ndarray]]
) -> ScalarScan:
    """The templated values in record order, tags named once."""
    tags: list[str] = []
    index: dict[str, int] = {}
    if not parts:
        empty = np.empty(0, np.int64)
        return ScalarScan(
            handled, empty, empty, np.empty(0), empty, np.empty(0, np.int32), np.empty(0, np.float32), tags
        )
    record = np.concatenate([p[0] for p in parts])
    slot = np.concatenate([np.full(len(p[0]), p[1], np.int64) for p in parts])
    tag = np.concatenate([np.full(len(p[0]), index.setdefault(p[4], len(index)), np.int32) for p in parts])
    tags = list(index)
    order = record_order(record, slot)
    return ScalarScan(
        handled=handled,
        record=record[order],
        slot=slot[order],
        wall=np.concatenate([p[2] for p in parts])[order],
        step=np.concatenate([p[3] for p in parts])[order],
        tag=tag[order],
        value=np.concatenate([p[5] for p in parts])[order],
        tags=tags,
    )


def _merge(first: ScalarScan, second: ScalarScan, second_records: np.ndarray) -> ScalarScan:
    """Two scans of one set of records (the second over ``second_records`` only) as one, in record order."""
    handled = first.handled.copy()
    handled[second_records[second.handled]] = True
    names = list(first.tags)
    index = {name: i for i, name in enumerate(names)}
    for name in second.tags:
        if name not in index:
            index[name] = len(names)
            names.append(name)
    remap = np.array([index[name] for name in second.tags], np.int32)
    record = np.concatenate([first.record, second_records[second.record]])
    slot = np.concatenate([first.slot, second.slot])
    order = record_order(record, slot)
    return ScalarScan(
        handled=handled,
        record=record[order],
        slot=slot[order],
        wall=np.concatenate([first.wall, second.wall])[order],
        step=np.concatenate([first.step, second.step])[order],
        tag=np.concatenate([first.tag, remap[second.tag] if len(remap) else second.tag.astype(np.int32)])[order],
        value=np.concatenate([first.value, second.value])[order],
        tags=names,
    )


def _scan_general(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> ScalarScan:
    """Every record walked field by field, all at once (a cursor per record)."""
    n = len(starts)
    end = starts + lengths
    ok = (lengths >= 9 + 2) & (_byte(buf, starts) == 0x09)
    wall = _f64(buf, starts + 1)
    pos = starts + 9
    has_step = _byte(buf, pos) == 0x10
    step, width, done = _varints(buf, pos + 1)
    ok &= ~has_step | done
    step = np.where(has_step, step, np.uint64(0))
    pos = np.where(has_step, pos + 1 + width, pos)
    ok &= _byte(buf, pos) == 0x2A
    summary_len, width, done = _varints(buf, pos + 1)
    pos = pos + 1 + width
    ok &= done & (pos + summary_len.astype(np.int64) == end)  # the summary is the event's last field
    rows: list[np.ndarray] = []
    slots: list[np.ndarray] = []
    tag_at: list[np.ndarray] = []
    tag_len: list[np.ndarray] = []
    value_at: list[np.ndarray] = []
    active = np.flatnonzero(ok & (pos < end))
    ok[np.flatnonzero(ok & (pos >= end))] = False  # an event with no value at all: the slow path says what it is
    for slot in range(MAX_VALUES + 1):
        if not len(active):
            break
        if slot == MAX_VALUES:
            ok[active] = False
            break
        p, stop = pos[active], end[active]
        good = _byte(buf, p) == 0x0A
        vlen, width, done = _varints(buf, p + 1)
        vstart = p + 1 + width
        vend = vstart + vlen.astype(np.int64)
        good &= done & (vend <= stop) & (_byte(buf, vstart) == 0x0A)
        tlen, width, done = _varints(buf, vstart + 1)
        tstart = vstart + 1 + width
        tend = tstart + tlen.astype(np.int64)
        good &= done & (tlen <= MAX_TAG) & (_byte(buf, tend) == 0x1D) & (tend + 5 == vend)
        ok[active[~good]] = False
        taken = active[good]
        rows.append(taken)
        slots.append(np.full(len(taken), slot, np.int64))
        tag_at.append(tstart[good])
        tag_len.append(tlen[good].astype(np.int64))
        value_at.append(tend[good] + 1)
        pos[taken] = vend[good]
        active = taken[pos[taken] < end[taken]]
    record = np.concatenate(rows) if rows else np.empty(0, np.int64)
    keep = ok[record] if n else np.empty(0, bool)  # a record that failed on a later value gives none
    record = record[keep]
    slot_arr = np.concatenate(slots)[keep] if slots else np.empty(0, np.int64)
    starts_t = np.concatenate(tag_at)[keep] if tag_at else np.empty(0, np.int64)
    lens_t = np.concatenate(tag_len)[keep] if tag_len else np.empty(0, np.int64)
    values_at = np.concatenate(value_at)[keep] if value_at else np.empty(0, np.int64)
    order = record_order(record, slot_arr)
    record, slot_arr, starts_t, lens_t, values_at = (a[order] for a in (record, slot_arr, starts_t, lens_t, values_at))
    tags, tag_ids = _tag_ids(buf, starts_t, lens_t)
    return ScalarScan(
        handled=ok,
        record=record,
        slot=slot_arr,
        wall=wall[record],
        step=step[record].astype(np.int64),
        tag=tag_ids,
        value=_f32(buf, values_at),
        tags=tags,
    )


def record_order(record: np.ndarray, slot: np.ndarray) -> np.ndarray | slice:
    """The order that sorts values by (record, slot); ``slice(None)`` when they already are (the usual case:
    one length group, or groups in file order), so no sort is paid for."""
    key = record * (MAX_VALUES + 1) + slot
    if len(key) < 2 or bool((key[1:] > key[:-1]).all()):
        return slice(None)
    return np.argsort(key, kind="stable")


def _byte(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    """buf[at]; a position past the end reads the last byte. Safe here: every position read lies after its
    record's start, and a field read past the record's end fails the bound checked with it."""
    if not len(buf):
        return np.zeros(len(at), np.uint8)
    return buf[np.minimum(at, len(buf) - 1)]


def _varints(buf: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value uint64, bytes it takes, complete within :data:`_VARINT_BYTES`) of the varint at each position."""
    value = np.zeros(len(at), np.uint64)
    width = np.zeros(len(at), np.int64)
    done = np.zeros(len(at), bool)
    for j in range(_VARINT_BYTES):
        byte = _byte(buf, at + j)
        taking = ~done
        value |= np.where(taking, (byte & np.uint8(0x7F)).astype(np.uint64) << np.uint64(7 * j), np.uint64(0))
        width = np.where(taking, j + 1, width)
        done |= taking & (byte < 0x80)
        if done.all():
            break
    return value, width, done


def _at(buf: np.ndarray, at: np.ndarray, dtype: str) -> np.ndarray:
    width = np.dtype(dtype).itemsize
    if len(buf) < width:
        return np.zeros(len(at), dtype)
    view = np.ndarray((len(buf) - width + 1,), dtype, buffer=buf, strides=(1,))
    inside = (at >= 0) & (at < len(view))
    out = view[np.where(inside, at, 0)]
    out[~inside] = 0
    return out


def _f64(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    return _at(buf, at, "<f8")


def _f32(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    return _at(buf, at, "<f4")


def _tag_ids(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The distinct tags and each value's index among them, every byte compared (hash, then checked)."""
    n = len(starts)
    if not n:
        return [], np.empty(0, np.int32)
    longest = int(lengths.max())
    digest = lengths.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    for j in range(longest):
        byte = np.where(j < lengths, _byte(buf, starts + j), np.uint8(0)).astype(np.uint64)
        digest = (digest ^ byte) * np.uint64(0x100000001B3)
    _, first, inverse = np.unique(digest, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    rep = first[inverse]  # each value's group representative
    same = lengths == lengths[rep]
    for j in range(longest):
        inside = j < lengths
        same &= ~inside | (_byte(buf, starts + j) == _byte(buf, starts[rep] + j))
    names: list[str] = []
    index: dict[str, int] = {}
    ids = np.empty(n, np.int32)
    group_ids = np.empty(len(first), np.int32)
    for group, at in enumerate(first.tolist()):
        name = buf[starts[at] : starts[at] + lengths[at]].tobytes().decode("utf-8", "replace")
        group_ids[group] = index.setdefault(name, len(index))
        if group_ids[group] == len(names):
            names.append(name)
    ids[:] = group_ids[inverse]
    for row in np.flatnonzero(~same).tolist():  # a hash collision: named one by one
        name = buf[starts[row] : starts[row] + lengths[row]].tobytes().decode("utf-8", "replace")
        ids[row] = index.setdefault(name, len(index))
        if ids[row] == len(names):
            names.append(name)
    return names, ids
