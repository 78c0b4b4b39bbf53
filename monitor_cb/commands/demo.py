"""``python -m monitor_cb demo``: train the small Transformer on random data with ``LiveMonitor``.

Real MindSpore on the CPU in GRAPH_MODE: ``TrainOneStepWithGradNorm``, a warmup +
cosine lr list, ``Model.fit`` with a validation set (so ``eval_loss`` and
``eval_accuracy`` appear), writing a run under ``LOGDIR/NAME``. ``--inject`` adds
the failure modes the dashboard's detectors look for::

    python -m monitor_cb demo --steps 600 --inject nan@400 --on-nan stop
    python -m monitor_cb demo --inject slow_data@300 --inject overfit@500
    python -m monitor_cb demo --steps 600 --pace 0.2     # about two minutes, to watch it live

The network trains 600 steps in a few seconds; ``--pace`` makes each step last at least that long,
so the curves grow at a speed a person can follow. SIGTERM (the dashboard's "Stop" button) ends the
training like Ctrl-C: the run is closed as ``stopped``.

MindSpore is imported only when the command runs, so building the CLI parser stays cheap.
"""

from __future__ import annotations

import argparse
import math
import signal
import time

from monitor_cb.commands.common import UsageError
from monitor_cb.demo.train import FAULTS, epochs_for, parse_injections, stop_like_ctrl_c, train
from monitor_cb.logroot import LOGDIR_HELP, log_root


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=_positive, default=2000, help="training steps (default 2000)")
    parser.add_argument("--logdir", default=None, metavar="PATH", help=f"where the run is written: {LOGDIR_HELP}")
    parser.add_argument("--name", default=None, help="run name (default demo-YYYYmmdd-HHMMSS)")
    parser.add_argument("--log-interval", type=_positive, default=10, help="log every K steps (default 10)")
    parser.add_argument(
        "--inject",
        action="append",
        default=[],
        metavar="FAULT@STEP",
        help=f"inject a fault from STEP on; FAULT is one of {', '.join(FAULTS)} (repeatable)",
    )
    parser.add_argument("--on-nan", choices=("warn", "stop"), default="warn", help="NaN guard mode (default warn)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--pace",
        type=_non_negative,
        default=0.0,
        metavar="SECONDS",
        help="make each training step last at least this long, to watch the run live (default 0: full speed)",
    )
    parser.add_argument(
        "--notify", default=None, help="notification settings file (docs/NOTIFICATIONS.md): say when the guard stops"
    )


def run(args: argparse.Namespace) -> int:
    try:
        injections = parse_injections(args.inject, args.steps)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    name = args.name or time.strftime("demo-%Y%m%d-%H%M%S")
    run_dir = log_root(args.logdir) / name
    epochs, per_epoch = epochs_for(args.steps)
    print(f"training the demo Transformer for {epochs * per_epoch} steps -> {run_dir}")
    started = time.perf_counter()
    previous = signal.signal(signal.SIGTERM, stop_like_ctrl_c)
    try:
        monitor = train(run_dir, epochs, per_epoch, injections, args)
    except KeyboardInterrupt as exc:
        print(f"stopped after {time.perf_counter() - started:.1f}s: {run_dir} ({exc})")
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(f"done in {time.perf_counter() - started:.1f}s: {run_dir} ({monitor.stop_reason or 'finished'})")
    return 0


def _non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value
