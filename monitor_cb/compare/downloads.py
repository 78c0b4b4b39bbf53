"""CSV and Parquet downloads of the selected runs: every row of every run (not the drawn sample), NaN kept.

One table with a ``run`` column first. As in ``python -m monitor_cb export``, a logged NaN stays NaN
(``NaN`` in CSV) while a value that was not logged is empty / null.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
import pandas as pd

from monitor_cb.compare.rundata import RunData
from monitor_cb.ingest.run_export import write_csv, write_parquet

_ALWAYS = ("step", "rank", "seg")


def combined(runs: Sequence[RunData]) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """All runs' rows in one frame (``run`` = run id first) and per column its "was logged" mask."""
    frames, masks_parts = [], []
    columns: dict[str, None] = {}
    for run in runs:
        for column in run.frame.columns:
            columns.setdefault(column, None)
    for run in runs:
        frame = run.frame
        n = len(frame)
        part = {"run": np.full(n, run.id, dtype=object)}
        mask_part = {}
        for column in columns:
            if column in frame.columns:
                part[column] = frame[column].to_numpy()
                logged = run.logged.get(column) if run.logged else None
                mask_part[column] = np.ones(n, bool) if logged is None else np.asarray(logged, bool)
            else:
                text = any(column in r.frame.columns and r.frame[column].dtype.kind not in "fiub" for r in runs)
                part[column] = np.full(n, None if text else np.nan, dtype=object if text else np.float64)
                mask_part[column] = np.zeros(n, bool)
        frames.append(pd.DataFrame(part))
        masks_parts.append(mask_part)
    if not frames:
        return pd.DataFrame({"run": []}), {}
    table = pd.concat(frames, ignore_index=True)
    masks = {
        column: np.concatenate([m[column] for m in masks_parts])
        for column in columns
        if column not in _ALWAYS and column in table.columns
    }
    return table, masks


def csv_bytes(runs: Sequence[RunData]) -> bytes:
    """The selected runs as CSV (UTF-8)."""
    table, masks = combined(runs)
    text = io.StringIO()
    write_csv(table, masks, text)
    return text.getvalue().encode("utf-8")


def parquet_bytes(runs: Sequence[RunData]) -> bytes:
    """The selected runs as Parquet."""
    table, masks = combined(runs)
    buffer = io.BytesIO()
    write_parquet(table, masks, buffer)
    return buffer.getvalue()
