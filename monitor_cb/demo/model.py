"""The demo's small Transformer classifier, its random data and its faults.

Used by ``python -m monitor_cb demo`` and by ``bench/bench_callback.py``. The
task: each token belongs to class ``token % classes`` and a sequence's label is
its most frequent class, which an embedding + one attention layer + mean-pool
learns in a few hundred steps, so train and eval loss fall together until a
fault is injected.

Faults (``FaultPlan``) are injected through the data so nothing recompiles:
each training batch carries a ``poison`` value (NaN poisons the logits, hence
the loss, gradients and weights) and a ``scale`` that multiplies the loss (a
factor growing 10x every 40 steps makes the gradient norm explode). A broken lr schedule is a
jump in the per-step lr list; a slow data loader sleeps in the generator; and
``overfit`` switches training to a small pool of batches with random labels,
which the network memorises while the eval loss rises.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import nn

FAULTS = ("nan", "grad_explosion", "lr_break", "slow_data", "overfit")


@dataclass(frozen=True)
class DemoConfig:
    """Sizes of the demo network and data."""

    vocab: int = 64
    seq_length: int = 16
    d_model: int = 32
    heads: int = 2
    ff: int = 64
    classes: int = 4
    batch_size: int = 32
    steps_per_epoch: int = 100
    eval_batches: int = 8
    peak_lr: float = 0.05
    warmup_fraction: float = 0.1


@dataclass(frozen=True)
class FaultPlan:
    """The step (1-based) from which each fault starts; None = never."""

    nan: int | None = None
    grad_explosion: int | None = None
    lr_break: int | None = None
    slow_data: int | None = None
    overfit: int | None = None
    slow_data_seconds: float = 0.03


class TransformerClassifier(nn.Cell):
    """Embedding + positional embedding + one Transformer encoder layer + mean-pool + Dense."""

    def __init__(self, cfg: DemoConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        pos = np.random.default_rng(0).normal(0, 0.02, (1, cfg.seq_length, cfg.d_model)).astype(np.float32)
        self.pos = ms.Parameter(ms.Tensor(pos), name="pos")
        layer = nn.TransformerEncoderLayer(
            cfg.d_model, cfg.heads, dim_feedforward=cfg.ff, dropout=0.0, activation="gelu", batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers=1)
        self.head = nn.Dense(cfg.d_model, cfg.classes)

    def construct(self, tokens: ms.Tensor) -> ms.Tensor:
        hidden = self.encoder(self.embed(tokens) + self.pos)
        return self.head(hidden.mean(axis=1))


class TrainLoss(nn.Cell):
    """Cross-entropy with the fault inputs: ``poison`` (0 or NaN) and ``scale`` (1 or more)."""

    def __init__(self, backbone: nn.Cell) -> None:
        super().__init__()
        self.backbone = backbone
        self.ce = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")

    def construct(self, tokens: ms.Tensor, labels: ms.Tensor, poison: ms.Tensor, scale: ms.Tensor) -> ms.Tensor:
        logits = self.backbone(tokens) * (1.0 + poison.reshape((-1, 1)))
        return self.ce(logits, labels) * scale.mean()


class EvalLoss(nn.Cell):
    """``(loss, logits, labels)`` for ``nn.Loss`` and ``nn.Accuracy`` (``eval_indexes=[0, 1, 2]``)."""

    def __init__(self, backbone: nn.Cell) -> None:
        super().__init__()
        self.backbone = backbone
        self.ce = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")

    def construct(self, tokens: ms.Tensor, labels: ms.Tensor) -> tuple[ms.Tensor, ms.Tensor, ms.Tensor]:
        logits = self.backbone(tokens)
        return self.ce(logits, labels), logits, labels


def make_batch(rng: np.random.Generator, cfg: DemoConfig) -> tuple[np.ndarray, np.ndarray]:
    """Random tokens and their label: the most frequent ``token % classes``."""
    tokens = rng.integers(0, cfg.vocab, size=(cfg.batch_size, cfg.seq_length), dtype=np.int32)
    counts = np.stack([(tokens % cfg.classes == c).sum(axis=1) for c in range(cfg.classes)], axis=1)
    return tokens, counts.argmax(axis=1).astype(np.int32)


class TrainBatches:
    """Iterable training source for ``GeneratorDataset``; counts batches across epochs to place faults."""

    def __init__(self, cfg: DemoConfig, faults: FaultPlan, seed: int = 0) -> None:
        self.cfg, self.faults = cfg, faults
        self.rng = np.random.default_rng(seed)
        self.step = 0
        pool_rng = np.random.default_rng(seed + 1)
        self.memorise = [
            (make_batch(pool_rng, cfg)[0], pool_rng.integers(0, cfg.classes, cfg.batch_size, dtype=np.int32))
            for _ in range(4)
        ]

    def __iter__(self) -> Iterator[tuple[np.ndarray, ...]]:
        for _ in range(self.cfg.steps_per_epoch):
            self.step += 1
            yield self.batch(self.step)

    def __len__(self) -> int:
        return self.cfg.steps_per_epoch

    def batch(self, step: int) -> tuple[np.ndarray, ...]:
        f, cfg = self.faults, self.cfg
        if _from(f.slow_data, step):
            time.sleep(f.slow_data_seconds)
        if _from(f.overfit, step):
            tokens, labels = self.memorise[step % len(self.memorise)]
        else:
            tokens, labels = make_batch(self.rng, cfg)
        poison = np.full(cfg.batch_size, np.nan if _from(f.nan, step) else 0.0, np.float32)
        scale = 10.0 ** min((step - f.grad_explosion) / 40, 30) if _from(f.grad_explosion, step) else 1.0
        return tokens, labels, poison, np.full(cfg.batch_size, scale, np.float32)


def eval_batches(cfg: DemoConfig, seed: int = 100) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [make_batch(rng, cfg) for _ in range(cfg.eval_batches)]


def _from(start: int | None, step: int) -> bool:
    return start is not None and step >= start


def warmup_cosine(total_steps: int, cfg: DemoConfig, lr_break: int | None = None) -> list[float]:
    """Per-step lr: linear warmup, cosine decay to 10% of the peak; ``lr_break`` jumps it to 6x the peak."""
    warmup = max(int(total_steps * cfg.warmup_fraction), 1)
    lrs = []
    for i in range(total_steps):
        if i < warmup:
            lr = cfg.peak_lr * (i + 1) / warmup
        else:
            progress = (i - warmup) / max(total_steps - warmup, 1)
            lr = cfg.peak_lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
        if lr_break is not None and i + 1 >= lr_break:
            lr = cfg.peak_lr * 6
        lrs.append(lr)
    return lrs


def build_model(total_steps: int, cfg: DemoConfig, faults: FaultPlan, seed: int = 0) -> tuple[Any, Any, Any]:
    """``(model, train_dataset, eval_dataset)`` ready for ``model.fit``."""
    from mindspore.train import Model

    from monitor_cb.train.cells import TrainOneStepWithGradNorm

    ms.set_seed(seed)
    backbone = TransformerClassifier(cfg)
    lrs = warmup_cosine(total_steps, cfg, faults.lr_break)
    optimizer = nn.Momentum(backbone.trainable_params(), learning_rate=lrs, momentum=0.9)
    train_cell = TrainOneStepWithGradNorm(TrainLoss(backbone), optimizer)
    metrics = {"loss": nn.Loss(), "accuracy": nn.Accuracy()}
    model = Model(train_cell, eval_network=EvalLoss(backbone), metrics=metrics, eval_indexes=[0, 1, 2])
    train = ms.dataset.GeneratorDataset(
        TrainBatches(cfg, faults, seed), ["tokens", "labels", "poison", "scale"], shuffle=False
    )
    evaluation = ms.dataset.GeneratorDataset(eval_batches(cfg), ["tokens", "labels"], shuffle=False)
    return model, train, evaluation
