"""Benchmark the compare page: server time and bytes for 20 runs × 100k steps.

Usage: ``.venv/bin/python bench/bench_compare.py [--runs 20] [--steps 100000] [--repeat 3]``

The runs are written once in the record format (train records every step, an eval record every 1,000
steps, lr and batch size differing) under ``bench/out/compare-<runs>x<steps>/`` (git-ignored) and
read through a ``RunStore`` as the page does. Then, per configuration, the median of ``--repeat``:

* **server time** of one page refresh without Streamlit: read every run from the store (frame and
  "was logged" masks; files already polled) plus ``build_view`` (alignment, smoothing, the common
  grid, figures, summary table, the page's sticky colours), the summary as text, then the figures'
  JSON as ``st.plotly_chart`` encodes it; overlay, grouped by lr (mean and min-max band), and
  side by side (the chosen metrics per run, shared y);
* **bytes**: the size of that JSON (what the browser receives for the charts).

The baseline, measured in the same run, draws every point of every run (no grid, no downsampling),
smoothed per point with the same EMA, as a naive overlay would.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

GOAL_S = 1.0


def write_runs(root: Path, runs: int, steps: int) -> None:
    """``runs`` finished runs of ``steps`` train records each (skipped when already written)."""
    for i in range(runs):
        run_dir = root / f"sweep{i:02d}"
        path = run_dir / "metrics.jsonl"
        if path.exists():
            continue
        run_dir.mkdir(parents=True, exist_ok=True)
        lr, batch = (1e-4, 3e-4, 1e-3, 3e-3)[i % 4], (32, 64)[i % 2]
        rng = np.random.default_rng(i)
        s = np.arange(1, steps + 1)
        t0 = time.time() - 86400 + i * 600
        t = t0 + s * (0.05 + 0.01 * (i % 3))
        loss = 3.0 * np.exp(-s * lr * 20 / steps * 100) + 0.3 + 0.05 * rng.standard_normal(steps)
        loss[rng.random(steps) < 2e-5] *= 15  # rare spikes
        grad = 1.0 + 0.2 * np.abs(rng.standard_normal(steps))
        thr = 800.0 + 20 * rng.standard_normal(steps)
        lines = []
        for k, step in enumerate(s.tolist()):
            record = {
                "step": step,
                "t": float(t[k]),
                "rank": 0,
                "seg": 1,
                "loss": float(loss[k]),
                "lr": lr * min(1.0, step / 1000),
                "throughput": float(thr[k]),
                "grad_norm": float(grad[k]),
                "samples": step * batch,
            }
            lines.append(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE))
            if step % 1000 == 0:
                ev = {"step": step, "t": float(t[k]) + 0.01, "rank": 0, "seg": 1, "eval_loss": float(loss[k]) * 1.1}
                lines.append(orjson.dumps(ev, option=orjson.OPT_APPEND_NEWLINE))
        path.write_bytes(b"".join(lines))
        meta = {
            "schema": 1,
            "name": run_dir.name,
            "status": "finished",
            "start_time": t0,
            "first_start_time": t0,
            "end_time": float(t[-1]),
            "rank": 0,
            "world_size": 1,
            "segment": 1,
            "metrics_file": "metrics.jsonl",
            "config": {"lr": lr, "batch_size": batch, "seed": i, "optimizer": {"name": "adamw", "wd": 0.01}},
        }
        (run_dir / "metrics.meta.json").write_bytes(orjson.dumps(meta))


def figures_json(figures: list[Any]) -> int:
    """Bytes of the figures' JSON, encoded as ``st.plotly_chart`` does."""
    import plotly.io as pio

    return sum(len(pio.to_json(fig, validate=False).encode()) for fig in figures)


def naive_figures(runs: list[Any], metrics: tuple[str, ...], smoothing: float) -> list[Any]:
    """The baseline: every point of every run, raw and per-point EMA, no downsampling."""
    import plotly.graph_objects as go

    from monitor_cb.analysis.series import float_values, logged_rows
    from monitor_cb.analysis.smoothing import ema_debiased

    figures = []
    for metric in metrics:
        fig = go.Figure()
        for run in runs:
            if metric not in run.frame.columns:
                continue
            keep = logged_rows(run.frame, metric, run.logged)
            x = run.frame["step"].to_numpy()[keep]
            y = float_values(run.frame[metric])[keep]
            fig.add_trace(go.Scattergl(x=x, y=y, name=f"{run.label} (raw)", legendgroup=run.id, opacity=0.3))
            fig.add_trace(go.Scattergl(x=x, y=ema_debiased(y, smoothing), name=run.label, legendgroup=run.id))
        figures.append(fig)
    return figures


def median_of(repeat: int, work: Callable[[], int]) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        size = work()
        times.append(time.perf_counter() - start)
    return statistics.median(times), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from monitor_cb.ingest import RunStore
    from monitor_cb.views.compare_session import CompareSettings, build_view, load_run
    from monitor_cb.views.summary_cells import summary_display

    root = REPO / "bench" / "out" / f"compare-{args.runs}x{args.steps}"
    start = time.perf_counter()
    write_runs(root, args.runs, args.steps)
    print(f"runs: {args.runs} x {args.steps:,} steps under {root} (ready in {time.perf_counter() - start:.1f} s)")
    store = RunStore(root)
    start = time.perf_counter()
    infos = store.list_runs()
    for info in infos:
        load_run(store, info)
    print(f"first load (ingest of every file, once per server): {time.perf_counter() - start:.2f} s")
    print(f"cpu: {os.cpu_count()} cores visible; python {sys.version.split()[0]}")

    history: dict[str, str] = {}  # the page's sticky colours (session state), passed as the page does

    def refresh(settings: CompareSettings, side: bool = False) -> int:
        runs = [load_run(store, info) for info in infos]
        view = build_view(runs, settings, side_by_side=side, colors=history)
        history.update(view.colors)
        summary_display(view.summary)  # the summary as the page shows it (text, NaN as NaN)
        figures = list(view.figures.values()) + [f for panel in view.side.values() for f in panel]
        return figures_json(figures)

    refresh(CompareSettings(metrics=("loss",)))  # warm-up: imports and first-use costs are not a refresh
    rows = []
    for alignment in ("step", "wall"):
        settings = CompareSettings(metrics=("loss", "eval_loss"), alignment=alignment, smoothing=0.6)
        seconds, size = median_of(args.repeat, lambda s=settings: refresh(s))
        rows.append((f"compare, 2 charts, align={alignment}", seconds, size))
    settings = CompareSettings(metrics=("loss", "eval_loss", "lr", "grad_norm"), smoothing=0.6)
    seconds, size = median_of(args.repeat, lambda: refresh(settings))
    rows.append(("compare, 4 charts, align=step", seconds, size))
    grouped = CompareSettings(metrics=("loss", "eval_loss"), smoothing=0.6, group_by="lr")
    seconds, size = median_of(args.repeat, lambda: refresh(grouped))
    rows.append(("grouped by lr (mean + min-max band), 2 charts", seconds, size))
    side = CompareSettings(metrics=("loss", "eval_loss"), smoothing=0.6)
    seconds, size = median_of(args.repeat, lambda: refresh(side, side=True))
    rows.append((f"side by side, {len(infos)} runs x 2 metrics, shared y", seconds, size))

    def naive() -> int:
        runs = [load_run(store, info) for info in infos]
        return figures_json(naive_figures(runs, ("loss", "eval_loss"), 0.6))

    seconds, size = median_of(1, naive)
    rows.append(("BASELINE naive (all points), 2 charts", seconds, size))

    print(f"\n{'configuration':<44} {'server s':>9} {'chart bytes':>13}")
    for name, seconds, size in rows:
        print(f"{name:<44} {seconds:>9.3f} {size:>13,}")
    main_s = rows[0][1]
    print(
        f"\ngoal <= {GOAL_S:.1f} s for 20 runs x 100k steps: {'MET' if main_s <= GOAL_S else 'MISSED'} "
        f"({main_s:.3f} s); bytes {rows[0][2] / rows[-1][2]:.1%} of the baseline's, "
        f"time {main_s / rows[-1][1]:.1%} of the baseline's"
    )


if __name__ == "__main__":
    main()
