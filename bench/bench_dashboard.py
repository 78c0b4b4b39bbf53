"""Benchmark the live page on a 1M-step run: server time and bytes per live refresh, record-to-screen latency.

Usage: ``.venv/bin/python bench/bench_dashboard.py [--steps 1000000] [--no-browser]``

1. Server time per refresh, measured with Streamlit's AppTest on the same process: the fragment's
   body alone (what ``run_every`` reruns: poll the run, build the KPIs and figures, marshal the
   charts) against a full-page rerun of ``dashboard.py`` (the baseline, what streamlit-autorefresh
   would trigger). Ten records are appended before every refresh, as a training would.
2. Bytes per refresh and latency, in a real headless Chromium against ``streamlit run``: websocket
   frames received per fragment refresh (1 s) against a full-page rerun (a widget click), and the
   time from a record written to its step drawn on the loss chart.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

RUN = "big"


# ----------------------------------------------------------------------------- the run
class BigRun:
    """A 1M-step run written in the record format, then appended to like a live training."""

    def __init__(self, root: Path, steps: int) -> None:
        self.dir = root / RUN
        self.dir.mkdir(parents=True)
        self.path = self.dir / "metrics.jsonl"
        self.step = 0
        self.t0 = time.time() - steps * 0.05
        meta = {
            "schema": 1,
            "name": RUN,
            "status": "running",
            "start_time": self.t0,
            "first_start_time": self.t0,
            "host": os.uname().nodename,
            "pid": os.getpid(),
            "rank": 0,
            "world_size": 1,
            "segment": 1,
            "metrics_file": "metrics.jsonl",
            "total_steps": steps * 2,
        }
        (self.dir / "metrics.meta.json").write_bytes(orjson.dumps(meta))
        with open(self.path, "wb") as f:
            chunk = 100_000
            for start in range(0, steps, chunk):
                f.write(self._lines(start + 1, min(start + chunk, steps), live=False))
        self.step = steps

    def _lines(self, first: int, last: int, live: bool) -> bytes:
        steps = np.arange(first, last + 1)
        t = np.full(steps.size, time.time()) if live else self.t0 + steps * 0.05
        rng = np.random.default_rng(first)
        loss = 3.0 * np.exp(-steps / 2e5) + 0.3 + 0.05 * rng.standard_normal(steps.size)
        spikes = rng.random(steps.size) < 1e-5
        loss[spikes] *= 20
        grad = 1.0 + 0.2 * rng.standard_normal(steps.size)
        out = []
        for i, s in enumerate(steps.tolist()):
            out.append(
                orjson.dumps(
                    {
                        "step": s,
                        "t": float(t[i]),
                        "rank": 0,
                        "seg": 1,
                        "epoch": 1 + s // 100_000,
                        "loss": float(loss[i]),
                        "lr": 1e-3 * min(1.0, s / 2000),
                        "throughput": 820.0 + (s % 13),
                        "grad_norm": float(grad[i]),
                        "samples": s * 32,
                    },
                    option=orjson.OPT_APPEND_NEWLINE,
                )
            )
        return b"".join(out)

    def append(self, n: int = 10) -> int:
        with open(self.path, "ab") as f:
            f.write(self._lines(self.step + 1, self.step + n, live=True))
        self.step += n
        return self.step


# ----------------------------------------------------------------------------- server time
def _fragment_script() -> None:
    """The fragment's body alone, as an AppTest script (what each run_every tick executes)."""
    import os
    import time

    import streamlit as st

    from monitor_cb.views.live import ChartSettings
    from pages import _shared, live_page

    store = _shared.get_store(os.environ["MONITOR_LOGDIR"])
    known = live_page.sidebar_state(store.list_runs(), _shared.log_root())  # what the page drew the sidebar from
    columns = frozenset(store.read("big").frame.columns)
    started = time.perf_counter()
    live_page._live_body(store, "big", ChartSettings(), known, columns)
    st.session_state["body_s"] = time.perf_counter() - started  # the script thread's own time, read by the bench


def _proto_bytes(at: Any) -> int:
    """Bytes of the element protos a run produced (what the deltas carry, less a few header bytes)."""
    total = 0
    stack = [at._tree]
    while stack:
        node = stack.pop()
        proto = getattr(node, "proto", None)
        if proto is not None and hasattr(proto, "ByteSize"):
            total += proto.ByteSize()
        children = getattr(node, "children", None)
        if isinstance(children, dict):
            stack.extend(children.values())
    return total


def server_time(run: BigRun, repeats: int) -> dict[str, Any]:
    from streamlit.testing.v1 import AppTest

    from monitor_cb.ingest import RunStore

    t = time.perf_counter()
    RunStore(run.dir.parent, cache=False).read(RUN)
    cold_load = time.perf_counter() - t
    store = RunStore(run.dir.parent)
    store.read(RUN)  # writes the columnar cache (if the breakdown did not already)
    store.cache.wait()
    t = time.perf_counter()
    RunStore(run.dir.parent).read(RUN)
    cached_load = time.perf_counter() - t

    frag = AppTest.from_function(_fragment_script, default_timeout=120)
    full = AppTest.from_file(str(REPO / "dashboard.py"), default_timeout=120)
    full.query_params["run"] = RUN
    frag.run()  # first runs: load the run into the shared store, import everything
    full.run()
    assert not frag.exception and not full.exception, (frag.exception, full.exception)
    times: dict[str, list[float]] = {"fragment": [], "full": []}
    sizes: dict[str, list[int]] = {"fragment": [], "full": []}
    body: list[float] = []
    for _ in range(repeats):
        for name, at in (("fragment", frag), ("full", full)):
            run.append(10)
            t = time.perf_counter()
            at.run()
            times[name].append(time.perf_counter() - t)
            sizes[name].append(_proto_bytes(at))
        body.append(frag.session_state["body_s"])
    return {"cold_load_s": cold_load, "cached_load_s": cached_load, "times": times, "sizes": sizes, "body": body}


def breakdown(run: BigRun, repeats: int) -> dict[str, float]:
    """Where a refresh's server time goes (no Streamlit): poll + frame, figures, plotly JSON."""
    import plotly.io

    from monitor_cb.ingest import RunStore
    from monitor_cb.views.live import ChartSettings
    from monitor_cb.views.live_refresh import LiveRequest, process
    from monitor_cb.views.zoom import ZoomState

    store = RunStore(run.dir.parent)
    store.read(RUN)
    parts: dict[str, list[float]] = {"poll+frame": [], "kpis+figures": [], "to_json": []}
    for _ in range(repeats):
        run.append(10)
        t0 = time.perf_counter()
        info = {r.id: r for r in store.list_runs()}[RUN]
        data = store.read(RUN)
        t1 = time.perf_counter()
        request = LiveRequest(ChartSettings(), ZoomState(), series_key=(str(store.root), RUN))
        live = process(info, data, request, time.time())
        t2 = time.perf_counter()
        size = sum(len(plotly.io.to_json(f, validate=False)) for f in live.figures.values())
        t3 = time.perf_counter()
        parts["poll+frame"].append(t1 - t0)
        parts["kpis+figures"].append(t2 - t1)
        parts["to_json"].append(t3 - t2)
    out = {k: statistics.median(v) for k, v in parts.items()}
    out["json_bytes"] = size
    return out


# ----------------------------------------------------------------------------- browser
def browser(run: BigRun, tmp: Path, samples: int) -> dict[str, Any] | str:
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    from tests.browser.harness import browser_missing, chart_state, chromium_page, poll, streamlit_server

    missing = browser_missing()
    if missing:
        return f"skipped: {missing}"
    frames: list[tuple[float, int, bool]] = []  # (time, bytes, ends a script run)

    def on_ws(ws: Any) -> None:
        def received(payload: Any) -> None:
            data = payload if isinstance(payload, bytes) else payload.encode()
            finished = False
            with contextlib.suppress(Exception):  # a frame that is not a ForwardMsg
                finished = ForwardMsg.FromString(data).WhichOneof("type") == "script_finished"
            frames.append((time.monotonic(), len(data), finished))

        ws.on("framereceived", received)

    with streamlit_server(run.dir.parent, tmp / "streamlit.log") as url:
        with chromium_page() as page:
            page.on("websocket", on_ws)
            opened = time.monotonic()
            page.goto(f"{url}/?run={RUN}", wait_until="domcontentloaded")
            poll(lambda: chart_state(page, "chart_loss_lr", "loss"), timeout=120, what="the first chart")
            first_chart = time.monotonic() - opened
            page.get_by_text("1 s", exact=True).click()
            ready = lambda: (chart_state(page, "chart_loss_lr", "loss") or {}).get("maxX", 0) >= run.step  # noqa: E731
            poll(ready, 30, what="ready")

            latencies = []
            for _ in range(samples):
                last = run.append(1)
                t = time.monotonic()
                poll(
                    lambda last=last: (chart_state(page, "chart_loss_lr", "loss") or {}).get("maxX", 0) >= last,
                    timeout=10,
                    interval=0.02,
                    what=f"step {last}",
                )
                latencies.append(time.monotonic() - t)
                # land the next write at a random phase of the refresh cycle
                time.sleep(0.1 + 0.37 * (len(latencies) % 3))  # pacing between samples, not a wait

            # bytes per fragment refresh: script runs in a quiet window with the run still writing
            frames.clear()
            t_end = time.monotonic() + 6.0
            while time.monotonic() < t_end:
                run.append(10)
                page.wait_for_timeout(500)
            fragment_bytes = _per_run(frames)

            # refreshes that find no new record: the figures are reused and Streamlit sends references.
            # The window starts after two script runs that began after the last write: on loaded cores
            # Chromium's refresh timer fires late, and the first run or two still draw the last records
            # (that is what the "121 kB with no new record" of an earlier version of this script measured).
            done = sum(f[2] for f in frames)
            poll(lambda: page.wait_for_timeout(50) or sum(f[2] for f in frames) >= done + 2, 60, what="two quiet runs")
            frames.clear()
            page.wait_for_timeout(5000)
            idle_bytes = _per_run(frames)

            # baseline: full-page reruns (the Pause toggle reruns the whole script; the charts still draw once)
            full_runs = []
            for _ in range(2):
                for _state in range(2):
                    run.append(10)  # new records, as for the fragment refreshes
                    page.wait_for_timeout(300)
                    frames.clear()
                    page.get_by_text("Pause", exact=True).click()
                    # wait_for_timeout lets Playwright deliver the websocket events while we poll
                    poll(lambda: page.wait_for_timeout(20) or any(f[2] for f in frames), timeout=30, what="full rerun")
                    page.wait_for_timeout(300)
                    full_runs.append(_per_run(frames)[0] if _per_run(frames) else 0)
            page.screenshot(path=str(REPO / "bench" / "out" / "dashboard-1m.png"), full_page=False)
        floor = first_chart_floor(url, run)  # after that browser has closed
    return {
        "floor": floor,
        "latency": latencies,
        "fragment_bytes": fragment_bytes,
        "idle_bytes": idle_bytes,
        "full_bytes": full_runs,
        "first_chart_s": first_chart,
    }


def first_chart_floor(url: str, run: BigRun) -> dict[str, float]:
    """First chart in a fresh browser (nothing cached) on the now warm server: a 1,000-step run (the floor:
    Streamlit's and Plotly's JavaScript loading and starting) against the 1M-step run."""
    from tests.browser.harness import chart_state, chromium_page, poll

    small = run.dir.parent / "small"
    if not small.exists():
        shutil.copytree(run.dir, small, ignore=shutil.ignore_patterns("*.jsonl"))
        with open(run.path, "rb") as src, open(small / "metrics.jsonl", "wb") as dst:
            dst.writelines(line for _, line in zip(range(1000), src, strict=False))
        meta_path = small / "metrics.meta.json"
        meta = orjson.loads(meta_path.read_bytes())
        meta.update(name="small", total_steps=2000)
        meta_path.write_bytes(orjson.dumps(meta))
    out = {}
    for name in ("small", RUN):
        with chromium_page() as page:
            opened = time.monotonic()
            page.goto(f"{url}/?run={name}", wait_until="domcontentloaded")
            poll(lambda page=page: chart_state(page, "chart_loss_lr", "loss"), timeout=120, what=f"{name}'s chart")
            out[name] = time.monotonic() - opened
    return out


def _per_run(frames: list[tuple[float, int, bool]]) -> list[int]:
    """Bytes of each script run: frames up to and including its script_finished message."""
    runs, acc = [], 0
    for _, size, finished in frames:
        acc += size
        if finished:
            runs.append(acc)
            acc = 0
    return runs


# ----------------------------------------------------------------------------- main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument(
        "--no-diagnosis", action="store_true", help="skip the diagnosis (findings) to time the charts alone"
    )
    args = parser.parse_args()
    if args.no_diagnosis:
        from pages import _findings

        _findings.run_findings = lambda *a, **k: []  # the AppTest scripts import the same module
    (REPO / "bench" / "out").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        root = tmp / "logs"
        t = time.perf_counter()
        run = BigRun(root, args.steps)
        size_mb = run.path.stat().st_size / 1e6
        print(f"run: {args.steps:,} steps, {size_mb:.0f} MB, written in {time.perf_counter() - t:.1f} s")
        os.environ["MONITOR_LOGDIR"] = str(root)

        parts = breakdown(run, args.repeats)
        print(
            "refresh breakdown (median, no Streamlit): "
            f"poll+frame {parts['poll+frame'] * 1e3:.1f} ms, KPIs+figures {parts['kpis+figures'] * 1e3:.1f} ms, "
            f"plotly JSON {parts['to_json'] * 1e3:.1f} ms, {parts['json_bytes'] / 1e3:.0f} kB of figure JSON"
        )
        server = server_time(run, args.repeats)
        print(
            f"load of the run by a fresh RunStore: {server['cold_load_s'] * 1e3:.0f} ms without the columnar cache, "
            f"{server['cached_load_s'] * 1e3:.0f} ms with it"
        )
        for name, label in (("fragment", "live refresh (fragment)"), ("full", "full-page rerun (baseline)")):
            ts = server["times"][name]
            print(
                f"server time per {label}: median {statistics.median(ts) * 1e3:.0f} ms, "
                f"max {max(ts) * 1e3:.0f} ms; element bytes {statistics.median(server['sizes'][name]) / 1e3:.0f} kB"
            )
        body = server["body"]
        print(
            f"    the fragment body timed inside the script (what a server spends on it): "
            f"median {statistics.median(body) * 1e3:.0f} ms, max {max(body) * 1e3:.0f} ms"
        )
        if not args.no_browser:
            result = browser(run, tmp, samples=6)
            if isinstance(result, str):
                print(f"browser: {result}")
            else:
                lat = result["latency"]
                first = result["first_chart_s"]
                print(f"first chart in the browser on a fresh server (the cache written above): {first:.2f} s")
                floor = result["floor"]
                print(
                    f"first chart in a fresh browser on the warm server: 1M-step run {floor[RUN]:.2f} s, "
                    f"1,000-step run {floor['small']:.2f} s (the browser's floor: Streamlit's and Plotly's "
                    f"JavaScript), so the 1M-step run adds {floor[RUN] - floor['small']:+.2f} s"
                )
                print(
                    f"record written -> drawn in the browser (1 s refresh): median {statistics.median(lat):.2f} s, "
                    f"max {max(lat):.2f} s over {len(lat)} records"
                )
                fb = result["fragment_bytes"]
                print(
                    f"websocket bytes per live refresh: median {statistics.median(fb) / 1e3:.0f} kB "
                    f"over {len(fb)} refreshes; per full-page rerun (baseline): "
                    f"median {statistics.median(result['full_bytes']) / 1e3:.0f} kB"
                )
                idle = result["idle_bytes"]
                if idle:
                    idle_kb = statistics.median(idle) / 1e3
                    print(f"websocket bytes per refresh with no new record: median {idle_kb:.1f} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
