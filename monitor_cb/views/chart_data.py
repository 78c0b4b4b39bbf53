"""The data behind one live chart, for download: the drawn run's rows of the chart's metrics, in the zoom.

As TensorBoard's and W&B's charts offer: what you see, as CSV or Parquet, with "was logged" kept apart
from a logged NaN (:mod:`monitor_cb.ingest.run_export`: in CSV a logged NaN reads ``NaN`` and a value not
logged is empty; in Parquet a value not logged is null).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from monitor_cb.analysis.series import logged_rows
from monitor_cb.ingest.run_export import write_csv, write_parquet

KEEP = ("step", "t", "rank")  # the x columns kept beside the metrics (rank only when there are several)


@dataclass(frozen=True)
class ChartRows:
    """The rows of a chart's metrics: a frame (``step``, ``t``, ``rank`` if present, the metrics) and
    per metric its "was logged" mask."""

    frame: pd.DataFrame
    masks: dict[str, np.ndarray]

    def csv(self) -> bytes:
        """CSV bytes (NaN for a logged NaN, empty for not logged)."""
        buffer = io.StringIO()
        write_csv(self.frame, self.masks, buffer)
        return buffer.getvalue().encode("utf-8")

    def parquet(self) -> bytes:
        """Parquet bytes (null for not logged)."""
        buffer = io.BytesIO()
        write_parquet(self.frame, self.masks, buffer)  # pyarrow writes to a file object too
        return buffer.getvalue()


def chart_rows(
    frame: pd.DataFrame,
    masks: Mapping[str, Any] | None,
    metrics: Sequence[str],
    steps: tuple[int | None, int | None] = (None, None),
) -> ChartRows:
    """The rows where any of ``metrics`` was logged, between ``steps`` (inclusive; None = open), with
    ``step``/``t``/``rank`` and those metrics only."""
    metrics = [m for m in metrics if m in frame.columns]
    logged = {m: _logged(frame, masks, m) for m in metrics}
    keep = np.zeros(len(frame), dtype=bool)
    for mask in logged.values():
        keep |= mask
    step = frame["step"].to_numpy() if "step" in frame.columns else np.zeros(len(frame))
    lo, hi = steps
    if lo is not None:
        keep &= step >= lo
    if hi is not None:
        keep &= step <= hi
    columns = [c for c in KEEP if c in frame.columns and (c != "rank" or frame["rank"].nunique() > 1)] + metrics
    rows = np.flatnonzero(keep)
    out = frame.iloc[rows][columns].reset_index(drop=True)
    return ChartRows(out, {m: mask[rows] for m, mask in logged.items()})


def _logged(frame: pd.DataFrame, masks: Mapping[str, Any] | None, column: str) -> np.ndarray:
    """The column's "was logged" mask (a column every row has, loss and step, has none: all True)."""
    return logged_rows(frame, column, masks).copy()
