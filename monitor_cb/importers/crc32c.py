"""CRC-32C (Castagnoli) as TFRecord framing uses it, masked, for one buffer or many records at once.

No ``crc32c`` package is a dependency, and a byte loop in Python costs about 0.1 µs a byte: fine for
one record, not for a million. :func:`crc32c_rows` therefore computes many records of one length at
once from the CRC's linearity: for messages of length L, ``crc(m) = crc(0^L) ^ XOR_j T_j[m[j]]``, where
``T_j[b]`` is what byte ``b`` at position ``j`` contributes (the table entry of ``b`` carried through the
``L - 1 - j`` zero bytes after it). The messages are gathered as whole rows, then each byte column
is one table lookup XORed in (no shift, mask or dependency from one byte to the next): about four
times the byte loop's speed.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
from numpy.lib.stride_tricks import as_strided

_POLY = 0x82F63B78  # CRC-32C, reflected
_MASK_DELTA = 0xA282EAD8  # TFRecord's mask (LevelDB's): rotate right by 15, add this


def _table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> np.uint32(1)) ^ np.uint32(_POLY), table >> np.uint32(1))
    return table.astype(np.uint32)


TABLE = _table()
_TABLE_LIST = [int(v) for v in TABLE]


def crc32c(data: bytes | memoryview) -> int:
    """The CRC-32C of ``data`` (one record: a Python loop over its bytes)."""
    crc = 0xFFFFFFFF
    table = _TABLE_LIST
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(crc: int | np.ndarray) -> int | np.ndarray:
    """The masked form TFRecord stores (so a CRC of data holding CRCs is not degenerate)."""
    if isinstance(crc, np.ndarray):
        c = crc.astype(np.uint32)
        return ((c >> np.uint32(15)) | (c << np.uint32(17))) + np.uint32(_MASK_DELTA)
    crc &= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


_ROWS_AT_ONCE = 1 << 16  # records gathered at once (bounds the n x L temporaries)
_contributions: dict[int, tuple[np.ndarray, np.uint32]] = {}


def _position_tables(length: int) -> tuple[np.ndarray, np.uint32]:
    """(T: length x 256 contributions, the CRC of ``length`` zero bytes) for messages of that length."""
    found = _contributions.get(length)
    if found is None:
        tables = np.empty((length, 256), np.uint32)
        carried = TABLE.copy()
        for j in range(length - 1, -1, -1):
            tables[j] = carried
            carried = TABLE[carried & np.uint32(0xFF)] ^ (carried >> np.uint32(8))
        if len(_contributions) > 64:
            _contributions.clear()
        found = _contributions[length] = (tables, np.uint32(crc32c(bytes(length))))
    return found


def crc32c_rows(buf: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray:
    """uint32 CRC-32C of ``buf[s : s + length]`` for every ``s`` in ``starts`` (all the same length)."""
    out = np.empty(len(starts), np.uint32)
    if length == 0:
        out[:] = crc32c(b"")
        return out
    tables, zeros = _position_tables(length)
    buf = np.ascontiguousarray(buf, np.uint8)
    # row i of ``windows`` is buf[i : i + length] (a view): the messages are gathered as whole rows
    windows = as_strided(buf, shape=(len(buf) - length + 1, length), strides=(1, 1), writeable=False)
    for lo in range(0, len(starts), _ROWS_AT_ONCE):
        columns = windows[starts[lo : lo + _ROWS_AT_ONCE]].T.copy()  # byte j of every message: one row
        acc = np.full(columns.shape[1], zeros, np.uint32)
        for j in range(length):
            acc ^= tables[j][columns[j]]
        out[lo : lo + len(acc)] = acc
    return out


def crc32c_many(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, few: int = 4) -> np.ndarray:
    """uint32 CRC-32C of each ``buf[starts[i] : starts[i] + lengths[i]]``, records of one length together.

    A length shared by fewer than ``few`` records is computed record by record (cheaper than a column
    pass per byte for one long record).
    """
    out = np.zeros(len(starts), np.uint32)
    if not len(starts):
        return out
    order = np.argsort(lengths, kind="stable")  # each length's records together, in one sort
    ordered = lengths[order]
    bounds = [0, *(np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist(), len(order)]
    for lo, hi in pairwise(bounds):
        rows, length = order[lo:hi], int(ordered[lo])
        if hi - lo < few:
            for row in rows.tolist():
                start = int(starts[row])
                out[row] = crc32c(buf[start : start + length].tobytes())
        else:
            out[rows] = crc32c_rows(buf, starts[rows], length)
    return out
