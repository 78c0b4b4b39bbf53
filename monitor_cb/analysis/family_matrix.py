"""A family as a parameters x steps matrix of bucket statistics, extended with only the new rows.

The heatmap of a family draws each parameter's value against its own recent baseline. With 1,000
parameters x 100k steps the raw values cannot be drawn or even kept per viewer, so each row is
reduced to at most ``buckets`` step buckets holding the bucket's maximum and minimum (a spike
survives any zoom out), its mean magnitude (the bucket's typical level) and its count of logged NaN/Inf.
All four merge exactly, so when the run outgrows the budget neighbouring buckets are merged in
pairs (the bucket width doubles) and nothing is read twice: a refresh folds in the rows after the
last one it saw. Memory is ``parameters x buckets`` whatever the run's length.

The baseline of a bucket is the median of the (log) mean magnitudes of the ``baseline_buckets`` buckets before
it, so a parameter that jumps 30x reads ``log10(30) ~ 1.5`` whatever its scale, and the jump itself
does not raise its own baseline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

CHUNK_CELLS = 4_000_000  # values read from the frame at a time (rows x parameters): bounds the working memory
_TINY = 1e-30  # |value| below this counts as this, so a zero has a (very low) log


@dataclass(frozen=True)
class MatrixOptions:
    """How a family is reduced.

    Attributes:
        buckets: step buckets per parameter at most (the heatmap's columns).
        baseline_buckets: buckets before a bucket whose median is its baseline.
        min_baseline: buckets a baseline needs; before that the run's first buckets are the baseline.
    """

    buckets: int = 400
    baseline_buckets: int = 16
    min_baseline: int = 3

    def __post_init__(self) -> None:
        for name in ("buckets", "baseline_buckets", "min_baseline"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
        if self.buckets < 2:
            raise ValueError(f"buckets must be at least 2, got {self.buckets}")


@dataclass(frozen=True)
class HeatmapData:
    """What the heatmap draws: one row per parameter, one column per bucket.

    Attributes:
        members: parameter names (rows), in family order.
        start: first step of each bucket; ``end``: its last step (inclusive).
        ratio: log10 of the bucket's extreme (its max or min, whichever is further) over the
            parameter's baseline; NaN where the parameter logged nothing in the bucket.
        value: the extreme itself (hover text); ``nonfinite``: NaN/Inf logged in the bucket.
        judged: the cell's baseline came from buckets before it (False for a run's first buckets,
            judged against the run's own start: coloured, but never a top mover).
    """

    members: tuple[str, ...]
    start: np.ndarray
    end: np.ndarray
    ratio: np.ndarray
    value: np.ndarray
    nonfinite: np.ndarray
    judged: np.ndarray

    @property
    def empty(self) -> bool:
        return self.start.size == 0


@dataclass(frozen=True)
class Mover:
    """A parameter that moved most from its baseline: its peak log ratio and where it was."""

    member: str
    ratio: float  # log10 of the peak value over the baseline (signed); inf for a NaN/Inf logged
    step: int
    value: float

    @property
    def factor(self) -> float:
        """The peak as a factor of the baseline (``30.0`` for 30x, ``0.1`` for a fall to a tenth)."""
        return float(10.0**self.ratio) if np.isfinite(self.ratio) else float("inf")


class FamilyMatrix:
    """Bucket statistics of one family's columns in one run, updated from new rows only.

    ``update(frame, masks)`` reads the frame's rows after the last one it saw (a frame that shrank or
    whose rows changed is read again from the start); ``data()`` is what the heatmap draws.
    """

    def __init__(self, members: Sequence[str], columns: Sequence[str], options: MatrixOptions | None = None) -> None:
        if len(members) != len(columns):
            raise ValueError(f"{len(members)} members but {len(columns)} columns")
        self.members = tuple(members)
        self.columns = tuple(columns)
        self.options = options or MatrixOptions()
        self._reset()

    def _reset(self) -> None:
        p, b = len(self.columns), self.options.buckets
        self.hi = np.full((p, b), np.nan)
        self.lo = np.full((p, b), np.nan)
        self.total = np.zeros((p, b))  # sum of |value| over the finite values
        self.count = np.zeros((p, b), np.int64)
        self.bad = np.zeros((p, b), np.int64)
        self.first = np.full(b, np.iinfo(np.int64).max, np.int64)  # first and last step seen in each bucket
        self.last = np.full(b, np.iinfo(np.int64).min, np.int64)
        self.origin: int | None = None
        self.width = 1
        self.n = 0
        self.rows_seen = 0
        self.last_step_seen: int | None = None
        # the last data()'s trailing medians, and the first bucket changed since (earlier ones are still right)
        self._trail: tuple[np.ndarray, np.ndarray] | None = None
        self._stale_from = 0
        self.medians_computed = 0  # cells whose trailing median the last data() computed (the rest were kept)

    def update(self, frame: pd.DataFrame, masks: Mapping[str, np.ndarray] | None = None) -> int:
        """Fold in the rows of ``frame`` not yet seen; returns how many rows were read."""
        if len(frame) < self.rows_seen or (
            self.rows_seen and int(frame["step"].iloc[self.rows_seen - 1]) != self.last_step_seen
        ):
            self._reset()  # truncated or rewritten: read from the start
        start = self.rows_seen
        known = set(frame.columns)  # looked up once per update, not once per chunk and column
        at = [j for j, c in enumerate(self.columns) if c in known]
        step_of = max(1, CHUNK_CELLS // max(1, len(at)))
        for a in range(start, len(frame), step_of):
            b = min(len(frame), a + step_of)
            self._fold(frame, masks, a, b, at)
        if len(frame):
            self.rows_seen = len(frame)
            self.last_step_seen = int(frame["step"].iloc[-1])
        return len(frame) - start

    def _fold(
        self, frame: pd.DataFrame, masks: Mapping[str, np.ndarray] | None, a: int, b: int, at: Sequence[int]
    ) -> None:
        """Fold rows ``a:b`` in; ``at``: the indexes of the family's columns the frame has."""
        steps = pd.to_numeric(frame["step"].iloc[a:b], errors="coerce").to_numpy(np.float64)
        values = self._values(frame, a, b, at)
        finite = np.isfinite(values)
        clean = bool(finite.all())  # the usual case: every value logged and finite, the fast path
        bad = None if clean else self._logged_bad(values, finite, frame, masks, a, b)
        keep = np.isfinite(steps)
        if bad is not None:
            keep &= finite.any(axis=1) | bad.any(axis=1)  # rows where the family was logged
        if not keep.any():
            return
        if not keep.all():
            steps, values, finite = steps[keep], values[keep], finite[keep]
            bad = bad[keep] if bad is not None else None
        steps = steps.astype(np.int64)
        if self.origin is None:
            self.origin = int(steps.min())
        index = np.maximum(steps - self.origin, 0) // self.width
        while index.max() >= self.options.buckets:
            self._merge_pairs()
            index = np.maximum(steps - self.origin, 0) // self.width
        if np.any(index[1:] < index[:-1]):  # steps out of order (a resumed segment): bucket them in order
            order = np.argsort(index, kind="stable")
            index, steps, values, finite = index[order], steps[order], values[order], finite[order]
            bad = bad[order] if bad is not None else None
        cuts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
        at = index[cuts]
        if clean:
            hi = np.maximum.reduceat(values, cuts, axis=0)
            lo = np.minimum.reduceat(values, cuts, axis=0)
            total = np.add.reduceat(np.abs(values), cuts, axis=0, dtype=np.float64)
            count = np.diff(np.r_[cuts, len(values)])[:, None]
        else:
            shown = np.where(finite, values, np.nan)
            hi = np.fmax.reduceat(shown, cuts, axis=0)
            lo = np.fmin.reduceat(shown, cuts, axis=0)
            total = np.add.reduceat(np.where(finite, np.abs(values), 0.0), cuts, axis=0, dtype=np.float64)
            count = np.add.reduceat(finite, cuts, axis=0, dtype=np.int64)
            self.bad[:, at] += np.add.reduceat(bad, cuts, axis=0, dtype=np.int64).T
        self.hi[:, at] = np.fmax(self.hi[:, at], hi.T)
        self.lo[:, at] = np.fmin(self.lo[:, at], lo.T)
        self.total[:, at] += total.T
        self.count[:, at] += count.T
        self.first[at] = np.minimum(self.first[at], np.minimum.reduceat(steps, cuts))
        self.last[at] = np.maximum(self.last[at], np.maximum.reduceat(steps, cuts))
        self.n = max(self.n, int(at.max()) + 1)
        self._stale_from = min(self._stale_from, int(at.min()))

    def _values(self, frame: pd.DataFrame, a: int, b: int, at: Sequence[int]) -> np.ndarray:
        """Rows ``a:b`` of the family's columns (NaN for a column the frame lacks: not in ``at``), in the
        frame's own float width (a float32 family stays float32: half the bytes to scan)."""
        block = frame.iloc[a:b][[self.columns[j] for j in at]]
        dtype = np.float32 if len(at) and all(d == np.float32 for d in block.dtypes) else np.float64
        try:
            got = block.to_numpy(dtype)  # one copy for every column
        except (TypeError, ValueError):  # text in a column: that text reads as not logged
            got = block.apply(pd.to_numeric, errors="coerce").to_numpy(np.float64)
            dtype = np.float64
        if len(at) == len(self.columns):
            return got
        values = np.full((b - a, len(self.columns)), np.nan, dtype)
        values[:, at] = got
        return values

    def _logged_bad(
        self,
        values: np.ndarray,
        finite: np.ndarray,
        frame: pd.DataFrame,
        masks: Mapping[str, np.ndarray] | None,
        a: int,
        b: int,
    ) -> np.ndarray:
        """Per cell: NaN or Inf that was logged (a NaN where nothing was logged is a gap, not a blow-up)."""
        bad = np.zeros(values.shape, bool)
        for j in np.flatnonzero(~finite.all(axis=0)):  # only columns holding NaN/Inf here
            column = self.columns[j]
            mask = masks.get(column) if masks is not None and column in frame.columns else None
            logged = np.asarray(mask[a:b], bool) if mask is not None and len(mask) == len(frame) else None
            bad[:, j] = ~finite[:, j] & (logged if logged is not None else ~np.isnan(values[:, j]))
        return bad

    def _merge_pairs(self) -> None:
        """Double the bucket width: bucket k and k+1 (k even) become bucket k // 2."""
        pairs = (self.options.buckets + 1) // 2

        def merge(arr: np.ndarray, fn: np.ufunc, fill: float | int) -> np.ndarray:
            padded = np.concatenate([arr, np.full((*arr.shape[:-1], 2 * pairs - arr.shape[-1]), fill, arr.dtype)], -1)
            merged = fn(padded[..., 0::2], padded[..., 1::2])
            out = np.full_like(arr, fill)
            out[..., :pairs] = merged
            return out

        self.hi = merge(self.hi, np.fmax, np.nan)
        self.lo = merge(self.lo, np.fmin, np.nan)
        self.total = merge(self.total, np.add, 0.0)
        self.count = merge(self.count, np.add, 0)
        self.bad = merge(self.bad, np.add, 0)
        self.first = merge(self.first, np.minimum, np.iinfo(np.int64).max)
        self.last = merge(self.last, np.maximum, np.iinfo(np.int64).min)
        self.width *= 2
        self.n = (self.n + 1) // 2
        self._stale_from = 0  # every bucket changed

    def data(self) -> HeatmapData:
        """The heatmap's cells: log ratios against each parameter's baseline, the extreme values, NaN/Inf."""
        n = self.n
        used = np.flatnonzero(self.first[:n] <= self.last[:n])
        hi, lo, count, bad = self.hi[:, used], self.lo[:, used], self.count[:, used], self.bad[:, used]
        with np.errstate(divide="ignore", invalid="ignore"):
            level = np.log(np.maximum(np.where(count > 0, self.total[:, used] / np.maximum(count, 1), np.nan), _TINY))
            # a refresh changes the last bucket or two: the cells before them keep their trailing medians
            kept = int(np.searchsorted(used, self._stale_from))
            kept = 0 if self._trail is None else min(kept, self._trail[0].shape[1])
            trail = _trailing_stats(level, self.options.baseline_buckets, kept, self._trail)
            self._trail, self._stale_from, self.medians_computed = trail, n, level.size - kept * level.shape[0]
            base, judged = _baseline(level, trail, self.options.baseline_buckets, self.options.min_baseline)
            up = np.log(np.maximum(np.abs(hi), _TINY)) - base
            down = np.log(np.maximum(np.abs(lo), _TINY)) - base
            use_hi = ~(np.abs(down) > np.abs(up))
            ratio = np.where(use_hi, up, down) / np.log(10.0)
            value = np.where(use_hi, hi, lo)
        first, last = self.first[used].copy(), self.last[used].copy()
        return HeatmapData(self.members, first, last, ratio, value, bad > 0, judged)


def _trailing_median(level: np.ndarray, window: int, min_count: int) -> tuple[np.ndarray, np.ndarray]:
    """Per cell: the median of the finite cells among the ``window`` before it in its row, and whether
    there were ``min_count`` of them.

    Cells with fewer take the median of the row's first ``window`` finite cells (a run's start is
    judged against itself).
    """
    return _baseline(level, _trailing_stats(level, window), window, min_count)


def _trailing_stats(
    level: np.ndarray, window: int, kept: int = 0, known: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per cell: the median of the finite cells among the ``window`` before it in its row, and how many
    there were. The first ``kept`` columns are taken from ``known`` (an earlier result whose cells up to
    there have not changed: a cell's window lies before it)."""
    p, n = level.shape
    kept = kept if known is not None else 0
    padded = np.concatenate([np.full((p, window), np.nan), level], axis=1)
    windows = np.lib.stride_tricks.sliding_window_view(padded, window, axis=1)[:, kept:n]  # cells before each cell
    ordered = np.sort(windows, axis=-1)  # NaN sort last
    valid = np.isfinite(windows).sum(axis=-1)
    lower = np.take_along_axis(ordered, np.maximum(valid - 1, 0)[..., None] // 2, -1)[..., 0]
    upper = np.take_along_axis(ordered, (valid // 2)[..., None], -1)[..., 0]
    with np.errstate(invalid="ignore"):
        median = np.where(valid > 0, (lower + upper) / 2.0, np.nan)
    if kept and known is not None:
        median = np.concatenate([known[0][:, :kept], median], axis=1)
        valid = np.concatenate([known[1][:, :kept], valid], axis=1)
    return median, valid


def _baseline(
    level: np.ndarray, trail: tuple[np.ndarray, np.ndarray], window: int, min_count: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's baseline (its trailing median, or the run start's where it had fewer than ``min_count``)."""
    median, valid = trail
    if level.shape[1] == 0:
        return level.copy(), np.zeros(level.shape, bool)
    start = _first_medians(level, window)
    judged = valid >= min_count
    return np.where(judged, median, start[:, None]), judged


def _first_medians(level: np.ndarray, window: int) -> np.ndarray:
    """Per row: the median of its first ``window`` finite cells (NaN for a row with none), one numpy pass
    over the matrix (a loop over 1,000 rows cost 0.15 s a draw)."""
    finite = np.isfinite(level)
    firsts = finite & (np.cumsum(finite, axis=1) <= window)  # each row's first ``window`` finite cells
    ordered = np.sort(np.where(firsts, level, np.nan), axis=1)  # NaN sort last
    valid = firsts.sum(axis=1)
    lower = np.take_along_axis(ordered, (np.maximum(valid - 1, 0) // 2)[:, None], 1)[:, 0]
    upper = np.take_along_axis(ordered, (valid // 2)[:, None], 1)[:, 0]
    with np.errstate(invalid="ignore"):
        return np.where(valid > 0, (lower + upper) / 2.0, np.nan)


def top_movers(data: HeatmapData, limit: int = 10, since_step: int | None = None) -> list[Mover]:
    """The parameters that left their baseline most (NaN/Inf first), one entry each, largest first.

    ``since_step``: only buckets ending at or after it (the recent movers).
    """
    if data.empty:
        return []
    cols = np.ones(data.start.size, bool) if since_step is None else data.end >= since_step
    # one numpy pass over the matrix (a loop over 1,000 rows cost 0.07 s a draw)
    bad = data.nonfinite & cols  # NaN/Inf counts even at a run's start
    has_bad, first_bad = bad.any(axis=1), np.argmax(bad, axis=1)
    with np.errstate(invalid="ignore"):
        r = np.where(cols & data.judged & np.isfinite(data.ratio), np.abs(data.ratio), -1.0)
    peak = np.argmax(r, axis=1)
    rows = np.arange(len(data.members))
    moved = r[rows, peak] > 0
    movers = []
    for i in np.flatnonzero(has_bad | moved):
        member = data.members[i]
        if has_bad[i]:
            movers.append(Mover(member, float("inf"), int(data.start[first_bad[i]]), float("nan")))
        else:
            k = peak[i]
            movers.append(Mover(member, float(data.ratio[i, k]), int(data.start[k]), float(data.value[i, k])))
    movers.sort(key=lambda m: (-abs(m.ratio), m.step, m.member))
    return movers[:limit]
