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
