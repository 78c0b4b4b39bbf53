"""A rescan of a TensorBoard run of many small event files with nothing changed, against a plain listing.

Usage: ``.venv/bin/python bench/bench_tb_rescan.py [--files 5000] [--rounds 5] [--layout segments|series|both]``

Issue 34 (item 9): 5,000 small event files in one run made every rescan of the root take 3-6 s while nothing
changed (the page rescans every 2 s); each rescan re-opened every file. A rescan should cost about what
listing the files costs. The run (:mod:`monitor_cb.testing.event_files`: one small tensorboardX file copied
under ``--files`` names) is read once by a :class:`~monitor_cb.ingest.RunStore`; then, in interleaved rounds,
``store.list_runs()`` (rescan_interval_s=0: every call lists the root and polls the run) is timed against
the baseline, a plain ``os.scandir`` walk of the same tree with a ``stat`` of every file. Prints the medians,
their ratio, and how many event files a rescan opened (0 expected).

Measured (2 shared cores, load about 10): ``--files 5000``: segments 0.220 s against 0.108 s (ratio 2.0),
series 0.535 s against 0.296 s (ratio 1.8), no file opened; a later run at a higher load: 2.9 and 1.9.
Before the change a rescan re-opened every file twice per listing (the series layout: 3.3 s a listing,
1.2 s with only the re-opening removed, since the run was then still listed once more per rank).
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


def plain_listing(directory: str) -> int:
    """The baseline: every file under ``directory`` found with ``os.scandir`` and stat'ed once."""
    count = 0
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                count += plain_listing(entry.path)
            else:
                entry.stat(follow_symlinks=False)
                count += 1
    return count


def measure(root: Path, files: int, rounds: int) -> tuple[float, float, int]:
    """Median seconds of a rescan and of the baseline, and event files a rescan opened."""
    from monitor_cb.ingest import RunStore

    store = RunStore(root, rescan_interval_s=0, cache=False)
    store.list_runs()
    store.read("many")
    real_open, opened = os.open, []

    def counting(path, *args, **kwargs):
        if "tfevents" in os.fspath(path):
            opened.append(path)
        return real_open(path, *args, **kwargs)

    rescans, plains = [], []
    for _ in range(rounds):
        os.open = counting
        try:
            start = time.perf_counter()
            store.list_runs()
            rescans.append(time.perf_counter() - start)
        finally:
            os.open = real_open
        start = time.perf_counter()
        assert plain_listing(str(root)) == files
        plains.append(time.perf_counter() - start)
    return statistics.median(rescans), statistics.median(plains), len(opened) // rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--layout", choices=["segments", "series", "both"], default="both")
    args = parser.parse_args()

    from monitor_cb.testing.event_files import small_event_file, write_many

    data = small_event_file()
    layouts = ["segments", "series"] if args.layout == "both" else [args.layout]
    for layout in layouts:
        with tempfile.TemporaryDirectory() as tmp:
            write_many(Path(tmp) / "many", args.files, layout, data)
            rescan, plain, opened = measure(Path(tmp), args.files, args.rounds)
        print(
            f"{layout:8s} {args.files} files: rescan {rescan:.3f} s, scandir+stat {plain:.3f} s, "
            f"ratio {rescan / plain:.1f}; event files opened per rescan: {opened}"
        )


if __name__ == "__main__":
    main()
