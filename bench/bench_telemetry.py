"""Cost of the telemetry sampler: training steps/s with it off, at 1 Hz and at 20 Hz, interleaved.

One process, one compiled small Transformer (the demo's), one long ``model.train`` call cut into
windows of ``--window`` seconds that rotate between the arms; a callback starts and stops a
:class:`~monitor_cb.train.telemetry.TelemetrySampler` (writing into a real ``MetricsWriter``) at window
boundaries. Per arm: median steps/s over its windows, and the median of paired ratios against the
"off" window of the same round. The 20 Hz arm makes a cost visible that 1 Hz would hide in noise.
Also printed: the time one sample takes (every source this machine has), which divided by the
interval is the sampler's share of one core.

    .venv/bin/python bench/bench_telemetry.py [--window 1.0] [--rounds 30]
"""

from __future__ import annotations

import argparse
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
from monitor_cb.train.telemetry import TelemetrySampler, default_sources
from monitor_cb.train.writer import MetricsWriter

ARMS = {"off": None, "1 Hz": 1.0, "20 Hz": 0.05}


class Rotate(Callback):
    """Every ``window`` seconds, switch to the next arm; count steps per window."""

    def __init__(self, writer: MetricsWriter, window: float, rounds: int) -> None:
        super().__init__()
        self.writer, self.window, self.rounds = writer, window, rounds
        self.order = list(ARMS)
        self.results: dict[str, list[float]] = {arm: [] for arm in ARMS}
        self.paired: dict[str, list[float]] = {arm: [] for arm in ARMS if arm != "off"}
        self.sampler: TelemetrySampler | None = None
        self.index, self.steps, self.step = 0, 0, 0
        self.round_rates: dict[str, float] = {}
        self.started = time.perf_counter()

    def on_train_step_end(self, run_context: Any) -> None:
        self.step += 1
        self.steps += 1
        now = time.perf_counter()
        if now - self.started < self.window:
            return
        arm = self.order[self.index % len(self.order)]
        rate = self.steps / (now - self.started)
        if self.index >= len(self.order):  # the first round warms up (compilation, caches)
            self.results[arm].append(rate)
            self.round_rates[arm] = rate
            if arm == self.order[-1]:
                base = self.round_rates["off"]
                for other in self.paired:
                    self.paired[other].append(self.round_rates[other] / base)
        self.index += 1
        if self.index >= self.rounds * len(self.order):
            run_context.request_stop()
        self._switch(self.order[self.index % len(self.order)])
        self.steps, self.started = 0, time.perf_counter()

    def _switch(self, arm: str) -> None:
        if self.sampler is not None:
            self.sampler.stop()
            self.sampler = None
        interval = ARMS[arm]
        if interval:
            step = self.step
            self.sampler = TelemetrySampler(
                lambda s, sample: self.writer.log_dict(sample, step=s), lambda: step, interval=interval
            ).start()

    def on_train_end(self, run_context: Any) -> None:
        if self.sampler is not None:
            self.sampler.stop()


def sample_cost(repeat: int = 200) -> tuple[float, list[str]]:
    sampler = TelemetrySampler(lambda s, sample: None, lambda: 0, sources=default_sources())
    names = sorted(sampler.sample_once())
    started = time.perf_counter()
    for _ in range(repeat):
        sampler.sample_once()
    return (time.perf_counter() - started) / repeat, names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=1.0, help="seconds per window")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    cfg = DemoConfig(steps_per_epoch=1_000_000)
    model, train, _ = build_model(10_000_000, cfg, FaultPlan(), seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        writer = MetricsWriter(Path(tmp) / "telemetry")
        rotate = Rotate(writer, args.window, args.rounds + 1)
        model.train(1, train, callbacks=[rotate], dataset_sink_mode=False)
        writer.close()
    per_sample, names = sample_cost()
    load = os.getloadavg()[0]
    print(f"small Transformer, MindSpore {ms.__version__}, CPU GRAPH_MODE, load average {load:.1f}")
    print(f"{args.rounds} rounds x {args.window:.1f} s windows per arm, interleaved")
    print(f"{'arm':8} {'steps/s':>9} {'vs off (medians)':>17} {'paired median':>14}")
    base = statistics.median(rotate.results["off"])
    for arm, rates in rotate.results.items():
        median = statistics.median(rates)
        paired = f"{(statistics.median(rotate.paired[arm]) - 1) * 100:+.2f}%" if arm in rotate.paired else "-"
        print(f"{arm:8} {median:9.1f} {(median / base - 1) * 100:+16.2f}% {paired:>14}")
    print(f"one sample ({len(names)} values: {', '.join(names)}): {per_sample * 1e6:.0f} us")
    print(f"-> sampler share of one core: {per_sample * 100:.3f}% at 1 Hz, {per_sample * 2000:.2f}% at 20 Hz")
    return 0


if __name__ == "__main__":
    sys.exit(main())
