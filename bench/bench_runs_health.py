"""Benchmark the Runs page's health column: a render with it against one without, in the same run.

Usage: ``.venv/bin/python bench/bench_runs_health.py [--runs 100] [--steps 2000] [--repeat 15] [--keep DIR]``

The runs are written with the real ``MetricsWriter`` (``bench_runs_table.write_runs``: a sweep, a few
failed with a NaN loss, a few stopped) and read through a ``RunStore`` as the page does. A render is
the page's server work for the table: ``store.list_runs()``, :func:`monitor_cb.views.runs_view.runs_view`
(statistics from their cache), the displayed text table and its Arrow conversion (what ``st.dataframe``
serialises). Renders with and without health alternate, so both see the same machine load; figures
are medians of ``--repeat``:

* **steady**: every run's health known (the worker is idle): the cost of the column itself;
* **while diagnosing**: the first visit, renders taken while the worker thread diagnoses the 100 runs
  (it never runs on the render's path, but shares the CPU and the GIL with it);
* how long the worker took to diagnose every run (the column is then complete).

Goal (issue 31, item 5): the Runs page no slower with the column than without it, within 1.1x.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_runs_table import write_runs  # noqa: E402

from monitor_cb.compare.runhealth import HealthCache  # noqa: E402
from monitor_cb.compare.runstats import StatsCache, store_loader  # noqa: E402
from monitor_cb.ingest import RunStore  # noqa: E402
from monitor_cb.ingest.viewer_work import Background  # noqa: E402
from monitor_cb.views.runs_view import RunsQuery, page_table, runs_view  # noqa: E402

GOAL = 1.1


def render(store: RunStore, stats: StatsCache, health: HealthCache | None) -> Any:
    """One render's server work for the table (with health: out-of-date runs handed to the worker at the end,
    as the page does once it is drawn)."""
    import pyarrow as pa

    now = time.time()
    view = runs_view(store.list_runs(), stats, now, RunsQuery(), budget_s=60.0, health=health)
    table = pa.Table.from_pandas(page_table(view, now), preserve_index=False)
    if health is not None:
        health.submit_pending()
    return table


def timed(func: Any) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def alternate(store: RunStore, stats: StatsCache, health: HealthCache, repeat: int) -> tuple[float, float]:
    """Median render time without and with health, renders alternating."""
    without, with_health = [], []
    for _ in range(repeat):
        without.append(timed(lambda: render(store, stats, None)))
        with_health.append(timed(lambda: render(store, stats, health)))
    return statistics.median(without), statistics.median(with_health)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--keep", type=Path, default=None, help="write (or reuse) the runs here instead of a temp dir")
    args = parser.parse_args()
    tmp = None
    if args.keep is not None:
        root = args.keep
        if not root.exists():
            write_runs(root, args.runs, args.steps)
    else:
        tmp = Path(tempfile.mkdtemp(prefix="bench-health-"))
        root = tmp / "logs"
        write_runs(root, args.runs, args.steps)
    try:
        run(root, args)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def run(root: Path, args: argparse.Namespace) -> None:
    store = RunStore(root)
    stats = StatsCache(store_loader(store))
    runs = store.list_runs()
    render(store, stats, None)  # every run read and its statistics computed: what the page has on a second visit
    background = Background()
    health = HealthCache(store_loader(store), background=background)
    print(f"{len(runs)} runs x {args.steps} steps, {args.repeat} renders each way, alternating")

    started = time.perf_counter()
    first = timed(lambda: render(store, stats, health))  # submits every run to the worker
    during_without, during_with = [], []
    while not background.wait_idle(0):  # the worker still diagnosing
        during_without.append(timed(lambda: render(store, stats, None)))
        during_with.append(timed(lambda: render(store, stats, health)))
    background.wait_idle(600)
    diagnosed_s = time.perf_counter() - started
    pending = health.pending(runs)

    steady_without, steady_with = alternate(store, stats, health, args.repeat)
    print(f"first render with health (submits {len(runs)} runs): {first * 1e3:.1f} ms")
    if during_without:
        a, b = statistics.median(during_without), statistics.median(during_with)
        print(
            f"while diagnosing ({len(during_with)} pairs): without {a * 1e3:.1f} ms, with {b * 1e3:.1f} ms,"
            f" ratio {b / a:.2f}x"
        )
    print(f"every run's health known after {diagnosed_s:.2f} s ({pending} pending), worker errors: {background.errors}")
    ratio = steady_with / steady_without
    verdict = "OK" if ratio <= GOAL else "OVER"
    print(
        f"steady: without {steady_without * 1e3:.1f} ms, with {steady_with * 1e3:.1f} ms,"
        f" ratio {ratio:.2f}x (goal <= {GOAL}x: {verdict})"
    )


if __name__ == "__main__":
    main()
