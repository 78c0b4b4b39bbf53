"""A webhook down for ten minutes, ``watch`` restarted once in between: is every alert delivered once, in order?

A real receiver on 127.0.0.1 and real ``python -m monitor_cb watch`` processes. First, with the
receiver up, ``--baseline-runs`` runs finish (the baseline: how long an alert takes when nothing
is wrong). Then the receiver answers 503 for ``--down-seconds``; meanwhile ``--runs`` runs finish at
even intervals, and halfway through the watcher is stopped (SIGTERM, or SIGKILL with ``--kill``) and
a new one started over the same state. When the receiver is back, the bench waits until every
alert has arrived (or ``--grace`` seconds) and prints: alerts expected, delivered (accepted with
200), lost, duplicates (copies beyond the first, recognised by id), whether they arrived in the
order the runs finished, and the delays (after recovery, and end to end) against the baseline's.

    .venv/bin/python bench/bench_alert_outage.py                     # 10 minutes down (the issue's goal)
    .venv/bin/python bench/bench_alert_outage.py --down-seconds 60   # short mode
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


@dataclass(frozen=True)
class Scenario:
    """The outage to play: durations in seconds, and the watcher's delivery settings."""

    down_seconds: float = 600.0
    runs: int = 10
    baseline_runs: int = 2
    interval: float = 2.0
    backoff: float = 1.0
    max_backoff: float = 30.0
    gather: float = 1.0
    group_window: float = 10.0
    grace: float = 180.0
    kill: bool = False


@dataclass
class Receiver:
    """Answers 503 while ``down``; records every request's time, status and alert ids."""

    down: bool = False
    log: list[tuple[float, int, list[str], list[str]]] = field(default_factory=list)  # (t, status, ids, runs)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def serve(self) -> ThreadingHTTPServer:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                status = 503 if receiver.down else 200
                alerts = body.get("alerts", [])
                with receiver.lock:
                    receiver.log.append((time.time(), status, [a["id"] for a in alerts], [a["run"] for a in alerts]))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        return server

    def accepted(self) -> list[tuple[float, str, str]]:
        """``(time, id, run)`` of every alert in a message answered 200, duplicates included."""
        with self.lock:
            return [(t, i, r) for t, s, ids, runs in self.log if s == 200 for i, r in zip(ids, runs, strict=True)]


@dataclass
class Result:
    expected: int
    delivered: int
    lost: int
    duplicates: int
    in_order: bool
    requests: int
    baseline_delays: list[float]
    recovery_delays: list[float]
    end_to_end: list[float]
    restarts: int
    log: list[tuple[float, int, list[str], list[str]]] = field(default_factory=list)


def finish_run(root: Path, name: str) -> float:
    """A short run that finishes now; the time it finished."""
    from monitor_cb.train.writer import MetricsWriter

    writer = MetricsWriter(root / name, fsync_interval=0)
    for step in range(1, 11):
        writer.log(step=step, loss=1.0 / step, lr=1e-3)
    writer.close("finished")
    return time.time()


class WatchProcess:
    """``python -m monitor_cb watch`` over ``root`` with the bench's settings."""

    def __init__(self, root: Path, config: Path, state: Path, url: str, interval: float, log_path: Path) -> None:
        command = [sys.executable, "-m", "monitor_cb", "watch", str(root), "--config", str(config)]
        command += ["--state", str(state), "--interval", str(interval), "--skip-older", "0"]
        self.log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "BENCH_HOOK_URL": url, "PYTHONPATH": str(REPO)}
        self.process = subprocess.Popen(command, env=env, stdout=self.log, stderr=self.log, cwd=REPO)

    def stop(self, kill: bool = False) -> int:
        self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            return self.process.wait(timeout=60)
        finally:
            self.log.close()


def write_config(path: Path, scenario: Scenario) -> None:
    settings = {
        "timeout": 5,
        "response_timeout": 10,
        "backoff": scenario.backoff,
        "max_backoff": scenario.max_backoff,
        "gather": scenario.gather,
        "group_window": scenario.group_window,
    }
    lines = ["[notify]", *(f"{k} = {v}" for k, v in settings.items())]
    lines += ["", "[[channels]]", 'type = "webhook"', 'name = "hook"', 'url_env = "BENCH_HOOK_URL"']
    path.write_text("\n".join(lines) + "\n")


def wait_until(predicate: Any, deadline: float, step: float = 0.1) -> bool:
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def play(scenario: Scenario, work: Path) -> Result:
    """Run the outage; the counts and delays."""
    root, config, state = work / "logs", work / "notify.toml", work / "state" / "watch-state.json"
    root.mkdir(parents=True)
    write_config(config, scenario)
    receiver = Receiver()
    server = receiver.serve()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    finished: dict[str, float] = {}
    order: list[str] = []
    try:
        watcher = WatchProcess(root, config, state, url, scenario.interval, work / "watch.log")
        # the baseline: the receiver up
        for i in range(scenario.baseline_runs):
            name = f"base{i}"
            finished[name] = finish_run(root, name)
            order.append(name)
            wait_until(lambda n=name: n in {r for _, _, r in receiver.accepted()}, time.monotonic() + 60)
        # the outage, with one restart halfway
        receiver.down = True
        down_start = time.monotonic()
        spacing = scenario.down_seconds / max(scenario.runs, 1)
        restarted = False
        for i in range(scenario.runs):
            wait_until(lambda i=i: time.monotonic() >= down_start + i * spacing, down_start + i * spacing + 1)
            if not restarted and time.monotonic() >= down_start + scenario.down_seconds / 2:
                watcher.stop(kill=scenario.kill)
                watcher = WatchProcess(root, config, state, url, scenario.interval, work / "watch.log")
                restarted = True
            name = f"run{i:03d}"
            finished[name] = finish_run(root, name)
            order.append(name)
        if not restarted:
            wait_until(lambda: False, down_start + scenario.down_seconds / 2)
            watcher.stop(kill=scenario.kill)
            watcher = WatchProcess(root, config, state, url, scenario.interval, work / "watch.log")
        wait_until(lambda: False, down_start + scenario.down_seconds)
        receiver.down = False
        recovered = time.time()
        wait_until(lambda: {r for _, _, r in receiver.accepted()} >= set(order), time.monotonic() + scenario.grace)
        watcher.stop()
    finally:
        server.shutdown()
        server.server_close()
    return tally(receiver, order, finished, recovered, scenario)


def tally(
    receiver: Receiver, order: list[str], finished: dict[str, float], recovered: float, scenario: Scenario
) -> Result:
    accepted = receiver.accepted()
    first: dict[str, tuple[float, str]] = {}
    copies: dict[str, int] = {}
    for t, alert_id, run in accepted:
        copies[alert_id] = copies.get(alert_id, 0) + 1
        first.setdefault(run, (t, alert_id))
    arrival = sorted(first, key=lambda run: first[run][0])
    delivered = [run for run in order if run in first]
    outage = [run for run in delivered if not run.startswith("base")]
    return Result(
        expected=len(order),
        delivered=len(delivered),
        lost=len(order) - len(delivered),
        duplicates=sum(n - 1 for n in copies.values()),
        in_order=[run for run in arrival if run in finished] == delivered,
        requests=len(receiver.log),
        baseline_delays=[first[r][0] - finished[r] for r in delivered if r.startswith("base")],
        recovery_delays=[first[r][0] - recovered for r in outage],
        end_to_end=[first[r][0] - finished[r] for r in outage],
        restarts=1,
        log=list(receiver.log),
    )


def _stats(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"median {statistics.median(values):.1f} s, max {max(values):.1f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--down-seconds", type=float, default=600.0, help="how long the webhook is down (default 600)")
    parser.add_argument("--runs", type=int, default=10, help="runs that finish during the outage (default 10)")
    parser.add_argument("--baseline-runs", type=int, default=2)
    parser.add_argument("--interval", type=float, default=2.0, help="the watcher's --interval")
    parser.add_argument("--max-backoff", type=float, default=30.0)
    parser.add_argument("--group-window", type=float, default=10.0)
    parser.add_argument("--grace", type=float, default=180.0, help="seconds to wait for delivery after recovery")
    parser.add_argument("--kill", action="store_true", help="restart with SIGKILL instead of SIGTERM")
    parser.add_argument("--verbose", action="store_true", help="print every request the receiver got")
    args = parser.parse_args(argv)
    scenario = Scenario(
        down_seconds=args.down_seconds,
        runs=args.runs,
        baseline_runs=args.baseline_runs,
        interval=args.interval,
        max_backoff=args.max_backoff,
        group_window=args.group_window,
        grace=args.grace,
        kill=args.kill,
    )
    with tempfile.TemporaryDirectory(prefix="bench-outage-") as work:
        started = time.monotonic()
        result = play(scenario, Path(work))
        took = time.monotonic() - started
    print(
        f"webhook down {scenario.down_seconds:g} s, watch restarted once ({'SIGKILL' if scenario.kill else 'SIGTERM'})"
    )
    print(
        f"settings: interval {scenario.interval:g} s, backoff {scenario.backoff:g}..{scenario.max_backoff:g} s, "
        f"gather {scenario.gather:g} s, group_window {scenario.group_window:g} s"
    )
    print(
        f"alerts: expected {result.expected}, delivered {result.delivered}, lost {result.lost}, "
        f"duplicates {result.duplicates}, in order: {'yes' if result.in_order else 'NO'}, requests {result.requests}"
    )
    baseline = statistics.median(result.baseline_delays) if result.baseline_delays else float("nan")
    recovery = statistics.median(result.recovery_delays) if result.recovery_delays else float("nan")
    print(f"baseline (receiver up) delay: {_stats(result.baseline_delays)}")
    print(f"after recovery: {_stats(result.recovery_delays)} ({recovery / baseline:.1f}x the baseline median)")
    print(f"end to end (run finished -> accepted): {_stats(result.end_to_end)}")
    print(f"bench took {took:.0f} s")
    if args.verbose:
        t0 = result.log[0][0] if result.log else 0.0
        for t, status, _, runs in result.log:
            print(f"  +{t - t0:6.1f} s  HTTP {status}  {' '.join(runs)}")
    return 0 if result.lost == 0 and result.in_order else 1


if __name__ == "__main__":
    sys.exit(main())
