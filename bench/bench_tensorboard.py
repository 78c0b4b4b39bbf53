"""Benchmark: one MindFormers TensorBoard run opened in TensorBoard and in the project, both in one run.

Usage: ``.venv/bin/python bench/bench_tensorboard.py [--steps 1000000] [--data DIR] [--no-browser] [--jsonl]
[--breakdown] [--before-after] [--rounds N]``

The data: ``--steps`` steps written by tensorboardX with MindFormers' tag names (``loss`` and
``grad-norm`` every step, ``learning-rate`` every 10; ``SummaryWriter(dir, max_queue=10000)``), one
event file (98 MB for 1M steps, about 200 s to write on this machine). ``--data DIR`` keeps it
between runs (it is written again only when the step count differs).

Printed, in one run:

* in-process: ``RunStore`` listing and reading the run, cold (no cache) and cached (a second store
  after the first wrote the columnar cache), to the frame in memory;
* TensorBoard (``tensorboard --logdir DIR``, its Rust data server by default): from the server
  process's start to the loss card's data arriving in a real Chromium page (``?tagFilter=loss``:
  the loss group opens, as a user asking for it would; TensorBoard sends 1,000 samples a tag);
* the project (``streamlit run dashboard.py -- --logdir DIR``, ``/?run=tbrun``): from the server
  process's start to the Live page's loss chart reaching the last step, at full resolution, with
  a cold cache and then again (a new server) with the cache the first one wrote;
* the ratios project / TensorBoard (below 1: the project is faster);
* with ``--jsonl``, the issue's other comparison: a run of the same steps in our own format (one
  ``metrics.jsonl`` of 9 metrics and its metadata, as ``bench/bench_dashboard.py`` writes it) on a
  fresh server with no cache, to its loss chart at the last step, against TensorBoard's time above;
* the floor of both tools: the same measurements on a 1,000-step run (what starting the server and
  the page costs whatever the data: Streamlit's server and bundles and first websocket against
  TensorBoard's), so what the data itself adds can be told apart; and Streamlit's own floor, a one-chart
  app (``bench/streamlit_floor_app.py``) timed the same way: what any Streamlit app pays, so what the
  project's page adds to it can be told apart too.
* with ``--breakdown``, where the project's time goes, each moment from the server's start: the port
  answers, Chromium launched, the HTML and Streamlit's bundles loaded, the websocket open, the first
  script run's start, first element, loss figure and end (the websocket's frames parsed as Streamlit's
  ``ForwardMsg``), Streamlit's Plotly chunk loaded, the chart drawn;
* with ``--before-after``, each project figure also without the server's first-chart aids
  (``MONITOR_PREWARM=off MONITOR_PRELOAD=off``: no listing and read at start, no Plotly module with the
  page), measured just before it; ``--rounds N`` repeats each pair N times in turn and prints medians.

The machine is shared: ``uptime``'s load is printed with the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

RUN = "tbrun"
MARKER = ".bench-steps"  # hidden: neither TensorBoard nor discovery reads it


# ----------------------------------------------------------------------------- the data
def write_events(run_dir: Path, steps: int) -> float:
    """The event file as MindFormers' tensorboardX writer leaves it; seconds it took (0: reused)."""
    marker = run_dir / MARKER
    if marker.exists() and marker.read_text().strip() == str(steps):
        return 0.0
    from tensorboardX import SummaryWriter

    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    started = time.perf_counter()
    writer = SummaryWriter(str(run_dir), max_queue=10000)
    for step in range(1, steps + 1):
        writer.add_scalar("loss", 2.0 * math.exp(-step / steps) + 0.01 * math.sin(step), step)
        writer.add_scalar("grad-norm", 1.0 + 0.1 * math.cos(step), step)
        if step % 10 == 0:
            writer.add_scalar("learning-rate", 1e-4 * (1 - step / steps), step)
    writer.close()
    marker.write_text(str(steps))
    return time.perf_counter() - started


def clear_cache(root: Path) -> None:
    shutil.rmtree(root / ".monitor", ignore_errors=True)


# ----------------------------------------------------------------------------- in process
def in_process(root: Path) -> dict[str, float]:
    from monitor_cb.ingest import RunStore

    clear_cache(root)
    started = time.perf_counter()
    store = RunStore(root, cache=False)
    store.list_runs()
    frame = store.read(RUN).frame
    cold = time.perf_counter() - started
    rows = len(frame)
    del store, frame

    writer = RunStore(root, cache=True)  # writes the cache as it reads
    writer.list_runs()
    writer.cache.wait()
    del writer
    started = time.perf_counter()
    store = RunStore(root, cache=True)
    store.list_runs()
    frame = store.read(RUN).frame
    cached = time.perf_counter() - started
    hits = store._runs[RUN].tensorboard.cache_hits
    return {"cold_s": cold, "cached_s": cached, "rows": rows, "last_step": int(frame["step"].iloc[-1]), "hits": hits}


# ----------------------------------------------------------------------------- TensorBoard
def tensorboard_time(root: Path, steps: int, log: Path) -> float:
    """Seconds from ``tensorboard --logdir`` starting to the loss series' last step arriving in the page."""
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
        with chromium_page() as page:

            def on_response(response: Any) -> None:
                if "timeSeries" not in response.url:
                    return
                try:
                    series = json.loads(response.text())
                except Exception:  # noqa: BLE001 - another kind of response
                    return
                for item in series if isinstance(series, list) else []:
                    points = (item.get("runToSeries") or {}).get(RUN) or []
                    if item.get("tag") == "loss" and points and points[-1].get("step") == steps:
                        arrived.append(time.monotonic())

            page.on("response", on_response)
            page.goto(f"{url}/?tagFilter=loss", wait_until="domcontentloaded")
            deadline = time.monotonic() + 300
            reloaded = time.monotonic()
            while not arrived:
                page.wait_for_timeout(50)
                if time.monotonic() > deadline:
                    raise TimeoutError("TensorBoard's loss data did not arrive in 300 s")
                if time.monotonic() - reloaded > 30:  # what a user does when the card stays empty
                    page.reload(wait_until="domcontentloaded")
                    reloaded = time.monotonic()
        return arrived[0] - started
    finally:
        proc.terminate()
        proc.wait()


def tensorboard_median(args: argparse.Namespace, root: Path, steps: int, log: Path) -> float:
    """TensorBoard's time, ``--rounds`` times (each printed), the median (the ratios' baseline)."""
    times = []
    for _ in range(max(1, args.rounds)):
        times.append(tensorboard_time(root, steps, log))
        print(f"TensorBoard ({steps:,} steps): server start -> loss data in the page: {times[-1]:.2f} s ({load()})")
    if len(times) > 1:
        print(f"  median, TensorBoard ({steps:,} steps): {statistics.median(times):.2f} s")
    return statistics.median(times)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


# ----------------------------------------------------------------------------- the project
# The phases of the project's time (``--breakdown``), each in seconds from the server process's start:
PHASES = (
    ("port", "server process start -> the port answers (/_stcore/health)"),
    ("browser", "headless Chromium launched (the same cost in TensorBoard's time)"),
    ("html", "the page's HTML loaded (DOMContentLoaded)"),
    ("bundles", "Streamlit's other JS/CSS bundles loaded (the last one before the websocket)"),
    ("ws_open", "the websocket opened"),
    ("new_session", "the first script run started (its newSession message arrived)"),
    ("first_delta", "the first element arrived"),
    ("chart_delta", "the loss chart's figure arrived"),
    ("plotly_js", "Streamlit's Plotly chunk loaded (PlotlyChart.*.js)"),
    ("finished", "the first script run finished (scriptFinished)"),
    ("drawn", "the loss chart drawn at the last step"),
)


FLOOR_APP = REPO / "bench" / "streamlit_floor_app.py"  # Streamlit's own floor: one chart, nothing else


def project_time(
    root: Path, steps: int, log: Path, run: str = RUN, phases: dict[str, Any] | None = None, script: Path | None = None
) -> float:
    """Seconds from ``streamlit run dashboard.py`` starting to the loss chart showing the last step.

    ``phases``: filled with the moments of :data:`PHASES` (and ``plotly_kb``, the chunk's size).
    ``script``: another app to serve instead (:data:`FLOOR_APP`)."""
    from tests.browser.harness import DASHBOARD, chart_state, chromium_page, poll, streamlit_server

    marks: dict[str, Any] = {} if phases is None else phases
    started = time.monotonic()

    def mark(name: str) -> None:
        marks.setdefault(name, time.monotonic() - started)

    with streamlit_server(root, log, script=script or DASHBOARD) as url:
        mark("port")
        with chromium_page() as page:
            mark("browser")
            if phases is not None:
                _watch(page, marks, started, mark)
            page.goto(f"{url}/?run={run}", wait_until="domcontentloaded")
            mark("html")

            def done() -> bool:
                page.wait_for_timeout(20)  # lets Playwright deliver the page's events
                return ((chart_state(page, "chart_loss_lr", "loss") or {}).get("maxX") or 0) >= steps

            poll(done, 600, 0.02, "the loss chart to reach the last step")
            took = time.monotonic() - started
            mark("drawn")
            page.screenshot(path=str(log.with_suffix(".png")))
    return took


def _watch(page: Any, marks: dict[str, Any], started: float, mark: Any) -> None:
    """Record the page's network and websocket moments into ``marks`` (see :data:`PHASES`)."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    def on_finished(request: Any) -> None:  # the whole body arrived
        kind = request.resource_type
        if kind not in ("script", "stylesheet"):
            return
        if "/PlotlyChart." in request.url:
            mark("plotly_js")
            with contextlib.suppress(Exception):  # no sizes for this one
                marks["plotly_kb"] = request.sizes()["responseBodySize"] / 1000
        elif "ws_open" not in marks:
            marks["bundles"] = time.monotonic() - started

    def on_frame(payload: Any) -> None:
        if not isinstance(payload, bytes):
            return
        msg = ForwardMsg()
        try:
            msg.ParseFromString(payload)
        except Exception:  # noqa: BLE001 - not one of Streamlit's messages
            return
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            mark("new_session")
        elif kind == "script_finished":
            mark("finished")
        elif kind == "delta":
            mark("first_delta")
            element = msg.delta.new_element
            if element.WhichOneof("type") == "plotly_chart" and b"chart_loss_lr" in payload:
                mark("chart_delta")
                marks.setdefault("chart_kb", len(payload) / 1000)

    def on_websocket(ws: Any) -> None:
        mark("ws_open")
        ws.on("framereceived", on_frame)

    page.on("requestfinished", on_finished)
    page.on("websocket", on_websocket)


def print_breakdown(label: str, marks: dict[str, Any]) -> None:
    """One line per phase: when it ended (from the server's start) and what it took after the one before."""
    print(f"  breakdown, {label}:")
    before = 0.0
    for name, what in PHASES:
        at = marks.get(name)
        if at is None:
            print(f"    {name:<12} -        {what}")
            continue
        extra = f" ({marks['plotly_kb']:.0f} kB)" if name == "plotly_js" and "plotly_kb" in marks else ""
        extra = f" ({marks['chart_kb']:.0f} kB message)" if name == "chart_delta" and "chart_kb" in marks else extra
        print(f"    {name:<12} {at:6.2f} s  {at - before:+6.2f} s  {what}{extra}")
        before = max(before, at)


def project_pair(
    args: argparse.Namespace, label: str, root: Path, steps: int, log: Path, run: str = RUN, cold: bool = False
) -> tuple[float, float | None]:
    """The project's time as shipped and, with ``--before-after``, just before it without the server's first-chart
    aids (``MONITOR_PREWARM=off MONITOR_PRELOAD=off``), ``--rounds`` times in turn (a shared machine's load
    drifts: pairs side by side, then medians): ``(as shipped, without or None)``, each measurement printed, with
    its phases under ``--breakdown``. ``cold``: the columnar cache is removed before each."""
    variants = (["without the aids"] if args.before_after else []) + [""]
    took: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(max(1, args.rounds)):
        for variant in variants:
            if cold:
                clear_cache(root)
            marks: dict[str, Any] = {}
            if variant:
                os.environ.update({"MONITOR_PREWARM": "off", "MONITOR_PRELOAD": "off"})
            try:
                name = log.with_name(log.stem + ("-before" if variant else "") + log.suffix)
                took[variant].append(project_time(root, steps, name, run, marks))
            finally:
                os.environ.pop("MONITOR_PREWARM", None)
                os.environ.pop("MONITOR_PRELOAD", None)
            what = f"{label}, {variant}" if variant else label
            at = took[variant][-1]
            print(f"project, {what}: server start -> loss chart at step {steps:,}: {at:.2f} s ({load()})")
            if args.breakdown and args.rounds > 1:
                print(f"    {phase_line(marks)}")
            elif args.breakdown:
                print_breakdown(what, marks)
    if args.rounds > 1:
        for variant in variants:
            times = ", ".join(f"{t:.2f}" for t in took[variant])
            what = f"{label}, {variant}" if variant else label
            print(f"  median, {what}: {statistics.median(took[variant]):.2f} s ({times})")
    before = statistics.median(took[variants[0]]) if args.before_after else None
    return statistics.median(took[""]), before


def phase_line(marks: dict[str, Any]) -> str:
    """One line of phases: the port, Chromium to the websocket, websocket to the loss figure, figure to drawn."""
    got = {k: marks.get(k) for k in ("port", "browser", "ws_open", "chart_delta", "drawn")}
    if None in got.values():
        return "phases: " + ", ".join(f"{k} {v:.2f}" for k, v in got.items() if v is not None)
    return (
        f"port {got['port']:.2f} s, Chromium -> websocket {got['ws_open'] - got['browser']:.2f} s, "
        f"websocket -> loss figure {got['chart_delta'] - got['ws_open']:.2f} s, figure -> drawn "
        f"{got['drawn'] - got['chart_delta']:.2f} s"
    )


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


# ----------------------------------------------------------------------------- main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000, help="steps to write (quick mode: --steps 50000)")
    parser.add_argument("--data", type=Path, default=None, help="keep the event files here between runs")
    parser.add_argument("--no-browser", action="store_true", help="only the in-process figures")
    parser.add_argument("--no-floor", action="store_true", help="skip the 1,000-step run (the fixed costs)")
    parser.add_argument("--jsonl", action="store_true", help="also a run of the same steps in our JSONL format")
    parser.add_argument(
        "--before-after",
        action="store_true",
        help="each project figure also without the server's first-chart aids (MONITOR_PREWARM/PRELOAD=off)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="each project figure this many times (medians)")
    parser.add_argument(
        "--breakdown", action="store_true", help="where the project's time goes: server, bundles, websocket, script run"
    )
    args = parser.parse_args()

    base = args.data or Path(tempfile.mkdtemp(prefix="bench_tb_"))
    root = base / "root"
    wrote = write_events(root / RUN, args.steps)
    size = sum(p.stat().st_size for p in (root / RUN).iterdir() if p.name != MARKER)
    print(f"data: {args.steps:,} steps, {size / 1e6:.0f} MB" + (f", written in {wrote:.0f} s" if wrote else ", reused"))
    print(f"load before: {load()}")

    got = in_process(root)
    print(
        f"in process: RunStore list+read cold {got['cold_s']:.2f} s, cached {got['cached_s']:.2f} s "
        f"({got['rows']:,} rows, last step {got['last_step']:,}, cache hits {got['hits']})"
    )
    if args.no_browser:
        return 0
    logs = base / "logs"
    logs.mkdir(exist_ok=True)
    tb = tensorboard_median(args, root, args.steps, logs / "tensorboard.log")
    cold, cold_before = project_pair(args, "cold cache", root, args.steps, logs / "project-cold.log", cold=True)
    cached, cached_before = project_pair(args, "cached", root, args.steps, logs / "project-cached.log")
    print(
        f"ratios (project / TensorBoard; below 1 is faster): cold {cold / tb:.2f}, cached {cached / tb:.2f}; "
        f"in process cached / TensorBoard {got['cached_s'] / tb:.2f}"
    )
    if cold_before is not None and cached_before is not None:
        print(f"ratios without the first-chart aids: cold {cold_before / tb:.2f}, cached {cached_before / tb:.2f}")
    if args.jsonl:
        sys.path.insert(0, str(REPO / "bench"))
        from bench_dashboard import RUN as JSONL_RUN
        from bench_dashboard import BigRun

        jsonl_root = base / "jsonl"
        if not (jsonl_root / JSONL_RUN / "metrics.jsonl").exists():
            BigRun(jsonl_root, args.steps)
        label = f"JSONL run of {args.steps:,} steps, fresh server, no cache"
        own, own_before = project_pair(args, label, jsonl_root, args.steps, logs / "project-jsonl.log", JSONL_RUN, True)
        without = "" if own_before is None else f", without the aids {own_before / tb:.2f}"
        print(f"JSONL run: ratio to TensorBoard on the same steps {own / tb:.2f}{without} ({load()})")
    if not args.no_floor:
        small = base / "small"
        write_events(small / RUN, 1000)
        tb_floor = tensorboard_median(args, small, 1000, logs / "tensorboard-small.log")
        floor, floor_before = project_pair(args, "floor", small, 1000, logs / "project-small.log", cold=True)
        print(
            f"floor (1,000 steps): TensorBoard {tb_floor:.2f} s, project {floor:.2f} s; what the data adds: "
            f"TensorBoard {tb - tb_floor:+.2f} s, project cold {cold - floor:+.2f} s, cached {cached - floor:+.2f} s "
            f"({load()})"
        )
        if floor_before is not None:
            print(f"floor ratio to TensorBoard: {floor / tb_floor:.2f}, without the aids {floor_before / tb_floor:.2f}")
        bare = [
            project_time(small, 1000, logs / f"streamlit-floor-{i}.log", script=FLOOR_APP) for i in range(args.rounds)
        ]
        st_floor = statistics.median(bare)
        print(
            f"Streamlit's own floor (a one-chart app, 1,000 points): {st_floor:.2f} s, {st_floor / tb_floor:.2f}x "
            f"TensorBoard's; what the project's page adds to it: {floor - st_floor:+.2f} s ({load()})"
        )
    print(f"screenshots and server logs: {logs}")
    if args.data is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.pop("MONITOR_LOGDIR", None)
    sys.exit(main())
