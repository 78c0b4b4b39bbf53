"""The runs table's data: one row per run, the config keys that differ, filters, sort and group-by.

Plain data, no Streamlit: the runs page shows it as text (``monitor_cb.views.runs_view``) and picks rows; the same
functions serve any other front end. Row values come from the ``RunInfo`` list and each run's cached
:class:`~monitor_cb.compare.runstats.RunStats`, so a table of a thousand runs is built from memory.

Columns (all names can be typed in a filter expression, see :mod:`monitor_cb.compare.runexpr`):

* ``id``, ``name``, ``status``, ``health``, ``health.count``, ``health.step`` (the worst finding, when the
  page gives them: :mod:`monitor_cb.compare.runhealth`), ``steps`` (last step), ``duration_s``, ``updated``
  (last write, Unix s), ``ranks``, ``records``, ``dropped`` (records the writer accepted and never wrote, from the
  metadata), ``bad_lines``, ``reason``;
* ``<metric>.<stat>`` for the key metrics (``loss``, ``eval_loss``, other ``eval_*``) and the chosen
  statistics (default ``last`` and ``best``; ``min``, ``max``, ``best_step`` on demand);
* the config keys whose values differ between the runs (every key with ``all_config``), flattened
  with dots (``optim.lr``); a key that clashes with a column above is shown as ``config.<key>``.
  Every config key of a run can be used in an expression, shown or not, also as ``config.<key>``.
"""

from __future__ import annotations

import fnmatch
import math
import numbers
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from monitor_cb.compare.configdiff import MISSING, show_value
from monitor_cb.compare.runexpr import compile_filter
from monitor_cb.compare.runstats import STATS, RunStats, key_metrics
from monitor_cb.ingest.meta_values import finite_float
from monitor_cb.ingest.status import ACTIVE, run_span

BASE_COLUMNS = (
    "id",
    "name",
    "status",
    "steps",
    "duration_s",
    "updated",
    "ranks",
    "records",
    "dropped",
    "bad_lines",
    "reason",
)
DEFAULT_STATS = ("last", "best")
_ACTIVE = ACTIVE
_GLOB = set("*?[")
INT_COLUMNS = ("steps", "ranks", "records", "dropped", "bad_lines", "health.count", "health.step")
HEALTH_COLUMNS = ("health", "health.count", "health.step")  # with health_of (monitor_cb.compare.runhealth)
RANKED = {"health": {"ok": 0, "warning": 1, "error": 2}}  # text columns sorted by rank, not alphabetically
INT_SUFFIXES = (".best_step", ".count", ".first_nonfinite_step")


@dataclass(frozen=True)
class TableOptions:
    """What the table shows.

    Args:
        stats: statistics per key metric (from :data:`~monitor_cb.compare.runstats.STATS`).
        metrics: key metrics to show; None for every one any run logged.
        all_config: every config key, not only those that differ between runs.
    """

    stats: tuple[str, ...] = DEFAULT_STATS
    metrics: tuple[str, ...] | None = None
    all_config: bool = False

    def __post_init__(self) -> None:
        unknown = [s for s in self.stats if s not in STATS]
        if unknown:
            raise ValueError(f"unknown statistics {unknown}; known: {', '.join(STATS)}")


@dataclass(frozen=True)
class RunsTable:
    """The table and what the filters need; filtering and sorting return a new one (rows in sync)."""

    frame: pd.DataFrame  # one row per run, columns: BASE_COLUMNS, metric columns, config columns
    metric_columns: tuple[str, ...]
    config_columns: tuple[str, ...]
    rows: tuple[Mapping[str, Any], ...] = field(repr=False)  # per run: every name an expression may use
    names: frozenset[str] = field(repr=False, default=frozenset())
    text: tuple[str, ...] = field(repr=False, default=())  # per run: what the text filter searches

    @property
    def ids(self) -> list[str]:
        return list(self.frame["id"])

    def take(self, positions: Sequence[int] | np.ndarray) -> RunsTable:
        """The rows at ``positions``, in that order."""
        index = np.asarray(positions, dtype=np.int64)
        return replace(
            self,
            frame=self.frame.iloc[index].reset_index(drop=True),
            rows=tuple(self.rows[i] for i in index),
            text=tuple(self.text[i] for i in index),
        )


def build_table(
    infos: Sequence[Any],
    stats_of: Callable[[Any], RunStats],
    now: float,
    options: TableOptions | None = None,
    health_of: Callable[[Any], Mapping[str, Any]] | None = None,
) -> RunsTable:
    """One row per run.

    Args:
        infos: the runs (``RunInfo``), in the order to show.
        stats_of: a run's statistics (``StatsCache.get``).
        now: Unix time, for the duration of running runs.
        options: what to show.
        health_of: a run's health cells (``HealthCache.columns``: ``health``, ``health.count``,
            ``health.step``; :mod:`monitor_cb.compare.runhealth`); None for no health columns.
    """
    options = options or TableOptions()
    stats = [stats_of(info) for info in infos]
    logged = {m for s in stats for m in s.metrics}
    metrics = list(options.metrics) if options.metrics is not None else key_metrics(logged)
    metric_columns = [f"{m}.{stat}" for m in metrics for stat in options.stats]
    keys = config_keys([s.config_text for s in stats], options.all_config)
    taken = set(BASE_COLUMNS) | set(metric_columns) | set(HEALTH_COLUMNS) | {"source"}
    config_columns = {key: (f"config.{key}" if key in taken else key) for key in keys}
    records, rows, texts = [], [], []
    health_columns: list[str] = []
    for info, run in zip(infos, stats, strict=True):
        record = _base_row(info, run, now)
        if health_of is not None:
            cells = health_of(info)
            record.update(cells)
            health_columns = health_columns or list(cells)
        for m in metrics:
            values = run.metrics.get(m)
            for stat in options.stats:
                record[f"{m}.{stat}"] = values.get(stat) if values is not None else None
        for key, column in config_columns.items():
            record[column] = run.config.get(key)
        records.append(record)
        rows.append(_expression_row(record, run.config))
        texts.append(_search_text(info, run, config_columns))
    columns = [*BASE_COLUMNS, *health_columns, *metric_columns, *config_columns.values()]
    frame = _frame(records, columns, set(BASE_COLUMNS))
    names = frozenset(columns) | frozenset(k for r in rows for k in r)
    return RunsTable(frame, tuple(metric_columns), tuple(config_columns.values()), tuple(rows), names, tuple(texts))


def _frame(records: list[dict[str, Any]], columns: list[str], inferred: set[str]) -> pd.DataFrame:
    """Base columns with inferred dtypes; metric and config columns as objects, so a value a run never
    logged (None) stays apart from a logged NaN."""
    data = {c: pd.Series([r[c] for r in records], dtype=None if c in inferred else object, name=c) for c in columns}
    return pd.DataFrame(data, columns=columns)


def config_keys(texts: Sequence[Mapping[str, str]], all_keys: bool = False) -> list[str]:
    """Sorted config keys; only those whose shown values (``RunStats.config_text``) differ between the
    runs (a missing key differs)."""
    keys = sorted({k for t in texts for k in t})
    if all_keys:
        return keys
    return [key for key in keys if len({t.get(key, MISSING) for t in texts}) > 1]


def _base_row(info: Any, run: RunStats, now: float) -> dict[str, Any]:
    return {
        "id": info.id,
        "name": str(info.name or info.id),
        "status": info.status,
        "steps": info.last_step,
        "duration_s": run_duration(info.meta, run, info.status, now),
        "updated": info.last_write or None,
        "ranks": len(info.ranks or ()),
        "records": info.n_records,
        "dropped": int(getattr(getattr(info, "drops", None), "total", 0) or 0),
        "bad_lines": info.bad_lines,
        "reason": info.reason or "",
        "source": str(getattr(info, "source", "") or "JSONL"),
        **name_parts(str(info.name or info.id)),
    }


_NAME_SEPARATORS = re.compile(r"[-_./ ]+")
MAX_NAME_PARTS = 6


def name_parts(name: str) -> dict[str, str]:
    """``run03-lr1e-4-seed2`` -> ``{"name.1": "run03", "name.2": "lr1e", ...}``: the parts of a run's name, to group
    runs that carry their settings only in their names (no config recorded)."""
    parts = [p for p in _NAME_SEPARATORS.split(name) if p][:MAX_NAME_PARTS]
    return {f"name.{i}": part for i, part in enumerate(parts, 1)}


def extra_group_keys(table: RunsTable) -> list[str]:
    """Besides status and config keys: ``source`` and the name parts that split the runs into groups
    (more than one, and not one per run)."""
    n = len(table.rows)
    keys = []
    for key in ("source", *(f"name.{i}" for i in range(1, MAX_NAME_PARTS + 1))):
        values = [row.get(key) for row in table.rows]
        distinct = len(set(values))
        if distinct > 1 and (distinct < n or key == "source"):
            keys.append(key)
    return keys


def run_duration(meta: Mapping[str, Any] | None, run: RunStats, status: str, now: float) -> float | None:
    """Seconds from the start (metadata, else first record) to the end (metadata, else last record;
    now while the run is active)."""
    meta = meta or {}
    start = finite_float(meta.get("first_start_time")) or finite_float(meta.get("start_time"))
    end, log_end = finite_float(meta.get("end_time")), finite_float(meta.get("log_end_time"))
    return run_span(start, end, run.t_first, run.t_last, status in _ACTIVE, now, log_end)


def _expression_row(record: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    row = {f"config.{k}": v for k, v in config.items()}
    row.update({k: v for k, v in config.items() if k not in record})
    row.update(record)
    return row


def _search_text(info: Any, run: RunStats, config_columns: Mapping[str, str]) -> str:
    parts = [str(info.id), str(info.name or ""), str(info.status), str(info.reason or "")]
    parts += [run.config_text[k] for k in config_columns if k in run.config_text]
    return " ".join(parts).lower()


# ----------------------------------------------------------------------------- filter, sort, group
def filter_text(table: RunsTable, text: str) -> RunsTable:
    """Runs matching ``text``: with ``*``, ``?`` or ``[`` a case-insensitive glob on the id or name,
    else runs whose id, name, status, reason or shown config values contain every word."""
    text = text.strip().lower()
    if not text:
        return table
    if _GLOB & set(text):
        keep = [
            i
            for i, row in enumerate(table.rows)
            if fnmatch.fnmatchcase(str(row["id"]).lower(), text) or fnmatch.fnmatchcase(str(row["name"]).lower(), text)
        ]
    else:
        words = text.split()
        keep = [i for i, hay in enumerate(table.text) if all(w in hay for w in words)]
    return table.take(keep)


def filter_expr(table: RunsTable, expression: str) -> RunsTable:
    """Runs for which ``expression`` is true (see :mod:`monitor_cb.compare.runexpr`).

    Raises:
        ExprError: the expression is not valid; the message says why.
    """
    predicate = compile_filter(expression, table.names if table.rows else None)  # no runs: no names to check
    return table.take([i for i, row in enumerate(table.rows) if predicate(row)])


def sort_table(table: RunsTable, column: str, descending: bool = False) -> RunsTable:
    """Rows sorted by ``column``: numbers numerically, other values as text; missing and NaN always last.

    Raises:
        KeyError: no such column.
    """
    if column not in table.frame.columns:
        raise KeyError(f"no column {column!r}; columns are {list(table.frame.columns)}")
    values = list(table.frame[column])
    present = [i for i, v in enumerate(values) if not absent(v)]
    missing = [i for i, v in enumerate(values) if absent(v)]
    numeric = all(_is_number(values[i]) for i in present)
    key: Callable[[int], Any] = (lambda i: float(values[i])) if numeric else (lambda i: show_value(values[i]).lower())
    if column in RANKED:  # health: ok < warning < error, not alphabetical
        key = lambda i: RANKED[column].get(str(values[i]), -1)  # noqa: E731
    ordered = sorted(present, key=key, reverse=descending)  # stable: ties keep the table's order
    return table.take(ordered + missing)


@dataclass(frozen=True)
class Group:
    """Runs sharing one value of a config key."""

    value: str  # the value as shown (``—`` for runs without the key)
    run_ids: tuple[str, ...]


def groups(table: RunsTable, key: str) -> list[Group]:
    """The table's runs grouped by the value of ``key`` (a column or config key), in order of first appearance.

    Raises:
        KeyError: ``key`` is neither a column nor a config key of any run.
    """
    if key not in table.names:
        raise KeyError(f"no column or config key {key!r}")
    found: dict[str, list[str]] = {}
    for row in table.rows:
        value = show_value(row[key]) if key in row and row[key] is not None else MISSING
        found.setdefault(value, []).append(str(row["id"]))
    return [Group(value, tuple(ids)) for value, ids in found.items()]


def group_table(table: RunsTable, key: str) -> pd.DataFrame:
    """One row per group: the value, the number of runs, and mean / min / max of each metric column
    over the runs' finite values: None where no run of the group logged the metric, NaN where they
    logged only NaN/±inf (so NaN always means a logged NaN)."""
    position = {run_id: i for i, run_id in enumerate(table.frame["id"])}
    numbers = {c: _float_array(table.frame[c]) for c in table.metric_columns}
    logged = {c: np.array([not _missing(v) for v in table.frame[c]], dtype=bool) for c in table.metric_columns}
    records = []
    for group in groups(table, key):
        record: dict[str, Any] = {key: group.value, "runs": len(group.run_ids)}
        rows = np.array([position[r] for r in group.run_ids], dtype=np.int64)
        for column, array in numbers.items():
            values = array[rows]
            finite = values[np.isfinite(values)]
            empty: float | None = math.nan if logged[column][rows].any() else None
            record[f"{column} mean"] = empty if finite.size == 0 else float(finite.mean())
            record[f"{column} min"] = empty if finite.size == 0 else float(finite.min())
            record[f"{column} max"] = empty if finite.size == 0 else float(finite.max())
        records.append(record)
    columns = list(records[0]) if records else [key, "runs"]
    # object columns: pandas would turn a None (not logged) into NaN (a logged NaN) in a float column
    return pd.DataFrame(
        {c: pd.Series([r[c] for r in records], dtype=object if c != "runs" else None) for c in columns},
        columns=columns,
    )


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA


def absent(value: Any) -> bool:
    """Missing (None, pd.NA) or NaN: sorts last, shows empty (``dashboard.runs_view`` shows NaN metrics as ``NaN``)."""
    if value is None or value is pd.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


def _is_number(value: Any) -> bool:
    """A real number a double holds; a JSON integer of 400 digits (float() refuses it) is shown as text."""
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
        return False
    return not isinstance(value, int) or -sys.float_info.max <= value <= sys.float_info.max


def _float_array(column: pd.Series) -> np.ndarray:
    """An object column as float64, anything not a number as NaN."""
    return np.fromiter((float(v) if _is_number(v) else math.nan for v in column), dtype=np.float64, count=len(column))
