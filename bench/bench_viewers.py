"""Benchmark many viewers of one growing run: 30 sessions at a 1 s refresh against one ``streamlit run`` server.

Usage: ``.venv/bin/python bench/bench_viewers.py [--viewers 30] [--seconds 60] [--repeat 2] [--steps 200000]
[--validate]``

A 200k-step run is written in the record format and then grows by a record every 0.2 s (the
writer notes when each step was written). One ``streamlit run dashboard.py`` server serves it;
``--viewers`` lightweight sessions (:mod:`bench.stclient`: the browser's protocol, the browser's
fragment reruns) open the live page, click "1 s" and follow it. Printed, per test run:

* server CPU (psutil on the server's pid, sampled each second): mean and max, in cores;
* server RSS over time (every 5 s), and its peak per run, so repeated runs show whether it grows;
* per session: fragment reruns completed, the largest gap between two new steps shown on the
  "Step" tile, and for each written step how long until the session showed it (or a later one);
  the goal is every session within 3 s, CPU under one core, memory flat across runs.

The baseline measured in the same run is one viewer alone (``--viewers 1`` first): what a refresh
costs when nobody shares the server. ``--validate`` also opens the page once in headless Chromium
and once with the client, for the same 20 s, and compares fragment reruns and bytes per rerun.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_dashboard import BigRun  # noqa: E402
from stclient import Session, choose_option  # noqa: E402

STEP_LABEL = "Step"


# ----------------------------------------------------------------------------- the server
class Server:
    """``streamlit run dashboard.py -- --logdir ROOT`` on a free port, with its pid for psutil."""

    def __init__(self, root: Path, log: Path) -> None:
        from tests.browser.harness import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [
            sys.executable, "-m", "streamlit", "run", str(REPO / "dashboard.py"), "--server.port", str(self.port),
            "--server.headless", "true", "--", "--logdir", str(root),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)}
        env.pop("MONITOR_LOGDIR", None)
        self._log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        from tests.browser.harness import _healthy, poll

        poll(lambda: _healthy(self.url) or self.proc.poll() is not None, timeout=60, interval=0.1, what="streamlit")
        if self.proc.poll() is not None:
            raise RuntimeError(f"streamlit exited; see {log}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()


@dataclass
class Sampler:
    """CPU (cores) each second and RSS (MB) every 5 s of one process, in a thread."""

    pid: int
    cpu: list[float] = field(default_factory=list)
    rss: list[tuple[float, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        import psutil

        self._proc = psutil.Process(self.pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Sampler:
        self._proc.cpu_percent(None)
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        tick = 0
        while not self._stop.wait(1.0):
            self.cpu.append(self._proc.cpu_percent(None) / 100)
            if tick % 5 == 0:
                self.rss.append((time.monotonic() - self._t0, self._proc.memory_info().rss / 2**20))
            tick += 1


# ----------------------------------------------------------------------------- the growing run
class Writer:
    """Appends one record every ``every`` seconds and remembers when each step was written."""

    def __init__(self, run: BigRun, every: float = 0.2) -> None:
        self.run, self.every = run, every
        self.written: list[tuple[int, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> Writer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            step = self.run.append(1)
            self.written.append((step, time.monotonic()))


# ----------------------------------------------------------------------------- one test run
@dataclass
class ViewerStats:
    reruns: int
    max_gap_s: float
    max_latency_s: float
    missed: int  # written steps never shown
    bytes_per_rerun: float


def viewers_run(url: str, run: BigRun, viewers: int, seconds: float, pid: int) -> dict[str, Any]:
    shown: list[list[tuple[float, int]]] = [[] for _ in range(viewers)]

    def on_metric(session: Session, label: str, body: str) -> None:
        if label.startswith(STEP_LABEL):
            try:
                step = int(body.replace(",", ""))
            except ValueError:
                return
            mine = shown[session.index]  # type: ignore[attr-defined]
            if not mine or step > mine[-1][1]:
                mine.append((time.monotonic(), step))

    sessions = []
    for i in range(viewers):
        session = Session(url, f"run={run.dir.name}", on_metric=on_metric)
        session.index = i  # type: ignore[attr-defined]
        session.set_widget("Refresh", choose_option("1 s"))
        sessions.append(session)
    writer = Writer(run).start()
    sampler = Sampler(pid).start()

    async def main() -> None:
        await asyncio.gather(*(s.run(seconds) for s in sessions))

    started = time.monotonic()
    asyncio.run(main())
    sampler.stop()
    writer.stop()
    settle = started + 10  # the first page loads are not refreshes
    written = [(s, t) for s, t in writer.written if settle <= t <= started + seconds - 3]
    stats = []
    for session, mine in zip(sessions, shown, strict=True):
        times = [t for t, _ in mine if t >= settle]
        gaps = [b - a for a, b in itertools.pairwise(times)] or [float("inf")]
        latencies, missed = [], 0
        for step, at in written:
            seen = next((t for t, s in mine if s >= step and t >= at), None)
            if seen is None:
                missed += 1
            else:
                latencies.append(seen - at)
        fragment_runs = [r for r in session.runs if r.fragment and r.finished_at >= settle]
        per_rerun = statistics.median([r.bytes for r in fragment_runs]) if fragment_runs else 0.0
        stats.append(
            ViewerStats(len(fragment_runs), max(gaps), max(latencies, default=float("inf")), missed, per_rerun)
        )
    return {
        "stats": stats,
        "cpu": sampler.cpu,
        "rss": sampler.rss,
        "errors": [e for s in sessions for e in s.errors],
        "written": len(written),
    }


def report(label: str, result: dict[str, Any], baseline_cpu: float | None = None) -> None:
    stats: list[ViewerStats] = result["stats"]
    cpu = result["cpu"][10:] or result["cpu"]
    rss = result["rss"]
    worst_latency = max(s.max_latency_s for s in stats)
    print(f"\n{label}: {len(stats)} viewer(s), {result['written']} steps written in the measured window")
    mean_cpu = statistics.mean(cpu) if cpu else float("nan")
    ratio = f" ({mean_cpu / baseline_cpu:.1f}x one viewer)" if baseline_cpu else ""
    print(f"  server CPU: mean {mean_cpu:.2f} cores{ratio}, max {max(cpu, default=0):.2f} (goal < 1 core)")
    print(
        "  server RSS (MB) every 5 s: "
        + " ".join(f"{m:.0f}" for _, m in rss)
        + f"; peak {max((m for _, m in rss), default=0):.0f}"
    )
    print(
        f"  per session: fragment reruns median {statistics.median(s.reruns for s in stats):.0f} "
        f"(min {min(s.reruns for s in stats)}); max gap between new steps median "
        f"{statistics.median(s.max_gap_s for s in stats):.1f} s, worst {max(s.max_gap_s for s in stats):.1f} s; "
        f"record -> shown worst {worst_latency:.1f} s (goal <= 3 s); steps never shown "
        f"{sum(s.missed for s in stats)}; bytes per rerun median "
        f"{statistics.median(s.bytes_per_rerun for s in stats) / 1e3:.1f} kB"
    )
    if result["errors"]:
        print(f"  client errors: {result['errors'][:3]}")


# ----------------------------------------------------------------------------- validation
def validate(url: str, run: BigRun, seconds: float = 20.0) -> None:
    """One Chromium page and one client session, each alone for ``seconds``: reruns and bytes per rerun."""
    import contextlib

    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    from tests.browser.harness import browser_missing, chart_state, chromium_page, poll

    missing = browser_missing()
    if missing:
        print(f"validation skipped: {missing}")
        return
    frames: list[tuple[float, int, bool, bool]] = []

    def on_ws(ws: Any) -> None:
        def received(payload: Any) -> None:
            data = payload if isinstance(payload, bytes) else payload.encode()
            finished = fragment = False
            with contextlib.suppress(Exception):
                msg = ForwardMsg.FromString(data)
                finished = msg.WhichOneof("type") == "script_finished"
                fragment = finished and bool(msg.metadata.run.fragment_ids)
            frames.append((time.monotonic(), len(data), finished, fragment))

        def sent(payload: Any) -> None:
            data = payload if isinstance(payload, bytes) else payload.encode()
            with contextlib.suppress(Exception):
                if BackMsg.FromString(data).rerun_script.is_auto_rerun:
                    auto_sent.append(time.monotonic())

        ws.on("framereceived", received)
        ws.on("framesent", sent)

    auto_sent: list[float] = []
    writer = Writer(run).start()
    with chromium_page() as page:
        page.on("websocket", on_ws)
        page.goto(f"{url}/?run={run.dir.name}", wait_until="domcontentloaded")
        poll(lambda: chart_state(page, "chart_loss_lr", "loss"), timeout=120, what="the first chart")
        page.get_by_text("1 s", exact=True).click()
        page.wait_for_timeout(3000)
        frames.clear()
        auto_sent.clear()
        page.wait_for_timeout(seconds * 1000)
    runs, acc = [], 0
    for _, size, finished, fragment in frames:
        acc += size
        if finished:
            if fragment:
                runs.append(acc)
            acc = 0
    session = Session(url, f"run={run.dir.name}")
    session.set_widget("Refresh", choose_option("1 s"))
    asyncio.run(session.run(seconds + 3))
    writer.stop()
    mine = [r.bytes for r in session.runs if r.fragment][2:]
    print(
        f"\nvalidation, {seconds:.0f} s each at a 1 s refresh: Chromium sent {len(auto_sent)} auto reruns and got "
        f"{len(runs)} fragment runs, median {statistics.median(runs) / 1e3 if runs else 0:.1f} kB; the client sent "
        f"{session.reruns_sent} reruns and got {len(mine)} fragment runs, median "
        f"{statistics.median(mine) / 1e3 if mine else 0:.1f} kB (Chromium's timer fires late while it draws on 2 "
        "shared cores; the client's fires on time, as an idle browser's does: the heavier load for the server)"
    )


# ----------------------------------------------------------------------------- main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--viewers", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--repeat", type=int, default=2, help="test runs against the same server (memory across runs)")
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--validate", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        run = BigRun(tmp / "logs", args.steps)
        server = Server(tmp / "logs", tmp / "streamlit.log")
        try:
            print(f"server pid {server.proc.pid} on {server.url}; load average {os.getloadavg()[0]:.1f}")
            if args.validate:
                validate(server.url, run)
            one = viewers_run(server.url, run, 1, min(args.seconds, 40.0), server.proc.pid)
            report("baseline: one viewer", one)
            base_cpu = statistics.mean(one["cpu"][10:] or one["cpu"])
            for i in range(args.repeat):
                result = viewers_run(server.url, run, args.viewers, args.seconds, server.proc.pid)
                report(f"run {i + 1} of {args.repeat}", result, base_cpu)
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
