"""TFRecord framing with both checksums verified, over a whole buffer at once (numpy).

MindSpore's summary files (and TensorBoard's) are a chain of records::

    u64 length | u32 masked CRC-32C of the 8 length bytes | payload | u32 masked CRC-32C of the payload

A length is only trusted when its own checksum matches: then the chain goes on after it. A record
whose payload checksum does not match is framed (its length was sound) and marked bad; a length
whose checksum does not match, or that claims more than :data:`RECORD_CAP`, ends the framing there
(the rest of the file cannot be told from noise). A record cut off at the end of the buffer is "not
yet": ``end`` stops before it and the next read starts there.

Speed: every position where a record could begin (the payload's first byte is ``0x09``, a proto's
field 1 as a double: MindSpore's ``Event`` and ``LineageEvent`` both start with ``wall_time``) has
its length checksum verified in one vectorised pass; runs of such records that chain exactly are
taken whole, and only breaks in the chain are walked one record at a time.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from monitor_cb.importers.crc32c import crc32c, crc32c_many, crc32c_rows, masked

HEADER = 12  # u64 length + u32 masked CRC of it
FOOTER = 4  # u32 masked CRC of the payload
RECORD_CAP = 64 << 20  # a longer record is refused as damage (nothing of ours needs one; never allocated)
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


@dataclass(frozen=True)
class Framing:
    """The records found in a buffer: where each payload is, and whether its checksum matched."""

    starts: np.ndarray  # int64: payload offsets in the buffer
    lengths: np.ndarray  # int64: payload lengths
    crc_ok: np.ndarray  # bool: the payload's checksum matched
    end: int  # just after the last complete record (where the next read starts)
    damaged: str | None = None  # why framing stopped at ``end`` before the buffer's end (None: it did not)

    @property
    def n(self) -> int:
        return len(self.starts)


def frame(buf: np.ndarray, start: int = 0, cap: int = RECORD_CAP) -> Framing:
    """Every complete record of ``buf[start:]`` (uint8), checksums verified."""
    size = len(buf)
    cand, nxt = candidates(buf, start, size, cap)
    chained = nxt[:-1] == cand[1:] if len(cand) else np.empty(0, bool)
    breaks = np.flatnonzero(~chained)
    runs: list[np.ndarray] = []
    singles: list[tuple[int, int]] = []  # (record offset, payload length) walked one by one
    pos, index, n = start, 0, len(cand)
    damaged: str | None = None
    while pos < size:
        index = int(np.searchsorted(cand, pos, side="left"))
        if index < n and cand[index] == pos:
            after = np.searchsorted(breaks, index)
            last = int(breaks[after]) if after < len(breaks) else n - 1
            runs.append(np.arange(index, last + 1))
            pos = int(nxt[last])
            continue
        found = _one(buf, pos, size, cap)
        if found is None:
            break  # cut off at the end: not yet
        if isinstance(found, str):
            damaged = found
            break
        singles.append((pos, found))
        pos += HEADER + found + FOOTER
    chosen = np.concatenate(runs) if runs else np.empty(0, np.int64)
    record_at = np.concatenate([cand[chosen], np.array([s for s, _ in singles], np.int64)])
    walked = np.array([n for _, n in singles], np.int64)
    lengths = np.concatenate([nxt[chosen] - cand[chosen] - HEADER - FOOTER, walked])
    order = np.argsort(record_at, kind="stable")
    record_at, lengths = record_at[order], lengths[order]
    starts = record_at + HEADER
    stored = _u32_at(buf, starts + lengths)
    crc_ok = masked(crc32c_many(buf, starts, lengths)) == stored
    return Framing(starts, lengths, crc_ok, pos, damaged)


def candidates(buf: np.ndarray, start: int, size: int, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """(record offsets, next record offsets) of every complete record whose payload starts with 0x09
    and whose length's checksum matches, sorted."""
    empty = np.empty(0, np.int64)
    if size - start < HEADER + 1 + FOOTER:
        return empty, empty
    q = np.flatnonzero(buf[start + HEADER : size] == np.uint8(0x09)) + (start + HEADER)
    p = q - HEADER
    length = _u64_at(buf, p)
    ok = (length > 0) & (length <= np.uint64(cap))
    p, length = p[ok], length[ok].astype(np.int64)
    nxt = p + HEADER + length + FOOTER
    ok = nxt <= size
    p, nxt = p[ok], nxt[ok]
    ok = masked(crc32c_rows(buf, p, 8)) == _u32_at(buf, p + 8)
    return p[ok], nxt[ok]


def _one(buf: np.ndarray, pos: int, size: int, cap: int) -> int | str | None:
    """The payload length of the record at ``pos``; None when it is not complete yet; the reason when
    its length cannot be trusted."""
    if pos + HEADER > size:
        return None
    head = buf[pos : pos + HEADER].tobytes()
    (length,) = _U64.unpack(head[:8])
    (stored,) = _U32.unpack(head[8:])
    if masked(crc32c(head[:8])) != stored:
        return f"a record length at byte {pos:,} fails its checksum (damaged or not a summary file)"
    if length > cap:
        return f"a record at byte {pos:,} claims {length:,} bytes, over the {cap:,}-byte cap"
    if pos + HEADER + length + FOOTER > size:
        return None
    return int(length)


def _u64_at(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    return _at(buf, at, "<u8")


def _u32_at(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    return _at(buf, at, "<u4")


def _at(buf: np.ndarray, at: np.ndarray, dtype: str) -> np.ndarray:
    """Little-endian numbers starting at each byte position (unaligned; past the end: 0)."""
    width = np.dtype(dtype).itemsize
    if len(buf) < width:
        return np.zeros(len(at), dtype)
    view = np.ndarray((len(buf) - width + 1,), dtype, buffer=buf, strides=(1,))
    inside = (at >= 0) & (at <= len(view) - 1)
    out = view[np.where(inside, at, 0)]
    out[~inside] = 0
    return out


def encode(payload: bytes) -> bytes:
    """One record framed as MindSpore's and TensorBoard's writers frame it (for tests and benchmarks)."""
    head = _U64.pack(len(payload))
    return head + _U32.pack(masked(crc32c(head))) + payload + _U32.pack(masked(crc32c(payload)))
