"""TensorBoard runs as other frameworks write them: their exact tag names, layout and rhythm (tests, not in the wheel).

Each recipe returns the scalars one framework's logger writes for a short, realistic training, with
explicit wall times, and :func:`write_run` puts them into event files where that framework puts them:

* HF Trainer (``TensorBoardCallback``, ``rewrite_logs``): ``train/loss``, ``train/grad_norm``,
  ``train/learning_rate``, ``train/epoch`` every ``logging_steps``; ``eval/loss``, ``eval/accuracy``,
  ``eval/runtime``, ``eval/samples_per_second``, ``eval/steps_per_second`` at each evaluation (written
  when it ends: its runtime later than the last training log); ``train/train_runtime``, ... at the end.
* PyTorch Lightning (``TensorBoardLogger``, ``LearningRateMonitor``): ``train_loss_step`` every
  ``log_every_n_steps``, ``lr-AdamW``, ``epoch``; ``val_loss``, ``val_acc``, ``train_loss_epoch`` per epoch.
* YOLOv5 (``loggers/__init__.py``): per epoch ``train/box_loss``, ``train/obj_loss``, ``train/cls_loss``,
  ``metrics/precision``, ``metrics/recall``, ``metrics/mAP_0.5``, ``metrics/mAP_0.5:0.95``, ``val/*_loss``,
  ``x/lr0..2``, at step = epoch.
* Unity ML-Agents (``TensorboardWriter``): every ``summary_freq`` environment steps ``Environment/Cumulative
  Reward``, ``Environment/Episode Length``, ``Losses/Policy Loss``, ``Losses/Value Loss``, ``Policy/Learning
  Rate``, ``Policy/Entropy``, ``Policy/Extrinsic Reward``, ``Is Training``, the wall time jittering with
  the environment.

Failures are labelled (:class:`FrameworkRun.onset_step`): an overfitting Lightning run (val loss turns up
from its best), and so on. Healthy recipes vary with ``seed``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from monitor_cb.testing.event_writer import Scalar, write_scalars

T0 = 1_750_000_000.0


@dataclass(frozen=True)
class FrameworkRun:
    """One framework's run: where its event files go (relative dir -> scalars, one file each, in order)."""

    framework: str
    files: dict[str, list[list[Scalar]]]
    label: str | None = None  # the injected failure kind, None for a healthy run
    onset_step: int | None = None
    notes: dict[str, float] = field(default_factory=dict)


def write_run(root: Path, run: FrameworkRun) -> list[Path]:
    """Write ``run``'s event files under ``root``; returns their paths."""
    paths = []
    for subdir, files in run.files.items():
        for i, scalars in enumerate(files):
            paths.append(write_scalars(root / subdir, scalars, suffix=f".{i}" if len(files) > 1 else ""))
    return paths


def _loss_curve(rng: np.random.Generator, n: int, start: float, floor: float, noise: float) -> np.ndarray:
    x = np.arange(1, n + 1) / n
    clean = floor + (start - floor) * np.exp(-4.0 * x)
    return clean * np.exp(rng.normal(0.0, noise, n))


def hf_trainer(
    seed: int = 0,
    steps: int = 600,
    logging_steps: int = 10,
    eval_steps: int = 200,
    final_eval_s: float | None = None,
    eval_runtime_s: float | None = None,
) -> FrameworkRun:
    """An HF Trainer run; ``eval_runtime_s``: how long each evaluation takes (it logs it as ``eval/runtime``,
    the next training log comes that much later); ``final_eval_s``: a last one after the last training log."""
    rng = np.random.default_rng(seed)
    step_s = 0.35 * (1 + 0.2 * rng.random())
    logged = np.arange(logging_steps, steps + 1, logging_steps)
    loss = _loss_curve(rng, len(logged), 2.5, 0.6, 0.05)
    out: list[Scalar] = []
    wall = T0 + 30.0  # model loading
    eval_s = 20.0 * (1 + rng.random()) if eval_runtime_s is None else eval_runtime_s
    for i, step in enumerate(logged):
        wall += logging_steps * step_s * (1 + rng.normal(0, 0.02))
        lr = 5e-5 * min(1.0, step / 60) * (1 - step / (steps + 1))
        out += [
            Scalar("train/loss", int(step), wall, float(loss[i])),
            Scalar("train/grad_norm", int(step), wall, float(1.5 * math.exp(rng.normal(0, 0.2)))),
            Scalar("train/learning_rate", int(step), wall, lr),
            Scalar("train/epoch", int(step), wall, step / 200),
        ]
        last_eval = step == steps and final_eval_s is not None
        if step % eval_steps == 0 or last_eval:
            runtime = final_eval_s if last_eval and final_eval_s is not None else eval_s
            wall += runtime
            for tag, value in (
                ("eval/loss", float(loss[i]) * 1.05),
                ("eval/accuracy", 0.6 + 0.3 * step / steps),
                ("eval/runtime", runtime),
                ("eval/samples_per_second", 1000 / runtime),
                ("eval/steps_per_second", 125 / runtime),
                ("train/epoch", step / 200),
            ):
                out.append(Scalar(tag, int(step), wall, value))
    wall += 1.0
    for tag, value in (
        ("train/train_runtime", wall - T0),
        ("train/train_samples_per_second", steps * 8 / (wall - T0)),
        ("train/train_steps_per_second", steps / (wall - T0)),
        ("train/total_flos", 1.2e15),
        ("train/train_loss", float(loss.mean())),
        ("train/epoch", steps / 200),
    ):
        out.append(Scalar(tag, int(steps), wall, value))
    return FrameworkRun("hf_trainer", {"runs/Dec07_03-00-00_host": [out]})


def lightning(seed: int = 0, epochs: int = 12, batches: int = 100, overfit_from: int | None = None) -> FrameworkRun:
    """A Lightning run logging every 10 steps; ``overfit_from``: the epoch from which its val loss rises."""
    rng = np.random.default_rng(seed)
    step_s = 0.05 * (1 + rng.random())
    out: list[Scalar] = []
    wall = T0 + 5.0
    n = epochs * batches
    loss = _loss_curve(rng, n, 1.2, 0.15, 0.08)
    best = None
    onset = None
    for epoch in range(epochs):
        for b in range(batches):
            step = epoch * batches + b + 1  # global_step after the optimizer step
            wall += step_s * (1 + rng.normal(0, 0.03))
            if step % 10 == 0:
                out += [
                    Scalar("train_loss_step", step - 1, wall, float(loss[step - 1])),
                    Scalar("lr-AdamW", step - 1, wall, 1e-3 * 0.5 * (1 + math.cos(math.pi * step / n))),
                    Scalar("epoch", step - 1, wall, float(epoch)),
                ]
        wall += 3.0  # validation
        train_epoch = float(loss[epoch * batches : (epoch + 1) * batches].mean())
        val = train_epoch * 1.1 + 0.02 * rng.normal()
        if overfit_from is not None and epoch >= overfit_from:
            best = best if best is not None else val
            val = best * (1 + 0.12 * (epoch - overfit_from + 1))  # 0.33 -> 0.52 over a few epochs
            onset = onset if onset is not None else (epoch + 1) * batches - 1
        step = (epoch + 1) * batches - 1
        out += [
            Scalar("val_loss", step, wall, val),
            Scalar("val_acc", step, wall, min(0.99, 0.5 + 0.04 * epoch + 0.01 * rng.normal())),
            Scalar("epoch", step, wall, float(epoch)),
            Scalar("train_loss_epoch", step, wall, train_epoch),
            Scalar("epoch", step, wall, float(epoch)),
        ]
    label = "overfitting" if overfit_from is not None else None
    return FrameworkRun("lightning", {"lightning_logs/version_0": [out]}, label, onset)


def yolov5(seed: int = 0, epochs: int = 60) -> FrameworkRun:
    """A YOLOv5 run: one point per epoch of each tag, three component losses and no total."""
    rng = np.random.default_rng(seed)
    epoch_s = 90.0 * (1 + rng.random())
    out: list[Scalar] = []
    wall = T0
    box = _loss_curve(rng, epochs, 0.10, 0.03, 0.02)
    obj = _loss_curve(rng, epochs, 0.05, 0.02, 0.02)
    cls = _loss_curve(rng, epochs, 0.04, 0.005, 0.03)
    for e in range(epochs):
        wall += epoch_s * (1 + rng.normal(0, 0.02))
        lr = 0.01 * ((1 - e / epochs) * 0.99 + 0.01)
        values = {
            "train/box_loss": box[e],
            "train/obj_loss": obj[e],
            "train/cls_loss": cls[e],
            "metrics/precision": min(0.95, 0.3 + 0.6 * e / epochs),
            "metrics/recall": min(0.9, 0.2 + 0.6 * e / epochs),
            "metrics/mAP_0.5": min(0.9, 0.1 + 0.7 * e / epochs),
            "metrics/mAP_0.5:0.95": min(0.7, 0.05 + 0.5 * e / epochs),
            "val/box_loss": box[e] * 0.9,
            "val/obj_loss": obj[e] * 1.1,
            "val/cls_loss": cls[e] * 1.05,
            "x/lr0": lr,
            "x/lr1": lr,
            "x/lr2": lr if e > 2 else 0.1 - 0.03 * e,  # bias group warmup from 0.1
        }
        out += [Scalar(tag, e, wall, float(v)) for tag, v in values.items()]
    return FrameworkRun("yolov5", {"runs/train/exp": [out]})


def ml_agents(seed: int = 0, summaries: int = 100, summary_freq: int = 10_000) -> FrameworkRun:
    """An ML-Agents PPO run: summaries every ``summary_freq`` environment steps, wall time jittering by a lot."""
    rng = np.random.default_rng(seed)
    out: list[Scalar] = []
    wall = T0
    x = np.arange(1, summaries + 1) / summaries
    for i in range(summaries):
        step = (i + 1) * summary_freq
        # the environment's speed varies: a summary every 30 s, give or take a third
        wall += 30.0 * math.exp(rng.normal(0, 0.3))
        reward = 100 * (1 - math.exp(-4 * x[i])) + rng.normal(0, 3)
        values = {
            "Environment/Cumulative Reward": reward,
            "Environment/Episode Length": 1000 * math.exp(-2 * x[i]) + 50,
            "Policy/Entropy": 1.4 - 0.6 * x[i],
            "Policy/Extrinsic Reward": reward,
            "Policy/Extrinsic Value Estimate": reward * 0.9,
            "Policy/Learning Rate": 3e-4 * (1 - x[i]) + 1e-10,
            "Policy/Epsilon": 0.2 * (1 - x[i]) + 0.1,
            "Policy/Beta": 5e-3 * (1 - x[i]) + 1e-5,
            "Losses/Policy Loss": 0.02 * math.exp(rng.normal(0, 0.3)),
            "Losses/Value Loss": 20 * math.exp(-2 * x[i]) * math.exp(rng.normal(0, 0.3)) + 0.5,
            "Is Training": 1.0,
        }
        out += [Scalar(tag, step, wall, float(v)) for tag, v in values.items()]
    return FrameworkRun("ml_agents", {"results/ppo/3DBall": [out]})


def resumed(run: FrameworkRun, at_fraction: float = 0.5, pause_s: float = 3 * 3600) -> FrameworkRun:
    """The same run stopped part way and resumed ``pause_s`` later into a second event file (from the last
    checkpoint: a few steps repeated), as every framework does on a restart."""
    (subdir, (scalars,)), *_ = run.files.items()
    steps = sorted({s.step for s in scalars})
    cut = steps[int(len(steps) * at_fraction)]
    back = steps[max(0, int(len(steps) * at_fraction) - 3)]  # the checkpoint was 3 logged steps earlier
    first = [s for s in scalars if s.step <= cut]
    second = [s._replace(wall=s.wall + pause_s) for s in scalars if s.step > back]
    return FrameworkRun(run.framework, {subdir: [first, second]}, run.label, run.onset_step, {"resume_step": back})


RECIPES: dict[str, Callable[..., FrameworkRun]] = {
    "hf_trainer": hf_trainer,
    "lightning": lightning,
    "yolov5": yolov5,
    "ml_agents": ml_agents,
}
