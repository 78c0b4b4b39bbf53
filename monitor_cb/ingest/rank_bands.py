"""One metric across the ranks of a run, aggregated per step: what the rank charts and straggler checks show.

A run with 8 ranks x 1M steps is 8M rows; its rank band chart shows, per step, the lowest, median
and highest value across ranks and which rank holds each. :func:`rank_bands` computes that once
from the per-rank columns (:class:`RankColumn`, read from each rank's table or its cache file), a
block of steps at a time, so the server holds ``steps`` values per statistic, not ``ranks x
steps``, and no merged frame is ever built. :class:`BandBuilder` keeps the bands of a live run and
recomputes only the steps new records reached.

Why numpy and not polars here: the per-step statistics of a ranks x steps matrix are one sort per
row; on this 2-core machine numpy's ``sort(axis=1)`` of 1M x 8 values takes about 0.1 s, polars'
``group_by(step)`` over the same 8M long rows 1.8 s and its ``concat_list(...).list.median()``
4 s (``bench/bench_scale.py`` prints the three side by side).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

BLOCK_ROWS = 1 << 17  # steps aggregated at once: bounds the ranks x steps scratch memory
MAX_NONFINITE = 100_000  # non-finite cells kept (the first ones); charts draw a few hundred


@dataclass(frozen=True)
class RankColumn:
    """One rank's rows of one metric: steps (sorted, unique), values, "was logged", and ``t`` per row."""

    rank: int
    steps: np.ndarray
    values: np.ndarray
    logged: np.ndarray
    t: np.ndarray


@dataclass(frozen=True)
class RankBands:
    """Per step (where any rank logged ``metric``): statistics of its finite values across ranks.

    Attributes:
        steps: increasing steps.
        t: the latest ``t`` among the ranks that logged the step (a step is done when its last rank is).
        logged: ranks that logged it; ``finite``: ranks with a finite value.
        lo, median, mean, hi: over the finite values (NaN where none).
        lo_rank, hi_rank: the rank holding ``lo`` / ``hi`` (the lowest such rank; -1 where none).
        others_median: the median of the other ranks' finite values at ``hi_rank`` (for "how much slower
            is the slowest rank than the rest"; NaN with fewer than two finite values).
        bad_steps, bad_ranks, bad_values: logged NaN/±inf cells (at most :data:`MAX_NONFINITE`).
        ranks: the ranks aggregated.
    """

    metric: str
    ranks: tuple[int, ...]
    steps: np.ndarray
    t: np.ndarray
    logged: np.ndarray
    finite: np.ndarray
    lo: np.ndarray
    median: np.ndarray
    mean: np.ndarray
    hi: np.ndarray
    lo_rank: np.ndarray
    hi_rank: np.ndarray
    others_median: np.ndarray
    bad_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    bad_ranks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    bad_values: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __len__(self) -> int:
        return int(self.steps.size)

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, name).nbytes for name in _ARRAYS) + self.bad_steps.nbytes * 3

    def since(self, step: int) -> RankBands:
        """The steps from ``step`` on (views)."""
        return self._cut(slice(int(np.searchsorted(self.steps, step, side="left")), None), step)

    def before(self, step: int) -> RankBands:
        """The steps before ``step`` (views)."""
        return self._cut(slice(None, int(np.searchsorted(self.steps, step, side="left"))), None, step)

    def _cut(self, rows: slice, lo: int | None, hi: int | None = None) -> RankBands:
        keep = np.ones(self.bad_steps.size, bool)
        if lo is not None:
            keep &= self.bad_steps >= lo
        if hi is not None:
            keep &= self.bad_steps < hi
        arrays = {name: getattr(self, name)[rows] for name in _ARRAYS}
        return RankBands(
            self.metric, self.ranks, **arrays, bad_steps=self.bad_steps[keep], bad_ranks=self.bad_ranks[keep],
            bad_values=self.bad_values[keep],
        )  # fmt: skip


_ARRAYS = ("steps", "t", "logged", "finite", "lo", "median", "mean", "hi", "lo_rank", "hi_rank", "others_median")


def empty_bands(metric: str, ranks: Sequence[int] = ()) -> RankBands:
    f, i = np.zeros(0), np.zeros(0, np.int64)
    return RankBands(metric, tuple(ranks), i, f, i.astype(np.int32), i.astype(np.int32), f, f, f, f, i, i, f)


def concat_bands(parts: Sequence[RankBands]) -> RankBands:
    """Bands of consecutive step ranges as one."""
    parts = [p for p in parts if len(p) or p.bad_steps.size]
    if not parts:
        return empty_bands("")
    if len(parts) == 1:
        return parts[0]
    arrays = {name: np.concatenate([getattr(p, name) for p in parts]) for name in _ARRAYS}
    bad = {name: np.concatenate([getattr(p, name) for p in parts]) for name in ("bad_steps", "bad_ranks", "bad_values")}
    return RankBands(parts[0].metric, parts[-1].ranks, **arrays, **bad)


def rank_bands(metric: str, columns: Sequence[RankColumn]) -> RankBands:
    """The bands of ``metric`` from each rank's column (ranks in any order; each rank once)."""
    columns = sorted(columns, key=lambda c: c.rank)
    ranks = tuple(c.rank for c in columns)
    if not columns:
        return empty_bands(metric)
    rank_ids = np.asarray(ranks, np.int64)
    first = columns[0].steps
    aligned = all(c.steps.size == first.size and np.array_equal(c.steps, first) for c in columns[1:])
    steps = first if aligned else np.unique(np.concatenate([c.steps for c in columns]))
    parts = []
    for start in range(0, max(steps.size, 1), BLOCK_ROWS):
        block = steps[start : start + BLOCK_ROWS]
        if block.size == 0:
            break
        parts.append(_block(metric, ranks, rank_ids, block, columns, start if aligned else None))
    out = concat_bands(parts)
    return out if len(out) or out.bad_steps.size else empty_bands(metric, ranks)


def _block(
    metric: str,
    ranks: tuple[int, ...],
    rank_ids: np.ndarray,
    steps: np.ndarray,
    columns: Sequence[RankColumn],
    aligned_at: int | None,
) -> RankBands:
    n, k = steps.size, len(columns)
    values = np.full((n, k), np.nan)
    logged = np.zeros((n, k), bool)
    t = np.full((n, k), np.nan)
    for j, col in enumerate(columns):
        if aligned_at is not None:
            rows = slice(aligned_at, aligned_at + n)
            values[:, j], logged[:, j], t[:, j] = col.values[rows], col.logged[rows], col.t[rows]
            continue
        lo, hi = np.searchsorted(col.steps, steps[0]), np.searchsorted(col.steps, steps[-1], side="right")
        where = np.searchsorted(steps, col.steps[lo:hi])
        values[where, j], logged[where, j], t[where, j] = col.values[lo:hi], col.logged[lo:hi], col.t[lo:hi]
    any_logged = logged.any(axis=1)
    if not any_logged.all():
        keep = np.flatnonzero(any_logged)
        steps, values, logged, t = steps[keep], values[keep], logged[keep], t[keep]
        n = steps.size
    finite = logged & np.isfinite(values)
    clean = np.where(finite, values, np.nan)
    count = finite.sum(axis=1)
    ordered = np.sort(clean, axis=1)  # NaN last: the finite values of a row are its first `count`
    rows = np.arange(n)
    has = count > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        lo_v = np.where(has, ordered[:, 0], np.nan)
        hi_v = np.where(has, ordered[rows, np.maximum(count - 1, 0)], np.nan)
        median = _median_of_sorted(ordered, count)
        others = _median_of_sorted(ordered, count - 1)  # the row without its highest value
        mean = np.where(has, np.where(finite, values, 0.0).sum(axis=1) / np.maximum(count, 1), np.nan)
        lo_rank = np.where(has, rank_ids[np.argmin(np.where(finite, values, np.inf), axis=1)], -1)
        hi_rank = np.where(has, rank_ids[np.argmax(np.where(finite, values, -np.inf), axis=1)], -1)
    bad_r, bad_c = np.nonzero(logged & ~finite)
    if bad_r.size > MAX_NONFINITE:
        bad_r, bad_c = bad_r[:MAX_NONFINITE], bad_c[:MAX_NONFINITE]
    latest_t = np.fmax.reduce(np.where(logged, t, np.nan), axis=1)
    return RankBands(
        metric,
        ranks,
        steps=np.asarray(steps, np.int64),
        t=latest_t,
        logged=logged.sum(axis=1).astype(np.int32),
        finite=count.astype(np.int32),
        lo=lo_v,
        median=median,
        mean=mean,
        hi=hi_v,
        lo_rank=lo_rank.astype(np.int64),
        hi_rank=hi_rank.astype(np.int64),
        others_median=others,
        bad_steps=np.asarray(steps, np.int64)[bad_r],
        bad_ranks=rank_ids[bad_c],
        bad_values=values[bad_r, bad_c],
    )


def _median_of_sorted(ordered: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Median of the first ``count`` entries of each sorted row (NaN where ``count`` < 1)."""
    rows = np.arange(ordered.shape[0])
    lo = np.maximum((count - 1) // 2, 0)
    hi = np.maximum(count // 2, 0)
    hi = np.minimum(hi, ordered.shape[1] - 1)
    with np.errstate(invalid="ignore"):
        out = (ordered[rows, lo] + ordered[rows, hi]) / 2
    out[count < 1] = np.nan
    return out
