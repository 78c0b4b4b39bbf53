"""Whether a columnar cache file's rows may stand for its JSONL: checked, not trusted.

A cache file sits in the shared log root, so anyone who can write there can replace it. Its header
describes the bytes of the JSONL it came from, and :meth:`monitor_cb.ingest.tail.FileTail.resume`
compares those bytes with the file; that proves the header, not the rows. A file with a genuine
header and forged rows (every loss 0.001, half the rows, reversed steps) would be shown as the run.
So before its rows are used a cache file must also pass:

* :func:`rows_problem`: the rows agree with the header (row counts, ``n_main`` in range, the main
  steps strictly increasing as the table keeps them, the first and last step the summary names, the
  column types the writer writes, a mask for every column) and with the CRC-32 of every column the
  writer stored in the header (a damaged or edited body);
* :func:`source_problem`: the rows agree with the JSONL itself: every record of the lines in the
  first and last 4 KiB before the cached offset, and in the 16 sampled 4 KiB blocks the tail checks,
  has a row at its step holding its values. A forger who rewrites the checksum still has to leave
  those rows (the first, the last, and a sample across the file) as the source says.

Either gives the reason in words, and the caller reads the JSONL instead. The cost on a 1M-row,
ten-column cache is in ``bench/bench_cacheproof.py``.
"""

from __future__ import annotations

import math
import zlib
from typing import TYPE_CHECKING, Any

import numpy as np

from monitor_cb.ingest.lines import decode_line
from monitor_cb.record import RESERVED_KEYS, STEP_LIMIT

if TYPE_CHECKING:
    from monitor_cb.ingest.colcache import CacheHeader, Fingerprint
    from monitor_cb.ingest.table import TableState

_INTS = ("step", "seg")
_RTOL = 1e-12  # JSON -> float64 by two parsers: equal but for a last-bit rounding at most


def rows_checksum(table: Any) -> str:
    """CRC-32 over every column of an Arrow table (names, values, masks; text as offsets and bytes)."""
    import pyarrow as pa

    crc = zlib.crc32(str(table.num_rows).encode())
    for name in table.column_names:
        crc = zlib.crc32(name.encode(), crc)
        column = table.column(name).combine_chunks()
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            nulls = column.is_null().to_numpy(zero_copy_only=False)
            crc = zlib.crc32(np.packbits(nulls).tobytes(), crc)
            crc = zlib.crc32("\x00".join(column.fill_null("").to_pylist()).encode("utf-8", "surrogatepass"), crc)
        else:
            values = np.ascontiguousarray(column.to_numpy(zero_copy_only=False))
            crc = zlib.crc32(values.view(np.uint8), crc)
    return f"{crc:08x}"


def rows_problem(table: Any, header: CacheHeader) -> str | None:
    """What is wrong with the rows against the header, or None: counts, order, types, masks, checksum."""
    import pyarrow as pa

    total, n = table.num_rows, header.n_main
    if not 0 <= n <= total:
        return f"n_main {n} outside 0..{total} rows"
    if header.rows is not None and header.rows != total:
        return f"{total} rows where the header says {header.rows}"
    if header.summary.n != n:
        return f"{n} main rows where the summary says {header.summary.n}"
    names = set(table.column_names)
    for name in (*_INTS, "t", "t?"):
        if name not in names:
            return f"no {name!r} column"
    for name in table.column_names:
        kind, _, metric = name.partition(":")
        typ = table.schema.field(name).type
        if name in _INTS:
            ok = pa.types.is_int64(typ)
        elif name == "t" or kind == "f":
            ok = pa.types.is_float64(typ)
        elif name == "t?" or kind in ("f?", "s?"):
            ok = pa.types.is_uint8(typ)
        elif kind == "s":
            ok = pa.types.is_string(typ)
        else:
            return f"unknown column {name!r}"
        if not ok:
            return f"column {name!r} is {typ}"
        if kind in ("f", "s") and f"{kind}?:{metric}" not in names:
            return f"column {name!r} has no mask"
    steps = table.column("step").slice(0, n).combine_chunks().to_numpy(zero_copy_only=False)
    if n and not bool(np.all(steps[1:] > steps[:-1])):
        return "the steps of its main rows are not strictly increasing"
    said = (header.summary.first_step, header.summary.last_step)
    if n and (int(steps[0]), int(steps[-1])) != said:
        return f"steps {int(steps[0])}..{int(steps[-1])} where the summary says {said[0]}..{said[1]}"
    if header.rows_crc is None:
        return "no checksum of its rows"
    crc = rows_checksum(table)
    if crc != header.rows_crc:
        return f"its rows' checksum {crc} differs from the header's {header.rows_crc}"
    return None


def source_problem(state: TableState, blocks: list[tuple[int, bytes]], skip: set[int]) -> str | None:
    """What a record of the source (``blocks``: (file offset, bytes) read from the JSONL) says that the rows
    do not, or None.

    Only complete lines inside a block are judged; lines at ``skip`` offsets (bad lines the parser
    reported) and records without an integer step are left out. A record matches when some row at its
    step (main, or one a resumed segment replaced) holds each of its finite numbers.
    """
    for base, data in blocks:
        first = 0 if base == 0 else data.find(b"\n") + 1  # a block may start mid-line
        last = data.rfind(b"\n")
        if (first <= 0 and base != 0) or last < first:
            continue
        offset = base + first
        for line in data[first:last].split(b"\n"):
            start, offset = offset, offset + len(line) + 1
            if not line.strip() or start in skip:
                continue
            record = decode_line(line)
            if isinstance(record, str):
                continue
            problem = _record_problem(state, record)
            if problem is not None:
                return f"the line at byte {start} of the JSONL says {problem}"
    return None


def source_blocks(tail: Any, fingerprint: Fingerprint) -> list[tuple[int, bytes]] | None:
    """(file offset, bytes) of the JSONL to compare a cache file's rows with: the first and last bytes
    before its offset (in the fingerprint, which the tail just compared with the file), and for a local
    file the sampled blocks, read again through :func:`monitor_cb.rootfile.open_regular`; None when
    the file cannot be read."""
    import os

    from monitor_cb.ingest.colcache import sample_offsets
    from monitor_cb.ingest.tail import FileTail
    from monitor_cb.rootfile import open_regular

    offset = fingerprint.offset
    blocks = [(0, fingerprint.head), (offset - len(fingerprint.window), fingerprint.window)]
    if not isinstance(tail, FileTail) or fingerprint.samples is None:
        return blocks
    try:
        with open_regular(tail.path, root=tail.root) as (fd, _):
            blocks += [(start, os.pread(fd, length, start)) for start, length in sample_offsets(offset)]
    except OSError:
        return None
    return blocks


def _record_problem(state: TableState, record: dict[str, Any]) -> str | None:
    step = record.get("step")
    if type(step) is not int or not 0 <= step < STEP_LIMIT:
        return None
    numbers = {k: float(v) for k, v in record.items() if k not in RESERVED_KEYS and _finite(v)}
    rows = _rows_at(state, step)
    if not rows:
        return f"step {step}, which the cache does not hold"
    for values in rows:
        if all(_holds(values, key, value) for key, value in numbers.items()):
            return None
    bad = next(k for k, v in numbers.items() if not _holds(rows[0], k, v))
    return f"{bad}={numbers[bad]!r} at step {step}, where the cache holds another value"


def _finite(value: Any) -> bool:
    if type(value) not in (int, float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _rows_at(state: TableState, step: int) -> list[dict[str, tuple[Any, bool]]]:
    """name -> (value, logged) of every row at ``step``: the main row, then rows resumes replaced."""
    found = []
    at = int(np.searchsorted(state.step, step))
    if at < state.n and int(state.step[at]) == step:
        found.append({k: (v[at], bool(lg[at])) for k, (v, lg) in (*state.floats.items(), *state.texts.items())})
    if state.history is not None:
        steps, _, columns = state.history
        for row in np.flatnonzero(steps == step)[:8]:
            found.append({k: (v[row], bool(lg[row])) for k, (v, lg) in columns.items()})
    return found


def _holds(values: dict[str, tuple[Any, bool]], key: str, value: float) -> bool:
    got = values.get(key)
    if got is None:
        return False
    held, logged = got
    if isinstance(held, str) or held is None:
        return True  # a text column: its numbers are the parser's business, not evidence of forgery
    return logged and math.isclose(float(held), value, rel_tol=_RTOL, abs_tol=0.0)
