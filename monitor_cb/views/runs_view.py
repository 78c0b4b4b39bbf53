"""The runs page without Streamlit: the table as text (NaN as ``NaN``, durations as ``h:mm:ss``,
``updated`` as an age) and what one render computes (the benchmark times :func:`runs_view`).

The page reads its widgets into a :class:`RunsQuery`, calls :func:`runs_view` and shows the result:
statistics are filled within a time budget (:meth:`StatsCache.fill`; the rest show config-only rows
and the page renders again while ``left > 0``), then the table is built, filtered by text and by
expression, and sorted. A bad expression never loses the table: the text-filtered rows stay and
``error`` says what is wrong (the page shows it as plain text). The table itself is
:mod:`monitor_cb.compare.runs_table`.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from monitor_cb.compare.configdiff import show_value
from monitor_cb.compare.runexpr import ExprError
from monitor_cb.compare.runs_table import (
    DEFAULT_STATS,
    INT_COLUMNS,
    INT_SUFFIXES,
    RunsTable,
    TableOptions,
    absent,
    build_table,
    filter_expr,
    filter_text,
    sort_table,
)
from monitor_cb.compare.runstats import StatsCache
from monitor_cb.ingest.status import NO_STATUS
from monitor_cb.views.runlist import format_age, format_duration


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


def text_width(values: list[str], title: str, px_per_char: int = 8, lo: int = 60, hi: int = 640) -> int:
    """Pixels a text column needs to show its longest value (and title) uncut, within ``[lo, hi]``."""
    longest = max([len(title), *(len(v) for v in values)])
    return max(lo, min(hi, px_per_char * longest + 24))


# ----------------------------------------------------------------------------- one render of the page
BUDGET_S = 0.5  # statistics computed per render; the page renders again for the rest
MAX_COMPARE = 24  # runs "Open in Compare" takes (one distinct colour each)
# Columns the page hides: ``id`` (the name column, or the link, says it) and internals.
HIDDEN_COLUMNS = ("updated",)
WIDE_TEXT = ("name", "id", "reason")


@dataclass(frozen=True)
class RunsQuery:
    """What the runs page's controls decided."""

    text: str = ""
    expression: str = ""
    sort: str | None = None  # a column; None keeps the store's order (newest first)
    descending: bool = False
    all_config: bool = False
    stats: tuple[str, ...] = DEFAULT_STATS


@dataclass(frozen=True)
class RunsView:
    """One render: every run's row (``table``), the rows shown (``shown``), an expression error, runs left."""

    table: RunsTable
    shown: RunsTable
    error: str | None
    left: int  # runs whose statistics are not computed yet


def runs_view(
    infos: Sequence[Any],
    cache: StatsCache,
    now: float,
    query: RunsQuery,
    budget_s: float = BUDGET_S,
    clock: Callable[[], float] = time.perf_counter,
    health: Any = None,
) -> RunsView:
    """Fill statistics within ``budget_s``, build the table, filter it and sort it.

    ``health``: a :class:`~monitor_cb.compare.runhealth.HealthCache` for the health columns (None: none)."""
    cache.prune(info.id for info in infos)
    left = cache.fill(infos, budget_s, clock)
    options = TableOptions(stats=query.stats, all_config=query.all_config)
    table = build_table(infos, cache.cached, now, options, health.columns if health is not None else None)
    shown = filter_text(table, query.text)
    error = None
    try:
        shown = filter_expr(shown, query.expression)
    except ExprError as exc:
        error = str(exc)
    if query.sort and query.sort in shown.frame.columns:
        shown = sort_table(shown, query.sort, query.descending)
    return RunsView(table, shown, error, left)


def time_notes(infos: Sequence[Any], cache: StatsCache, shown: Sequence[str]) -> list[tuple[str, str]]:
    """``(run name, note)`` for the shown runs with record times past any plausible date: those times were
    refused (not used for the duration or the first and last time), and the note says so."""
    wanted, notes = set(shown), []
    for info in infos:
        stats = cache.cached(info) if info.id in wanted else None
        if stats is not None and stats.refused_times:
            count = stats.refused_times
            noun = "time" if count == 1 else "times"
            notes.append(
                (
                    str(info.name or info.id),
                    f"{count:,} record {noun} outside any plausible date (such as {stats.refused_example:.6g}) "
                    "not used for its duration",
                )
            )
    return notes


def page_table(view: RunsView, now: float) -> pd.DataFrame:
    """The shown rows as text (:func:`~monitor_cb.compare.runs_table.display_table`) without hidden columns
    (``name`` only where some run's name differs from its id): the run, status, steps and duration, then
    the config keys, the metrics, then ranks, records, dropped records (only when a run has some), bad lines
    and the reason (only when some run's says more than its status)."""
    frame = display_table(view.shown, now)
    drop = [c for c in HIDDEN_COLUMNS if c in frame.columns]
    if "name" in frame.columns and list(view.shown.frame["name"]) == list(view.shown.frame["id"]):
        drop.append("name")
    if "dropped" in frame.columns and not view.shown.frame["dropped"].fillna(0).astype(bool).any():
        drop.append("dropped")  # shown only when a writer lost records
    if "reason" in frame.columns:
        frame["reason"] = [said_reason(r) for r in frame["reason"]]
        if not any(frame["reason"]):
            drop.append("reason")  # no run's reason says anything: no column of "no status recorded"
    frame = frame.drop(columns=drop)
    # what a comparison reads first (metrics, config) before the bookkeeping and the long reason
    first = [c for c in ("id", "name", "status", "health", "steps", "duration_s") if c in frame.columns]
    # the config keys that differ come before the metric statistics and the health's count and step: at
    # 1440 px they were behind a scroll
    first += [c for c in view.shown.config_columns if c in frame.columns and c not in first]
    first += [c for c in ("health.count", "health.step") if c in frame.columns and c not in first]
    last = [c for c in ("ranks", "records", "dropped", "bad_lines", "reason") if c in frame.columns]
    middle = [c for c in frame.columns if c not in first and c not in last]
    return frame[[*first, *middle, *last]]


def said_reason(reason: str) -> str:
    """A run's reason as the table shows it: "" for "no status recorded" (its status, ``ended``, says that
    already, on every row of runs without metadata), else as it is."""
    text = str(reason or "")
    return "" if text.startswith(NO_STATUS) else text


ROW_PX, HEADER_PX, MAX_ROWS_SHOWN = 35, 38, 30


def table_height(n_rows: int) -> int:
    """Pixels for a table of ``n_rows``: every row up to :data:`MAX_ROWS_SHOWN` (then it scrolls), not
    Streamlit's fixed ten rows that left half a screen empty under 79 runs."""
    return HEADER_PX + ROW_PX * max(1, min(n_rows, MAX_ROWS_SHOWN)) + 2


def column_widths(frame: pd.DataFrame) -> dict[str, int]:
    """Pixels per text column so names, reasons and config values show uncut (long reasons up to 640 px;
    the selected runs' details below the table show everything)."""
    return {str(c): text_width([str(v) for v in frame[c]], str(c)) for c in frame.columns}


def picked_ids(view: RunsView, rows: Sequence[int]) -> list[str]:
    """Run ids of the selected row positions of the shown table (positions out of range ignored)."""
    ids = view.shown.ids
    return [ids[i] for i in dict.fromkeys(rows) if isinstance(i, int) and 0 <= i < len(ids)]


def compare_query(ids: Sequence[str], group_by: str | None = None) -> dict[str, list[str] | str]:
    """The compare page's query for these runs (``?runs=a&runs=b``, ``&group=key``), at most :data:`MAX_COMPARE`."""
    query: dict[str, list[str] | str] = {"runs": list(dict.fromkeys(ids))[:MAX_COMPARE]}
    if group_by:
        query["group"] = group_by
    return query


def sweep_columns(table: RunsTable) -> tuple[list[str], list[str]]:
    """``(config columns, metric columns)`` a sweep view can draw: the config keys that differ, the metrics."""
    return list(table.config_columns), list(table.metric_columns)


def default_sweep_keys(table: RunsTable, n: int = 6) -> list[str]:
    """The config columns a sweep view starts with: up to ``n`` of those that vary between the runs,
    the ones with the most distinct values first (numeric before text; a seed last, it is noise, not
    a choice), so ``lr`` comes before a constant ``classes``; the first ``n`` when none varies."""
    keys = list(table.config_columns)
    varying = [k for k in keys if _distinct(table.frame[k]) > 1]
    if not varying:
        return keys[:n]

    def rank(key: str) -> tuple[bool, bool, int]:
        seed = "seed" in key.rsplit(".", 1)[-1].lower()
        return (seed, not _numeric(table.frame[key]), -_distinct(table.frame[key]))

    return sorted(varying, key=rank)[:n]


def _distinct(column: pd.Series) -> int:
    """How many different values (shown as text: lists and dicts count too) the runs have, missing left out."""
    return len({show_value(v) for v in column if not absent(v)})


def _numeric(column: pd.Series) -> bool:
    values = [v for v in column if v is not None]
    return bool(values) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
