"""A wide run against a narrow one with the same number of values: listing and first read.

Usage: ``.venv/bin/python bench/bench_wide_run.py [--metrics 5000] [--steps 200] [--narrow 5] [--rounds 3]
[--format jsonl|tensorboard]``

Two runs are written by :class:`~monitor_cb.train.writer.MetricsWriter` (or tensorboardX's ``SummaryWriter``
with ``walltime=``) with explicit times: ``--metrics``
metrics x ``--steps`` steps, and ``--narrow`` metrics x as many steps as give the same number of values.
Each is listed by a new :class:`~monitor_cb.ingest.RunStore` (no cache: a server's first look) and
then read (what the first chart waits for), in interleaved rounds after one warm-up (imports). Issue #31
asks that a run with 5,000 metrics opens as fast as one with 5: the printed ratios are wide / narrow.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

T0 = 1_700_000_000.0


def write_run(run_dir: Path, metrics: int, steps: int) -> None:
    from monitor_cb.train.writer import MetricsWriter

    names = [f"layer_{i:05d}/grad_norm" for i in range(metrics)]
    writer = MetricsWriter(run_dir, queue_size=steps + 1)
    for step in range(steps):
        writer.log_at(T0 + step, step, **{"loss": 1.0 / (step + 1)}, **dict.fromkeys(names, step * 1e-3))
    writer.close()


def write_tensorboard_run(run_dir: Path, metrics: int, steps: int) -> None:
    from tensorboardX import SummaryWriter

    names = [f"layer_{i:05d}/grad_norm" for i in range(metrics)]
    writer = SummaryWriter(str(run_dir), flush_secs=3600)
    for step in range(steps):
        walltime = T0 + step
        writer.add_scalar("loss", 1.0 / (step + 1), step, walltime=walltime)
        for name in names:
            writer.add_scalar(name, step * 1e-3, step, walltime=walltime)
    writer.close()


def open_run(root: Path) -> tuple[float, float]:
    """(listing, first read) seconds of a store nobody opened before."""
    from monitor_cb.ingest import RunStore

    store = RunStore(root, cache=False, rescan_interval_s=0)
    start = time.perf_counter()
    (info,) = store.list_runs()
    listed = time.perf_counter()
    frame = store.read(info.id).frame
    assert len(frame) > 0
    return listed - start, time.perf_counter() - listed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", type=int, default=5000)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--narrow", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--format", choices=("jsonl", "tensorboard"), default="jsonl")
    args = parser.parse_args()
    write = write_run if args.format == "jsonl" else write_tensorboard_run
    narrow_steps = args.metrics * args.steps // args.narrow
    with tempfile.TemporaryDirectory() as tmp:
        roots = {"wide": Path(tmp) / "wide", "narrow": Path(tmp) / "narrow"}
        write(roots["wide"] / "run", args.metrics - 1, args.steps)  # plus loss: --metrics columns
        write(roots["narrow"] / "run", args.narrow - 1, narrow_steps)
        for name, root in roots.items():
            size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
            print(f"{name}: {size / 1e6:.1f} MB")
        print(
            f"{args.format}: wide: {args.metrics:,} metrics x {args.steps:,} steps; narrow: {args.narrow} metrics x "
            f"{narrow_steps:,} steps; load {os.getloadavg()[0]:.2f}"
        )
        open_run(roots["narrow"])  # warm-up: imports, page cache
        times: dict[str, list[tuple[float, float]]] = {"wide": [], "narrow": []}
        for _ in range(args.rounds):
            for name, root in roots.items():
                times[name].append(open_run(root))
        med = {
            name: (statistics.median(t[0] for t in runs), statistics.median(t[1] for t in runs))
            for name, runs in times.items()
        }
        for name, (listed, read) in med.items():
            print(f"{name:>6}: listing {listed:.3f} s, first read {read:.3f} s")
        wide, narrow = med["wide"], med["narrow"]
        print(
            f"ratio wide / narrow: listing {wide[0] / narrow[0]:.2f}, first read {wide[1] / narrow[1]:.2f}, "
            f"both {(wide[0] + wide[1]) / (narrow[0] + narrow[1]):.2f}"
        )
        print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
