"""The compare summary as a page shows it: every cell as text, so NaN reads ``NaN`` (not "None") and
whole numbers keep their digits; a value that does not exist (never logged) is ``–``.

``st.dataframe`` draws a float NaN as "None", the same as a value that does not exist, which hides
exactly what a comparison looks for (the run whose loss went NaN). The HTML report says NaN; so
does this table.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from monitor_cb.views.runlist import format_duration
from monitor_cb.views.runs_view import format_value

NOT_LOGGED = "–"  # a value that does not exist; NaN is kept for a logged NaN
# Seconds columns of the data tables (CSV keeps seconds) -> their title where durations read h:mm:ss.
DURATION_COLUMNS = {"duration (s)": "duration", "duration_s": "duration"}


def summary_display(summary: pd.DataFrame) -> pd.DataFrame:
    """A summary (or any) table as text, cell by cell through :func:`~monitor_cb.views.runs_view.format_value`,
    a missing value (None, ``pd.NA``) as :data:`NOT_LOGGED`; durations as ``h:mm:ss``, the Runs page's form
    (``7.3e+04`` seconds read as a number, not as 20 hours)."""
    out, titles = {}, []
    for column in summary.columns:
        title, is_duration = duration_title(str(column))
        cell = _duration_cell if is_duration else _cell
        out[title] = [cell(v) for v in summary[column]]
        titles.append(title)
    return pd.DataFrame(out, columns=titles, dtype=object)


def durations_as_text(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with only its seconds columns as ``h:mm:ss`` (retitled); the rest as they are (the HTML report)."""
    out = {}
    for column in table.columns:
        title, is_duration = duration_title(str(column))
        out[title] = (
            pd.Series([_duration_cell(v) for v in table[column]], index=table.index, dtype=object)
            if is_duration
            else table[column]
        )
    return pd.DataFrame(out)


def duration_title(column: str) -> tuple[str, bool]:
    """``("duration", True)`` for a seconds column (``duration (s)``, ``duration_s mean``), else ``(column, False)``."""
    for seconds, title in DURATION_COLUMNS.items():
        if column == seconds or column.startswith(f"{seconds} "):
            return title + column[len(seconds) :], True
    return column, False


def _cell(value: Any) -> str:
    return NOT_LOGGED if _absent(value) else format_value(value)


def _duration_cell(value: Any) -> str:
    if _absent(value):
        return NOT_LOGGED
    try:
        return format_duration(float(value))
    except (TypeError, ValueError):
        return format_value(value)


def _absent(value: Any) -> bool:
    return value is None or value is pd.NA or value is pd.NaT
