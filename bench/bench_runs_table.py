"""Benchmark the runs table: build, display and filter 1,000 runs against the store's own run listing.

Usage: ``.venv/bin/python bench/bench_runs_table.py [--runs 1000] [--steps 300] [--repeat 5] [--keep DIR] [--no-page]``

The runs are written with the real ``MetricsWriter`` under a temporary root (a sweep over lr, seed,
batch size and optimizer, with nested config and constant keys; eval every 50 steps; a few failed
with a NaN loss, a few stopped) and read through a ``RunStore`` as the runs page does. Figures are
medians of ``--repeat``:

* **baseline**: ``store.list_runs()`` (discovery, polling, status), which every page refresh pays
  anyway; measured cold (first read of every file) and warm (nothing new);
* **table, cold**: every run's statistics computed from the store's frames (the first visit);
* **refresh**: list_runs + the table from cached statistics + the displayed text table + its Arrow
  conversion (what ``st.dataframe`` serialises): the server time of one page render;
* **filter**: a text filter, an expression (``lr < 1e-3 and status == "finished"``), a sort and a
  group-by on the built table, each alone, and the filtered table displayed;
* **changed**: 10 runs get new records; the refresh recomputes only those;
* **first visit, budgeted**: ``StatsCache.fill`` computes stats for at most 0.5 s per render and the
  table shows the rest with config-only rows until the next render, so no render waits for all;
* **the page itself** (``--page``, on by default): the real runs page (``pages/runs_page.py``) run by
  Streamlit's ``AppTest`` in this process, so the time is the server's whole script run (widgets,
  ``runs_view``, the table's Arrow, the Sweeps tab's parallel coordinates and scatter of 200 runs,
  protobuf): a warm render, a text filter, an expression filter, a sort. Its baseline, measured
  in the same run, is an AppTest render of a page that only shows the same 1,000-row text table
  (Streamlit's own cost of a table this size).

Goal (issue 15): render and filter of 1,000 runs within 1 s of server time.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from monitor_cb.compare.runs_table import (  # noqa: E402
    build_table,
    filter_expr,
    filter_text,
    group_table,
    sort_table,
)
from monitor_cb.compare.runstats import StatsCache, store_loader  # noqa: E402
from monitor_cb.ingest import RunStore  # noqa: E402
from monitor_cb.train.writer import MetricsWriter  # noqa: E402
from monitor_cb.views.runs_view import display_table  # noqa: E402

GOAL_S = 1.0
BUDGET_S = 0.5  # stats computed per render on a first visit (StatsCache.fill)
LRS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
EXPRESSION = 'lr < 1e-3 and status == "finished"'


def write_runs(root: Path, runs: int, steps: int) -> None:
    """``runs`` runs of ``steps`` records each, through the real writer."""
    t0 = time.time() - 86_400
    for i in range(runs):
        lr, seed = LRS[i % len(LRS)], i // len(LRS) % 4
        config = {
            "lr": lr,
            "seed": seed,
            "batch_size": (32, 64)[i % 2],
            "optim": {"name": ("adam", "sgd")[i % 3 == 0], "betas": [0.9, 0.999], "weight_decay": 0.01},
            "model": {"layers": 12, "hidden": 768, "heads": 12},
            "data": {"path": "/data/corpus", "seq_length": 1024},
        }
        writer = MetricsWriter(root / f"group{i // 100:02d}" / f"run{i:04d}", rank=0, world_size=1, config=config)
        failed = i % 97 == 5
        start = t0 + i * 10
        for step in range(1, steps + 1):
            loss = 3.0 * math.exp(-step * lr * 10) + 0.2 + 0.01 * seed
            if failed and step > steps // 2:
                loss = math.nan
            writer.log_at(start + step, step=step, loss=loss, lr=lr, throughput=900.0 + i % 50, grad_norm=1.0)
            if step % 50 == 0:
                writer.log_at(start + step + 0.5, step=step, eval_loss=loss * 1.1, eval_accuracy=1 - loss / 4)
        status = "failed" if failed else "stopped" if i % 89 == 7 else "finished"
        writer.close(status, "loss is NaN" if failed else None, end_time=start + steps + 1)


def median_time(func: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Median wall time of ``repeat`` calls (the last call's result)."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = func()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", type=Path, default=None, help="write (or reuse) the runs here instead of a temp dir")
    parser.add_argument("--no-page", dest="page", action="store_false", help="skip the AppTest page renders")
    args = parser.parse_args()

    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-runs-table-"))
    try:
        run(root, args)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


def run(root: Path, args: argparse.Namespace) -> None:
    import pyarrow as pa

    if not any(root.glob("group*/run*/metrics.jsonl")):
        start = time.perf_counter()
        write_runs(root, args.runs, args.steps)
        took = time.perf_counter() - start
        print(f"wrote {args.runs:,} runs x {args.steps} steps with MetricsWriter in {took:.1f} s")

    import shutil

    shutil.rmtree(root / ".monitor", ignore_errors=True)  # no summary index yet: a first server ever
    store = RunStore(root)
    start = time.perf_counter()
    infos = store.list_runs()
    list_cold = time.perf_counter() - start
    store.index.flush(force=True)
    start = time.perf_counter()
    restarted = RunStore(root).list_runs()  # a restarted server: unchanged files listed from the index
    list_restart = time.perf_counter() - start
    assert [(i.id, i.n_records, i.status) for i in restarted] == [(i.id, i.n_records, i.status) for i in infos]
    now = time.time()
    # first visit with a time budget: renders until every run's stats are in
    budgeted = StatsCache(store_loader(store))
    renders = []
    while True:
        start = time.perf_counter()
        left = budgeted.fill(infos, BUDGET_S)
        table = build_table(infos, budgeted.cached, now)
        pa.Table.from_pandas(display_table(table, now), preserve_index=False)
        renders.append((time.perf_counter() - start, left))
        if not left:
            break
    cache = StatsCache(store_loader(store))
    start = time.perf_counter()
    table = build_table(infos, cache.get, now)
    build_cold = time.perf_counter() - start
    assert cache.computed == len(infos), (cache.computed, len(infos))

    list_warm, infos = median_time(store.list_runs, args.repeat)
    build_warm, table = median_time(lambda: build_table(infos, cache.get, now), args.repeat)
    show, shown = median_time(lambda: display_table(table, now), args.repeat)
    arrow, _ = median_time(lambda: pa.Table.from_pandas(shown, preserve_index=False), args.repeat)

    def refresh() -> Any:
        listed = store.list_runs()
        built = build_table(listed, cache.get, time.time())
        return pa.Table.from_pandas(display_table(built, now), preserve_index=False)

    full, _ = median_time(refresh, args.repeat)
    text, by_text = median_time(lambda: filter_text(table, "group03 adam"), args.repeat)
    expr, by_expr = median_time(lambda: filter_expr(table, EXPRESSION), args.repeat)
    sort, _ = median_time(lambda: sort_table(table, "loss.best"), args.repeat)
    group, grouped = median_time(lambda: group_table(table, "lr"), args.repeat)
    filtered_view, _ = median_time(
        lambda: pa.Table.from_pandas(display_table(filter_expr(filter_text(table, "adam"), EXPRESSION), now)),
        args.repeat,
    )

    for k, info in enumerate(infos[:10]):  # resumed: a new segment with the same config
        with MetricsWriter(info.path, rank=0, world_size=1, config=info.meta.get("config")) as writer:
            writer.log(step=args.steps + 1, loss=0.01 * (k + 1))
    store.refresh(force=True)
    before = cache.computed
    start = time.perf_counter()
    refresh()
    changed = time.perf_counter() - start
    recomputed = cache.computed - before

    print(
        f"\nlist_runs on a restarted server (summary index): {list_restart * 1000:.0f} ms against "
        f"{list_cold * 1000:.0f} ms on a first server (every file read) -> {list_cold / list_restart:.1f}x faster"
    )
    print(f"\nruns: {len(infos):,} ({args.steps} steps each); table {table.frame.shape[0]} x {table.frame.shape[1]}")
    print(f"  columns: {', '.join(table.frame.columns)}")
    print(f"\n{'what':<44}{'time':>10}{'x list_runs (warm)':>22}")
    rows = [
        ("baseline: store.list_runs(), cold", list_cold),
        ("baseline: store.list_runs(), warm", list_warm),
        ("table, cold (stats of every run)", build_cold),
        ("table, warm (cached stats)", build_warm),
        ("display_table (text, NaN as 'NaN')", show),
        ("Arrow conversion (what st.dataframe sends)", arrow),
        ("refresh = list_runs + table + display + Arrow", full),
        (f"refresh after 10 runs changed ({recomputed} recomputed)", changed),
        (f"filter text 'group03 adam' -> {len(by_text.ids)} runs", text),
        (f"filter expression -> {len(by_expr.ids)} runs", expr),
        ("sort by loss.best", sort),
        (f"group by lr -> {len(grouped)} groups", group),
        ("text + expression filter, displayed + Arrow", filtered_view),
    ]
    for label, seconds in rows:
        print(f"{label:<44}{seconds * 1000:>8.1f} ms{seconds / list_warm:>20.1f}x")
    filtering = text + expr + filtered_view
    print(f"\nrender (refresh): {full * 1000:.0f} ms; filter (text + expression + display): {filtering * 1000:.0f} ms")
    print(f"goal <= {GOAL_S:.1f} s each: {'met' if max(full, filtering) <= GOAL_S else 'NOT met'}")
    print(
        f"first visit: list_runs cold {list_cold * 1000:.0f} ms (the store reads every file; baseline)"
        f" + table cold {build_cold * 1000:.0f} ms ({build_cold / list_cold:.2f}x the cold listing)"
    )
    steps = ", ".join(f"{seconds * 1000:.0f} ms ({left} left)" for seconds, left in renders)
    print(f"first visit with a {BUDGET_S:g} s stats budget per render: {len(renders)} renders: {steps}")
    if args.page:
        page_renders(root, display_table(table, now), args.repeat)


PAGE_SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
from pages.runs_page import runs_page
runs_page()
"""
PLAIN_SCRIPT = """
import pandas as pd
import streamlit as st
st.dataframe(pd.read_pickle({path!r}), hide_index=True)
"""


def page_renders(root: Path, shown: Any, repeat: int) -> None:
    """Server time of the real runs page (AppTest, in process) against a page showing only the table."""
    import os

    from streamlit.testing.v1 import AppTest

    os.environ["MONITOR_LOGDIR"] = str(root)
    pickled = root / ".bench-table.pkl"
    shown.to_pickle(pickled)
    plain = AppTest.from_string(PLAIN_SCRIPT.format(path=str(pickled)), default_timeout=600)
    baseline, _ = median_time(plain.run, repeat)
    at = AppTest.from_string(PAGE_SCRIPT.format(repo=str(REPO)), default_timeout=600)
    start = time.perf_counter()
    at.run()  # a first visit: reruns (0.5 s of statistics each) until every run's are in
    first = time.perf_counter() - start
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.dataframe(key="runs_table").value) == len(shown), "every run in the table"
    warm, _ = median_time(at.run, repeat)

    def typed(key: str, value: str) -> Callable[[], Any]:
        def run() -> Any:
            at.text_input(key=key).set_value(value)
            return at.run()

        return run

    def cleared() -> None:
        at.text_input(key="runs_filter").set_value("")
        at.text_input(key="runs_expr").set_value("")
        at.run()

    texts, exprs, sorts = [], [], []
    for _ in range(repeat):
        start = time.perf_counter()
        typed("runs_filter", "group03 adam")()
        texts.append(time.perf_counter() - start)
        n_text = len(at.dataframe(key="runs_table").value)
        cleared()
        start = time.perf_counter()
        typed("runs_expr", EXPRESSION)()
        exprs.append(time.perf_counter() - start)
        n_expr = len(at.dataframe(key="runs_table").value)
        cleared()
        start = time.perf_counter()
        at.selectbox(key="runs_sort").set_value("loss.best").run()
        sorts.append(time.perf_counter() - start)
        at.selectbox(key="runs_sort").set_value("(newest first)").run()
    assert not at.exception, [e.value for e in at.exception]
    text, expr, sort = (statistics.median(v) for v in (texts, exprs, sorts))
    print(f"\nthe runs page (AppTest, server time of one script run; {len(shown):,} runs):")
    print(f"{'what':<52}{'time':>10}{'x table-only page':>20}")
    for label, seconds in (
        ("baseline: a page with only the 1,000-row table", baseline),
        ("runs page, warm render (table + sweeps tab)", warm),
        (f"runs page, text filter 'group03 adam' -> {n_text} runs", text),
        (f"runs page, expression filter -> {n_expr} runs", expr),
        ("runs page, sort by loss.best", sort),
    ):
        print(f"{label:<52}{seconds * 1000:>8.0f} ms{seconds / baseline:>18.1f}x")
    print(f"runs page, first visit (cold stats, reruns until all are in): {first:.2f} s")
    worst = max(warm, text, expr, sort)
    print(f"page goal <= {GOAL_S:.1f} s to render and to filter: {'met' if worst <= GOAL_S else 'NOT met'}")


if __name__ == "__main__":
    main()
