"""The demo training: the small Transformer (:mod:`monitor_cb.demo.model`) trained with ``LiveMonitor``.

``python -m monitor_cb demo`` (:mod:`monitor_cb.commands.demo`) parses its flags and calls :func:`train`;
MindSpore is imported only when it runs. ``--inject FAULT@STEP`` plans the failure modes the
dashboard's detectors look for; ``--pace`` makes each step last at least that long.
"""

from __future__ import annotations

import math
import os
import signal
import time
from pathlib import Path
from typing import Any

FAULTS = ("nan", "grad_explosion", "lr_break", "slow_data", "overfit")


def parse_injections(specs: list[str], steps: int) -> dict[str, int]:
    """``["nan@400", "slow_data@300"]`` -> ``{"nan": 400, "slow_data": 300}``.

    Raises:
        ValueError: an unknown fault, a missing/invalid step, or a step beyond ``steps``.
    """
    plan: dict[str, int] = {}
    for spec in specs:
        fault, sep, at = spec.partition("@")
        if fault not in FAULTS or not sep:
            raise ValueError(f"--inject {spec!r}: expected FAULT@STEP with FAULT one of {', '.join(FAULTS)}")
        if not at.isdigit() or not 1 <= int(at) <= steps:
            raise ValueError(f"--inject {spec!r}: STEP must be an integer between 1 and --steps ({steps})")
        plan[fault] = int(at)
    return plan


def epochs_for(steps: int) -> tuple[int, int]:
    """``(epochs, steps_per_epoch)`` covering at least ``steps``, with up to 10 evaluations."""
    epochs = max(1, min(10, steps // 20))
    return epochs, math.ceil(steps / epochs)


def train(run_dir: Path, epochs: int, per_epoch: int, injections: dict[str, int], args: Any) -> Any:
    os.environ.setdefault("GLOG_v", "3")  # MindSpore's C++ warnings would drown the demo's output
    import mindspore as ms

    from monitor_cb.demo.model import DemoConfig, FaultPlan, build_model
    from monitor_cb.train.callback import LiveMonitor

    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    cfg = DemoConfig(steps_per_epoch=per_epoch)
    model, train, evaluation = build_model(epochs * per_epoch, cfg, FaultPlan(**injections), seed=args.seed)
    config = {**cfg.__dict__, "epochs": epochs, "optimizer": "Momentum(0.9)", "inject": injections, "seed": args.seed}
    monitor = LiveMonitor(
        run_dir, log_interval=args.log_interval, config=config, on_nan=args.on_nan, notify=getattr(args, "notify", None)
    )
    callbacks = [monitor]
    if getattr(args, "pace", 0.0):
        callbacks.append(_pacer(args.pace))
    model.fit(epochs, train, evaluation, callbacks=callbacks, dataset_sink_mode=False)
    return monitor


def _pacer(seconds: float) -> Any:
    """A callback that makes each training step last at least ``seconds`` (sleeping off the rest)."""
    from mindspore.train import Callback

    class Pacer(Callback):
        def __init__(self) -> None:
            super().__init__()
            self.next_end: float | None = None

        def on_train_step_end(self, run_context: Any) -> None:
            now = time.monotonic()
            # A deadline per step, not a sleep per step: time spent evaluating is caught up, not added.
            self.next_end = max(now, (self.next_end or now) + seconds)
            time.sleep(self.next_end - now)

    return Pacer()


def stop_like_ctrl_c(signum: int, frame: Any) -> None:
    """SIGTERM ends the training as Ctrl-C would, so LiveMonitor closes the run as ``stopped``.

    A second SIGTERM (a supervisor repeating it) must not interrupt that closing: it is ignored.
    """
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt("stopped by SIGTERM (the dashboard's Stop button)")
