"""One metric of a multi-rank frame as a steps x ranks matrix, and robust statistics across its rows.

A merged frame (``RunStore.read(run_id).frame``) holds one row per (step, rank), sorted by step then
rank. Comparing ranks needs the values of one step side by side: :func:`rank_matrix` pivots a column
into ``values[step_index, rank_index]`` (NaN where that rank logged nothing at that step) without a
pandas pivot (which costs a hash join; here the frame's step order makes it one pass).

The cross-rank statistics are NaN-aware through one sort per row: NaN sorts last, so the finite
values of a row are its first ``count`` sorted entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from monitor_cb.analysis.series import float_values, logged_rows


@dataclass(frozen=True)
class RankMatrix:
    """One column of a frame with ranks side by side.

    Attributes:
        steps: the distinct steps, increasing (``int64``).
        ranks: the distinct ranks, increasing.
        values: ``(len(steps), len(ranks))`` float64; NaN where not logged *or* logged as NaN.
        logged: same shape, True where the rank logged the column at that step (a NaN included).
        rows: same shape, the frame row of each cell (-1 where the rank has no row at that step).
    """

    steps: np.ndarray
    ranks: np.ndarray
    values: np.ndarray
    logged: np.ndarray
    rows: np.ndarray

    def __len__(self) -> int:
        return int(self.steps.size)


def frame_ranks(frame: pd.DataFrame) -> np.ndarray:
    """The distinct ranks of a frame, increasing (``[0]`` for a frame without a ``rank`` column)."""
    if len(frame) == 0:
        return np.zeros(0, dtype=np.int64)
    if "rank" not in frame.columns:
        return np.zeros(1, dtype=np.int64)
    ranks = float_values(frame["rank"])
    ranks = ranks[np.isfinite(ranks)]
    return np.unique(ranks).astype(np.int64)


def rank_matrix(frame: pd.DataFrame, column: str, logged: Mapping[str, ArrayLike] | None = None) -> RankMatrix | None:
    """``column`` as a steps x ranks matrix; None when the frame lacks the column (or ``step``).

    Rows whose rank or step is missing are left out. When one (step, rank) appears twice (a frame
    that kept earlier segments) the later row wins, as the store's "latest segment wins".
    """
    if column not in frame.columns or "step" not in frame.columns or len(frame) == 0:
        return None
    steps_all = pd.to_numeric(frame["step"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    rank_all = float_values(frame["rank"]) if "rank" in frame.columns else np.zeros(len(frame))
    keep = np.isfinite(steps_all) & np.isfinite(rank_all)
    rows = np.flatnonzero(keep)
    steps_kept = steps_all[rows].astype(np.int64)
    if rows.size and np.all(steps_kept[1:] >= steps_kept[:-1]):  # the store's order: one linear pass
        new = np.concatenate(([True], steps_kept[1:] != steps_kept[:-1]))
        steps = steps_kept[new]
        step_index = np.cumsum(new) - 1
    else:
        steps, step_index = np.unique(steps_kept, return_inverse=True)
    ranks, rank_index = np.unique(rank_all[rows].astype(np.int64), return_inverse=True)
    shape = (steps.size, ranks.size)
    cell_rows = np.full(shape, -1, dtype=np.int64)
    cell_rows[step_index, rank_index] = rows  # fancy assignment: the last duplicate wins
    has_row = cell_rows >= 0
    source = float_values(frame[column])
    was_logged = logged_rows(frame, column, logged)
    values = np.full(shape, np.nan)
    values[has_row] = source[cell_rows[has_row]]
    mask = np.zeros(shape, dtype=bool)
    mask[has_row] = was_logged[cell_rows[has_row]]
    values[~mask] = np.nan
    return RankMatrix(steps, ranks, values, mask, cell_rows)


def frame_bands(frame: pd.DataFrame, column: str, logged: Mapping[str, ArrayLike] | None = None) -> Any:
    """The bands across ranks (:class:`monitor_cb.ingest.rank_bands.RankBands`) of a merged frame's ``column``:
    what the store computes at ingest, for a frame at hand (tests, an upload)."""
    from monitor_cb.ingest.rank_bands import RankColumn, empty_bands, rank_bands

    m = rank_matrix(frame, column, logged)
    if m is None:
        return empty_bands(column)
    t = float_values(frame["t"]) if "t" in frame.columns else np.full(len(frame), np.nan)
    columns = []
    for j, rank in enumerate(m.ranks.tolist()):
        present = m.rows[:, j] >= 0
        rows = m.rows[present, j]
        columns.append(RankColumn(rank, m.steps[present], m.values[present, j], m.logged[present, j], t[rows]))
    return rank_bands(column, columns)


def finite_count(values: np.ndarray) -> np.ndarray:
    """Finite entries per row."""
    return np.isfinite(values).sum(axis=1)


def row_nanmedian(values: np.ndarray) -> np.ndarray:
    """Median of the finite values of each row (NaN for a row without any); one sort, no nanmedian."""
    clean = np.where(np.isfinite(values), values, np.nan)
    ordered = np.sort(clean, axis=1)  # NaN last
    count = finite_count(clean)
    lo = np.maximum((count - 1) // 2, 0)
    hi = np.maximum(count // 2, 0)
    take = np.arange(ordered.shape[0])
    with np.errstate(invalid="ignore"):
        out = (ordered[take, lo] + ordered[take, hi]) / 2
    out[count == 0] = np.nan
    return out


def leave_one_out_median(values: np.ndarray) -> np.ndarray:
    """Per cell, the median of the *other* finite cells of its row (NaN where the cell is not finite
    or no other cell is).

    Comparing a rank with the others' median, not with a median it is part of, keeps one odd rank
    from pulling its own reference: with two ranks it is the other rank's value, with eight ranks the
    median of seven.
    """
    clean = np.where(np.isfinite(values), values, np.nan)
    n, k = clean.shape
    order = np.argsort(clean, axis=1)  # NaN last
    ordered = np.take_along_axis(clean, order, axis=1)
    position = np.empty_like(order)
    np.put_along_axis(position, order, np.broadcast_to(np.arange(k), (n, k)), axis=1)
    others = finite_count(clean)[:, None] - 1
    lo = np.maximum((others - 1) // 2, 0)
    hi = np.maximum(others // 2, 0)
    # index j among the others is index j (before the cell itself) or j + 1 (after it) in the sorted row
    lo_at = np.minimum(lo + (lo >= position), k - 1)
    hi_at = np.minimum(hi + (hi >= position), k - 1)
    with np.errstate(invalid="ignore"):
        out = (np.take_along_axis(ordered, lo_at, axis=1) + np.take_along_axis(ordered, hi_at, axis=1)) / 2
    out[(others < 1) | np.isnan(clean)] = np.nan
    return out


def row_mad(values: np.ndarray) -> np.ndarray:
    """Median absolute deviation from the row median, over the finite values of each row."""
    center = row_nanmedian(values)
    return row_nanmedian(np.abs(values - center[:, None]))


__all__ = [
    "RankMatrix",
    "frame_bands",
    "frame_ranks",
    "leave_one_out_median",
    "rank_matrix",
    "row_mad",
    "row_nanmedian",
]
