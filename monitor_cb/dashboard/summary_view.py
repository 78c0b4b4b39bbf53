"""The compare summary as a page shows it: every cell as text, so NaN reads ``NaN`` (not "None") and
whole numbers keep their digits; a missing value is empty.

``st.dataframe`` draws a float NaN as "None", the same as a value that does not exist, which hides
exactly what a comparison looks for (the run whose loss went NaN). The HTML report says NaN; so
does this table.
"""

from __future__ import annotations

import pandas as pd

from monitor_cb.dashboard.runs_view import format_value


def summary_display(summary: pd.DataFrame) -> pd.DataFrame:
    """A summary (or any) table as text, cell by cell through :func:`~monitor_cb.dashboard.runs_view.format_value`."""
    columns = list(summary.columns)
    out = {c: [format_value(v) for v in summary[c]] for c in columns}
    return pd.DataFrame(out, columns=columns, dtype=object)
