"""Benchmark reading MindFormers' own log: a 1M-line ``info.log`` opened, and a live one tailed.

    /work/main/.venv/bin/python bench/bench_mindformers_log.py [--lines 1000000] [--live-seconds 20]

1. Open: a generated MindFormers log of ``--lines`` lines (MFLossMonitor's step line and progress
   line per step, in MindFormers 1.9's exact format) read by ``RunStore`` from cold, against polars
   reading the same lines and extracting the same fields with one regex (the least polars needs to
   get these numbers out of text); side by side, a 1M-step JSONL run of ours against
   ``pl.read_ndjson``, as ``bench_ingest.py`` measures it. The goal: the same ratio to polars.
2. Live: a writer appends lines at 10 lines/s (5 steps/s) to ``info.log``; a reader polls
   ``RunStore.read`` every ``--poll`` seconds (the dashboard's refresh: 1 or 2 s) and notes when each
   step first appears. Reader-side latency = that time - the line's write time. Goal: under 2 s.

Files go to a temporary directory, deleted afterwards. The machine may be shared: figures are the
best of a few interleaved rounds, and the ratios matter more than absolute times.
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ingest import polars_schema, write_lines

from monitor_cb.ingest import RunStore

PREFIX = "[INFO] {stamp},{ms:03d} [mindformers/core/callback/callback.py:{lineno}] print_output_info: "
STEP = (
    "{{ Epoch:[{epoch:3d}/{epochs:3d}], step:[{step:5d}/{per_epoch:5d}], loss:[{loss:5.6f}/{mean:5.6f}], "
    "per_step_time: {ms_step}ms, lr: {lr}, overflow cond: False, loss_scale: 65536.0, global_norm: [{norm}], "
    "train_throughput_per_npu: 0.000T"
)
PROGRESS = "  {pct:4.1f}% |{bar:<50}| {thr:.5f} samples/s/p  0:00:{eta:02d} }}"
# The same fields by one regex: what polars alone would do to read them.
ONE_REGEX = (
    r"Epoch:\[\s*(\d+)/\s*(\d+)\], step:\[\s*(\d+)/\s*(\d+)\], loss:\[([^/]+)/[^\]]+\], per_step_time: (\d+)ms, "
    r"lr: (\S+), overflow cond: (\w+), loss_scale: ([^,]+), global_norm: \[([^\]]+)\]"
)


def mf_lines(first: int, last: int, per_epoch: int, t0: float) -> list[str]:
    rnd = random.Random(first)
    out = []
    for step in range(first, last + 1):
        epoch, within = (step - 1) // per_epoch + 1, (step - 1) % per_epoch + 1
        t = t0 + step * 0.05
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
        ms = int((t % 1) * 1000)
        loss = 2.0 / (1 + step * 1e-4) + rnd.random() * 0.01
        out.append(
            PREFIX.format(stamp=stamp, ms=ms, lineno=747)
            + STEP.format(
                epoch=epoch,
                epochs=10,
                step=within,
                per_epoch=per_epoch,
                loss=loss,
                mean=loss,
                ms_step=50,
                lr=f"{1e-3 * (1 - step / (last + 1)):.6g}",
                norm=f"{rnd.random() * 3:.7g}",
            )
        )
        pct = 100.0 * step / (last + 1)
        out.append(
            PREFIX.format(stamp=stamp, ms=ms, lineno=764)
            + PROGRESS.format(pct=pct, bar="█" * int(pct / 2), thr=800 + rnd.random() * 50, eta=step % 60)
        )
    return out


def write_mf_log(path: Path, lines: int) -> None:
    steps = lines // 2
    with open(path, "w") as out:
        for start in range(1, steps + 1, 50_000):
            stop = min(start + 50_000 - 1, steps)
            out.write("\n".join(mf_lines(start, stop, 100_000, 1.7e9)) + "\n")


def polars_lines(path: Path) -> pl.DataFrame:
    """Polars alone: the file's lines, and one regex over the step lines."""
    lines = pl.read_csv(
        path, has_header=False, separator="\x1f", quote_char=None, new_columns=["line"], schema={"line": pl.String}
    )["line"]
    return lines.filter(lines.str.contains("Epoch:[", literal=True)).str.extract_groups(ONE_REGEX).struct.unnest()


def best(fn, rounds: list[float]) -> None:
    start = time.perf_counter()
    fn()
    rounds.append(time.perf_counter() - start)


def open_bench(tmp: Path, lines: int) -> None:
    log = tmp / "mf" / "output" / "log" / "rank_0" / "info.log"
    log.parent.mkdir(parents=True)
    jsonl = tmp / "ours" / "run" / "metrics.jsonl"
    jsonl.parent.mkdir(parents=True)
    start = time.perf_counter()
    write_mf_log(log, lines)
    write_lines(jsonl, 1, lines, lines)
    print(
        f"generated {lines} log lines ({log.stat().st_size / 1e6:.0f} MB) and {lines} JSONL steps "
        f"({jsonl.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - start:.1f} s"
    )
    t: dict[str, list[float]] = {"mf_polars": [], "mf_ours": [], "jsonl_polars": [], "jsonl_ours": []}
    for _ in range(3):  # interleaved rounds: a busy neighbour slows both sides alike
        best(lambda: polars_lines(log), t["mf_polars"])
        best(lambda: RunStore(tmp / "mf", cache=False).read("output/log"), t["mf_ours"])
        best(lambda: pl.read_ndjson(jsonl, schema=polars_schema()), t["jsonl_polars"])
        best(lambda: RunStore(tmp / "ours", cache=False).read("run"), t["jsonl_ours"])
    frame = RunStore(tmp / "mf", cache=False).read("output/log").frame
    assert len(frame) == lines // 2 and not frame["loss"].isna().any(), "every step read"
    b = {k: min(v) for k, v in t.items()}
    log_ratio, jsonl_ratio = b["mf_ours"] / b["mf_polars"], b["jsonl_ours"] / b["jsonl_polars"]
    print("\n== open from cold (best of 3) ==")
    print(f"  MindFormers log, polars lines + one regex   {b['mf_polars']:7.3f} s")
    print(f"  MindFormers log, ours (RunStore.read)       {b['mf_ours']:7.3f} s   x{log_ratio:.2f}")
    print(f"  our JSONL, polars read_ndjson               {b['jsonl_polars']:7.3f} s")
    print(f"  our JSONL, ours (RunStore.read, no cache)   {b['jsonl_ours']:7.3f} s   x{jsonl_ratio:.2f}")
    print(f"  ratio to polars: log x{log_ratio:.2f} vs JSONL x{jsonl_ratio:.2f}  (goal: the log's no higher)")


def live_bench(tmp: Path, seconds: float, poll_s: float) -> None:
    log = tmp / f"live{poll_s}" / "output" / "log" / "rank_0" / "info.log"
    log.parent.mkdir(parents=True)
    written: dict[int, float] = {}
    stop = threading.Event()

    def writer() -> None:
        step = 0
        with open(log, "a") as out:
            while not stop.is_set():
                step += 1
                step_line, progress = mf_lines(step, step, 100_000, time.time())
                out.write(step_line + "\n")
                out.flush()
                written[step] = time.time()
                stop.wait(0.1)
                out.write(progress + "\n")
                out.flush()
                stop.wait(0.1)  # 10 lines/s

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    store = RunStore(log.parents[3], cache=False, rescan_interval_s=2.0)
    seen: dict[int, float] = {}
    deadline = time.time() + seconds
    while time.time() < deadline:
        tick = time.time()
        try:
            frame = store.read("output/log").frame
        except KeyError:
            frame = None
        now = time.time()
        if frame is not None and len(frame):
            for step in frame["step"].to_numpy()[-20:]:
                seen.setdefault(int(step), now)
        time.sleep(max(0.0, poll_s - (time.time() - tick)))
    stop.set()
    thread.join()
    lat = [seen[s] - written[s] for s in written if s in seen]
    if not lat:
        print(f"  poll {poll_s} s: nothing seen")
        return
    print(
        f"  poll every {poll_s:.0f} s: {len(lat)} steps seen of {len(written)} written; latency median "
        f"{statistics.median(lat):.2f} s, p95 {sorted(lat)[math.ceil(0.95 * len(lat)) - 1]:.2f} s, max {max(lat):.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--live-seconds", type=float, default=20.0)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_mflog_"))
    try:
        open_bench(tmp, args.lines)
        print(f"\n== live: 10 lines/s for {args.live_seconds:.0f} s, reader-side latency (goal < 2 s) ==")
        for poll_s in (1.0, 2.0):
            live_bench(tmp, args.live_seconds, poll_s)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
