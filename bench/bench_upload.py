"""Memory and time to replay an uploaded run: the Replay page parses an upload in memory.

A collector-like file of ``--steps`` records (1M is about 220 MB, the size the upload limit is
sized for) is written to a temporary folder; then, each in a fresh process so peak memory is its
own: the baseline imports the parser and reads the file's bytes (what Streamlit holds for an
upload), the upload path does the same and runs ``parse_upload`` (checks, parse, the run frame).
Printed: file size, peak RSS of each, the parse's extra peak memory as a multiple of the file
size, and the parse time against the read time of the same run.

    .venv/bin/python bench/bench_upload.py [--steps 1000000]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_MEASURE = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[3])
from monitor_cb.compare.browser_upload import parse_upload  # both arms pay for the imports (pandas, polars)
import monitor_cb.ingest.parse, monitor_cb.ingest.table
t = time.perf_counter()
data = open(sys.argv[1], "rb").read()
read_s = time.perf_counter() - t
parse_s, rows = 0.0, 0
if sys.argv[2] == "parse":
    t = time.perf_counter()
    parsed = parse_upload("run.jsonl", data, len(data) + 1)
    parse_s, rows = time.perf_counter() - t, len(parsed.frame)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"peak": peak, "read_s": read_s, "parse_s": parse_s, "rows": rows}))
"""


def write_run(path: Path, steps: int) -> None:
    """Lines as the collector writes them: step, epoch, time and ten metrics."""
    import orjson

    with open(path, "wb") as out:
        lines = []
        for s in range(1, steps + 1):
            lines.append(
                orjson.dumps(
                    {
                        "step": s,
                        "epoch": 1 + s // 5000,
                        "t": 1.7e9 + s * 0.31,
                        "loss": 2.5 * math.exp(-s / 2e5) + 0.2 + 1e-3 * (s % 7),
                        "lr": 3e-4 * min(1.0, s / 2000),
                        "throughput": 812.3 + (s % 13),
                        "step_time": 0.3101 + (s % 5) * 1e-3,
                        "data_time": 0.0123,
                        "grad_norm": 1.234 + (s % 11) / 10,
                        "loss_scale": 65536.0,
                        "mem_device": 12884901888,
                        "tokens_per_s": 415883.2,
                    }
                )
            )
            if len(lines) == 10_000:
                out.write(b"\n".join(lines) + b"\n")
                lines = []
        if lines:
            out.write(b"\n".join(lines) + b"\n")


def measure(path: Path, mode: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), mode, str(REPO)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.jsonl"
        write_run(path, args.steps)
        size = path.stat().st_size
        base = measure(path, "read")
        parsed = measure(path, "parse")
    mb = 2**20
    print(f"file: {args.steps:,} records, {size / mb:,.0f} MB; parsed rows {parsed['rows']:,}")
    print(f"peak RSS: read only {base['peak'] / mb:,.0f} MB, read + parse_upload {parsed['peak'] / mb:,.0f} MB")
    extra = parsed["peak"] - base["peak"]
    print(f"parse extra peak: {extra / mb:,.0f} MB = {extra / size:.2f} x the file")
    ratio = parsed["parse_s"] / base["read_s"]
    print(f"time: read {base['read_s']:.2f} s, parse {parsed['parse_s']:.2f} s = {ratio:.0f} x the read")


if __name__ == "__main__":
    main()
