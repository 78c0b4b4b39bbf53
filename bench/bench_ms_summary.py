"""Benchmark: a 1M-record MindSpore summary file opened by the project, against polars reading the same values.

Usage: ``.venv/bin/python bench/bench_ms_summary.py [--records 1000000] [--scalars 1] [--data DIR] [--rounds 3]``

The data: ``--records`` summary events as ``SummaryRecord`` writes them in a custom loop (one event a
step holding ``--scalars`` scalars: ``loss``, then ``lr``, ``grad_norm``...), laid out byte for byte as
MindSpore 2.9 lays them out (``tests/importers/test_ms_summary.py`` checks the encoder against real
files), framed with both CRC-32C. The baseline: the same values (step, wall time, each scalar) as one
JSON line a step, read by ``polars.read_ndjson`` with an explicit schema, as ``bench/bench_scale.py``
measures our own format. ``--data DIR`` keeps both files between runs.

Printed, in one run (best of ``--rounds`` interleaved rounds): polars; the reader alone
(``SummaryRun.poll_batches``: framing, checksums, decoding, the rows); the store's cold read
(``RunStore.list_runs`` + ``read``: the frame in memory); each as a ratio to polars (goal <= 1.3).
The machine is shared: ``uptime``'s load is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import orjson  # noqa: E402
import polars as pl  # noqa: E402

from monitor_cb.importers.ms_proto import encode_event  # noqa: E402
from monitor_cb.importers.ms_summary import SummaryRun  # noqa: E402
from monitor_cb.importers.tfrecord import encode  # noqa: E402
from monitor_cb.ingest.store import RunStore  # noqa: E402

NAMES = ("loss", "lr", "grad_norm", "throughput", "loss_scale")
START = 1.7e9


def values(records: int, scalars: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    steps = np.arange(1, records + 1)
    out = {"step": steps, "t": START + steps * 0.25}
    for name in NAMES[:scalars]:
        out[name] = rng.random(records).astype(np.float32)
    return out


def write(data: Path, records: int, scalars: int) -> tuple[Path, Path]:
    """The summary file and the JSONL of the same values (written once per size in ``data``)."""
    run = data / f"root_{records}_{scalars}" / "run"  # alone under its root: the store lists only it
    summary = run / "events.out.events.summary.1700000000.0.bench_MS"
    jsonl = data / f"same_{records}_{scalars}.jsonl"
    if summary.exists() and jsonl.exists():
        return run, jsonl
    run.mkdir(parents=True, exist_ok=True)
    cols = values(records, scalars)
    names = NAMES[:scalars]
    with open(summary, "wb") as out:
        out.write(encode(encode_event(START, 0, version="MindSpore.Event:1")))
        for i in range(records):
            scalars_at = [(name, float(cols[name][i])) for name in names]
            out.write(encode(encode_event(float(cols["t"][i]), int(cols["step"][i]), scalars_at)))
    with open(jsonl, "wb") as out:
        for i in range(records):
            row = {"step": int(cols["step"][i]), "t": float(cols["t"][i])}
            row.update({name: float(cols[name][i]) for name in names})
            out.write(orjson.dumps(row) + b"\n")
    return run, jsonl


def best(fn, rounds: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(rounds):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--scalars", type=int, default=1, choices=range(1, len(NAMES) + 1))
    parser.add_argument("--data", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    data = args.data or Path(tempfile.mkdtemp(prefix="bench_ms_summary_"))
    t = time.perf_counter()
    run, jsonl = write(data, args.records, args.scalars)
    size = os.path.getsize(next(run.iterdir())) / 1e6
    print(f"data: {run} ({size:.0f} MB), written in {time.perf_counter() - t:.0f} s")
    schema = {"step": pl.Int64, "t": pl.Float64, **{name: pl.Float64 for name in NAMES[: args.scalars]}}

    def polars() -> int:
        return len(pl.read_ndjson(jsonl, schema=schema))

    def reader() -> int:
        return sum(len(b) for b in SummaryRun(run).poll_batches().values())

    def store() -> int:
        s = RunStore(run.parent, cache=False, peek_min_bytes=None)
        s.list_runs()
        return len(s.read(run.name).frame)

    times: dict[str, list[float]] = {"polars": [], "reader": [], "store": []}
    for _ in range(args.rounds):  # interleaved: a burst of load hits every contender alike
        for name, fn in (("polars", polars), ("reader", reader), ("store", store)):
            seconds, rows = best(fn, 1)
            assert rows == args.records, (name, rows)
            times[name].append(seconds)
    base = min(times["polars"])
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"{args.records:,} records, {args.scalars} scalar(s) each; {load}")
    for name, seconds in times.items():
        print(f"  {name:<8} {min(seconds):6.3f} s   x{min(seconds) / base:.2f} of polars (goal <= 1.3)")


if __name__ == "__main__":
    main()
