"""A parsed chunk of records in columnar form: what both parsers hand to the table.

Columns are numpy arrays of one length. Metrics are float64 with a parallel
"logged" mask, so a logged NaN stays distinct from a key that was absent.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from monitor_cb.record import NONFINITE_STRINGS, STEP_LIMIT, step_of

# Kinds of a column, learned from the values seen.
FLOAT = "float"
BOOL = "bool"
TEXT = "text"
MIXED = "mixed"  # numbers and booleans under one key: only the slow path handles it
NUMERIC_KINDS = frozenset({FLOAT, BOOL, MIXED})  # a key of these kinds: a text value under it is a bad value
_RESERVED = frozenset({"step", "seg", "rank", "t"})

MISSING_INT = -1  # step / rank / seg absent on a line


@dataclass
class Batch:
    """Records of one chunk, column by column (row order = line order)."""

    step: np.ndarray  # int64, MISSING_INT where absent
    seg: np.ndarray  # int64, MISSING_INT where absent
    rank: np.ndarray  # int64, MISSING_INT where absent
    t: np.ndarray  # float64, NaN where absent
    floats: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # name -> (values, logged)
    texts: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # name -> (objects, logged)

    def __len__(self) -> int:
        return len(self.step)

    @classmethod
    def empty(cls) -> Batch:
        return cls(
            step=np.empty(0, np.int64),
            seg=np.empty(0, np.int64),
            rank=np.empty(0, np.int64),
            t=np.empty(0, np.float64),
        )


def concat_batches(batches: list[Batch]) -> Batch:
    """Batches of consecutive pieces of a chunk as one (keys missing in a piece: not logged there)."""
    if len(batches) == 1:
        return batches[0]
    if not batches:
        return Batch.empty()
    out = Batch(
        step=np.concatenate([b.step for b in batches]),
        seg=np.concatenate([b.seg for b in batches]),
        rank=np.concatenate([b.rank for b in batches]),
        t=np.concatenate([b.t for b in batches]),
    )
    for attr, fill, dtype in (("floats", np.nan, np.float64), ("texts", None, object)):
        names = dict.fromkeys(name for b in batches for name in getattr(b, attr))
        target = getattr(out, attr)
        for name in names:
            values, logged = [], []
            for b in batches:
                got = getattr(b, attr).get(name)
                values.append(got[0] if got is not None else np.full(len(b), fill, dtype))
                logged.append(got[1] if got is not None else np.zeros(len(b), bool))
            target[name] = (np.concatenate(values), np.concatenate(logged))
    return out


def adopt_legacy_time(batch: Batch) -> Batch:
    """The origin article's files call the time ``ts``: use it where ``t`` is absent."""
    legacy = batch.floats.pop("ts", None)
    if legacy is not None:
        values, logged = legacy
        use = logged & np.isnan(batch.t)
        batch.t = np.where(use, values, batch.t)
    return batch


def value_kind(value: Any) -> str | None:
    """Kind of one JSON value, None for values no column can hold (null, lists, objects)."""
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, (int, float)):
        return FLOAT
    if isinstance(value, str):
        return FLOAT if value in NONFINITE_STRINGS else TEXT
    return None


def as_float(value: Any) -> float | None:
    """A record value as a float (NaN/Inf spellings decoded), None when it is not numeric."""
    if isinstance(value, (bool, int, float)):
        try:
            return float(value)
        except OverflowError:  # an integer too large for a double: keep the sign, like JSON parsers do
            return math.copysign(math.inf, value)
    if isinstance(value, str):
        return NONFINITE_STRINGS.get(value)
    return None


def _int_or_missing(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return MISSING_INT
    if isinstance(value, float):
        if not value.is_integer():
            return MISSING_INT
        value = int(value)
    return value if 0 <= value < 2**62 else MISSING_INT


def bad_step_reason(value: Any) -> str:
    """Why a line's ``step`` is refused (it is present, not null, and not a step)."""
    shown = repr(value) if not isinstance(value, str) else repr(value[:40])
    return f"step {shown[:60]} is not an integer from 0 to {STEP_LIMIT - 1}"


def bad_value_reason(key: str, value: str) -> str:
    """Why a text value under a numeric key is not read (the line's other values are)."""
    return f"text {value[:40]!r} under numeric key {key[:80]!r} (value skipped)"


def records_to_batch(
    records: Iterable[dict[str, Any]],
    numeric: Callable[[str], bool] | None = None,
    problems: list[tuple[int, str, bool]] | None = None,
) -> Batch:
    """Columnar form of decoded records (the slow path: one Python loop per value).

    A record whose ``step`` is present but not a step (7.5, -5, "7", true, 2**62) is left
    out: merged under the step before it, it would overwrite that step's values. A text
    value under a numeric key (``numeric(key)``, or a key holding numbers in these records)
    is left out; the rest of its record is kept, so the column stays numeric. Each of
    these is reported as ``(index of the record, reason, only the value skipped)`` in ``problems``.
    """
    steps: list[int] = []
    segs: list[int] = []
    ranks: list[int] = []
    times: list[float] = []
    float_cols: dict[str, tuple[list[int], list[float]]] = {}
    text_cols: dict[str, tuple[list[int], list[str], list[int]]] = {}
    row = 0
    for index, rec in enumerate(records):
        raw_step = rec.get("step")
        step = raw_step if type(raw_step) is int and 0 <= raw_step < STEP_LIMIT else step_of(raw_step)
        if step is None:
            if raw_step is not None:
                if problems is not None:
                    problems.append((index, bad_step_reason(raw_step), False))
                continue
            step = MISSING_INT
        steps.append(step)
        segs.append(_int_or_missing(rec.get("seg")))
        ranks.append(_int_or_missing(rec.get("rank")))
        raw_t = rec.get("t")
        t = as_float(raw_t)
        if t is None:
            t = math.nan
            if isinstance(raw_t, str) and problems is not None:
                problems.append((index, bad_value_reason("t", raw_t), True))
        times.append(t)
        for key, value in rec.items():
            if key in _RESERVED:
                continue
            number = as_float(value)
            if number is not None:
                idx, vals = float_cols.setdefault(key, ([], []))
                idx.append(row)
                vals.append(number)
            elif isinstance(value, str):
                idx_t, vals_t, where = text_cols.setdefault(key, ([], [], []))
                idx_t.append(row)
                vals_t.append(value)
                where.append(index)
        row += 1
    for key in [k for k in text_cols if k in float_cols or (numeric is not None and numeric(k))]:
        _, vals_t, where = text_cols.pop(key)
        if problems is not None:
            problems.extend(
                (index, bad_value_reason(key, value), True) for index, value in zip(where, vals_t, strict=True)
            )
    n = len(steps)
    batch = Batch(
        step=np.array(steps, np.int64),
        seg=np.array(segs, np.int64),
        rank=np.array(ranks, np.int64),
        t=np.array(times, np.float64),
    )
    for key, (idx, vals) in float_cols.items():
        values = np.full(n, np.nan)
        values[idx] = vals
        logged = np.zeros(n, bool)
        logged[idx] = True
        batch.floats[key] = (values, logged)
    for key, (idx, vals_t, _) in text_cols.items():
        objects = np.full(n, None, dtype=object)
        objects[idx] = vals_t
        logged = np.zeros(n, bool)
        logged[idx] = True
        batch.texts[key] = (objects, logged)
    return batch
