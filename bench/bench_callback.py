"""Training steps/s with and without ``LiveMonitor`` on the demo's small Transformer (CPU, GRAPH_MODE).

One process, one compiled network, one long ``model.train`` call. Training is
cut into windows of ``--window`` steps that rotate between three arms: no
monitor, ``LiveMonitor(log_interval=1)`` and ``LiveMonitor(log_interval=10)``.
A switch callback forwards the hooks to the active arm's monitor only (both
monitors are open for the whole run, as in real use), so every arm pays the
same dispatch cost and machine noise, which drifts over seconds, hits the arms
alike. Windows of ~0.1 s interleaved hundreds of times beat long blocks on a
shared machine.

Per window: mean step time (first step of a window left out). Per arm: median
over its windows -> steps/s, and overhead against the baseline both from the
medians and as the median of paired ratios (each monitor window against the
baseline window of the same round). Also printed: the time spent inside the
monitor's hooks per step (mean, which preemption inflates on a busy machine),
and from the median hook time of logged and other steps the overhead it implies.

Goal: overhead <= 1% at log_interval 10.

``--upload`` adds a fourth arm, ``interval_10_upload``: ``LiveMonitor(log_interval=10,
upload="s3://...")`` shipping to a moto S3 server in its own process on 127.0.0.1 (2 s ship
interval, the default), so the shipper's thread and its HTTP requests run inside the training process
as in real use (the server's CPU is not, but shares the machine's two cores).

    .venv/bin/python bench/bench_callback.py [--window 20] [--rounds 80] [--upload]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("GLOG_v", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mindspore as ms
from mindspore.train import Callback

from monitor_cb.demo.model import DemoConfig, FaultPlan, build_model
from monitor_cb.train.callback import LiveMonitor

ARMS: tuple[str, ...] = ("baseline", "interval_1", "interval_10")


class Switch(Callback):
    """Forwards hooks to the monitor of the active arm; records when each step ended."""

    def __init__(self, monitors: dict[str, LiveMonitor | None], window: int) -> None:
        super().__init__()
        self.monitors, self.window = monitors, window
        self.ends: list[float] = []
        self.in_hooks = dict.fromkeys(monitors, 0.0)
        # per-step in-hook time of each arm, split by whether the monitor logged that step
        self.hook_steps: dict[tuple[str, bool], list[float]] = {}
        self.step = 0
        self._this_step = 0.0

    def arm(self, step: int) -> str:
        return ARMS[(step // self.window) % len(ARMS)]

    def on_train_begin(self, run_context: Any) -> None:
        for monitor in self.monitors.values():
            if monitor is not None:
                monitor.on_train_begin(run_context)

    def on_train_step_begin(self, run_context: Any) -> None:
        self._forward("on_train_step_begin", run_context)

    def on_train_step_end(self, run_context: Any) -> None:
        self._forward("on_train_step_end", run_context)
        self.ends.append(time.perf_counter())
        arm = self.arm(self.step)
        if self.monitors[arm] is not None:
            logged = (self.step + 1) % self.monitors[arm].log_interval == 0  # steps are 1-based
            self.hook_steps.setdefault((arm, logged), []).append(self._this_step)
        self._this_step = 0.0
        self.step += 1

    def on_train_end(self, run_context: Any) -> None:
        for monitor in self.monitors.values():
            if monitor is not None:
                monitor.on_train_end(run_context)

    def _forward(self, hook: str, run_context: Any) -> None:
        arm = self.arm(self.step)
        monitor = self.monitors[arm]
        if monitor is not None:
            start = time.perf_counter()
            getattr(monitor, hook)(run_context)
            spent = time.perf_counter() - start
            self.in_hooks[arm] += spent
            self._this_step += spent


def window_means(switch: Switch, warmup_windows: int) -> dict[str, list[float]]:
    """Mean step time of each window per arm, in round order (first step of each window left out)."""
    out: dict[str, list[float]] = {arm: [] for arm in ARMS}
    w, ends = switch.window, switch.ends
    for start in range(warmup_windows * w, len(ends) - w + 1, w):
        if start == 0:
            continue
        steps = ends[start + 1 : start + w]
        out[switch.arm(start)].append((steps[-1] - ends[start]) / (len(steps)))
    rounds = min(len(v) for v in out.values())
    return {arm: v[:rounds] for arm, v in out.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=20, help="steps per window (default 20)")
    parser.add_argument("--rounds", type=int, default=80, help="rounds of the three arms (default 80)")
    parser.add_argument("--upload", action="store_true", help="add the arm that also ships to a moto S3 server")
    args = parser.parse_args()
    global ARMS
    if args.upload:
        ARMS = (*ARMS, "interval_10_upload")
    with contextlib.ExitStack() as stack:
        upload = None
        if args.upload:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            from bench.bench_object_store import moto_process
            from tests.objectstore import make_bucket

            endpoint = stack.enter_context(moto_process(tmp))
            make_bucket(endpoint, "bench")
            upload = "s3://bench/callback"
        run_arms(args, upload)
    return 0


def run_arms(args: argparse.Namespace, upload: str | None) -> None:
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    warmup = 6  # windows: graph compilation and the first lr evaluation
    steps = args.window * len(ARMS) * (args.rounds + warmup // len(ARMS) + 1)
    cfg = DemoConfig(steps_per_epoch=steps)
    model, data, _ = build_model(steps, cfg, FaultPlan())
    with tempfile.TemporaryDirectory() as tmp:
        monitors = {
            "baseline": None,
            "interval_1": LiveMonitor(Path(tmp) / "interval_1", log_interval=1),
            "interval_10": LiveMonitor(Path(tmp) / "interval_10", log_interval=10),
        }
        if upload:
            monitors["interval_10_upload"] = LiveMonitor(Path(tmp) / "upload", log_interval=10, upload=upload)
        switch = Switch(monitors, args.window)
        model.train(1, data, callbacks=[switch], dataset_sink_mode=False)
        shipped = upload_summary(Path(tmp) / "upload", upload) if upload else None
    report(switch, window_means(switch, warmup), cfg, args)
    if shipped:
        print(f"upload arm: {shipped}")


def upload_summary(local: Path, url: str) -> str:
    """Whether the bucket holds exactly the upload arm's local file."""
    from monitor_cb.storage.objects import ObjectStore

    store, remote = ObjectStore.open(url)
    chunks = store.list_prefix(f"{remote.path}/metrics.jsonl.chunks/")
    data = b"".join(store.read(e.path) for e in chunks)
    local_bytes = (local / "metrics.jsonl").read_bytes()
    same = "identical to" if data == local_bytes else "DIFFERENT from"
    return f"{len(chunks)} chunks, {len(data):,} bytes in the bucket, {same} the local file"


def report(switch: Switch, means: dict[str, list[float]], cfg: Any, args: argparse.Namespace) -> None:
    rounds = len(means["baseline"])
    print(
        f"small Transformer (d_model {cfg.d_model}, seq {cfg.seq_length}, batch {cfg.batch_size}), "
        f"MindSpore {ms.__version__}, CPU GRAPH_MODE, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}; {rounds} rounds x {args.window}-step windows per arm, interleaved"
    )
    print(f"{'arm':<12} {'steps/s':>8} {'overhead':>9} {'paired':>8} {'in-hook us/step':>16} {'of base step':>13}")
    base = statistics.median(means["baseline"])
    per_arm_steps = {arm: switch.ends and sum(1 for s in range(switch.step) if switch.arm(s) == arm) for arm in ARMS}
    for arm in ARMS:
        med = statistics.median(means[arm])
        paired = statistics.median(m / b - 1 for m, b in zip(means[arm], means["baseline"], strict=True))
        hooks = switch.in_hooks[arm] / per_arm_steps[arm]
        print(
            f"{arm:<12} {1 / med:>8.1f} {med / base - 1:>+9.2%} {paired:>+8.2%} "
            f"{hooks * 1e6:>16.1f} {hooks / base:>+13.2%}"
        )
    spread = {arm: f"{1 / max(v):.0f}-{1 / min(v):.0f}" for arm, v in means.items()}
    print(f"window steps/s range per arm (machine noise): {spread}")
    print("median in-hook time per step (robust to preemption), and the overhead it implies:")
    for arm in ARMS[1:]:
        logged = statistics.median(switch.hook_steps[(arm, True)])
        other = statistics.median(switch.hook_steps.get((arm, False), [0.0]))
        interval = int(arm.split("_")[1])
        per_step = (logged + (interval - 1) * other) / interval
        print(
            f"  {arm:<12} logged step {logged * 1e6:7.1f} us, other steps {other * 1e6:5.1f} us "
            f"-> {per_step * 1e6:6.1f} us/step = {per_step / base:+.2%} of the baseline step ({base * 1e3:.2f} ms)"
        )


if __name__ == "__main__":
    sys.exit(main())
