"""What ``Model.train`` knows about a run, as config: optimizer, lr schedule, batch size, epochs, dataset size.

Read from the objects at train begin, so a run made with ``Model.train`` and no ``config=`` still
shows its hyperparameters on the Runs page. Attribute reading only (MindSpore is imported by the
caller); a value that cannot be read is left out, never an error into training.
"""

from __future__ import annotations

import contextlib
from typing import Any

from monitor_cb.train.extract import to_float
from monitor_cb.train.lr import PerStep, _is_schedule, _per_step_array, _unique_holders

# Optimizer hyperparameters worth a column, as MindSpore (and MindFormers) optimizers name them.
OPTIMIZER_ATTRS = (
    "beta1",
    "beta2",
    "eps",
    "weight_decay",
    "momentum",
    "use_nesterov",
    "dampening",
    "amsgrad",
    "loss_scale",
    "use_amsgrad",
)
# Attributes every Cell carries, which say nothing about a schedule.
CELL_NOISE = {
    "training",
    "requires_grad",
    "phase",
    "cell_type",
    "enable_hook",
    "bprop_debug",
    "is_check",
    "is_top_cell",
    "arguments_key",
    "grad_ops_label",
    "has_bprop",
    "math_pi",
}
_MAX_ATTRS = 30


def train_config(cb: Any, optimizer: Any) -> dict[str, Any]:
    """``{"optimizer": {...}, "lr_schedule": {...}, "batch_size", "epochs", "dataset_size"}`` from the
    callback parameters of ``Model.train`` / ``Model.fit`` (keys absent when unknown)."""
    out: dict[str, Any] = {}
    if optimizer is not None:
        out["optimizer"] = optimizer_config(optimizer)
        schedule = lr_schedule_config(getattr(optimizer, "learning_rate", None))
        if schedule:
            out["lr_schedule"] = schedule
    dataset = cb.get("train_dataset")
    for key, read in (("batch_size", "get_batch_size"), ("dataset_size", "get_dataset_size")):
        with contextlib.suppress(Exception):
            value = getattr(dataset, read)()
            if isinstance(value, int) and value > (1 if key == "batch_size" else 0):  # 1: not batched here
                out[key] = value
    if isinstance(cb.get("epoch_num"), int):
        out["epochs"] = cb.get("epoch_num")
    return out


def optimizer_config(optimizer: Any) -> dict[str, Any]:
    """The optimizer's class and the hyperparameters of :data:`OPTIMIZER_ATTRS` it has."""
    out: dict[str, Any] = {"type": type(optimizer).__name__}
    for name in OPTIMIZER_ATTRS:
        value = _scalar(getattr(optimizer, name, None))
        if value is not None:
            out[name] = value
    return out


def lr_schedule_config(learning_rate: Any) -> dict[str, Any]:
    """The lr schedule's name and arguments: a schedule cell's class and scalar attributes; a
    constant's value; a per-step list's length, first, peak and last values. Group lrs: the first."""
    holders = _unique_holders(learning_rate) if learning_rate is not None else []
    if not holders:
        return {}
    holder = holders[0]
    per_step = _per_step_array(holder)
    if isinstance(per_step, PerStep) and per_step.values:
        values = per_step.values
        return {
            "type": "per_step_list",
            "steps": len(values),
            "first": values[0],
            "peak": max(values),
            "last": values[-1],
        }
    if _is_schedule(holder):
        return {"type": type(holder).__name__, **_schedule_args(holder)}
    value = _scalar(holder)
    return {"type": "constant", "learning_rate": value} if value is not None else {}


def _schedule_args(cell: Any) -> dict[str, Any]:
    """A schedule cell's public scalar attributes (``learning_rate``, ``warmup_steps``, ``total_steps``...)."""
    out: dict[str, Any] = {}
    with contextlib.suppress(Exception):
        for name, value in vars(cell).items():
            if name.startswith("_") or name in CELL_NOISE or len(out) >= _MAX_ATTRS:
                continue
            scalar = _scalar(value)
            if scalar is not None:
                out[name] = scalar
    return out


def _scalar(value: Any) -> Any:
    """A bool, int, float or short str as it is; a 1-element tensor or Parameter as a float; else None."""
    if value is None:
        return None
    if isinstance(value, (bool, int)):
        return value
    if isinstance(value, str):
        return value if len(value) <= 100 else None
    try:
        return to_float(value)
    except (TypeError, ValueError, AttributeError):
        return None
    except Exception:  # noqa: BLE001 - a device tensor may fail to copy; the key is then left out
        return None
