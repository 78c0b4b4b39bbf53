"""A burst of log() calls through ``with MetricsWriter(...)`` on a healthy disk (issue 22's goal).

A converter or a loop replaying a log calls ``log()`` a million times in a few seconds, much faster than
the writer thread writes. Goal: every record written (1,000,000 lines, status ``finished``,
``written_records`` equal to the lines), ``log()`` p99 under 1 ms.

Prints, each measured in its own process (so peak memory is the scenario's own):
* the writer: lines in the file, status, written/dropped records, ``log()`` p50/p99/max, the loop's and
  ``close()``'s durations, peak RSS, the queue's capacity and its measured bytes per record;
* the baseline: the same loop with ``queue.Queue.put`` of the same tuple instead of ``log()``
  (what a plain producer/consumer queue costs the caller, nothing consuming it);
* ``log()`` p99 against the baseline's.

Run: ``.venv/bin/python bench/bench_writer_burst.py [--records 1000000]``
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FIELDS = {"lr": 1e-3, "grad_norm": 1.5, "throughput": 812.5}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def line_count(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def run_writer(n: int) -> dict[str, Any]:
    from monitor_cb import MetricsWriter

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "burst"
        per_call = [0.0] * n
        clock = time.perf_counter
        started = clock()
        with MetricsWriter(run) as writer:
            for step in range(n):
                t0 = clock()
                writer.log(step=step, loss=1.0 / (step + 1), **FIELDS)
                per_call[step] = clock() - t0
            looped = clock()
        closed = clock()
        meta = json.loads((run / "metrics.meta.json").read_text())
        return {
            "lines": line_count(run / "metrics.jsonl"),
            "status": meta["status"],
            "written_records": meta["written_records"],
            "dropped_records": meta["dropped_records"],
            "p50": percentile(per_call, 0.50),
            "p99": percentile(per_call, 0.99),
            "max": max(per_call),
            "loop_s": looped - started,
            "close_s": closed - looped,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "capacity": writer._max_pending,
            "record_bytes": writer._record_bytes,
        }


def run_baseline(n: int) -> dict[str, Any]:
    """``queue.Queue.put`` of what log() queues: (step, time, kwargs)."""
    sink: queue.Queue[Any] = queue.Queue()
    per_call = [0.0] * n
    clock = time.perf_counter

    def put(step: int, **metrics: Any) -> None:
        sink.put((step, time.time(), metrics))

    for step in range(n):
        t0 = clock()
        put(step, loss=1.0 / (step + 1), **FIELDS)
        per_call[step] = clock() - t0
    return {"p50": percentile(per_call, 0.50), "p99": percentile(per_call, 0.99), "max": max(per_call)}


def child(kind: str, n: int) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, __file__, "--records", str(n), "--child", kind],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    return json.loads(result.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--child", choices=("writer", "baseline"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_writer(args.records) if args.child == "writer" else run_baseline(args.records)))
        return
    n = args.records
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; records: {n:,}")
    base = child("baseline", n)
    w = child("writer", n)
    us = 1e6
    ok = w["lines"] == n == w["written_records"] and w["status"] == "finished" and w["p99"] < 1e-3
    print(
        f"writer: {w['lines']:,} lines, status {w['status']}, written_records {w['written_records']:,}, "
        f"dropped {w['dropped_records']:,}"
    )
    print(f"log()            p50 {w['p50'] * us:6.2f} us  p99 {w['p99'] * us:6.2f} us  max {w['max'] * 1e3:7.2f} ms")
    print(
        f"Queue.put (base) p50 {base['p50'] * us:6.2f} us  p99 {base['p99'] * us:6.2f} us  "
        f"max {base['max'] * 1e3:7.2f} ms"
    )
    print(f"log() p99 / Queue.put p99: {w['p99'] / base['p99']:.2f}x (goal: log() p99 < 1 ms)")
    print(
        f"loop {w['loop_s']:.2f} s, close() {w['close_s']:.2f} s (draining), peak RSS {w['rss_mb']:.0f} MB, "
        f"queue capacity {w['capacity']:,} records at {w['record_bytes']:.0f} B each"
    )
    print("goal met" if ok else "GOAL NOT MET")


if __name__ == "__main__":
    main()
