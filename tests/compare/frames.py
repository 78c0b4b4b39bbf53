"""A run's frame for the compare and replay tests."""

from __future__ import annotations

import numpy as np
import pandas as pd


def frame(steps, loss, t0: float = 1000.0, dt: float = 1.0, **cols) -> pd.DataFrame:
    steps = np.asarray(steps, dtype=np.int64)
    data = {"step": steps, "t": t0 + dt * np.arange(steps.size), "rank": 0, "seg": 1, "loss": np.asarray(loss, float)}
    data.update({k: np.asarray(v, float) for k, v in cols.items()})
    return pd.DataFrame(data)
