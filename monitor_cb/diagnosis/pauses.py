"""Pauses a run explains itself: evaluations it logged, and resumes (a new segment).

Time between two records is not training time when an evaluation ran in between (the run logs its
results, and HF Trainer even how long it took: ``eval_runtime``) or when the job was stopped and
resumed (our writer and every TensorBoard reader start a new segment). The stall and throughput
detectors leave such intervals out rather than call them a hang or a slowdown.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from monitor_cb.analysis.roles import is_evaluation, is_evaluation_seconds
from monitor_cb.diagnosis._cache import frame_memo
from monitor_cb.diagnosis._stats import INDEX_COLUMNS, column


def evaluation_rows(frame: pd.DataFrame) -> np.ndarray:
    """Rows that logged an evaluation result (any metric named as one: ``eval_*``, ``val_*``, ``test*``); none
    when most rows do (a metric evaluated at every logged point marks no pause)."""

    def compute() -> np.ndarray:
        found = np.zeros(len(frame), dtype=bool)
        for name in frame.columns:
            if name not in INDEX_COLUMNS and is_evaluation(str(name)):
                values = column(frame, name)
                if values is not None:
                    found |= ~np.isnan(values)
        if found.sum() * 2 > len(frame):  # evaluated at most logged points: no pause of its own
            found[:] = False
        return found

    return frame_memo(frame, "evaluation_rows", compute)


def evaluation_seconds(frame: pd.DataFrame) -> np.ndarray:
    """Per row, the longest evaluation time it logged (seconds), NaN where none."""
    out = np.full(len(frame), np.nan)
    for name in frame.columns:
        if name not in INDEX_COLUMNS and is_evaluation_seconds(str(name)):
            values = column(frame, name)
            if values is not None:
                out = np.fmax(out, np.where(values >= 0, values, np.nan))
    return out


def resumed_between(frame: pd.DataFrame, before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Whether each pair of rows (``before[i]``, ``after[i]``) lies in two segments (a resume in between)."""
    if "seg" not in frame.columns:
        return np.zeros(len(before), dtype=bool)
    seg = frame["seg"].to_numpy()
    return seg[before] != seg[after]


def explained_pause(frame: pd.DataFrame, before: np.ndarray, after: np.ndarray, gaps: np.ndarray) -> np.ndarray:
    """How much of each gap between rows ``before[i]`` and ``after[i]`` the run explains (seconds): all of it
    across a resume; at an evaluation, the evaluation time it logged, else all of it."""
    evals = evaluation_rows(frame)
    seconds = evaluation_seconds(frame)
    at_eval = evals[before] | evals[after]
    logged = np.fmax(seconds[before], seconds[after])
    explained = np.where(at_eval, np.where(np.isfinite(logged), np.minimum(logged, gaps), gaps), 0.0)
    return np.where(resumed_between(frame, before, after), gaps, explained)


def paused_between(frame: pd.DataFrame, before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Whether an evaluation or a resume lies between each pair of rows: their interval is no step time."""
    evals = evaluation_rows(frame)
    return evals[before] | evals[after] | resumed_between(frame, before, after)
