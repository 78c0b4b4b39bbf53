"""CRC-32C (Castagnoli) as TFRecord framing uses it, masked, for one buffer or many records at once.

No ``crc32c`` package is a dependency, and a byte loop in Python costs about 0.1 µs a byte: fine for
one record, not for a million. :func:`crc32c_rows` therefore runs the table algorithm over many
records of one length at once, one numpy gather per byte column.
"""

from __future__ import annotations

import numpy as np

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


def crc32c_rows(buf: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray:
    """uint32 CRC-32C of ``buf[s : s + length]`` for every ``s`` in ``starts`` (all the same length)."""
    crc = np.full(len(starts), 0xFFFFFFFF, np.uint32)
    shift = np.uint32(8)
    for j in range(length):
        crc = TABLE[(crc ^ buf[starts + j]) & np.uint32(0xFF)] ^ (crc >> shift)
    return crc ^ np.uint32(0xFFFFFFFF)


def crc32c_many(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, few: int = 4) -> np.ndarray:
    """uint32 CRC-32C of each ``buf[starts[i] : starts[i] + lengths[i]]``, records of one length together.

    A length shared by fewer than ``few`` records is computed record by record (cheaper than a column
    pass per byte for one long record).
    """
    out = np.zeros(len(starts), np.uint32)
    if not len(starts):
        return out
    values, inverse, counts = np.unique(lengths, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    for group, (length, count) in enumerate(zip(values.tolist(), counts.tolist(), strict=True)):
        rows = np.flatnonzero(inverse == group)
        if count < few:
            for row in rows.tolist():
                start = int(starts[row])
                out[row] = crc32c(buf[start : start + length].tobytes())
        else:
            out[rows] = crc32c_rows(buf, starts[rows], length)
    return out
