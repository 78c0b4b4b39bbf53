"""A parsed chunk of records in columnar form: what both parsers hand to the table.

Columns are numpy arrays of one length. Metrics are float64 with a parallel
"logged" mask, so a logged NaN stays distinct from a key that was absent.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from monitor_cb.record import NONFINITE_STRINGS

# Kinds of a column, learned from the values seen.
FLOAT = "float"
BOOL = "bool"
TEXT = "text"
MIXED = "mixed"  # numbers and text under one key: only the slow path handles it

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


def records_to_batch(records: Iterable[dict[str, Any]]) -> Batch:
    """Columnar form of decoded records (the slow path: one Python loop per value)."""
    steps: list[int] = []
    segs: list[int] = []
    ranks: list[int] = []
    times: list[float] = []
    float_cols: dict[str, tuple[list[int], list[float]]] = {}
    text_cols: dict[str, tuple[list[int], list[str]]] = {}
    for row, rec in enumerate(records):
        steps.append(_int_or_missing(rec.get("step")))
        segs.append(_int_or_missing(rec.get("seg")))
        ranks.append(_int_or_missing(rec.get("rank")))
        t = as_float(rec.get("t"))
        times.append(math.nan if t is None else t)
        for key, value in rec.items():
            if key in ("step", "seg", "rank", "t"):
                continue
            number = as_float(value)
            if number is not None:
                idx, vals = float_cols.setdefault(key, ([], []))
                idx.append(row)
                vals.append(number)
            elif isinstance(value, str):
                idx_t, vals_t = text_cols.setdefault(key, ([], []))
                idx_t.append(row)
                vals_t.append(value)
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
    for key, (idx, vals_t) in text_cols.items():
        objects = np.full(n, None, dtype=object)
        objects[idx] = vals_t
        logged = np.zeros(n, bool)
        logged[idx] = True
        batch.texts[key] = (objects, logged)
    return batch
