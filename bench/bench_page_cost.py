"""Benchmark: what each part of the Live page costs its first chart, in a real headless Chromium.

Usage: ``.venv/bin/python bench/bench_page_cost.py [--rounds 5] [--variant SPEC ...] [--timeline] [--profile]
[--data DIR]``

The run is ``bench/bench_tensorboard.py``'s floor: 1,000 steps written by tensorboardX as MindFormers writes
them. Each variant is timed as ``bench_tensorboard.project_time`` times the project: from ``streamlit run``
starting to the Live page's loss chart drawn at the last step. The variants run in turn, ``--rounds`` times
(a shared machine's load drifts), and the medians are printed with ``uptime``'s load, the phases (the port
answers, Chromium launched, the HTML's DOMContentLoaded, the websocket created, its first element and loss
figure as the page's main thread took them) and what the browser did until the chart was drawn (Chromium's
``Performance.getMetrics``: script, layout and style seconds; the long tasks' total from a
``PerformanceObserver``). ``--timeline``: each page's websocket moments (created, open, sends, messages) and
long tasks, in seconds before the chart was found drawn. ``--profile``: each page's CPU profile (self time by
script and by function).

A variant: ``LABEL`` alone is the dashboard as it is; ``LABEL|env=NAME=VALUE`` sets an environment variable for
its server (``"no preload|env=MONITOR_PRELOAD=off"``); ``LABEL|patch=FILE`` serves a copy of the repository with
the ``git diff`` FILE applied (a part switched off by a temporary edit: nothing of it ships; several
``patch=`` parts: all of them, in turn); ``LABEL|floor`` serves ``bench/streamlit_floor_app.py`` (Streamlit's
own floor: one chart, nothing else). Default: the dashboard, the same without the Plotly preload, and
Streamlit's floor. The edits measured for docs/TENSORBOARD.md, each a line or two made and diffed (``git diff
FILE > x.diff``, then ``git checkout FILE``): ``chart_events`` in ``pages/_zoom.py`` returning ``(None, None)``
before it mounts the listener; ``DEFAULT_PANELS = ("loss_lr",)``; ``chart_controls`` returning
``ChartSettings()`` before its pills; ``show`` without ``show_kpis`` and ``_findings.headline``; ``set_page_config``
without ``page_icon``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

STEPS = 1000
DEFAULT_VARIANTS = ("as is", "no preload|env=MONITOR_PRELOAD=off", "Streamlit floor|floor")

# Run in the page before its own scripts: the long tasks' total until the chart is drawn, and when (page
# milliseconds) the websocket was created, opened, first sent (the request for the first script run) and first
# handed a message to the page's code (Playwright's frame events come when the page's main thread takes them).
_IN_PAGE = """
window.__longTasks = { n: 0, ms: 0 };
window.__events = [];
const note = (what) => { if (window.__events.length < 60) window.__events.push([what, performance.now()]); };
try {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      window.__longTasks.n += 1;
      window.__longTasks.ms += e.duration;
      note("long task " + Math.round(e.duration) + " ms from " + Math.round(e.startTime));
    }
  }).observe({ type: "longtask", buffered: true });
} catch (e) {}
const Native = window.WebSocket;
const sendNative = Native.prototype.send;
window.WebSocket = function (...args) {
  const ws = new Native(...args);
  note("ws created");
  ws.addEventListener("open", () => note("ws open"));
  ws.addEventListener("message", (ev) => note("ws message " + (ev.data.byteLength || ev.data.size || 0) + " B"));
  return ws;
};
window.WebSocket.prototype = Native.prototype;
Object.assign(window.WebSocket, { CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3 });
Native.prototype.send = function (...args) {
  note("ws send");
  return sendNative.apply(this, args);
};
"""
_CDP_METRICS = ("ScriptDuration", "LayoutDuration", "RecalcStyleDuration", "TaskDuration")


@dataclass
class Variant:
    """One way of serving the page: its label, the app's directory and script, extra environment."""

    label: str
    repo: Path = REPO
    script: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    times: list[dict[str, float]] = field(default_factory=list)


def parse_variant(spec: str, workdir: Path) -> Variant:
    """``LABEL[|env=NAME=VALUE][|patch=FILE][|floor]`` (see the module's docstring)."""
    label, *parts = spec.split("|")
    variant = Variant(label.strip())
    for part in parts:
        if part == "floor":
            variant.script = REPO / "bench" / "streamlit_floor_app.py"
        elif part.startswith("env="):
            name, _, value = part[4:].partition("=")
            variant.env[name] = value
        elif part.startswith("patch="):  # several: applied in turn to one copy
            if variant.repo == REPO:
                variant.repo = fresh_copy(workdir / f"v{len(list(workdir.iterdir()))}")
            subprocess.run(["git", "apply", str(Path(part[6:]).resolve())], cwd=variant.repo, check=True)
        else:
            raise SystemExit(f"not understood in --variant {spec!r}: {part!r}")
    if variant.script is None:
        variant.script = variant.repo / "dashboard.py"
    return variant


def fresh_copy(into: Path) -> Path:
    """A copy of the repository's files (not its .git), for patches."""
    shutil.copytree(REPO, into, ignore=shutil.ignore_patterns(".git", "__pycache__", "logs"))
    return into


@contextlib.contextmanager
def served_from(variant: Variant) -> Iterator[None]:
    """The harness starts servers in the variant's directory (its ``pages/`` and ``monitor_cb/`` imported),
    with its environment."""
    import tests.browser.harness as harness

    saved_repo, saved_env = harness.REPO, dict(os.environ)
    harness.REPO = variant.repo
    os.environ.update(variant.env)
    try:
        yield
    finally:
        harness.REPO = saved_repo
        os.environ.clear()
        os.environ.update(saved_env)


def measure(variant: Variant, root: Path, log: Path, timeline: bool = False, profile: bool = False) -> dict[str, float]:
    """Server start -> loss chart drawn at the last step, with the phases and the browser's own figures."""
    from bench_tensorboard import RUN, _watch

    from tests.browser.harness import chart_state, chromium_page, poll, streamlit_server

    marks: dict[str, Any] = {}
    started = time.monotonic()

    def mark(name: str) -> None:
        marks.setdefault(name, time.monotonic() - started)

    with served_from(variant), streamlit_server(root, log, script=variant.script) as url:
        mark("port")
        with chromium_page() as page:
            mark("browser")
            page.add_init_script(_IN_PAGE)
            cdp = page.context.new_cdp_session(page)
            cdp.send("Performance.enable")
            if profile:
                cdp.send("Profiler.enable")
                cdp.send("Profiler.setSamplingInterval", {"interval": 500})
                cdp.send("Profiler.start")
            _watch(page, marks, started, mark)
            page.goto(f"{url}/?run={RUN}", wait_until="domcontentloaded")
            mark("html")

            def done() -> bool:
                page.wait_for_timeout(20)
                return ((chart_state(page, "chart_loss_lr", "loss") or {}).get("maxX") or 0) >= STEPS

            poll(done, 120, 0.02, "the loss chart to reach the last step")
            marks["drawn"] = time.monotonic() - started
            metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
            long_tasks = page.evaluate("window.__longTasks")
            events = page.evaluate("[window.__events, performance.now()]")
            if profile:
                print_profile(cdp.send("Profiler.stop")["profile"])
    out = {k: float(v) for k, v in marks.items() if isinstance(v, (int, float))}
    out.update({name: float(metrics.get(name, 0.0)) for name in _CDP_METRICS})
    out["long_ms"] = float(long_tasks.get("ms", 0.0)) if long_tasks else 0.0
    out["long_n"] = float(long_tasks.get("n", 0.0)) if long_tasks else 0.0
    if timeline:  # page milliseconds, as seconds before the chart was found drawn
        now = events[1]
        print("    in page (s before drawn): " + ", ".join(f"{w} {(t - now) / 1000:.2f}" for w, t in events[0]))
    return out


def print_profile(profile: dict[str, Any], top: int = 18) -> None:
    """The page's CPU profile until the chart was drawn: self time by script and by function, the largest."""
    nodes = {n["id"]: n for n in profile["nodes"]}
    step: dict[int, float] = {}
    for node_id, delta in zip(profile["samples"], profile["timeDeltas"], strict=False):
        step[node_id] = step.get(node_id, 0) + delta
    by_file: dict[str, float] = {}
    by_function: dict[str, float] = {}
    for node_id, us in step.items():
        frame = nodes[node_id]["callFrame"]
        name = frame["url"].rsplit("/", 1)[-1] or f"({frame['functionName'] or 'program'})"
        by_file[name] = by_file.get(name, 0) + us / 1e6
        where = f"{frame['functionName'] or '(anonymous)'} {name}:{frame['lineNumber']}"
        by_function[where] = by_function.get(where, 0) + us / 1e6
    busy = sum(v for k, v in by_file.items() if k != "((idle))")
    print(f"    CPU profile: {busy:.2f} s busy on the page's main thread until the chart was drawn")
    for title, table in (("script", by_file), ("function", by_function)):
        biggest = sorted(table.items(), key=lambda kv: -kv[1])[:top]
        print(f"    self time by {title}: " + ", ".join(f"{k} {v:.3f}" for k, v in biggest))


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip().split("load average:")[-1].strip()


def line(got: dict[str, float]) -> str:
    """One measurement: drawn, websocket phases, the browser's figures."""

    def at(name: str) -> float:
        return got.get(name, float("nan"))

    ws = at("ws_open")
    return (
        f"drawn {at('drawn'):.2f} s | port {at('port'):.2f}, Chromium +{at('browser') - at('port'):.2f}, "
        f"websocket +{ws - at('browser'):.2f} = {ws:.2f} (HTML's DOMContentLoaded {at('html') - ws:+.2f}), "
        f"1st element +{at('first_delta') - ws:.2f}, loss figure +{at('chart_delta') - ws:.2f}, drawn "
        f"+{at('drawn') - ws:.2f} | script {at('ScriptDuration'):.2f} s, layout {at('LayoutDuration'):.2f} s, "
        f"style {at('RecalcStyleDuration'):.2f} s, tasks {at('TaskDuration'):.2f} s, long tasks {at('long_n'):.0f} "
        f"= {at('long_ms') / 1000:.2f} s"
    )


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    keys = set().union(*runs) if runs else set()
    return {k: statistics.median(r[k] for r in runs if k in r) for k in keys}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="each variant this many times, in turn (medians)")
    parser.add_argument("--variant", action="append", help="LABEL[|env=NAME=VALUE][|patch=FILE][|floor]; repeatable")
    parser.add_argument("--timeline", action="store_true", help="print each page's websocket and long-task moments")
    parser.add_argument("--profile", action="store_true", help="print each page's CPU profile (self time)")
    parser.add_argument("--data", type=Path, default=None, help="keep the run (and the logs) here")
    args = parser.parse_args()

    from bench_tensorboard import RUN, write_events

    base = args.data or Path(tempfile.mkdtemp(prefix="bench_page_cost_"))
    root = base / "small"
    write_events(root / RUN, STEPS)
    logs = base / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    copies = Path(tempfile.mkdtemp(prefix="bench_page_variants_"))
    try:
        variants = [parse_variant(spec, copies) for spec in (args.variant or DEFAULT_VARIANTS)]
        print(f"{STEPS:,}-step TensorBoard run; {len(variants)} variants x {args.rounds} rounds; load {load()}")
        for n in range(args.rounds):
            for i, variant in enumerate(variants):
                shutil.rmtree(root / ".monitor", ignore_errors=True)  # each server reads the run cold
                got = measure(variant, root, logs / f"v{i}-{n}.log", args.timeline, args.profile)
                variant.times.append(got)
                print(f"  round {n + 1}, {variant.label:<24} {line(got)} (load {load()})", flush=True)
        print(f"medians of {args.rounds} rounds (load {load()}):")
        first = statistics.median(t["drawn"] for t in variants[0].times)
        for variant in variants:
            med = medians(variant.times)
            drawn = sorted(t["drawn"] for t in variant.times)
            print(
                f"  {variant.label:<24} {line(med)}; drawn range {drawn[0]:.2f}-{drawn[-1]:.2f} s, "
                f"{med['drawn'] - first:+.2f} s against {variants[0].label!r}"
            )
    finally:
        shutil.rmtree(copies, ignore_errors=True)
        if args.data is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.pop("MONITOR_LOGDIR", None)
    sys.exit(main())
