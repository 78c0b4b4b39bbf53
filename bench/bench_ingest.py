"""Benchmark the reading side on a generated 1M-line run; prints figures and ratios from one run.

    /work/main/.venv/bin/python bench/bench_ingest.py [--lines 1000000] [--quick]

Generates its files in a temporary directory and deletes them afterwards. The
machine may be shared: every figure is the best of a few repeats, and the ratios
(measured side by side in this run) matter more than the absolute times.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from monitor_cb.ingest import RunStore
from monitor_cb.ingest.batch import records_to_batch
from monitor_cb.ingest.source import MetricsSource
from monitor_cb.record import encode_record, metrics_filename

FLOAT_KEYS = ("loss", "lr", "throughput", "step_time", "data_time", "grad_norm", "mem_host_rss")


def record(step: int, rnd: random.Random, total: int) -> dict[str, Any]:
    return {
        "step": step,
        "t": 1.7e9 + step * 0.05,
        "rank": 0,
        "seg": 1,
        "epoch": 1 + step // 10_000,
        "loss": math.nan if step % 997 == 0 else 2.0 / (1 + step * 1e-4) + rnd.random() * 0.01,
        "lr": 1e-3 * (1 - step / total),
        "throughput": 800 + rnd.random() * 50,
        "step_time": 0.04 + rnd.random() * 0.001,
        "data_time": 0.001,
        "grad_norm": math.inf if step % 1499 == 0 else rnd.random() * 3,
        "mem_host_rss": 512_753_664 + step,
    }


def write_lines(path: Path, first: int, last: int, total: int, seed: int = 0) -> None:
    rnd = random.Random(seed + first)
    with open(path, "ab") as handle:
        for start in range(first, last + 1, 10_000):
            stop = min(start + 10_000, last + 1)
            handle.write(
                b"".join(orjson.dumps(encode_record(record(s, rnd, total))) + b"\n" for s in range(start, stop))
            )


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def median_ms(fn: Callable[[], Any], repeat: int, setup: Callable[[], Any] | None = None) -> float:
    times = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def polars_schema() -> dict[str, Any]:
    # polars cannot read "NaN" strings as Float64: the columns holding them are read as strings,
    # the most an explicit schema lets polars do with this file.
    schema: dict[str, Any] = {"step": pl.Int64, "t": pl.Float64, "rank": pl.Int64, "seg": pl.Int64, "epoch": pl.Int64}
    for key in FLOAT_KEYS:
        schema[key] = pl.String if key in ("loss", "grad_norm") else pl.Float64
    return schema


def full_load(path: Path, quick: bool) -> None:
    print(f"\n== full load: {path.stat().st_size / 1e6:.0f} MB, best of repeats ==")
    # Interleaved rounds, best of each: a busy neighbour then slows both sides alike.
    timings: dict[str, list[float]] = {"bytes": [], "polars": [], "store": [], "source": []}
    for _ in range(3):
        timings["bytes"].append(best(path.read_bytes, 1))
        timings["polars"].append(best(lambda: pl.read_ndjson(path, schema=polars_schema()), 1))
        timings["store"].append(best(lambda: RunStore(path.parent.parent, rescan_interval_s=0).read("run"), 1))
        timings["source"].append(best(lambda: MetricsSource(path).poll(), 1))
    read_bytes, polars_s = min(timings["bytes"]), min(timings["polars"])
    ours_store, ours_source = min(timings["store"]), min(timings["source"])
    slow = MetricsSource(path, bulk_min_bytes=1 << 62)
    ours_slow = best(slow.poll, 1)
    torn = path.with_name("torn.jsonl")  # a crash + resume leaves one torn line mid-file
    data = path.read_bytes()
    middle = data.find(b"\n", len(data) // 2) + 1
    torn.write_bytes(data[:middle] + b'{"step": 12, "lo\n' + data[middle:])
    del data
    ours_torn = best(lambda: MetricsSource(torn).poll(), 1)
    torn.unlink()
    rows = [
        ("read the bytes alone", read_bytes),
        ("polars read_ndjson, explicit schema", polars_s),
        ("ours: MetricsSource.poll (polars fast path)", ours_source),
        ("ours: RunStore(...).read(run) from cold", ours_store),
        ("ours: orjson line path forced", ours_slow),
        ("ours: same file with one torn line mid-file", ours_torn),
    ]
    try:
        arrow_s = best(lambda: pd.read_json(path, lines=True, engine="pyarrow"), 1)
        rows.append(('pd.read_json(lines=True, engine="pyarrow")', arrow_s))
    except Exception as exc:  # noqa: BLE001 - report, do not abort the benchmark
        print(f"  pd.read_json(engine='pyarrow') fails on this file: {str(exc)[:90]}")
    if not quick:
        rows.append(("pd.read_json(lines=True) default", best(lambda: pd.read_json(path, lines=True), 1)))
        rows.append(("stdlib json.loads per line (to dicts)", best(lambda: stdlib_lines(path), 1)))
    for name, seconds in rows:
        print(f"  {name:<46} {seconds:7.3f} s   x{seconds / polars_s:5.2f} of polars")
    print(f"  ratio ours(store)/polars = {ours_store / polars_s:.2f}  (goal <= 1.2)")
    default = dict(rows).get("pd.read_json(lines=True) default")
    if default:
        print(f"  pd.read_json default / ours(store) = {default / ours_store:.1f}x faster  (goal >= 5)")


def stdlib_lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(1 for raw in handle if json.loads(raw))


def incremental(tmp: Path, big: Path) -> None:
    print("\n== incremental poll after 100 appended lines (median of 30) ==")
    results = {}
    for label, path in (("10k-line file", tmp / "small" / "run" / "metrics.jsonl"), ("1M-line file", big)):
        store = RunStore(path.parent.parent, rescan_interval_s=1e9)
        store.read(path.parent.name)
        source = next(iter(store._runs[path.parent.name].sources.values()))
        total = source.table.n
        state = {"next": total + 1}

        def add() -> None:
            write_lines(path, state["next"], state["next"] + 99, total + 10_000)  # noqa: B023
            state["next"] += 100  # noqa: B023

        poll_ms = median_ms(source.poll, 30, setup=add)
        frame_ms = median_ms(lambda: store.read(path.parent.name), 30, setup=add)  # noqa: B023
        idle_ms = median_ms(source.poll, 30)
        results[label] = poll_ms
        print(f"  {label:<14} poll {poll_ms:6.2f} ms   poll+frame {frame_ms:6.2f} ms   idle poll {idle_ms:6.3f} ms")
    ratio = results["1M-line file"] / results["10k-line file"]
    print(f"  ratio 1M/10k poll = {ratio:.2f}  (goal <= 1.5; goal poll <= 2 ms)")


def growth_vs_concat() -> None:
    print("\n== growing a 1M-row frame by 100 rows (median of 20) ==")
    n = 1_000_000
    rng = np.random.default_rng(0)
    base = pd.DataFrame({k: rng.random(n) for k in ("step", *FLOAT_KEYS)})
    extra = pd.DataFrame({k: rng.random(100) for k in ("step", *FLOAT_KEYS)})
    concat_ms = median_ms(lambda: pd.concat([base, extra], ignore_index=True), 20)
    source = MetricsSource(Path("/nonexistent"))
    table = source.table
    table.append(records_to_batch([{"step": s, "seg": 1, **dict.fromkeys(FLOAT_KEYS, 1.0)} for s in range(1, n + 1)]))
    state = {"next": n + 1}

    def grow() -> None:
        start = state["next"]
        table.append(
            records_to_batch(
                [{"step": s, "seg": 1, **dict.fromkeys(FLOAT_KEYS, 2.0)} for s in range(start, start + 100)]
            )
        )
        state["next"] += 100

    append_ms = median_ms(grow, 20)
    view_ms = median_ms(lambda: table.frame(), 20, setup=grow)
    print(f"  pd.concat onto 1M rows          {concat_ms:7.2f} ms")
    print(f"  ours: table.append (100 rows)   {append_ms:7.2f} ms   ({concat_ms / append_ms:.0f}x less than concat)")
    print(f"  ours: new frame view after it   {view_ms:7.2f} ms")


def merged_ranks(tmp: Path, ranks: int = 8, steps: int = 125_000) -> None:
    print(f"\n== {ranks} ranks x {steps} steps: merged frame after one rank got a record (median of 10) ==")
    run = tmp / "ranks" / "dp"
    run.mkdir(parents=True)
    for rank in range(ranks):
        write_lines(run / metrics_filename(rank, ranks), 1, steps, steps)
    store = RunStore(run.parent, rescan_interval_s=1e9)
    store.read("dp")
    state = {"next": steps + 1}

    def add() -> None:
        write_lines(run / metrics_filename(0, ranks), state["next"], state["next"], steps)
        state["next"] += 1

    merged_ms = median_ms(lambda: store.read("dp"), 10, setup=add)
    one_ms = median_ms(lambda: store.read("dp", rank=0), 10, setup=add)
    print(f"  store.read(run) all ranks  {merged_ms:7.2f} ms   (rebuilt on change: a sort of all rows)")
    print(f"  store.read(run, rank=0)    {one_ms:7.2f} ms   (a view)")


def idle_runs(tmp: Path, count: int = 1000) -> None:
    print(f"\n== idle poll over {count} runs (median of 20) ==")
    root = tmp / "many"
    for i in range(count):
        run = root / f"run{i:04d}"
        run.mkdir(parents=True)
        write_lines(run / "metrics.jsonl", 1, 10, 10)
    store = RunStore(root, rescan_interval_s=1e9)
    assert len(store.list_runs()) == count
    poll_ms = median_ms(store.poll, 20)
    list_ms = median_ms(store.list_runs, 20)
    print(f"  store.poll()       {poll_ms:7.2f} ms  (goal <= 10 ms)")
    print(f"  store.list_runs()  {list_ms:7.2f} ms  (status and info for every run included)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="skip the slow pandas-default and stdlib baselines")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_ingest_"))
    try:
        big = tmp / "big" / "run" / "metrics.jsonl"
        big.parent.mkdir(parents=True)
        start = time.perf_counter()
        write_lines(big, 1, args.lines, args.lines)
        small = tmp / "small" / "run" / "metrics.jsonl"
        small.parent.mkdir(parents=True)
        write_lines(small, 1, 10_000, 10_000)
        print(
            f"generated {args.lines} lines ({big.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - start:.1f} s"
        )
        full_load(big, args.quick)
        incremental(tmp, big)
        growth_vs_concat()
        merged_ranks(tmp)
        idle_runs(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
