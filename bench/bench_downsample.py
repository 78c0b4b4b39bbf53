"""Time downsample_indices on 1M points against a naive numpy min/max-per-bucket baseline.

Run: ``.venv/bin/python bench/bench_downsample.py``. Goal: well under 40 ms for 1M points, so a live
page refreshing every second or two spends its time drawing, not picking points.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np
import pandas as pd

from monitor_cb.analysis.downsample import downsample_indices
from monitor_cb.analysis.smoothing import ema_debiased
from monitor_cb.charts.figures import ChartOptions, dual_axis_figure

N = 1_000_000
N_OUT = 2000
REPEAT = 15


def naive_minmax(y: np.ndarray, n_out: int) -> np.ndarray:
    """Baseline: argmin and argmax of each of n_out/2 equal buckets (NaN-aware, numpy only)."""
    n_buckets = n_out // 2
    size = -(-y.size // n_buckets)
    padded = np.full(n_buckets * size, np.nan)
    padded[: y.size] = y
    buckets = padded.reshape(n_buckets, size)
    offsets = np.arange(n_buckets) * size
    lo = np.nanargmin(buckets, axis=1) + offsets
    hi = np.nanargmax(buckets, axis=1) + offsets
    return np.unique(np.concatenate([lo, hi, np.flatnonzero(~np.isfinite(y)), [0, y.size - 1]]))


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    fn()  # warm up (first call loads code paths and allocates)
    runs = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - start) * 1e3)
    return statistics.median(runs), min(runs)


def main() -> None:
    rng = np.random.default_rng(0)
    step = np.arange(1, N + 1, dtype=np.int64)
    clean = 2.0 * np.exp(-step / 3e5) + 0.5 + rng.normal(0, 0.05, N)
    with_nan = clean.copy()
    with_nan[rng.choice(N, 100, replace=False)] = np.nan
    with_nan[123_457] = 50.0
    frame = pd.DataFrame({"step": step, "t": 1.7e9 + step * 0.2, "loss": with_nan, "lr": np.linspace(1e-3, 0, N)})

    cases: list[tuple[str, Callable[[], object]]] = [
        ("downsample_indices, all finite", lambda: downsample_indices(step, clean, N_OUT)),
        ("downsample_indices, 100 NaN", lambda: downsample_indices(step, with_nan, N_OUT)),
        ("downsample_indices, float x", lambda: downsample_indices(step.astype(np.float64), clean, N_OUT)),
        ("naive numpy min/max baseline", lambda: naive_minmax(with_nan, N_OUT)),
        ("ema_debiased (w=0.9)", lambda: ema_debiased(with_nan, 0.9)),
        (
            "dual_axis_figure loss|lr, smoothed",
            lambda: dual_axis_figure(frame, ["loss"], ["lr"], ChartOptions(smoothing=0.9)),
        ),
    ]
    kept = downsample_indices(step, with_nan, N_OUT)
    print(f"{N:,} points, n_out={N_OUT}, median/min of {REPEAT} runs")
    for name, fn in cases:
        median, best = timed(fn)
        print(f"  {name:<38} {median:8.2f} ms  (min {best:.2f})")
    print(f"  kept {kept.size} rows; spike kept: {123_457 in kept}; NaN kept: {np.isnan(with_nan[kept]).sum()}/100")


if __name__ == "__main__":
    main()
