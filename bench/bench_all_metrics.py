"""Benchmark: the All metrics page against TensorBoard's time series on one wide TensorBoard run, in one run.

Usage: ``.venv/bin/python bench/bench_all_metrics.py [--tags 1000] [--steps 10000] [--data DIR]``

The data: one run written by tensorboardX, ``--tags`` scalar tags in groups of 50 (``group<k>/metric<i>``)
plus ``loss`` and ``lr``, each logged at every one of ``--steps`` steps (1,000 x 10k: 10M scalars; writing
takes minutes, ``--data DIR`` keeps it between runs). Printed, with the machine's load:

* TensorBoard (``tensorboard --logdir DIR``): from the server process's start to the first time-series
  data of the run reaching a real Chromium page opened on its time series (the first screen's cards);
* the project (``streamlit run dashboard.py -- --logdir DIR``, ``/metrics?run=tbrun``): from the
  server process's start to the first group's charts (``loss``, ``lr``) drawn at the last step, the
  other groups listed, collapsed;
* the ratio project / TensorBoard (below 1: the project's first screen came first).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_tensorboard import _answers  # noqa: E402

RUN = "tbrun"
MARKER = ".bench-shape"
T0 = 1_700_000_000.0


def write_events(run_dir: Path, tags: int, steps: int) -> float:
    """The event file; seconds it took (0: reused). Explicit wall times (0.5 s a step)."""
    shape = f"{tags}x{steps}"
    marker = run_dir / MARKER
    if marker.exists() and marker.read_text().strip() == shape:
        return 0.0
    from tensorboardX import SummaryWriter

    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    started = time.perf_counter()
    writer = SummaryWriter(str(run_dir), max_queue=100_000)
    names = [f"group{i // 50}/metric{i}" for i in range(tags)]
    for step in range(steps):
        wall = T0 + 0.5 * step
        writer.add_scalar("loss", 2.0 * math.exp(-step / max(steps, 1)) + 0.01 * math.sin(step), step, walltime=wall)
        writer.add_scalar("lr", 1e-4, step, walltime=wall)
        for i, name in enumerate(names):
            writer.add_scalar(name, math.sin(step / 50 + i), step, walltime=wall)
    writer.close()
    marker.write_text(shape)
    return time.perf_counter() - started


def tensorboard_time(root: Path, log: Path) -> float:
    """Seconds from ``tensorboard --logdir`` starting to the run's first time-series data in the page."""
    from tests.browser.harness import chromium_page, free_port, poll

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    exe = Path(sys.executable).with_name("tensorboard")
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(exe), "--logdir", str(root), "--port", str(port), "--host", "127.0.0.1"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        poll(lambda: _answers(url + "/data/logdir"), 120, 0.02, "tensorboard to start")
        arrived: list[float] = []
        with chromium_page(1440, 900) as page:

            def on_response(response: Any) -> None:
                if "timeSeries" not in response.url:
                    return
                try:
                    series = json.loads(response.text())
                except Exception:  # noqa: BLE001 - another kind of response
                    return
                for item in series if isinstance(series, list) else []:
                    if (item.get("runToSeries") or {}).get(RUN):
                        arrived.append(time.monotonic())

            page.on("response", on_response)
            page.goto(f"{url}/#timeseries", wait_until="domcontentloaded")
            deadline = time.monotonic() + 600
            while not arrived:
                page.wait_for_timeout(50)
                if time.monotonic() > deadline:
                    raise TimeoutError("TensorBoard's time series did not arrive in 600 s")
        return arrived[0] - started
    finally:
        proc.terminate()
        proc.wait()


JS_FIRST_GROUP = """
(steps) => {
  const charts = document.querySelectorAll("[data-testid='stExpanderDetails'] .js-plotly-plot");
  let done = 0;
  for (const gd of charts) {
    if (!gd._fullData) continue;
    const last = Math.max(...gd._fullData.flatMap((t) => Array.from(t.x || []).map(Number)));
    if (last >= steps - 1) done += 1;
  }
  return done;
}
"""


def project_time(root: Path, steps: int, log: Path) -> float:
    """Seconds from ``streamlit run dashboard.py`` starting to the All metrics page's first group drawn."""
    from tests.browser.harness import chromium_page, poll, streamlit_server

    started = time.monotonic()
    with streamlit_server(root, log) as url, chromium_page(1440, 900) as page:
        page.goto(f"{url}/metrics?run={RUN}", wait_until="domcontentloaded")
        poll(lambda: page.evaluate(JS_FIRST_GROUP, steps) >= 2, 900, 0.05, "the first group's charts")
        took = time.monotonic() - started
        page.screenshot(path=str(log.with_suffix(".png")))
    return took


def load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tags", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--data", type=Path, default=None, help="keep the event file here between runs")
    args = parser.parse_args()
    base = args.data or Path("/tmp") / f"bench-all-metrics-{args.tags}x{args.steps}"
    root = base / "logs"
    wrote = write_events(root / RUN, args.tags, args.steps)
    if wrote:
        print(f"wrote {args.tags + 2} tags x {args.steps:,} steps with tensorboardX in {wrote:.0f} s")
    shutil.rmtree(root / ".monitor", ignore_errors=True)  # the project starts without its cache, as TensorBoard does
    tb = tensorboard_time(root, base / "tensorboard.log")
    print(f"TensorBoard: server start -> the run's first time-series data in the page: {tb:.2f} s ({load()})")
    ours = project_time(root, args.steps, base / "streamlit.log")
    print(f"All metrics: server start -> the first group's charts at the last step: {ours:.2f} s ({load()})")
    print(f"ratio project / TensorBoard: {ours / tb:.2f}x (below 1: the project's first screen came first)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
