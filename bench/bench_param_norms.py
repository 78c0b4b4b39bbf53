"""Cost of per-parameter gradient norms (``grad_norm_model(param_norms=True)``) on the demo's Transformer (CPU).

Two compiled train cells over the same demo model and batches: the baseline
``TrainOneStepWithGradNorm`` (the global norm, as the demo trains) and the same cell with
``param_norms=True, param_norm_interval=10`` (every trainable parameter's norm as one vector in
the step: the sums of squares the global norm adds up anyway, stacked, their roots taken on the host
on the steps logged, every 10th as ``grad_norm/<param>``). Both train under
``LiveMonitor(log_interval=10)``. Windows of ``--window`` steps alternate between the two arms for
``--rounds`` rounds (each arm first in every other round), so machine noise hits both alike; per
window the mean step time (its first step left out), per arm the median over windows, and the ratio
(median of paired ratios too).

Goal (issue 33): at most 3% of step time at every 10th step.

    .venv/bin/python bench/bench_param_norms.py [--window 20] [--rounds 40]
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
import numpy as np
from mindspore import nn
from mindspore.train import Callback, Model

from monitor_cb.demo.model import DemoConfig, FaultPlan, TrainBatches, TrainLoss, TransformerClassifier
from monitor_cb.train.callback import LiveMonitor
from monitor_cb.train.cells import TrainOneStepWithGradNorm

COLUMNS = ["tokens", "labels", "poison", "scale"]


class StepEnds(Callback):
    """When each step ended, per window: wall clock and the process's CPU time (all its threads).

    On a shared machine other processes stretch the wall time of whichever arm they hit; the CPU time
    this process spent is what the arm itself costs.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ends: list[float] = []
        self.cpu: list[float] = []

    def on_train_step_end(self, run_context: Any) -> None:
        self.ends.append(time.perf_counter())
        self.cpu.append(time.process_time())


def build(cfg: DemoConfig, per_param: bool) -> tuple[Model, int]:
    ms.set_seed(0)
    backbone = TransformerClassifier(cfg)
    optimizer = nn.Momentum(backbone.trainable_params(), learning_rate=1e-3, momentum=0.9)
    kwargs = {"param_norms": True, "param_norm_interval": 10} if per_param else {}
    cell = TrainOneStepWithGradNorm(TrainLoss(backbone), optimizer, **kwargs)
    return Model(cell), len(backbone.trainable_params())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=20, help="steps per window (default 20)")
    parser.add_argument("--rounds", type=int, default=40, help="rounds of the two arms (default 40)")
    args = parser.parse_args()
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    cfg = DemoConfig()
    source = TrainBatches(cfg, FaultPlan(), seed=0)
    batches = [source.batch(i + 1) for i in range(args.window)]
    arms = {"baseline": build(cfg, False), "param_norms": build(cfg, True)}
    means: dict[str, list[float]] = {arm: [] for arm in arms}
    cpu: dict[str, list[float]] = {arm: [] for arm in arms}
    with tempfile.TemporaryDirectory() as tmp:
        monitors = {arm: LiveMonitor(Path(tmp) / arm, log_interval=10) for arm in arms}
        for round_ in range(args.rounds + 1):  # round 0 compiles both graphs: not counted
            order = list(arms) if round_ % 2 else list(arms)[::-1]  # neither arm always runs first
            for arm in order:
                model = arms[arm][0]
                ends = StepEnds()
                data = ms.dataset.GeneratorDataset(batches, COLUMNS, shuffle=False)
                model.train(1, data, callbacks=[monitors[arm], ends], dataset_sink_mode=False)
                if round_:
                    steps = np.diff(ends.ends)  # the first step (after train() starts) left out
                    means[arm].append(float(np.mean(steps)))
                    cpu[arm].append(float(np.mean(np.diff(ends.cpu))))
        logged = sorted(p.name for p in (Path(tmp) / "param_norms").glob("*.jsonl"))
    base, per = statistics.median(means["baseline"]), statistics.median(means["param_norms"])
    paired = statistics.median(p / b for p, b in zip(means["param_norms"], means["baseline"], strict=True))
    n_params = arms["param_norms"][1]
    print(f"demo model: {n_params} trainable parameters, batch {cfg.batch_size} x seq {cfg.seq_length}, CPU GRAPH_MODE")
    print(f"windows of {args.window} steps, {args.rounds} rounds; LiveMonitor(log_interval=10) on both arms")
    print(f"baseline     (global norm only):          {base * 1e3:8.3f} ms/step (median of window means)")
    print(f"param_norms  (+{n_params} norms, logged every 10th): {per * 1e3:8.3f} ms/step")
    fast = {arm: statistics.mean(sorted(v)[: max(1, len(v) // 4)]) for arm, v in means.items()}
    print(
        f"ratio param_norms / baseline: {per / base:.4f} (medians), {paired:.4f} (median of paired windows), "
        f"{fast['param_norms'] / fast['baseline']:.4f} (fastest quarter of windows: load only adds time)"
    )
    cpu_base, cpu_per = statistics.median(cpu["baseline"]), statistics.median(cpu["param_norms"])
    cpu_paired = statistics.median(p / b for p, b in zip(cpu["param_norms"], cpu["baseline"], strict=True))
    print(
        f"CPU time of this process per step: {cpu_base * 1e3:.3f} -> {cpu_per * 1e3:.3f} ms, ratio "
        f"{cpu_per / cpu_base:.4f} (medians), {cpu_paired:.4f} (median of paired windows)"
    )
    print(
        f"overhead: {(per / base - 1) * 100:+.2f}% wall, {(cpu_per / cpu_base - 1) * 100:+.2f}% CPU "
        f"(goal <= 3%); files written: {logged}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
