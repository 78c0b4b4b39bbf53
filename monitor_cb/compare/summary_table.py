"""The compare page's summary table: one row per run, NaN-aware.

A logged NaN never becomes a minimum or a best value (``min`` over NaN would lie or return NaN); it
shows up once, as the first non-finite step. Values are taken only where the column was logged (the
``logged`` masks), so a gap is not mistaken for a NaN, and a value that does not exist (a metric never
logged, a duration without times) is None, never NaN: NaN in this table is always a logged NaN
(the final loss of a run that diverged).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from monitor_cb.analysis.series import first_nonfinite, float_values, latest, logged_rows
from monitor_cb.compare.rundata import RunData
from monitor_cb.ingest.meta_values import finite_float
from monitor_cb.ingest.status import ACTIVE, run_span

# Eval metrics where lower is better; any other eval metric (accuracy, f1, bleu, ...) is higher-better.
_LOWER_BETTER = ("loss", "error", "err", "perplexity", "ppl", "wer", "cer", "mse", "mae", "rmse", "nll")
COLUMNS = (
    "run",
    "status",
    "steps",
    "duration (s)",
    "final loss",
    "min loss",
    "min loss step",
    "best eval",
    "best eval value",
    "best eval step",
    "first non-finite step",
    "mean throughput",
    "max grad norm",
)


def lower_is_better(metric: str) -> bool:
    """Whether a smaller value of ``metric`` is better (``*loss*``, error rates, perplexity)."""
    name = metric.lower()
    return any(word in name for word in _LOWER_BETTER)


def default_eval_metric(columns: Sequence[str]) -> str | None:
    """The eval metric the summary ranks by: ``eval_loss`` when logged, else the first ``eval_*``."""
    evals = [c for c in columns if str(c).startswith("eval_")]
    if "eval_loss" in evals:
        return "eval_loss"
    return evals[0] if evals else None


def finite_values(
    frame: pd.DataFrame, column: str, logged: Mapping[str, np.ndarray] | None
) -> tuple[np.ndarray, np.ndarray]:
    """``(values, steps)`` of the rows where ``column`` was logged with a finite value."""
    if column not in frame.columns or len(frame) == 0:
        return np.empty(0), np.empty(0, dtype=np.int64)
    values = float_values(frame[column])
    keep = logged_rows(frame, column, logged) & np.isfinite(values)
    return values[keep], frame["step"].to_numpy()[keep]


def extreme(
    frame: pd.DataFrame, column: str, logged: Mapping[str, np.ndarray] | None, lowest: bool
) -> tuple[float, int] | None:
    """``(value, step)`` of the lowest (or highest) finite logged value; the first such step on ties."""
    values, steps = finite_values(frame, column, logged)
    if values.size == 0:
        return None
    i = int(np.argmin(values) if lowest else np.argmax(values))
    return float(values[i]), int(steps[i])


def run_duration(run: RunData, now: float) -> float | None:
    """Seconds from the run's start (metadata, else first record) to its end (metadata, else last record;
    now while it is running)."""
    meta = run.meta or {}
    frame = run.frame
    t = float_values(frame["t"]) if "t" in frame.columns and len(frame) else np.empty(0)
    t = t[np.isfinite(t)]
    start = finite_float(meta.get("first_start_time")) or finite_float(meta.get("start_time"))
    t_first, t_last = (float(t.min()), float(t.max())) if t.size else (None, None)
    active = run.status in ACTIVE
    log_end = finite_float(meta.get("log_end_time"))
    return run_span(start, finite_float(meta.get("end_time")), t_first, t_last, active, now, log_end)


def summary_row(run: RunData, eval_metric: str | None, now: float) -> dict[str, Any]:
    """The summary of one run (None where a value does not exist; NaN only where NaN was logged)."""
    frame, logged = run.frame, run.logged or None
    final = latest(frame, "loss", logged)
    low = extreme(frame, "loss", logged, lowest=True)
    best = None
    if eval_metric is not None and eval_metric in frame.columns:
        best = extreme(frame, eval_metric, logged, lowest=lower_is_better(eval_metric))
    bad = first_nonfinite(frame, "loss", logged) if "loss" in frame.columns else None
    throughput, _ = finite_values(frame, "throughput", logged)
    grad, _ = finite_values(frame, "grad_norm", logged)
    return {
        "run": run.label,
        "status": run.status,
        "steps": int(frame["step"].max()) if len(frame) else None,
        "duration (s)": run_duration(run, now),
        "final loss": final[1] if final is not None else None,
        "min loss": low[0] if low else _nan_if_logged(frame, "loss", logged),
        "min loss step": low[1] if low else None,
        "best eval": eval_metric if best else None,
        "best eval value": best[0] if best else (_nan_if_logged(frame, eval_metric, logged) if eval_metric else None),
        "best eval step": best[1] if best else None,
        "first non-finite step": bad[0] if bad else None,
        "mean throughput": float(throughput.mean()) if throughput.size else _nan_if_logged(frame, "throughput", logged),
        "max grad norm": float(grad.max()) if grad.size else _nan_if_logged(frame, "grad_norm", logged),
    }


def summary_table(runs: Sequence[RunData], eval_metric: str | None = None, now: float | None = None) -> pd.DataFrame:
    """One row per run (columns :data:`COLUMNS`); integer columns are nullable ``Int64``, number columns
    hold floats and None (object dtype, so pandas does not turn a missing value into NaN).

    ``eval_metric`` defaults to :func:`default_eval_metric` over every run's columns.
    """
    import time

    now = time.time() if now is None else now
    if eval_metric is None:
        columns = [c for r in runs for c in r.frame.columns]
        eval_metric = default_eval_metric(list(dict.fromkeys(columns)))
    rows = [summary_row(r, eval_metric, now) for r in runs]
    table = pd.DataFrame({c: pd.Series([row[c] for row in rows], dtype=object) for c in COLUMNS}, columns=list(COLUMNS))
    for column in ("steps", "min loss step", "best eval step", "first non-finite step"):
        table[column] = table[column].astype("Int64")
    return table


def _nan_if_logged(frame: pd.DataFrame, column: str, logged: Mapping[str, np.ndarray] | None) -> float | None:
    """For a statistic with no finite value: NaN when the column was logged (only NaN/±inf), None when never."""
    if column not in frame.columns or len(frame) == 0:
        return None
    return math.nan if logged_rows(frame, column, logged).any() else None
