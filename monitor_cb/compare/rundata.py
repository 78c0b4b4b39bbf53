"""One run as comparing needs it: its frame, "was logged" masks, metadata and status, and the metrics runs share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class RunData:
    """One selected run as the compare logic needs it (``compare.session.load_run`` builds it from the store)."""

    id: str
    label: str
    frame: pd.DataFrame
    logged: Mapping[str, np.ndarray] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)
    status: str = "finished"
    version: tuple[Any, ...] = ()  # RunFrame.key when read from a store: changes exactly when the rows do


def default_metrics(metrics: Sequence[str]) -> list[str]:
    """The charts Compare opens with: the runs' training loss and their eval loss, by role (a run that logs
    ``val_loss`` or ``eval/loss`` opens with it, not with an ``eval_loss`` it never logged); the first eval
    metric when no eval loss is logged."""
    from monitor_cb.analysis.roles import automatic

    casting = automatic(metrics)
    picks = (casting.first("loss"), casting.first("eval_loss") or casting.first("eval_metric"))
    return [m for m in dict.fromkeys(picks) if m]


def metric_options(runs: Sequence[RunData]) -> list[str]:
    """Metrics any selected run logged, well-known ones first."""
    from monitor_cb.analysis.series import metric_columns

    seen: dict[str, None] = {}
    for run in runs:
        for column in metric_columns(run.frame):
            if column not in ("samples",):
                seen.setdefault(column, None)
    preferred = [m for m in ("loss", "eval_loss", "eval_accuracy", "lr", "grad_norm", "throughput") if m in seen]
    return preferred + [m for m in seen if m not in preferred]
