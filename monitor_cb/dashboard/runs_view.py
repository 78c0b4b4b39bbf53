"""The runs table as the runs page shows it: every cell as text (NaN as ``NaN``, durations as ``h:mm:ss``,
``updated`` as an age); the table itself is :mod:`monitor_cb.compare.runs_table`."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import pandas as pd

from monitor_cb.compare.configdiff import show_value
from monitor_cb.compare.runs_table import INT_COLUMNS, INT_SUFFIXES, RunsTable, absent
from monitor_cb.dashboard.runlist import format_age, format_duration


def format_value(value: Any) -> str:
    """A cell as text: NaN as ``NaN``, ±inf as ``inf``/``-inf``, missing as empty, numbers to 4 significant digits."""
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if isinstance(value, numbers.Real):
        number = float(value)
        if math.isnan(number):
            return "NaN"
        if math.isinf(number):
            return "inf" if number > 0 else "-inf"
        return f"{number:.4g}"
    return show_value(value)


def display_table(table: RunsTable, now: float) -> pd.DataFrame:
    """The table as text, as a page shows it: durations as ``h:mm:ss``, ``updated`` as an age, the rest
    through :func:`format_value`; integer columns keep integers (``1,234``) even where pandas made them float."""
    frame = table.frame
    out: dict[str, list[str]] = {}
    for column in frame.columns:
        values = list(frame[column])
        if column == "duration_s":
            out[column] = [format_duration(v) if not absent(v) else "" for v in values]
        elif column == "updated":
            out[column] = [f"{format_age(now - v)} ago" if not absent(v) else "" for v in values]
        elif column in INT_COLUMNS or column.endswith(INT_SUFFIXES):
            out[column] = [format_value(int(v)) if not absent(v) else "" for v in values]
        else:
            out[column] = [format_value(v) for v in values]
    return pd.DataFrame(out, columns=list(frame.columns), dtype=object)
