"""A self-contained HTML report of a comparison: charts, summary table and config diff in one file.

It opens offline (training clusters are often air-gapped): plotly.js is inlined once, nothing is
fetched from the network. Every piece of user text (run names, config keys and values) is escaped with
``html.escape``; the charts' JSON is written by plotly, which escapes ``</`` so a name cannot end the
script block.
"""

from __future__ import annotations

import datetime as dt
import html
import math
import numbers
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: right; }
th { background: #f4f4f4; } td.text, th.key { text-align: left; }
.meta { color: #666; font-size: 0.9em; }
"""


def table_html(table: pd.DataFrame, index: bool = False) -> str:
    """An HTML table of ``table`` with every header and cell escaped (NaN shown as ``NaN``, missing as ``–``)."""
    head = []
    if index:
        head.append(f'<th class="key">{html.escape(str(table.index.name or ""))}</th>')
    head += [f"<th>{html.escape(str(c))}</th>" for c in table.columns]
    rows = []
    for key, row in zip(table.index, table.itertuples(index=False), strict=True):
        cells = [f'<th class="key">{html.escape(str(key))}</th>'] if index else []
        for value in row:
            text, numeric = _cell(value)
            cells.append(f"<td>{text}</td>" if numeric else f'<td class="text">{text}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{''.join(head)}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _cell(value: object) -> tuple[str, bool]:
    if value is None or value is pd.NA or value is pd.NaT:
        return "–", True  # not logged; NaN is kept for a logged NaN
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        return f"{int(value):,}", True
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
        number = float(value)
        if math.isnan(number):
            return "NaN", True
        if math.isinf(number):
            return ("inf" if number > 0 else "-inf"), True
        return f"{number:.6g}", True
    return html.escape(str(value)), False


def build_report(
    title: str,
    figures: Sequence[go.Figure],
    summary: pd.DataFrame,
    config_diff: pd.DataFrame | None = None,
    notes: Sequence[str] = (),
    now: dt.datetime | None = None,
    empty_diff: str = "The runs' configs do not differ.",
) -> str:
    """The report as one HTML string.

    Args:
        title: the report's heading (user text: escaped).
        figures: charts, in order; the first one carries plotly.js inline.
        summary: the summary table (:func:`monitor_cb.compare.summary_table.summary_table`).
        config_diff: the config diff (:func:`monitor_cb.compare.configdiff.config_diff`), index = key.
        notes: plain-text lines shown under the title (escaped).
        now: the time stamp written into the report (default now, UTC).
        empty_diff: the sentence shown when ``config_diff`` has no rows (plain text, escaped).
    """
    now = now or dt.datetime.now(dt.timezone.utc)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="meta">Generated {html.escape(now.strftime("%Y-%m-%d %H:%M UTC"))} by monitor_cb.</p>',
    ]
    parts += [f'<p class="meta">{html.escape(line)}</p>' for line in notes]
    parts.append("<h2>Summary</h2>")
    parts.append(table_html(summary))
    if config_diff is not None:
        parts.append("<h2>Config differences</h2>")
        if len(config_diff):
            parts.append(table_html(config_diff, index=True))
        else:
            parts.append(f"<p>{html.escape(empty_diff)}</p>")
    parts.append("<h2>Charts</h2>")
    for i, fig in enumerate(figures):
        parts.append(
            fig.to_html(
                full_html=False,
                include_plotlyjs=i == 0,  # True: the whole plotly.js inlined, no CDN
                config={"displaylogo": False, "responsive": True},
                default_width="100%",
            )
        )
    parts.append("</body></html>")
    return "\n".join(parts)
