"""The series one live refresh needs, extracted from a run read once: values, masks, x axes, tile values.

A refresh used to hand the frame down to every chart builder, and each builder asked it again for
the same column as float64 (``float_values``), the same "was logged" mask (``logged_rows``) and
the same x axis; ``loss`` alone was converted three times per refresh. :class:`LiveSeries` wraps
one :class:`~monitor_cb.ingest.runframe.RunFrame` (or a bare frame) and builds each of these once,
on first use, then hands out the same read-only arrays to the tiles, the banner and every chart.
It is a value for one data version: thirty viewers of a run share one (``monitor_cb.views.live_refresh``),
so each array is built once per new data, not once per viewer.

```python
series = LiveSeries.of(store.read(run_id))
series.values("loss"), series.logged("loss"), series.x_axis("time")
series.latest("loss")              # (step, value) of the last logged value, for a tile
series.selection("loss", "step")   # x, y, steps of the logged rows with a valid x, sorted by x
```
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from monitor_cb.analysis.series import XAxis, float_values, logged_rows, x_axis

TAIL_ROWS = 4096  # the newest rows a tile looks at first: on a 1M-row run its value is almost always there


@dataclass(frozen=True)
class Selection:
    """One metric's drawable rows: logged, with a valid x, sorted by x (``rows``: their positions in the frame)."""

    x: np.ndarray
    y: np.ndarray
    steps: np.ndarray | None
    rows: np.ndarray | None  # None: every row, in frame order
    order: np.ndarray | None  # None: already sorted by x

    def __len__(self) -> int:
        return int(self.y.size)


class LiveSeries:
    """Column arrays of one run read, each extracted once and shared (thread-safe, read-only results).

    Args:
        frame: a run frame (``step``, ``t``, metric columns), sorted by step.
        masks: "was logged" masks (``RunFrame.masks``); without one for a column every NaN counts as logged.
        key: the read's identity (``RunFrame.key``), None for a bare frame.
    """

    def __init__(self, frame: pd.DataFrame, masks: Mapping[str, Any] | None = None, key: Hashable = None) -> None:
        self.frame = frame
        self.masks = masks
        self.key = key
        self._memo: dict[Hashable, Any] = {}
        self._lock = threading.Lock()
        self.extractions = 0  # arrays built (tests check that a refresh builds each once)

    @classmethod
    def of(cls, data: Any) -> LiveSeries:
        """From a ``RunFrame`` (frame, masks, key), a ``LiveSeries`` (itself) or a bare DataFrame."""
        if isinstance(data, LiveSeries):
            return data
        if isinstance(data, pd.DataFrame):
            return cls(data)
        return cls(data.frame, data.masks, data.key)

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def columns(self) -> pd.Index:
        return self.frame.columns

    def has(self, column: str) -> bool:
        return column in self.frame.columns

    def has_mask(self, column: str) -> bool:
        return self.masks is not None and column in self.masks

    # ------------------------------------------------------------------ arrays, each built once
    def _once(self, key: Hashable, build: Callable[[], Any]) -> Any:
        hit = self._memo.get(key, _MISSING)
        if hit is not _MISSING:
            return hit
        value = build()  # built outside the lock: two threads may both build it, the first one stored wins
        if isinstance(value, np.ndarray) and value.flags.writeable:
            value = value.view()
            value.flags.writeable = False
        with self._lock:
            if key not in self._memo:
                self.extractions += 1
            return self._memo.setdefault(key, value)

    def memo(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """Anything derived from this data version, built once (``key`` names it; arrays come back read-only)."""
        return self._once(("memo", key), build)

    def values(self, column: str) -> np.ndarray:
        """``column`` as float64 (NaN where missing), read-only."""
        return self._once(("values", column), lambda: float_values(self.frame[column]))  # type: ignore[no-any-return]

    def logged(self, column: str) -> np.ndarray:
        """Per row, whether ``column`` was logged (all True without a mask; all False for a missing column)."""
        return self._once(("logged", column), lambda: logged_rows(self.frame, column, self.masks))  # type: ignore[no-any-return]

    def steps(self) -> np.ndarray:
        return self._once(("steps",), lambda: self.frame["step"].to_numpy())  # type: ignore[no-any-return]

    def x_axis(self, kind: str) -> XAxis:
        """The x axis ``kind`` (:func:`~monitor_cb.analysis.series.x_axis`); KeyError when a column is missing."""
        return self._once(("x", kind), lambda: x_axis(self.frame, kind))  # type: ignore[no-any-return]

    def selection(
        self, metric: str, xa: XAxis | str, rank_mask: np.ndarray | None = None, rank: Any = None
    ) -> Selection:
        """``metric``'s logged rows with a valid x (of the drawn rank when ``rank_mask`` is given), sorted by x.

        ``xa``: an x-axis kind, or this frame's :class:`XAxis` of that kind (built elsewhere, e.g. with
        another origin for elapsed time); one selection is kept per (metric, kind, rank).
        """
        axis = self.x_axis(xa) if isinstance(xa, str) else xa
        key = ("selection", metric, axis.kind, rank)
        return self._once(key, lambda: self._select(metric, axis, rank_mask))  # type: ignore[no-any-return]

    def _axis_checks(self, axis: XAxis) -> tuple[np.ndarray, bool]:
        """Per x axis, once for every metric: rows with a valid x, and whether x never steps back."""

        def build() -> tuple[np.ndarray, bool]:
            xv = axis.values
            return valid_x(xv), bool(np.all(xv[1:] >= xv[:-1]))

        if self._memo.get(("x", axis.kind)) is not axis:  # an axis built elsewhere (another origin): not kept
            return build()
        return self._once(("axis checks", axis.kind), build)  # type: ignore[no-any-return]

    def _select(self, metric: str, axis: XAxis, rank_mask: np.ndarray | None) -> Selection:
        xv, y = axis.values, self.values(metric)
        steps = self.steps() if self.has("step") else None
        valid, ordered = self._axis_checks(axis)
        keep = self.logged(metric) & valid
        if rank_mask is not None:
            keep = keep & rank_mask
        rows = None
        if not keep.all():  # copying 1M rows costs milliseconds: only when some rows drop out
            rows = np.flatnonzero(keep)
            xv, y = xv[rows], y[rows]
            steps = steps[rows] if steps is not None else None
            ordered = bool(np.all(xv[1:] >= xv[:-1])) if not ordered else True  # a subset of an ordered x is ordered
        order = None
        if y.size and not ordered:  # wall time can step back after a clock change
            order = np.argsort(xv, kind="stable")
            xv, y = xv[order], y[order]
            steps = steps[order] if steps is not None else None
        return Selection(_frozen(xv), _frozen(y), None if steps is None else _frozen(steps), rows, order)

    # ------------------------------------------------------------------ what the tiles and the banner read
    def latest(self, column: str) -> tuple[int, float] | None:
        """``(step, value)`` of the last logged value of ``column`` (may be NaN); None if never logged."""
        return self._once(("latest", column), lambda: self._latest(column))  # type: ignore[no-any-return]

    def _latest(self, column: str) -> tuple[int, float] | None:
        if not self.has(column) or len(self) == 0:
            return None
        mask, values, steps = self.logged(column), self.values(column), self.steps()
        for start in (max(0, len(mask) - TAIL_ROWS), 0):
            rows = np.flatnonzero(mask[start:])
            if rows.size:
                row = start + int(rows[-1])
                return int(steps[row]), float(values[row])
        return None

    def last_value(self, column: str) -> float | None:
        """The value a tile shows: the last logged one given a mask; without one the last finite value
        (a NaN then usually means "not logged here"), or a non-finite tail (the run diverged) as such."""
        if self.has_mask(column):
            found = self.latest(column)
            return None if found is None else found[1]
        return self._once(("last_value", column), lambda: self._last_unmasked(column))  # type: ignore[no-any-return]

    def _last_unmasked(self, column: str) -> float | None:
        if not self.has(column) or len(self) == 0:
            return None
        values = self.values(column)
        for start in (max(0, values.size - TAIL_ROWS), 0):
            found = last_unmasked(values[start:])
            if found is not None or start == 0:
                return found
        return None  # pragma: no cover - the loop returns at start == 0

    def first_nonfinite(self, column: str) -> tuple[int, float] | None:
        """``(step, t)`` of the first logged NaN/±inf in ``column`` (``t`` NaN without a ``t`` column)."""
        return self._once(("first_bad", column), lambda: self._first_bad(column))  # type: ignore[no-any-return]

    def _first_bad(self, column: str) -> tuple[int, float] | None:
        if not self.has(column):
            return None
        rows = np.flatnonzero(~np.isfinite(self.values(column)) & self.logged(column))
        if rows.size == 0:
            return None
        row = int(rows[0])
        t = float(self.values("t")[row]) if self.has("t") else float("nan")
        return int(self.steps()[row]), t


def last_unmasked(values: np.ndarray) -> float | None:
    """The last finite value, or the last ±inf after it (a diverged tail); None when nothing is finite or inf."""
    if values.size == 0:
        return None
    finite = np.flatnonzero(np.isfinite(values))
    if finite.size == 0:
        return float(values[-1]) if np.isinf(values[-1]) else None
    last = int(finite[-1])
    tail = values[last + 1 :]
    if tail.size and np.isinf(tail).any():
        return float(tail[np.isinf(tail)][-1])
    return float(values[last])


def valid_x(values: np.ndarray) -> np.ndarray:
    """Rows with a drawable x (not NaN/NaT)."""
    if np.issubdtype(values.dtype, np.datetime64):
        return ~np.isnat(values)
    return np.isfinite(values.astype(np.float64, copy=False))


def _frozen(values: np.ndarray) -> np.ndarray:
    if values.flags.writeable:
        values = values.view()
        values.flags.writeable = False
    return values


_MISSING = object()
