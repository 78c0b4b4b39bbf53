"""Tiny MindSpore networks, datasets and readers shared by the collector tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import nn
from mindspore.train import Callback

from monitor_cb.record import decode_record
from monitor_cb.train.telemetry import TELEMETRY_KEYS

ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")

BATCH = 4
FEATURES = 3


def batches(n: int, seed: int = 0, nan_from: int | None = None) -> list[tuple[np.ndarray, ...]]:
    """``n`` batches ``(x, y, poison)``; ``poison`` is NaN from batch ``nan_from`` (1-based) on."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(1, n + 1):
        x = rng.normal(size=(BATCH, FEATURES)).astype(np.float32)
        y = rng.integers(0, 2, size=(BATCH,)).astype(np.int32)
        poison = np.full((BATCH,), np.nan if nan_from is not None and i >= nan_from else 0.0, np.float32)
        out.append((x, y, poison))
    return out


def dataset(n: int, seed: int = 0, nan_from: int | None = None, poison: bool = False) -> Any:
    data = batches(n, seed, nan_from)
    if poison:
        return ms.dataset.GeneratorDataset(data, ["x", "y", "poison"], shuffle=False)
    return ms.dataset.GeneratorDataset([d[:2] for d in data], ["x", "y"], shuffle=False)


class Net(nn.Cell):
    """Dense + Tanh (ReLU would turn an injected NaN into 0 on CPU) + Dense."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Dense(FEATURES, 8)
        self.act = nn.Tanh()
        self.out = nn.Dense(8, 2)

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        return self.out(self.act(self.hidden(x)))


def ce() -> nn.Cell:
    return nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")


class PoisonedLoss(nn.Cell):
    """Cross-entropy of logits multiplied by ``1 + poison``: a NaN poison makes loss and grads NaN."""

    def __init__(self, net: nn.Cell) -> None:
        super().__init__()
        self.net, self.ce = net, ce()

    def construct(self, x: ms.Tensor, y: ms.Tensor, poison: ms.Tensor) -> ms.Tensor:
        return self.ce(self.net(x) * (1.0 + poison.reshape((-1, 1))), y)


class Recorder(Callback):
    """Remembers every train step's number and raw outputs, as another callback sees them."""

    def __init__(self, stop_at: int | None = None, raise_at: int | None = None) -> None:
        super().__init__()
        self.steps: list[int] = []
        self.outputs: list[Any] = []
        self.raise_at = raise_at

    def on_train_step_end(self, run_context: Any) -> None:
        cb = run_context.original_args()
        self.steps.append(int(cb.get("cur_step_num")))
        self.outputs.append(_host(cb.get("net_outputs")))
        if self.raise_at == self.steps[-1]:
            raise RuntimeError(f"boom at step {self.steps[-1]}")


def _host(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_host(v) for v in value]
    if isinstance(value, dict):
        return {k: _host(v) for k, v in value.items()}
    return float(value.asnumpy()) if hasattr(value, "asnumpy") else value


def is_telemetry(record: dict[str, Any]) -> bool:
    """A sampler record: hardware keys only."""
    return set(record) - {"step", "t", "rank", "seg"} <= TELEMETRY_KEYS


def read_raw(path: Path) -> list[dict[str, Any]]:
    """Parsed lines as written (``"NaN"`` stays a string), telemetry samples left out."""
    return [r for r in map(json.loads, path.read_text().splitlines()) if not is_telemetry(r)]


def read_records(path: Path, telemetry: bool = False) -> list[dict[str, Any]]:
    """Decoded records of a metrics file (``"NaN"`` -> float nan).

    The 1 Hz telemetry samples (lines holding only hardware keys) are left out unless asked for:
    whether one lands in a short test run depends on timing.
    """
    records = [decode_record(json.loads(line)) for line in path.read_text().splitlines()]
    if telemetry:
        return records
    return [r for r in records if not is_telemetry(r)]


def read_meta(run_dir: Path, stem: str = "metrics") -> dict[str, Any]:
    return json.loads((run_dir / f"{stem}.meta.json").read_text())


def train_records(path: Path) -> list[dict[str, Any]]:
    return [r for r in read_records(path) if "loss" in r]


def host_grad_norm(loss_net: nn.Cell, params: Any, *inputs: np.ndarray) -> float:
    """Gradient L2 norm computed on the host in float64 from ``value_and_grad``'s grads."""
    grad_fn = ms.value_and_grad(loss_net, None, params)
    _, grads = grad_fn(*(ms.Tensor(a) for a in inputs))
    return float(np.sqrt(sum((g.asnumpy().astype(np.float64) ** 2).sum() for g in grads)))
