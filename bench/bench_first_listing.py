"""A fresh root's first listing: long runs listed from their files' ends, against parsing every file.

Usage: ``.venv/bin/python bench/bench_first_listing.py [--runs 8] [--steps 1000000] [--rounds 3]``

A root of ``--runs`` finished runs of ``--steps`` steps each (bench_scale's generator: the collector's
format, ten metrics, about 190 bytes a line) is listed by a new :class:`~monitor_cb.ingest.RunStore`
with no index and no cache (what a server started on a root nobody opened before does), in interleaved
rounds: as the store lists it now (each file's size, line count and first and last records,
:mod:`monitor_cb.ingest.peek`) and with ``peek_min_bytes=None`` (every file parsed, as before: the
baseline). It also times what the first chart waits for: the listing plus the newest run's rows.
Prints the medians and the ratios; the two listings must be equal.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_scale import write_rank  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from monitor_cb.ingest import RunStore

    def store(root: Path, peek: bool) -> RunStore:
        kwargs = {} if peek else {"peek_min_bytes": None}
        return RunStore(root, cache=False, rescan_interval_s=0, **kwargs)  # type: ignore[arg-type]

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "logs"
        t0 = time.time() - 86_400
        for i in range(args.runs):
            write_rank(root / f"run{i:02d}" / "metrics.jsonl", 0, args.steps, t0 + i * 3600)
        size = sum(f.stat().st_size for f in root.rglob("metrics.jsonl"))
        print(f"root: {args.runs} runs x {args.steps:,} steps, {size / 1e6:,.0f} MB; load {os.getloadavg()[0]:.2f}")
        times: dict[str, list[float]] = {"peek": [], "parse": [], "peek_first": [], "parse_first": []}
        listings: dict[str, list[object]] = {}
        for _ in range(args.rounds):
            for name, peek in (("peek", True), ("parse", False)):
                s = store(root, peek)
                start = time.perf_counter()
                infos = s.list_runs()
                listed = time.perf_counter()
                frame = s.read(infos[0].id).frame  # the newest run: the one a page draws first
                times[name].append(listed - start)
                times[f"{name}_first"].append(time.perf_counter() - start)
                assert len(frame) == args.steps, len(frame)
                listings[name] = [dataclasses.replace(i, meta={}) for i in infos]
        assert listings["peek"] == listings["parse"], "the peeked listing differs from the parsed one"
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"first listing: from the files' ends {med['peek']:.3f} s, parsing every file {med['parse']:.2f} s")
        print(f"  ratio (ends / parse): {med['peek'] / med['parse']:.3f}")
        print(
            f"listing + the newest run's rows (the first chart's data): {med['peek_first']:.2f} s against "
            f"{med['parse_first']:.2f} s; ratio {med['peek_first'] / med['parse_first']:.3f}"
        )
        print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
