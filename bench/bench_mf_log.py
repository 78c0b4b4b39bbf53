"""Benchmark opening msrun's ``worker_0.log`` of 1M lines, in both MindFormers line generations, against polars.

    .venv/bin/python bench/bench_mf_log.py [--lines 1000000] [--rounds 3]

A generated ``output/msrun_log/worker_0.log`` (stdout prefix, as msrun writes it) is read from cold by
``RunStore`` and, in the same run, by polars alone: the file's lines and one regex extracting the same
fields from the step lines (the least polars needs to get these numbers out of text). Two logs:

* 1.x: MFLossMonitor's step line and progress line per step (MindFormers 1.9's format);
* 2.x: one step line per step, built with the format strings of MindFormers 2.0.0's ``_print_log``.

Goal: each ratio (ours / polars) at most 1.3. Files go to a temporary directory, deleted afterwards.
The machine may be shared: figures are the best of interleaved rounds; the ratios are what count.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_mindformers_log import mf_lines

from monitor_cb.ingest import RunStore

STDOUT = "{stamp},{ms:03d} - mindformers[mindformers/{where}] - INFO - "
FILE_PREFIX = "[INFO] "
ONE_REGEX_1X = (
    r"Epoch:\[\s*(\d+)/\s*(\d+)\], step:\[\s*(\d+)/\s*(\d+)\], loss:\[([^/]+)/[^\]]+\], per_step_time: (\d+)ms, "
    r"lr: (\S+), overflow cond: (\w+), loss_scale: ([^,]+), global_norm: \[([^\]]+)\]"
)
ONE_REGEX_2X = (
    r"step:\[\s*(\d+)/\s*(\d+)\], loss:\s+(\S+), per_step_time:\s+(\d+)ms, lr: (\S+), grad_norm:\s+(\S+), "
    r"throughput:\s+(\S+)T"
)


def lines_1x(count: int) -> list[str]:
    """MindFormers 1.9's lines with msrun's stdout prefix in place of the file handler's."""
    out: list[str] = []
    steps = count // 2
    for start in range(1, steps + 1, 50_000):
        for line in mf_lines(start, min(start + 49_999, steps), 100_000, 1.7e9):
            stamp, rest = line[len(FILE_PREFIX) : len(FILE_PREFIX) + 23], line.split("] print_output_info: ", 1)[1]
            out.append(f"{stamp} - mindformers[mindformers/core/callback/callback.py:747] - INFO - {rest}")
    return out


def lines_2x(count: int) -> list[str]:
    """One 2.x step line per step (``_print_log``'s format strings)."""
    rnd = random.Random(7)
    out = []
    for step in range(1, count + 1):
        t = 1.7e9 + step * 0.05
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
        parts = [
            f"step:[{step:5d}/{count:5d}]",
            f"loss: {2.0 / (1 + step * 1e-4) + rnd.random() * 0.01:10.6f}",
            f"per_step_time: {50:6d}ms",
            f"lr: {1e-4 * (1 - step / (count + 1)):10.6e}",
            f"grad_norm: {rnd.random() * 3:10.6f}",
            f"throughput: {12 + rnd.random():6.2f}T",
        ]
        prefix = STDOUT.format(stamp=stamp, ms=int((t % 1) * 1000), where="pynative/callback/loss_callback.py:310")
        out.append(prefix + f"{{ {', '.join(parts)} }}")
    return out


def polars_alone(path: Path, mark: str, regex: str) -> pl.DataFrame:
    lines = pl.read_csv(
        path, has_header=False, separator="\x1f", quote_char=None, new_columns=["line"], schema={"line": pl.String}
    )["line"]
    return lines.filter(lines.str.contains(mark, literal=True)).str.extract_groups(regex).struct.unnest()


def timed(fn: Callable[[], object], into: list[float]) -> None:
    start = time.perf_counter()
    fn()
    into.append(time.perf_counter() - start)


def bench(tmp: Path, name: str, lines: list[str], mark: str, regex: str, steps: int, rounds: int) -> float:
    job = tmp / name
    log = job / "output" / "msrun_log" / "worker_0.log"
    log.parent.mkdir(parents=True)
    log.write_text("\n".join(lines) + "\n")
    (log.parent / "scheduler.log").write_text("scheduler\n")
    ours: list[float] = []
    alone: list[float] = []
    for _ in range(rounds):  # interleaved: a busy neighbour slows both sides alike
        timed(lambda: polars_alone(log, mark, regex), alone)
        timed(lambda: RunStore(job, cache=False).read("output/msrun_log"), ours)
    frame = RunStore(job, cache=False).read("output/msrun_log").frame
    assert len(frame) == steps and not frame["loss"].isna().any(), "every step read"
    ratio = min(ours) / min(alone)
    size = log.stat().st_size / 1e6
    print(f"  {name}: {len(lines):,} lines ({size:.0f} MB), {steps:,} steps")
    print(f"    polars lines + one regex    {min(alone):7.3f} s")
    print(f"    ours (RunStore.read)        {min(ours):7.3f} s   x{ratio:.2f}  (goal <= 1.3)")
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_mf_worker_"))
    try:
        print(f"== open a {args.lines:,}-line msrun worker_0.log from cold (best of {args.rounds}) ==")
        one = bench(tmp, "mf1x", lines_1x(args.lines), "Epoch:[", ONE_REGEX_1X, args.lines // 2, args.rounds)
        two = bench(tmp, "mf2x", lines_2x(args.lines), "{ step:[", ONE_REGEX_2X, args.lines, args.rounds)
        print(f"ratio to polars: 1.x x{one:.2f}, 2.x x{two:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
