"""A dashboard with one poisoned run still serves the others within its usual time.

Usage: ``.venv/bin/python bench/bench_poisoned_root.py [--runs 50] [--steps 2000] [--rounds 5]``

Two copies of the same root of ``--runs`` runs are made; in the second, one more run is poisoned
the ways issue 23 found: its metadata a FIFO, a second rank a link to ``/dev/zero``, a third rank a
3 GB sparse file, and, at the root, the summary index and ``diagnosis.json`` FIFOs and a good
run's cache file a link out of the root; the clean root holds the same run unpoisoned. In
interleaved rounds, with no summary index (every file read, as on a server's first listing), a fresh
:class:`~monitor_cb.ingest.RunStore` (a new server) on each root lists the runs and reads
five of the other runs (what the Runs page, then the Live page do), then lists again ten times (a
refresh: the median of them). Prints the medians and the poisoned / clean ratios (goal: about 1x;
before issue 23 the poisoned root never answered).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def write_root(root: Path, runs: int, steps: int) -> None:
    for i in range(runs):
        run = root / f"run{i:03d}"
        run.mkdir(parents=True)
        lines = (
            json.dumps({"step": s, "t": 1000.0 + s, "loss": 3.0 / (1 + s / 100) + i * 1e-3, "lr": 1e-3})
            for s in range(1, steps + 1)
        )
        (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
        (run / "metrics.meta.json").write_text(json.dumps({"name": run.name, "status": "finished"}))


def poison(root: Path, outside: Path) -> None:
    run = root / "poisoned"
    (run / "metrics.meta.json").unlink()
    os.mkfifo(run / "metrics.meta.json")
    (run / "metrics.rank1.jsonl").symlink_to("/dev/zero")
    with open(run / "metrics.rank2.jsonl", "wb") as f:
        f.truncate(3 * 1024**3)
    hidden = root / ".monitor"
    (hidden / "cache" / "run001").mkdir(parents=True)
    os.mkfifo(hidden / "diagnosis.json")
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "forged.arrow").write_bytes(b"ARROW1" * 100)
    (hidden / "cache" / "run001" / "metrics.jsonl.arrow").symlink_to(outside / "forged.arrow")


def serve(root: Path) -> tuple[float, float, int]:
    """(first listing + five runs read, a refresh's listing) seconds, and the notes of skipped files."""
    from monitor_cb.diagnosis.settings import load_settings_checked
    from monitor_cb.ingest import RunStore

    t = time.perf_counter()
    store = RunStore(root, cache=True)
    runs = store.list_runs()
    load_settings_checked(root)
    for info in sorted((r for r in runs if r.id != "poisoned"), key=lambda r: r.id)[:5]:  # the others
        store.read(info.id)
    first = time.perf_counter() - t
    refreshes = []
    for _ in range(10):
        t = time.perf_counter()
        store.refresh(force=True)
        store.list_runs()
        refreshes.append(time.perf_counter() - t)
    return first, statistics.median(refreshes), len(store.skipped_files())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        clean, poisoned = Path(tmp) / "clean", Path(tmp) / "poisoned"
        write_root(clean, args.runs, args.steps)
        shutil.copytree(clean / "run000", clean / "poisoned")  # the same run, clean: both roots hold as many
        shutil.copytree(clean, poisoned)
        poison(poisoned, Path(tmp) / "outside")
        times: dict[str, list[tuple[float, float]]] = {"clean": [], "poisoned": []}
        notes = 0
        for round_ in range(args.rounds):
            order = [("clean", clean), ("poisoned", poisoned)]
            for name, root in order if round_ % 2 == 0 else order[::-1]:  # neither always goes first
                for cache in (root / ".monitor" / "cache").glob("*/*.arrow"):
                    if not cache.is_symlink():
                        cache.unlink()  # every round a new server with the same files and no index
                index = root / ".monitor" / "cache" / "index.json"
                index.unlink(missing_ok=True)
                if name == "poisoned":
                    os.mkfifo(index)  # (the first listing replaces it with a real index: planted again)
                first, refresh, skipped = serve(root)
                times[name].append((first, refresh))
                notes = max(notes, skipped) if name == "poisoned" else notes
        med = {k: [statistics.median(t[i] for t in v) for i in (0, 1)] for k, v in times.items()}
        shape = f"{args.runs} runs x {args.steps:,} steps, {args.rounds} rounds (medians)"
        print(f"{shape}; poisoned: {notes} files skipped")
        for i, what in enumerate(("first listing + 5 runs read", "refresh listing")):
            c, p = med["clean"][i], med["poisoned"][i]
            print(f"  {what:<28} clean {c * 1e3:7.1f} ms   poisoned {p * 1e3:7.1f} ms   ratio {p / c:.2f}x")


if __name__ == "__main__":
    main()
