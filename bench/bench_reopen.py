"""Benchmark: issue 35's four cases against ``tensorboard --logdir`` and a one-chart Streamlit floor, in one run.

Usage: ``.venv/bin/python bench/bench_reopen.py [--quick] [--steps N] [--runs R] [--run-steps M] [--rounds K]
[--data DIR] [--no-cold] [--copies]``

Cases (each contender's servers already running and warmed by one visit, unless said otherwise):

* **reopen, cache kept**: a new tab in a browser context that opened the page before (HTTP cache kept,
  a new Streamlit session), to the loss chart at the last step of a ``--steps`` run;
* **reopen, fresh context**: the same in a new browser context (nothing cached);
* **20 runs**: ``--runs`` runs of ``--run-steps`` steps, every run's loss: TensorBoard's time series
  (``?tagFilter=loss``) against our Compare page (``/compare?runs=...&metric=loss``), fresh context;
* **cold** (unless ``--no-cold``): server start to the whole chart, as ``bench/bench_tensorboard.py``
  times it (no columnar cache).

The contenders are taken in turn, round after round (``--rounds``, medians): the machine is shared and
its load drifts. TensorBoard is timed to its data for the last step arriving (it sends 1,000 samples a
tag), ours and the floor's to the Plotly trace reaching it, as in ``bench_tensorboard.py``. The floor
(``bench/streamlit_floor_app.py``) draws 1,000 points whatever the run.

The breakdown of each reopen (medians): server script time (Streamlit's ``newSession`` to
``scriptFinished`` frames; ``-`` for TensorBoard), bytes received (HTTP bodies as sent, i.e. not from the
cache, plus websocket frames), browser script time and layout+style time (Chromium's
``Performance.getMetrics`` ``ScriptDuration`` and ``LayoutDuration + RecalcStyleDuration`` of the tab).

After the many-runs case, each server's resident memory (its process and children: TensorBoard's Rust data
server): the heap (anonymous pages) and mapped files (page cache) apart. ``--copies`` makes the many runs copies
of one written run (20 x 1M steps in seconds instead of an hour of tensorboardX); item 4 of issue 35 is
``--copies --run-steps 1000000``.

``--quick``: a 50k-step run, 20 runs of 2k steps, 3 rounds (a few minutes on a quiet machine).
The load (``uptime``) is printed with every figure; only the ratios of one run mean anything.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_tensorboard import (  # noqa: E402 - the bench directory is put on the path just above
    FLOOR_APP,
    MARKER,
    RUN,
    _answers,
    clear_cache,
    load,
    project_time,
    tensorboard_time,
    write_events,
)

# Every trace of a chart (by container key) with its largest x: what the page really shows.
JS_TRACES = """
(key) => {
  const gd = document.querySelector('.st-key-' + key + ' .js-plotly-plot');
  if (!gd || !gd._fullData) return null;
  const out = {};
  for (const t of gd._fullData) {
    let m = null;
    for (let i = 0; t.x && i < t.x.length; i++) { const v = Number(t.x[i]); if (m === null || v > m) m = v; }
    out[t.name] = m;
  }
  return out;
}
"""


@dataclass
class Visit:
    """One page opening: seconds to the last step, and where the time and bytes went."""

    seconds: float
    server_s: float | None = None
    bytes_in: int = 0
    script_s: float = 0.0
    layout_s: float = 0.0


@dataclass
class Contender:
    """A page to open: its URL, and when it is done (``page`` -> bool), given the responses seen."""

    name: str
    url: str
    tensorboard: bool
    wanted: dict[str, int]  # run -> last step (TensorBoard: from its responses; ours: Plotly traces)
    chart_key: str = "chart_loss_lr"
    visits: dict[str, list[Visit]] = field(default_factory=dict)


def open_once(context: Any, who: Contender) -> Visit:
    """Open ``who.url`` in a new tab of ``context``; a :class:`Visit` once every wanted run reaches its step."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")
    cdp.send("Network.enable")
    got: dict[str, Any] = {"bytes": 0, "arrived": set(), "session": None, "finished": None}

    def on_loaded(event: dict[str, Any]) -> None:
        got["bytes"] += int(event.get("encodedDataLength") or 0)

    def on_frame(payload: Any) -> None:
        if not isinstance(payload, bytes):
            return
        got["bytes"] += len(payload)
        msg = ForwardMsg()
        with contextlib.suppress(Exception):
            msg.ParseFromString(payload)
            kind = msg.WhichOneof("type")
            if kind == "new_session" and got["session"] is None:
                got["session"] = time.monotonic()
            elif kind == "script_finished" and got["finished"] is None:
                got["finished"] = time.monotonic()

    def on_response(response: Any) -> None:
        if "timeSeries" not in response.url:
            return
        try:
            series = json.loads(response.text())
        except Exception:  # noqa: BLE001 - another kind of response
            return
        for item in series if isinstance(series, list) else []:
            if item.get("tag") != "loss":
                continue
            for run, points in (item.get("runToSeries") or {}).items():
                if points and points[-1].get("step") == who.wanted.get(run):
                    got["arrived"].add(run)

    cdp.on("Network.loadingFinished", on_loaded)
    page.on("websocket", lambda ws: ws.on("framereceived", on_frame))
    if who.tensorboard:
        page.on("response", on_response)
    started = time.monotonic()
    page.goto(who.url, wait_until="domcontentloaded")
    deadline = started + 300
    while True:
        page.wait_for_timeout(20)  # lets Playwright deliver the page's events
        if who.tensorboard:
            done = got["arrived"] >= set(who.wanted)
        else:
            shown = page.evaluate(JS_TRACES, who.chart_key) or {}
            done = all((shown.get(run) or 0) >= step for run, step in who.wanted.items())
        if done:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{who.name}: not done in 300 s")
    took = time.monotonic() - started
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    page.close()
    server = got["finished"] - got["session"] if got["session"] and got["finished"] else None
    return Visit(
        took,
        server,
        got["bytes"],
        metrics.get("ScriptDuration", 0.0),
        metrics.get("LayoutDuration", 0.0) + metrics.get("RecalcStyleDuration", 0.0),
    )


@contextlib.contextmanager
def tensorboard_server(root: Path, log: Path) -> Any:
    from tests.browser.harness import free_port, poll

    port = free_port()
    exe = Path(sys.executable).with_name("tensorboard")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(exe), "--logdir", str(root), "--port", str(port), "--host", "127.0.0.1"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        poll(lambda: _answers(url + "/data/logdir"), 180, 0.05, "tensorboard to start")
        yield url
    finally:
        proc.terminate()
        proc.wait()


def wait_tensorboard_loaded(url: str, wanted: dict[str, int], timeout: float = 900) -> float:
    """Seconds until TensorBoard's scalars API has every run's last step (a page opened before that shows a
    partial run and, here, did not reach the last step within minutes): its servers start warm, as ours do."""
    import urllib.request

    started = time.monotonic()

    def last(run: str) -> int | None:
        with (
            contextlib.suppress(Exception),
            urllib.request.urlopen(f"{url}/data/plugin/scalars/scalars?run={run}&tag=loss", timeout=30) as answer,
        ):
            return int(json.load(answer)[-1][1])
        return None

    while not all(last(run) == step for run, step in wanted.items()):
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"TensorBoard did not load {len(wanted)} runs in {timeout:.0f} s")
        time.sleep(0.5)
    return time.monotonic() - started


def server_memory(url: str) -> str:
    """Resident memory of the server answering ``url`` and its children (TensorBoard's Rust data server):
    the heap (anonymous pages) and the mapped files (page cache, shared and given back under pressure)."""
    import psutil

    port = url.rsplit(":", 1)[1]
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if port in cmdline and any("streamlit" in a or "tensorboard" in a for a in cmdline):
            anon = files = 0
            for member in [proc, *proc.children(recursive=True)]:
                with contextlib.suppress(psutil.Error, OSError), open(f"/proc/{member.pid}/status") as status:
                    fields = dict(line.split(":", 1) for line in status if ":" in line)
                    anon += int(fields["RssAnon"].split()[0]) * 1024
                    files += int(fields["RssFile"].split()[0]) * 1024
            heap, mapped = f"{anon / 1e6:,.0f} MB heap", f"{files / 1e6:,.0f} MB mapped files"
            return f"{(anon + files) / 1e6:,.0f} MB resident ({heap}, {mapped})"
    return "-"


def summary(visits: list[Visit]) -> str:
    """Medians of one contender's visits in one case, and each visit's seconds."""
    med = statistics.median
    servers = [v.server_s for v in visits if v.server_s is not None]
    server = f"{med(servers):.2f} s" if servers else "-"
    each = ", ".join(f"{v.seconds:.2f}" for v in visits)
    return (
        f"{med(v.seconds for v in visits):5.2f} s  (server script {server}, "
        f"{med(v.bytes_in for v in visits) / 1e3:,.0f} kB in, "
        f"browser script {med(v.script_s for v in visits):.2f} s, layout+style "
        f"{med(v.layout_s for v in visits):.2f} s; each: {each})"
    )


def run_case(
    case: str, contenders: list[Contender], rounds: int, fresh: bool, browser: Any, memory: bool = False
) -> None:
    """``rounds`` visits of each contender in turn; a warm-up visit first (its server's first session)."""
    kept = {who.name: browser.new_context(viewport={"width": 1500, "height": 1300}) for who in contenders}
    try:
        for who in contenders:  # warm-up: the server's first session, the kept context's cache filled
            open_once(kept[who.name], who)
        for _ in range(rounds):
            for who in contenders:
                if fresh:
                    context = browser.new_context(viewport={"width": 1500, "height": 1300})
                    try:
                        visit = open_once(context, who)
                    finally:
                        context.close()
                else:
                    visit = open_once(kept[who.name], who)
                who.visits.setdefault(case, []).append(visit)
    finally:
        for context in kept.values():
            context.close()
    print(f"\n{case} ({load()}):")
    for who in contenders:
        print(f"  {who.name:<22} {summary(who.visits[case])}")
        if memory:
            print(f"  {'':<22} server after the case: {server_memory(who.url.split('/?')[0].split('/compare')[0])}")
    base = statistics.median(v.seconds for v in contenders[0].visits[case])
    ratios = ", ".join(
        f"{who.name} {statistics.median(v.seconds for v in who.visits[case]) / base:.2f}x" for who in contenders[1:]
    )
    print(f"  ratios to {contenders[0].name}: {ratios}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50k steps, 20 runs x 2k steps, 3 rounds")
    parser.add_argument("--steps", type=int, default=None, help="the single run's steps (default 1M; quick 50k)")
    parser.add_argument("--runs", type=int, default=20, help="runs in the many-runs case")
    parser.add_argument("--run-steps", type=int, default=None, help="steps of each (default 50k; quick 2k)")
    parser.add_argument("--rounds", type=int, default=None, help="visits of each contender per case (5; quick 3)")
    parser.add_argument("--data", type=Path, default=None, help="keep the event files here between runs")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold start case")
    parser.add_argument(
        "--copies", action="store_true", help="the many runs are copies of one written run (quick to make at 1M steps)"
    )
    args = parser.parse_args()
    steps = args.steps or (50_000 if args.quick else 1_000_000)
    run_steps = args.run_steps or (2_000 if args.quick else 50_000)
    rounds = args.rounds or (3 if args.quick else 5)

    from playwright.sync_api import sync_playwright

    from tests.browser.harness import CHROMIUM, CHROMIUM_ARGS, streamlit_server

    base = args.data or Path(tempfile.mkdtemp(prefix="bench_reopen_"))
    root, many, logs = base / "one", base / "many", base / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    write_events(root / RUN, steps)
    names = [f"run{i:02d}" for i in range(args.runs)]
    for i, name in enumerate(names):
        if args.copies and i:
            marker = many / name / MARKER
            if not marker.exists() or marker.read_text() != (many / names[0] / MARKER).read_text():
                shutil.rmtree(many / name, ignore_errors=True)
                shutil.copytree(many / names[0], many / name)
        else:
            write_events(many / name, run_steps)
    took = time.perf_counter() - started
    print(f"data: one run of {steps:,} steps, {args.runs} runs of {run_steps:,} ({took:.0f} s)")
    print(f"load before: {load()}")
    try:
        with contextlib.ExitStack() as stack:
            tb_one = stack.enter_context(tensorboard_server(root, logs / "tb-one.log"))
            tb_many = stack.enter_context(tensorboard_server(many, logs / "tb-many.log"))
            ours_one = stack.enter_context(streamlit_server(root, logs / "ours-one.log"))
            ours_many = stack.enter_context(streamlit_server(many, logs / "ours-many.log"))
            floor = stack.enter_context(streamlit_server(root, logs / "floor.log", script=FLOOR_APP))
            waited = wait_tensorboard_loaded(tb_many, dict.fromkeys(names, run_steps))
            print(f"TensorBoard had loaded the {args.runs} runs {waited:.1f} s after the servers were up")
            pw = stack.enter_context(sync_playwright())
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            stack.callback(browser.close)

            def single() -> list[Contender]:
                return [
                    Contender("TensorBoard", f"{tb_one}/?tagFilter=loss", True, {RUN: steps}),
                    Contender("Streamlit floor", f"{floor}/", False, {"loss": 1000}),
                    Contender("ours (Live)", f"{ours_one}/?run={RUN}", False, {"loss": steps}),
                ]

            run_case(f"reopen, cache kept, {steps:,} steps", single(), rounds, False, browser)
            run_case(f"reopen, fresh context, {steps:,} steps", single(), rounds, True, browser)
            query = "&".join(f"runs={n}" for n in names) + "&metric=loss"
            wanted = dict.fromkeys(names, run_steps)
            run_case(
                f"{args.runs} runs x {run_steps:,} steps, fresh context",
                [
                    Contender("TensorBoard", f"{tb_many}/?tagFilter=loss", True, wanted),
                    Contender("ours (Compare)", f"{ours_many}/compare?{query}", False, wanted, "chart_cmp_0"),
                ],
                rounds,
                True,
                browser,
                memory=True,
            )
        if not args.no_cold:
            tb, ours = [], []
            for i in range(rounds):
                tb.append(tensorboard_time(root, steps, logs / f"tb-cold-{i}.log"))
                clear_cache(root)
                ours.append(project_time(root, steps, logs / f"ours-cold-{i}.log"))
            t, o = statistics.median(tb), statistics.median(ours)
            print(f"\ncold, server start to the {steps:,}-step chart, no cache ({load()}):")
            print(f"  TensorBoard {t:.2f} s ({', '.join(f'{x:.2f}' for x in tb)})")
            print(f"  ours (Live) {o:.2f} s ({', '.join(f'{x:.2f}' for x in ours)}); ratio {o / t:.2f}x")
    finally:
        if args.data is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
