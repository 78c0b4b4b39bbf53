"""Small frames for detector tests, in the shape ``RunStore.frame`` returns."""

from __future__ import annotations

import numpy as np
import pandas as pd


def frame(n: int, seed: int = 0, **columns: np.ndarray | float) -> pd.DataFrame:
    """``n`` rows with step/t/rank/seg and the given columns (scalars are broadcast)."""
    data: dict[str, object] = {
        "step": np.arange(1, n + 1, dtype=np.int64),
        "t": 1.76e9 + np.arange(n, dtype=np.float64) * 0.5,
        "rank": np.zeros(n, dtype=np.int64),
        "seg": np.ones(n, dtype=np.int64),
    }
    for name, values in columns.items():
        data[name] = np.broadcast_to(np.asarray(values, dtype=np.float64), (n,)).copy()
    return pd.DataFrame(data)


def noisy(n: int, level: float = 1.0, rel: float = 0.03, seed: int = 0) -> np.ndarray:
    """A level with relative lognormal noise."""
    return level * np.random.default_rng(seed).lognormal(0.0, rel, n)


def decaying_loss(n: int, seed: int = 0, rel: float = 0.03) -> np.ndarray:
    """A noisy power-law loss curve."""
    steps = np.arange(1, n + 1)
    return (1.5 + 6.0 * (1 + steps / 50) ** -0.6) * np.random.default_rng(seed).lognormal(0.0, rel, n)
