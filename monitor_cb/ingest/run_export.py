"""A run's rows as CSV or Parquet with "was logged" kept apart from a logged NaN.

Used by ``python -m monitor_cb export`` and the compare page's downloads. In CSV a logged NaN
reads ``NaN`` (``inf``/``-inf`` likewise) and a value that was not logged is empty; in Parquet a
logged NaN stays NaN and a value not logged is null.
"""

from __future__ import annotations

from typing import Any


def write_csv(frame: Any, masks: dict[str, Any], target: Any) -> None:
    """CSV where a logged NaN reads ``NaN`` (``inf``/``-inf`` likewise) and a value not logged is empty."""
    import numpy as np

    out = frame.copy()
    for column, logged in masks.items():
        values = out[column]
        if values.dtype.kind != "f":
            continue
        nan = np.isnan(values.to_numpy())
        if nan.any():  # a plain float column (the usual case) is written as it is
            text = values.astype(object)
            text[nan & logged] = "NaN"
            text[~logged] = None
            out[column] = text
    out.to_csv(target, index=False, na_rep="")


def write_parquet(frame: Any, masks: dict[str, Any], path: str) -> None:
    """Parquet where a logged NaN stays NaN and a value not logged is null."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = {}
    for column in frame.columns:
        values = frame[column].to_numpy()
        logged = masks.get(column)
        if values.dtype.kind == "f" and logged is not None:
            arrays[column] = pa.array(values, mask=~logged, from_pandas=False)
        else:
            arrays[column] = pa.array(frame[column], from_pandas=True)
    pq.write_table(pa.table(arrays), path)
