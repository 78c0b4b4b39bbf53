"""The compare summary as a page shows it: every cell as text, so NaN reads ``NaN`` (not "None") and
whole numbers keep their digits; a value that does not exist (never logged) is ``–``.

``st.dataframe`` draws a float NaN as "None", the same as a value that does not exist, which hides
exactly what a comparison looks for (the run whose loss went NaN). The HTML report says NaN; so
does this table.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from monitor_cb.views.runs_view import format_value

NOT_LOGGED = "–"  # a value that does not exist; NaN is kept for a logged NaN


def summary_display(summary: pd.DataFrame) -> pd.DataFrame:
    """A summary (or any) table as text, cell by cell through :func:`~monitor_cb.views.runs_view.format_value`,
    a missing value (None, ``pd.NA``) as :data:`NOT_LOGGED`."""
    columns = list(summary.columns)
    out = {c: [_cell(v) for v in summary[c]] for c in columns}
    return pd.DataFrame(out, columns=columns, dtype=object)


def _cell(value: Any) -> str:
    return NOT_LOGGED if value is None or value is pd.NA or value is pd.NaT else format_value(value)
