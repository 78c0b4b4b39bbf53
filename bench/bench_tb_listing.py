"""A fresh root of TensorBoard runs: the first listing from the event files' ends, against decoding them.

Usage: ``.venv/bin/python bench/bench_tb_listing.py [--runs 20] [--steps 200000] [--rounds 3] [--data DIR]``

One event file is written with tensorboardX as bench_tensorboard writes it (``loss`` and ``grad-norm``
every step, ``learning-rate`` every tenth; kept in ``--data`` between runs), and a root of ``--runs``
MindFormers-style runs (``runN/tensorboard/rank_0/events.out.tfevents.*``) is made of hard links to it
(copies where links cannot be made): the same bytes, so the figure is the listing's work, not the disk's.
A new :class:`~monitor_cb.ingest.RunStore` with no cache lists the root, in interleaved rounds: as it
does now (each file's two 64 kB ends, :mod:`monitor_cb.importers.event_peek`) and with
``peek_min_bytes=None`` (every event file decoded, as before: the baseline). Also timed: the listing
plus the newest run's rows (what the first chart waits for). Prints medians and ratios; the two
listings must be equal.

Measured (load 4.6-4.7 on 2 cores): ``--runs 20 --steps 1000000 --rounds 1``: 0.070 s against 21.91 s (ratio
0.003), with the newest run's rows 1.32 s against 21.92 s; ``--steps 200000 --rounds 3``: 0.151 s against 5.25 s.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_tensorboard import write_events  # noqa: E402


def make_root(source: Path, root: Path, runs: int) -> None:
    """``runs`` runs whose rank_0 event file is ``source`` (hard links, else copies)."""
    (event_file,) = [p for p in source.iterdir() if "tfevents" in p.name]
    for i in range(runs):
        rank_dir = root / f"run{i:02d}" / "tensorboard" / "rank_0"
        rank_dir.mkdir(parents=True)
        try:
            os.link(event_file, rank_dir / event_file.name)
        except OSError:
            shutil.copy(event_file, rank_dir / event_file.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path, default=None, help="keep the written event file here between runs")
    args = parser.parse_args()

    from monitor_cb.ingest import RunStore

    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or Path(tmp) / "data"
        source = data / f"tb{args.steps}"
        data.mkdir(parents=True, exist_ok=True)
        wrote = write_events(source, args.steps)
        root = Path(tmp) / "logs"
        make_root(source, root, args.runs)
        size = sum(f.stat().st_size for f in source.iterdir() if "tfevents" in f.name)
        print(
            f"root: {args.runs} runs x {args.steps:,} steps, {size / 1e6:,.1f} MB an event file "
            f"(written in {wrote:.1f} s; 0: reused); load {os.getloadavg()[0]:.2f}"
        )
        times: dict[str, list[float]] = {"peek": [], "decode": [], "peek_first": [], "decode_first": []}
        listings: dict[str, list[object]] = {}
        for round_ in range(args.rounds + 1):  # round 0 warms up (imports, page cache): not timed
            for name, peek in (("peek", True), ("decode", False)):
                kwargs = {} if peek else {"peek_min_bytes": None}
                store = RunStore(root, cache=False, rescan_interval_s=0, **kwargs)  # type: ignore[arg-type]
                start = time.perf_counter()
                infos = store.list_runs()
                listed = time.perf_counter()
                frame = store.read(infos[0].id).frame  # the newest run: the one a page draws first
                if round_:
                    times[name].append(listed - start)
                    times[f"{name}_first"].append(time.perf_counter() - start)
                assert len(frame) == args.steps, len(frame)
                listings[name] = [dataclasses.replace(i, meta={}) for i in infos]
                del store, frame
        assert listings["peek"] == listings["decode"], "the listing from the ends differs from the decoded one"
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"first listing: from the files' ends {med['peek']:.3f} s, decoding every file {med['decode']:.2f} s")
        print(f"  ratio (ends / decode): {med['peek'] / med['decode']:.3f}")
        print(
            f"listing + the newest run's rows (the first chart's data): {med['peek_first']:.2f} s against "
            f"{med['decode_first']:.2f} s; ratio {med['peek_first'] / med['decode_first']:.3f}"
        )
        print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
