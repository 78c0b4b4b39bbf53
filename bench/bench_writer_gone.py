"""What the writer's "is my file still there" check costs, against one batch write it guards.

Usage: ``.venv/bin/python bench/bench_writer_gone.py [--rounds 20000]``

Issue 34 (item 8): a run directory deleted while training went unnoticed. The writer thread now compares
``fstat`` of its open file with ``stat`` of its path (:func:`monitor_cb.train.writer._gone`) once every
``GONE_CHECK_S`` (0.25 s) and at each flush and close, never on the training thread. Printed: the median cost
of one check, of one ``write()`` of a 4,096-record batch (the writer's largest) on the same disk, and their
ratio, and the checks' share of the writer thread's time at that rate.

Measured (2 shared cores, load about 10): check 23.6-34.7 us, batch write 409-826 us (ratio 0.04-0.06);
four times a second that is 0.014 % of the writer thread's time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def median_seconds(call: Callable[[], object], rounds: int, repeat: int = 5) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(rounds):
            call()
        runs.append((time.perf_counter() - start) / rounds)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20_000)
    args = parser.parse_args()

    from monitor_cb.train.writer import GONE_CHECK_S, _dumps_line, _gone

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "metrics.jsonl"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            line = _dumps_line({"step": 1, "t": 1.7e9, "rank": 0, "seg": 1, "loss": 0.123, "lr": 1e-3, "gn": 1.0})
            batch = line * 4096
            check = median_seconds(lambda: _gone(fd, path), args.rounds)
            write = median_seconds(lambda: os.write(fd, batch), max(args.rounds // 100, 10))
        finally:
            os.close(fd)
    print(
        f"check {check * 1e6:.1f} us, 4,096-record batch write {write * 1e6:.0f} us, ratio {check / write:.3f}; "
        f"once every {GONE_CHECK_S:g} s: {100 * check / GONE_CHECK_S:.4f} % of the writer thread's time"
    )


if __name__ == "__main__":
    main()
