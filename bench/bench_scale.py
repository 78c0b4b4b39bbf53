"""Benchmark issue 14's goals for long runs and many ranks: cold load, first chart, server memory.

Usage: ``.venv/bin/python bench/bench_scale.py [--steps 1000000] [--shapes 8x1000000,64x100000] [--keep DIR]``

Runs are generated in the record format with polars (a 1M-step run of one rank, and one run per
``RANKSxSTEPS`` shape), under a temporary root (or ``--keep DIR``, reused when present). Every
figure is measured in this run next to its baseline:

1. **Cold load** of the 1M-step file: ``RunStore(...).read(run)`` on a fresh store without a cache,
   and with the columnar cache being written, against ``polars.read_ndjson`` with an explicit
   schema on the same file (interleaved rounds, best of each). Goal: <= 1.2x polars.
2. **First chart** on a fresh server process: a new Python process (Streamlit loaded, as a server
   is before a page is opened) imports the dashboard's modules, opens the store, lists the runs,
   reads the run (the drawn rank of a multi-rank run and the other ranks' NaN cells, aggregated at
   ingest) and builds the live page's KPIs and figures
   and their JSON (what the first render of the live page computes before the browser draws):
   time from process start, cold (no cache yet) and with the cache; diagnosis timed apart (it
   runs off the request path, in the viewers' background worker, as the server runs it). Goals:
   1M steps <= 4 s cold and <= 1.5 s cached; 8x1M and 64x100k <= 3 s cached.
3. **Server memory**: RSS of that process when the figures are built, and once the diagnosis is
   done, minus the RSS of an empty app (the same imports and an empty store), both measured here.
   Goal: <= 600 MB.
4. **Bands across ranks**: numpy (what the store uses) against polars' ``group_by`` and list
   functions on the same values.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FLOATS = ("loss", "lr", "throughput", "step_time", "data_time", "grad_norm")


# ----------------------------------------------------------------------------- runs
def write_rank(path: Path, rank: int, steps: int, t0: float) -> None:
    """One rank's metrics file (polars writes the lines: fast; the format is the collector's)."""
    import numpy as np
    import polars as pl

    step = np.arange(1, steps + 1, dtype=np.int64)
    rng = np.random.default_rng(rank + 7)
    slow = 1.0 + 0.6 * (rank == 3) * (step > steps // 2)  # rank 3 a straggler in the second half
    frame = pl.DataFrame(
        {
            "step": step,
            "t": t0 + step * 0.05 + rank * 1e-3,
            "rank": np.full(steps, rank, np.int64),
            "seg": np.ones(steps, np.int64),
            "epoch": 1 + step // 100_000,
            "loss": 3.0 * np.exp(-step / 2e5) + 0.3 + 0.05 * rng.standard_normal(steps),
            "lr": 1e-3 * np.minimum(1.0, step / 2000),
            "throughput": 820.0 + (step % 13),
            "step_time": 0.05 * slow * (1 + 0.02 * rng.standard_normal(steps)),
            "data_time": 0.002 + 0.0002 * rng.standard_normal(steps),
            "grad_norm": 1.0 + 0.2 * rng.standard_normal(steps),
            "samples": step * 32,
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.write_ndjson(path)
    meta = {
        "schema": 1,
        "name": path.parent.name,
        "status": "finished",
        "start_time": t0,
        "end_time": t0 + steps * 0.05,
        "rank": rank,
        "world_size": 1,
        "segment": 1,
        "metrics_file": path.name,
    }
    path.with_name(path.name.replace(".jsonl", ".meta.json")).write_text(json.dumps(meta))


def make_runs(root: Path, steps: int, shapes: list[tuple[int, int]]) -> dict[str, int]:
    """run id -> ranks; files written only when missing (``--keep`` reuses them)."""
    t0 = time.time() - 86_400
    runs = {"single": 1}
    if not (root / "single" / "metrics.jsonl").exists():
        write_rank(root / "single" / "metrics.jsonl", 0, steps, t0)
    for ranks, n in shapes:
        run = f"ranks{ranks}x{n}"
        runs[run] = ranks
        for rank in range(ranks):
            path = root / run / f"metrics.rank{rank}.jsonl"
            if not path.exists():
                write_rank(path, rank, n, t0)
    return runs


# ----------------------------------------------------------------------------- 1. cold load
def cold_load(path: Path, rounds: int = 3) -> dict[str, float]:
    import polars as pl

    from monitor_cb.ingest import RunStore

    schema = {"step": pl.Int64, "t": pl.Float64, "rank": pl.Int64, "seg": pl.Int64, "epoch": pl.Int64}
    schema.update({k: pl.Float64 for k in FLOATS})
    schema["samples"] = pl.Int64
    root = path.parent.parent
    times: dict[str, list[float]] = {"polars": [], "store": [], "store+cache write": []}
    for _ in range(rounds):  # interleaved: a busy neighbour slows every side alike
        t = time.perf_counter()
        pl.read_ndjson(path, schema=schema)
        times["polars"].append(time.perf_counter() - t)
        t = time.perf_counter()
        RunStore(root, cache=False).read(path.parent.name)
        times["store"].append(time.perf_counter() - t)
        with tempfile.TemporaryDirectory() as cache_dir:
            from monitor_cb.ingest.colcache import Place

            t = time.perf_counter()
            RunStore(root, cache=[Place(Path(cache_dir), Path(cache_dir))]).read(path.parent.name)
            times["store+cache write"].append(time.perf_counter() - t)
    return {name: min(values) for name, values in times.items()}


# ----------------------------------------------------------------------------- 2-3. first chart (child process)
CHILD = r"""
import json, os, sys, time
import streamlit  # the server has it loaded before any page is opened
start = time.perf_counter()
sys.path.insert(0, {repo!r})
import psutil
from monitor_cb.views.live import ChartSettings, other_rank_cells
from monitor_cb.views.zoom import ZoomState
from monitor_cb.ingest import RunStore
from pages import live_page
from monitor_cb.views.live_refresh import LiveRequest, process
mode, root, run_id = sys.argv[1:4]
proc = psutil.Process()
imported = time.perf_counter() - start
store = RunStore(root)
if mode == "empty":
    store.list_runs()
    print(json.dumps({{"rss": proc.memory_info().rss}}))
    sys.exit(0)
import plotly.io
runs = {{r.id: r for r in store.list_runs()}}
run = runs[run_id]
listed = time.perf_counter() - start
data = live_page.read_run(store, run_id, run.ranks)
others = other_rank_cells(store, run_id, data)
read = time.perf_counter() - start
settings, zoom = ChartSettings(), ZoomState()
live = process(run, data, LiveRequest(settings, zoom, (), others or None, (root, run_id)), time.time())
size = sum(len(plotly.io.to_json(f, validate=False)) for f in live.figures.values())
first_chart = time.perf_counter() - start
rss = proc.memory_info().rss
t = time.perf_counter()
from pages import _findings
from monitor_cb.views.live_refresh import LiveShared
# as the server runs it: in the viewers' background worker (which then trims the C heap)
findings = _findings.run_findings(run, data, root, store=store, shared=LiveShared(), first_wait_s=600)
diagnosis = time.perf_counter() - t
hits = sum(getattr(s, "cache_hit", False) for s in store._runs[run_id].sources.values())
if store.cache is not None:
    store.cache.wait(600)  # cache files are written in the background; a server lives on, this process ends
print(json.dumps({{"first_chart": first_chart, "imported": imported, "listed": listed, "read": read,
                  "rss": rss, "rss_after_diagnosis": proc.memory_info().rss,
                  "diagnosis": diagnosis, "json_bytes": size, "cache_hits": hits,
                  "findings": sorted({{f.kind for f in findings}}), "rows_drawn": len(data.frame)}}))
"""


def child(mode: str, root: Path, run_id: str, cache: bool) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    if not cache:
        env["MONITOR_CACHE"] = "off"
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(repo=str(REPO)), mode, str(root), run_id],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- 4. bands
def bands_engines(steps: int, ranks: int) -> dict[str, float]:
    import numpy as np
    import polars as pl

    from monitor_cb.ingest.rank_bands import RankColumn, rank_bands

    rng = np.random.default_rng(0)
    m = rng.random((steps, ranks))
    step = np.arange(steps)
    columns = [RankColumn(r, step, m[:, r], np.ones(steps, bool), step.astype(float)) for r in range(ranks)]
    out = {}
    t = time.perf_counter()
    rank_bands("x", columns)
    out["numpy (store)"] = time.perf_counter() - t
    long = pl.DataFrame({"step": np.repeat(step, ranks), "rank": np.tile(np.arange(ranks), steps), "v": m.ravel()})
    t = time.perf_counter()
    long.group_by("step").agg(
        pl.col("v").min().alias("lo"), pl.col("v").max().alias("hi"), pl.col("v").median().alias("median"),
        pl.col("v").mean().alias("mean"), pl.col("rank").get(pl.col("v").arg_max()).alias("hi_rank"),
    )  # fmt: skip
    out["polars group_by"] = time.perf_counter() - t
    wide = pl.DataFrame({str(r): m[:, r] for r in range(ranks)})
    cols = [pl.col(str(r)) for r in range(ranks)]
    t = time.perf_counter()
    wide.select(
        pl.min_horizontal(cols).alias("lo"), pl.max_horizontal(cols).alias("hi"),
        pl.mean_horizontal(cols).alias("mean"),
        pl.concat_list(cols).list.median().alias("median"), pl.concat_list(cols).list.arg_max().alias("hi_rank"),
    )  # fmt: skip
    out["polars list functions"] = time.perf_counter() - t
    return out


# ----------------------------------------------------------------------------- main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--shapes", default="8x1000000,64x100000")
    parser.add_argument("--keep", type=Path, help="generate the runs here (and reuse them next time)")
    args = parser.parse_args()
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",") if s]
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    root = base / "logs"
    try:
        t = time.perf_counter()
        runs = make_runs(root, args.steps, shapes)  # type: ignore[arg-type]
        print(f"runs ready in {time.perf_counter() - t:.0f} s under {root}; load average {os.getloadavg()[0]:.1f}")
        path = root / "single" / "metrics.jsonl"
        size = path.stat().st_size / 1e6
        load = cold_load(path)
        print(f"\n1. cold load of a {args.steps:,}-step file ({size:.0f} MB), best of 3 interleaved rounds")
        for name, seconds in load.items():
            print(f"   {name:<22} {seconds:6.2f} s   x{seconds / load['polars']:.2f} of polars (goal <= 1.2)")

        print("\n2-3. first chart on a fresh server process (imports included), and its memory")
        empty_root = base / "empty"
        empty_root.mkdir(exist_ok=True)
        empty = child("empty", empty_root, ".", cache=False)["rss"]
        print(f"   empty app: RSS {empty / 2**20:.0f} MB (the baseline)")
        goals = {"single": (4.0, 1.5)}
        for run_id, ranks in runs.items():
            run_root = root / run_id  # each run alone under its root: the first listing reads only it
            shutil.rmtree(run_root / ".monitor", ignore_errors=True)
            cold = child("chart", run_root, ".", cache=True)  # the first open writes the cache
            cached = child("chart", run_root, ".", cache=True)
            nocache = child("chart", run_root, ".", cache=False)
            cold_goal, warm_goal = goals.get(run_id, (None, 3.0))
            print(
                f"   {run_id} ({ranks} rank{'s' if ranks > 1 else ''}): first chart cold {cold['first_chart']:.2f} s"
                + (f" (goal <= {cold_goal:.0f} s)" if cold_goal else "")
                + f", with the cache {cached['first_chart']:.2f} s (goal <= {warm_goal} s; {cached['cache_hits']} "
                f"files from the cache), cache off {nocache['first_chart']:.2f} s -> cached/cold "
                f"{cached['first_chart'] / cold['first_chart']:.2f}"
            )
            for label, result in (("cold", cold), ("cached", cached)):
                print(
                    f"      {label}: imports {result['imported']:.2f} s, listed at {result['listed']:.2f} s, read at "
                    f"{result['read']:.2f} s, figures at {result['first_chart']:.2f} s; RSS above the empty app "
                    f"{(result['rss'] - empty) / 2**20:.0f} MB (goal <= 600), "
                    f"after diagnosis {(result['rss_after_diagnosis'] - empty) / 2**20:.0f} MB; diagnosis "
                    f"{result['diagnosis']:.2f} s {result['findings']}; {result['rows_drawn']:,} rows drawn, "
                    f"{result['json_bytes'] / 1e3:.0f} kB of figure JSON"
                )
        print("\n4. bands across ranks, the same values")
        for steps, ranks in ((1_000_000, 8), (100_000, 64)):
            times = bands_engines(steps, ranks)
            base_s = times["numpy (store)"]
            listed = ", ".join(f"{k} {v:.2f} s (x{v / base_s:.1f})" for k, v in times.items())
            print(f"   {ranks} ranks x {steps:,} steps: {listed}")
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
