"""Cost of MetricsWriter per record, against a plain json.dumps + write + flush baseline.

Prints, in one run:
* caller-side cost of ``log()`` (what the training thread pays), mean and p99;
* writer-thread cost per record (encode + append), measured alone;
* end-to-end cost per record (log + encode + append, until ``close`` returns);
* the baseline: ``json.dumps`` then ``write`` + ``flush`` per record on the caller thread;
* ``log()`` p99 while the disk hangs (a write that blocks), goal < 1 ms.

Run: ``.venv/bin/python bench/bench_writer.py [--records 200000]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from monitor_cb.train import writer as writer_module
from monitor_cb.train.writer import MetricsWriter

FIELDS = {"epoch": 1, "lr": 1e-3, "throughput": 812.5, "step_time": 0.039, "data_time": 0.001, "grad_norm": 1.7}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench_writer(root: Path, n: int) -> tuple[float, float, float]:
    """Caller cost and end-to-end cost with both threads running, as in training."""
    writer = MetricsWriter(root / "writer", queue_size=n + 10)
    per_call = []
    started = time.perf_counter()
    for step in range(n):
        t0 = time.perf_counter()
        writer.log(step=step, loss=1.0 / (step + 1), **FIELDS)
        per_call.append(time.perf_counter() - t0)
    writer.close()
    total = time.perf_counter() - started
    assert writer.written == n, (writer.written, writer.dropped)
    return statistics.fmean(per_call), percentile(per_call, 0.99), total / n


def bench_writer_thread(root: Path, n: int) -> float:
    """Writer-thread cost per record (encode + append), measured alone: queue first, then drain."""
    gate = threading.Event()
    real_write = os.write

    def gated_write(fd: int, data: bytes) -> int:
        gate.wait(60)
        return real_write(fd, data)

    writer_module.os.write = gated_write  # type: ignore[attr-defined]
    try:
        writer = MetricsWriter(root / "drain", queue_size=n + 10)
        writer.log(step=0, loss=1.0, **FIELDS)  # the thread now waits in write()
        for step in range(1, n):
            writer.log(step=step, loss=1.0 / (step + 1), **FIELDS)
        started = time.perf_counter()
        gate.set()
        writer.close(timeout=120)
        elapsed = time.perf_counter() - started
    finally:
        writer_module.os.write = real_write  # type: ignore[attr-defined]
    assert writer.written == n, (writer.written, writer.dropped)
    return elapsed / n


def bench_baseline(root: Path, n: int) -> float:
    path = root / "baseline.jsonl"
    started = time.perf_counter()
    with open(path, "a") as handle:
        for step in range(n):
            record = {"step": step, "t": time.time(), "loss": 1.0 / (step + 1), **FIELDS}
            handle.write(json.dumps(record) + "\n")
            handle.flush()
    return (time.perf_counter() - started) / n


def bench_hung_disk(root: Path, n: int) -> tuple[float, float, int]:
    release = threading.Event()
    real_write = os.write

    def hanging_write(fd: int, data: bytes) -> int:
        release.wait(60)
        return real_write(fd, data)

    writer_module.os.write = hanging_write  # type: ignore[attr-defined]
    try:
        writer = MetricsWriter(root / "hung", queue_size=10_000)
        per_call = []
        for step in range(n):
            t0 = time.perf_counter()
            writer.log(step=step, loss=1.0, **FIELDS)
            per_call.append(time.perf_counter() - t0)
        release.set()
        writer.close()
    finally:
        writer_module.os.write = real_write  # type: ignore[attr-defined]
    return percentile(per_call, 0.99), max(per_call), writer.dropped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    args = parser.parse_args()
    n = args.records
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        mean_call, p99_call, end_to_end = bench_writer(root, n)
        drain = bench_writer_thread(root, n)
        baseline = bench_baseline(root, n)
        hung_p99, hung_max, hung_dropped = bench_hung_disk(root, 50_000)
    print(f"records: {n}")
    print(f"log() caller cost      mean {mean_call * 1e6:6.2f} us   p99 {p99_call * 1e6:6.2f} us")
    print(f"writer thread per record    {drain * 1e6:6.2f} us   (encode + append, alone; goal <= 5 us)")
    print(f"end-to-end per record       {end_to_end * 1e6:6.2f} us   (caller + writer thread sharing the GIL)")
    print(f"baseline json.dumps+write+flush {baseline * 1e6:6.2f} us")
    print(f"training-thread cost vs baseline: {mean_call / baseline:.2f}x")
    print(f"hung disk: log() p99 {hung_p99 * 1e6:.2f} us, max {hung_max * 1e3:.3f} ms (goal p99 < 1 ms); ", end="")
    print(f"dropped {hung_dropped} of 50000 once the 10000-record queue filled")


if __name__ == "__main__":
    main()
