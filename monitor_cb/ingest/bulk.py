"""Decode a large chunk in one polars call: the fast path for full loads.

polars rejects both non-finite spellings (``"NaN"`` strings in a Float64 column and
bare ``NaN`` tokens), so each is first swapped for a sentinel number that no metric
plausibly takes (a subnormal double near 3e-323) and swapped back after parsing.
A key outside the schema learned from a sample makes polars infer the chunk's schema.
Whatever this path cannot decode with certainty (a parse error, a null, a nested
value, a duplicate key, a colon inside a string, a step out of range, a text column
holding what may be a number polars turned into text) returns None; the caller then
tries smaller pieces and finally :mod:`monitor_cb.ingest.lines`, so the fast path is
never the only judge of a doubtful line.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import numpy as np

from monitor_cb.ingest.batch import BOOL, FLOAT, MISSING_INT, TEXT, Batch
from monitor_cb.record import STEP_LIMIT

# token -> sentinel text; the doubles these parse to are mapped back after parsing
_SENTINELS = {"NaN": "2.5e-323", "Infinity": "3e-323", "-Infinity": "3.5e-323"}
_SENTINEL_VALUES = {float(text): float(token) for token, text in _SENTINELS.items()}
_WS = b" \t\r"
# A String column turns numbers and booleans into their text: such a value may not have been text.
# NaN and Infinity too: the other paths read those tokens as numbers.
_MAYBE_NOT_TEXT = r"^(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?|true|false|NaN|-?Infinity)$"


def substitute_nonfinite(data: bytes) -> bytes:
    """Replace every NaN / Infinity value token (quoted or bare) by its sentinel number."""
    spans: list[tuple[int, int, bytes]] = []
    for token in (b"NaN", b"Infinity"):
        for pos in _occurrences(data, token):
            span = _value_span(data, pos, token)
            if span is not None:
                spans.append(span)
    if not spans:
        return data
    spans.sort()
    pieces: list[bytes] = []
    last = 0
    for start, end, text in spans:
        pieces.append(data[last:start])
        pieces.append(text)
        last = end
    pieces.append(data[last:])
    return b"".join(pieces)


def _occurrences(data: bytes, token: bytes) -> list[int]:
    """Positions of ``token``. Searching its first byte is memchr-fast (20x a substring search);
    if that byte turns out common (keys with capitals), switch to the substring search."""
    found: list[int] = []
    first = token[:1]
    misses = 0
    pos = data.find(first)
    while pos >= 0:
        if data.startswith(token, pos):
            found.append(pos)
            pos = data.find(first, pos + len(token))
            continue
        misses += 1
        if misses > 10_000 and misses > 4 * len(found):
            pos = data.find(token, pos + 1)
            while pos >= 0:
                found.append(pos)
                pos = data.find(token, pos + len(token))
            break
        pos = data.find(first, pos + 1)
    return found


def _value_span(data: bytes, pos: int, token: bytes) -> tuple[int, int, bytes] | None:
    """(start, end, sentinel) when the token at ``pos`` is a whole JSON value after a key."""
    start, end = pos, pos + len(token)
    name = token.decode()
    if token == b"Infinity" and data[start - 1 : start] == b"-":
        start -= 1
        name = "-Infinity"
    if data[start - 1 : start] == b'"' and data[end : end + 1] == b'"':
        start, end = start - 1, end + 1
    before = start - 1
    while before >= 0 and data[before] in _WS:
        before -= 1
    after = end
    while after < len(data) and data[after] in _WS:
        after += 1
    if before < 0 or data[before] != ord(":") or after >= len(data) or data[after] not in b",}":
        return None  # inside a string or somewhere else a value cannot be
    return start, end, _SENTINELS[name].encode()


def decode_bulk(data: bytes, kinds: Mapping[str, str], line_cap: int) -> tuple[Batch, dict[str, str]] | None:
    """Decode complete lines with polars; (batch, kinds used) or None when unsure.

    First under the schema ``kinds`` (learned from a sample of lines); if a key outside it
    shows up (a rare eval key, say), once more with polars inferring every key, which
    still beats the line-by-line path several times over.
    """
    # (Counting one byte is memchr-fast; counting '":' would cost twice as much.)
    return _decode(substitute_nonfinite(data), lambda: data.count(b":"), kinds, line_cap)


def decode_bulk_file(
    path: str, mapped: Any, size: int, kinds: Mapping[str, str], line_cap: int
) -> tuple[Batch, dict[str, str]] | None:
    """:func:`decode_bulk` of a whole file that polars reads itself (no copy of its bytes into Python).

    ``mapped`` is the file mapped (its ``size`` bytes are complete lines); while polars parses the
    path its colons are counted there. A file that grew in between has more cells than colons and
    goes the usual way. So does one with a NaN or Infinity token (they would need rewriting first),
    without a search for them: polars refuses each spelling in a number column, and a text column
    holding one is refused by :func:`_to_batch` (a search took 40 ms of CPU from polars' parse).
    """
    import numpy as np

    def count() -> int:
        view = np.frombuffer(mapped, np.uint8, count=size)
        colons = 0
        for i in range(0, size, 16 << 20):
            colons += int(np.count_nonzero(view[i : i + (16 << 20)] == 58))
        del view
        return colons

    return _decode(path, count, kinds, line_cap, sentinels=False)


def _decode(
    source: Any, count_colons: Any, kinds: Mapping[str, str], line_cap: int, sentinels: bool = True
) -> tuple[Batch, dict[str, str]] | None:
    if any(kind not in (FLOAT, BOOL, TEXT) for kind in kinds.values()):
        return None
    try:
        import polars as pl
    except ImportError:  # polars is optional (the dashboard extra): the orjson path reads everything
        return None

    schema: dict[str, pl.DataType] = {"step": pl.Int64(), "rank": pl.Int64(), "seg": pl.Int64(), "t": pl.Float64()}
    for key, kind in kinds.items():
        if key not in schema:
            schema[key] = {FLOAT: pl.Float64(), BOOL: pl.Boolean(), TEXT: pl.String()}[kind]
    # Every value has its own colon, so colons >= non-null cells; equality proves that no key
    # fell outside the schema, no value was null or nested and no string held a colon.
    counter = _CountWhile(count_colons)  # in a thread: polars parses meanwhile, without the GIL
    counter.go()
    frame = _read(source, schema)
    colons = counter()
    if frame is None or colons is None:
        return None  # a bad line or a value of another type: the caller narrows it down
    used = dict(kinds)
    if _cells(frame) != colons:  # a key outside the schema (or a null): let polars infer them all
        frame = _read(source, None)
        inferred = None if frame is None else _inferred_kinds(frame, kinds)
        if frame is None or inferred is None or _cells(frame) != colons:
            return None
        frame, used = _with_reserved(frame), inferred
    batch = _to_batch(frame, used, line_cap, sentinels)
    return None if batch is None else (batch, used)


class _CountWhile:
    """``count`` in a thread while polars parses without the GIL; call the object for its result
    (None when the count failed).

    The thread waits for :meth:`go`, given just before polars is called: begun earlier, it could take
    the GIL first (``bytes.count`` holds it), and the parse would wait for it (20 ms measured).
    """

    def __init__(self, count: Any) -> None:
        import threading

        self._out: list[int | None] = []
        self._start = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(count,), daemon=True)
        self._thread.start()

    def _run(self, count: Any) -> None:
        self._start.wait()
        try:
            self._out.append(count())
        except Exception:  # noqa: BLE001 - no count, no fast path: the caller reads the usual way
            self._out.append(None)

    def go(self) -> None:
        self._start.set()

    def __call__(self) -> int | None:
        self._start.set()
        self._thread.join()
        return self._out[0]


def _read(data: bytes | str, schema: dict[str, object] | None) -> object | None:
    import polars as pl

    source = data if isinstance(data, str) else io.BytesIO(data)
    try:
        if schema is None:
            return pl.read_ndjson(source, infer_schema_length=None)
        return pl.read_ndjson(source, schema=schema)
    except Exception:  # noqa: BLE001 - any polars complaint sends the chunk to the careful path
        return None


def _cells(frame: object) -> int:
    """Non-null cells of a frame."""
    return int(sum(frame.height - count for count in frame.null_count().row(0)))  # type: ignore[attr-defined]


def _inferred_kinds(frame: object, known: Mapping[str, str]) -> dict[str, str] | None:
    """Kinds from the dtypes polars inferred; None for anything the fast path should not judge."""
    import polars as pl

    kinds: dict[str, str] = {}
    for name, dtype in frame.schema.items():  # type: ignore[attr-defined]
        if name in ("step", "rank", "seg"):
            if not (dtype.is_integer() or dtype == pl.Null):
                return None
        elif dtype == pl.Null:
            continue
        elif dtype.is_numeric():
            kinds[name] = FLOAT
        elif dtype == pl.Boolean:
            kinds[name] = BOOL
        elif dtype == pl.String and known.get(name) == TEXT:
            kinds[name] = TEXT  # a string column only where the sample saw text: numbers-as-text stay careful
        else:
            return None
    return kinds


def _with_reserved(frame: object) -> object:
    """An inferred frame with step/rank/seg/t present and typed as the explicit schema types them."""
    import polars as pl

    columns = []
    for name, dtype in (("step", pl.Int64), ("rank", pl.Int64), ("seg", pl.Int64), ("t", pl.Float64)):
        if name in frame.columns:  # type: ignore[attr-defined]
            columns.append(pl.col(name).cast(dtype))
        else:
            columns.append(pl.lit(None, dtype).alias(name))
    return frame.with_columns(columns)  # type: ignore[attr-defined]


def _to_batch(frame: object, kinds: Mapping[str, str], line_cap: int, sentinels: bool = True) -> Batch | None:
    """The batch of a parsed frame; ``sentinels``: NaN/Infinity tokens were swapped before parsing."""
    import polars as pl

    assert isinstance(frame, pl.DataFrame)
    step = frame["step"]
    if step.null_count() < frame.height and not (step.min() >= 0 and step.max() < STEP_LIMIT):  # type: ignore[operator]
        return None  # a step out of range: the line path refuses that line and counts it

    def ints(name: str) -> object:
        column = frame[name]
        return column.fill_null(MISSING_INT) if column.null_count() else column

    numbers = [key for key, kind in kinds.items() if kind == FLOAT and key not in ("step", "rank", "seg", "t")]
    arrays = _to_numpy([ints("step"), ints("seg"), ints("rank"), frame["t"], *(frame[key] for key in numbers)])
    step, seg, rank, t, *values = arrays
    batch = Batch(step=step, seg=seg, rank=rank, t=_floats(t, sentinels))
    converted = dict(zip(numbers, values, strict=True))
    everywhere = np.ones(frame.height, bool)  # one mask for every column logged on every line
    everywhere.flags.writeable = False
    for key, kind in kinds.items():
        if key in ("step", "rank", "seg", "t"):
            continue
        column = frame[key]
        logged = everywhere if column.null_count() == 0 else column.is_not_null().to_numpy()
        if kind == TEXT:
            if (column.str.len_bytes().max() or 0) > line_cap:
                return None  # a value this long means the line was over the cap
            if column.str.contains(_MAYBE_NOT_TEXT).any():
                return None  # "5" or 5? only the line path can tell text from a number here
            batch.texts[key] = (column.to_numpy().astype(object), logged)
        elif kind == BOOL:
            batch.floats[key] = (column.cast(pl.Float64).fill_null(np.nan).to_numpy(), logged)
        else:
            batch.floats[key] = (_floats(converted[key], sentinels), logged)
    return batch


# From this many rows, columns are turned into numpy arrays two at a time: polars copies its chunks
# without the GIL, and on a 1M-row file the twelve copies took 55 ms one after another, 30 ms in pairs.
PARALLEL_ROWS = 200_000
_POOL: dict[int, Any] = {}  # process id -> its pool (a forked child makes its own)


def _to_numpy(columns: list[Any]) -> list[np.ndarray]:
    """Each polars column as a numpy array (nulls of a float column as NaN)."""
    if not columns or len(columns[0]) < PARALLEL_ROWS:
        return [column.to_numpy() for column in columns]
    import os

    pool = _POOL.get(os.getpid())
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL.clear()
        pool = _POOL.setdefault(os.getpid(), ThreadPoolExecutor(2, thread_name_prefix="monitor-cb-to-numpy"))
    return list(pool.map(lambda column: column.to_numpy(), columns))


def _floats(values: np.ndarray, sentinels: bool = True) -> np.ndarray:
    """Float64 values (nulls already NaN) with the sentinels turned back into NaN / ±inf."""
    if values.dtype != np.float64:
        values = values.astype(np.float64, copy=True)
    if not sentinels:
        return values
    tiny = (values > 0) & (values < 1e-322)  # one cheap pass; sentinels are rare
    if tiny.any():
        if not values.flags.writeable:  # polars' zero-copy view: copied only when a sentinel is in it
            values = values.copy()
        for sentinel, real in _SENTINEL_VALUES.items():
            values[tiny & (values == sentinel)] = real
    return values
