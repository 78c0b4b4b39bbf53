"""A run's rows as CSV or Parquet with "was logged" kept apart from a logged NaN.

Used by ``python -m monitor_cb export`` and the compare page's downloads. In CSV a logged NaN
reads ``NaN`` (``inf``/``-inf`` likewise) and a value that was not logged is empty; in Parquet a
logged NaN stays NaN and a value not logged is null.

CSV files are opened in spreadsheets, and a log root is written by anyone: a run name, metric name or
text value such as ``=cmd|' /C calc'!A0`` would be a formula there. In CSV, every text cell and header
that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading ``'`` (OWASP's
advice, as well-known exporters do), unless the text is a plain number (``-0.5`` stays ``-0.5``);
numeric columns are never touched. Parquet keeps its text as it is (it holds types, not formulas).
"""

from __future__ import annotations

import re
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def csv_safe_text(value: Any) -> Any:
    """``value`` as a spreadsheet shows it as text: a string starting like a formula gets a leading ``'``.

    Anything that is not a string (a number, None) and a string that is a plain number come back unchanged.
    """
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def _neutralise(out: Any, skip: set[str]) -> None:
    """Make ``out``'s headers and the cells of its text columns (but ``skip``) :func:`csv_safe_text`, in place."""
    for column in out.columns:
        values = out[column]
        if column not in skip and values.dtype.kind not in "biufcmM":  # object, string or category: may be text
            out[column] = values.astype(object).map(csv_safe_text)
    out.columns = [csv_safe_text(str(c)) for c in out.columns]


def write_csv(frame: Any, masks: dict[str, Any], target: Any) -> None:
    """CSV where a logged NaN reads ``NaN`` (``inf``/``-inf`` likewise) and a value not logged is empty."""
    import numpy as np

    out = frame.copy()
    numeric: set[str] = set()  # float columns given "NaN" and empty cells: numbers, never formulas
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
            numeric.add(column)
    _neutralise(out, numeric)
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
