"""The Layers heatmap at scale: a family of 1,000 parameters x 100k steps, first draw and refresh on a warm path.

The run's frame is in memory (as the store holds it once read: "warm"); what is timed is what the
Layers page does per viewer on top of it: fold the family into its bucket matrix
(``FamilyMatrix.update``, every row the first time), the cells and top movers, the heatmap and the
selected parameter's curve, and the figures serialised as Streamlit sends them (``to_json``). Then
a refresh after ten new rows (only those are folded). The baseline, measured in the same run, is
one numpy pass over the family's values (``frame[columns].to_numpy().max(axis=0)``): the least any
drawing of every value must pay (``to_numpy`` alone is a view of the frame's float32 block, no
read). A small family is drawn first, untimed, as a warm server has (plotly's lazily imported
modules and templates loaded once per process).

Goal (issue 33): the first draw within 2 s on a warm server; memory bounded (the matrix is
parameters x buckets whatever the steps).

    .venv/bin/python bench/bench_families.py [--params 1000] [--steps 100000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pandas as pd
import plotly.io as pio

from monitor_cb.views.layers import MatrixCache, layers_view, run_families


def family_frame(params: int, steps: int, seed: int = 0) -> pd.DataFrame:
    """``steps`` rows: loss, grad_norm and ``grad_norm/model.layers.<i>...`` (float32, one spike)."""
    rng = np.random.default_rng(seed)
    values = (10.0 ** rng.uniform(-3, 1, params)).astype(np.float32) * np.exp(
        rng.normal(0, 0.05, (steps, params))
    ).astype(np.float32)
    values[steps * 3 // 4, params // 3] *= 40.0
    names = [f"grad_norm/model.layers.{i // 8}.part{i % 8}.weight" for i in range(params)]
    family = pd.DataFrame(values, columns=names)
    head = pd.DataFrame(
        {
            "step": np.arange(1, steps + 1, dtype=np.int64),
            "loss": 2.0 + rng.normal(0, 0.01, steps),
            "grad_norm": 1.0 + rng.normal(0, 0.01, steps),
        }
    )
    return pd.concat([head, family], axis=1)


def draw(frame: pd.DataFrame, cache: MatrixCache) -> tuple[float, int, str]:
    data = SimpleNamespace(run_id="bench", rank=None, frame=frame, masks={})
    start = time.perf_counter()
    family = run_families(list(frame.columns))[0]  # as the page finds it, on every draw
    view = layers_view(data, family, None, [], cache)
    payload = pio.to_json(view.heatmap) + pio.to_json(view.curve)
    return time.perf_counter() - start, len(payload), view.movers[0].member if view.movers else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=100_000)
    args = parser.parse_args()
    draw(family_frame(8, 200, seed=1), MatrixCache())  # a warm server: plotly's modules and templates loaded
    frame = family_frame(args.params, args.steps)
    columns = [c for c in frame.columns if c.startswith("grad_norm/")]
    start = time.perf_counter()
    frame[columns].to_numpy().max(axis=0)
    touch = time.perf_counter() - start
    cache = MatrixCache()
    first, size, top = draw(frame.iloc[:-10], cache)
    refresh, _, _ = draw(frame, cache)
    matrix, _ = next(iter(cache._items.values()))
    matrix_mb = sum(a.nbytes for a in (matrix.hi, matrix.lo, matrix.total, matrix.count, matrix.bad)) / 2**20
    family_mb = frame[columns].memory_usage(index=False).sum() / 2**20
    print(f"family: {args.params} parameters x {args.steps:,} steps ({family_mb:,.0f} MB of float32 in the frame)")
    print(f"baseline, one numpy pass over the values:     {touch:7.3f} s")
    print(
        f"first draw (fold every row, cells, figures):  {first:7.3f} s  = {first / touch:5.2f}x baseline (goal <= 2 s)"
    )
    print(f"refresh after 10 new rows:                    {refresh:7.3f} s  = {refresh / first:5.3f}x the first draw")
    print(
        f"bucket matrix: {matrix_mb:.1f} MB ({matrix.n} buckets of {matrix.width} steps); figures {size / 2**20:.1f} MB"
    )
    print(f"top mover: {top} (the spiked one: model.layers.{args.params // 3 // 8}.part{args.params // 3 % 8}.weight)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
