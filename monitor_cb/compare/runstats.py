"""Cheap per-run statistics for the runs table: last / best / min / max of the key metrics, kept per run.

A runs table over a thousand runs cannot read a thousand frames on every refresh. :class:`StatsCache`
keeps each run's :class:`RunStats` and recomputes them only when the run's state (records, last
step, last write, status, metadata) changed; the numbers come from the frame the ``RunStore``
already holds in memory, never from the files again.

Key metrics are ``loss``, ``eval_loss`` and every other ``eval_*`` column. "Best" is the minimum for
lower-is-better metrics (names with loss, error, perplexity, ...; see
:func:`monitor_cb.compare.summary_table.lower_is_better`) and the maximum for the others (accuracy, f1,
bleu, ...). Best, min and max use finite values only; ``last`` is the last logged value, NaN
included, so a run that ended in NaN says so.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from monitor_cb.analysis.series import float_values, logged_rows
from monitor_cb.compare.configdiff import run_config, show_value
from monitor_cb.compare.summary_table import lower_is_better
from monitor_cb.ingest.status import TIME_MAX

TRAIN_METRICS = ("loss",)


@dataclass(frozen=True)
class MetricStats:
    """One metric of one run (NaN where there is no such value; steps None)."""

    last: float = math.nan
    best: float = math.nan
    best_step: int | None = None
    min: float = math.nan
    max: float = math.nan
    count: int = 0  # logged values, non-finite included
    first_nonfinite_step: int | None = None

    def get(self, stat: str) -> float | int | None:
        """``last``, ``best``, ``min``, ``max``, ``best_step``, ``count`` or ``first_nonfinite_step`` by name."""
        if stat not in STATS:
            raise KeyError(f"unknown statistic {stat!r}; known: {', '.join(STATS)}")
        return getattr(self, stat)


STATS = ("last", "best", "best_step", "min", "max", "count", "first_nonfinite_step")


@dataclass(frozen=True)
class RunStats:
    """What the runs table shows about one run, beside its :class:`RunInfo`."""

    metrics: Mapping[str, MetricStats] = field(default_factory=dict)
    t_first: float | None = None  # first and last record time (Unix s)
    t_last: float | None = None
    config: Mapping[str, Any] = field(default_factory=dict)  # flattened config + meta.* keys
    config_text: Mapping[str, str] = field(default_factory=dict)  # the same, as shown (compared across runs)
    refused_times: int = 0  # finite record times past any plausible date (ingest.status.TIME_MAX): not used
    refused_example: float | None = None  # the largest of them, for the note


def key_metrics(columns: Iterable[str]) -> list[str]:
    """``loss``, ``eval_loss``, then the other ``eval_*`` columns in sorted order."""
    cols = set(columns)
    evals = sorted(c for c in cols if c.startswith("eval_") and c != "eval_loss")
    return [m for m in (*TRAIN_METRICS, "eval_loss") if m in cols] + evals


def metric_stats(frame: pd.DataFrame, column: str, logged: Mapping[str, np.ndarray] | None = None) -> MetricStats:
    """Statistics of ``column`` over the rows where it was logged (all rows without a mask)."""
    if column not in frame.columns or len(frame) == 0:
        return MetricStats()
    return _stats(column, float_values(frame[column]), frame["step"].to_numpy(), logged_rows(frame, column, logged))


def _stats(column: str, values: np.ndarray, steps: np.ndarray, rows: np.ndarray) -> MetricStats:
    values, steps = values[rows], steps[rows]
    if values.size == 0:
        return MetricStats()
    finite = np.isfinite(values)
    bad = np.flatnonzero(~finite)
    first_bad = int(steps[bad[0]]) if bad.size else None
    if bad.size == values.size:
        return MetricStats(last=float(values[-1]), count=int(values.size), first_nonfinite_step=first_bad)
    good, good_steps = (values, steps) if first_bad is None else (values[finite], steps[finite])
    lo, hi = int(np.argmin(good)), int(np.argmax(good))
    best = lo if lower_is_better(column) else hi
    return MetricStats(
        last=float(values[-1]),
        best=float(good[best]),
        best_step=int(good_steps[best]),
        min=float(good[lo]),
        max=float(good[hi]),
        count=int(values.size),
        first_nonfinite_step=first_bad,
    )


def run_stats(
    frame: pd.DataFrame, logged: Mapping[str, np.ndarray] | None = None, meta: Mapping[str, Any] | None = None
) -> RunStats:
    """The :class:`RunStats` of a run's frame (one rank's is enough: the key metrics are per step)."""
    metrics: dict[str, MetricStats] = {}
    if len(frame):
        steps = frame["step"].to_numpy()
        for m in key_metrics(frame.columns):
            rows = logged_rows(frame, m, logged)
            metrics[m] = _stats(m, float_values(frame[m]), steps, rows)
    t_first = t_last = refused_example = None
    refused = 0
    if "t" in frame.columns and len(frame):
        t = float_values(frame["t"])
        t = t[np.isfinite(t)]
        plausible = np.abs(t) <= TIME_MAX
        refused = int(t.size - np.count_nonzero(plausible))
        if refused:
            refused_example = float(t[~plausible][np.argmax(np.abs(t[~plausible]))])
            t = t[plausible]
        if t.size:
            t_first, t_last = float(t.min()), float(t.max())
    stats = config_stats(meta, metrics, t_first, t_last)
    return replace(stats, refused_times=refused, refused_example=refused_example) if refused else stats


def config_stats(
    meta: Mapping[str, Any] | None,
    metrics: Mapping[str, MetricStats] | None = None,
    t_first: float | None = None,
    t_last: float | None = None,
) -> RunStats:
    """RunStats with the run's flattened config and its shown text (computed once per run, not per table)."""
    config = run_config(meta)
    return RunStats(metrics or {}, t_first, t_last, config, {k: show_value(v) for k, v in config.items()})


# (frame, logged masks) of a run id; None when the run vanished
Loader = Callable[[Any], "tuple[pd.DataFrame, Mapping[str, np.ndarray]] | None"]


def store_loader(store: Any) -> Loader:
    """Read one rank of a run from a ``RunStore`` (the lowest: a zero-copy view, no merge across ranks).

    The one place that knows the store's read API, so a change there changes only this function.
    """

    def load(info: Any) -> tuple[pd.DataFrame, Mapping[str, np.ndarray]] | None:
        rank = min(info.ranks) if info.ranks else None
        try:
            data = store.read(info.id, rank=rank)
        except (FileNotFoundError, KeyError, ValueError):
            return None
        return data.frame, data.masks

    return load


def state_key(info: Any) -> tuple[Any, ...]:
    """What a run's statistics depend on: equal keys mean nothing new to compute."""
    return (info.n_records, info.last_step, info.last_write, info.bad_lines, info.status, info.reason, id(info.meta))


class StatsCache:
    """Per-run :class:`RunStats`, recomputed only for runs whose :func:`state_key` changed; thread-safe.

    Args:
        load: reads a run's frame and masks (see :func:`store_loader`).
    """

    def __init__(self, load: Loader) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[tuple[Any, ...], RunStats]] = {}
        self.computed = 0  # how many times stats were (re)computed: for tests and benchmarks

    def get(self, info: Any) -> RunStats:
        """The stats of the run ``info`` (a ``RunInfo``) describes; empty stats when it cannot be read."""
        key = state_key(info)
        with self._lock:
            hit = self._entries.get(info.id)
        if hit is not None and hit[0] == key:
            return hit[1]
        loaded = self._load(info)
        stats = config_stats(info.meta) if loaded is None else run_stats(*loaded, meta=info.meta)
        with self._lock:
            self._entries[info.id] = (key, stats)
            self.computed += 1
        return stats

    def fill(self, infos: Iterable[Any], budget_s: float, clock: Callable[[], float] = time.perf_counter) -> int:
        """Compute the stats of runs whose state changed, in the given order, until ``budget_s`` is spent.

        Lets a page show a thousand new runs within its time budget: what is not computed yet shows
        with :meth:`cached`'s older (or config-only) stats, and the next refresh continues.

        Returns:
            How many runs are still out of date.
        """
        deadline = clock() + budget_s
        stale = [info for info in infos if not self.is_fresh(info)]
        for done, info in enumerate(stale):
            if clock() >= deadline:
                return len(stale) - done
            self.get(info)
        return 0

    def is_fresh(self, info: Any) -> bool:
        """Whether the cached stats of ``info``'s run match its current state."""
        with self._lock:
            hit = self._entries.get(info.id)
        return hit is not None and hit[0] == state_key(info)

    def cached(self, info: Any) -> RunStats:
        """The last stats computed for the run, current or not; config-only stats when there are none yet."""
        with self._lock:
            hit = self._entries.get(info.id)
        return hit[1] if hit is not None else config_stats(info.meta)

    def prune(self, keep: Iterable[str]) -> None:
        """Forget runs no longer listed."""
        wanted = set(keep)
        with self._lock:
            self._entries = {k: v for k, v in self._entries.items() if k in wanted}
