"""The learning rate an optimizer actually used at a step.

MindSpore optimizers hold the lr in one of four shapes (see
``/work/shared/MINDSPORE_NOTES.md``): a ``Parameter`` (float or 0-d Tensor given),
an ``_IteratorLearningRate`` (a list or 1-D Tensor given), a
``LearningRateSchedule`` cell, or, with group parameters, a ``CellList`` /
tuple holding one of those per *parameter* (deduplicated here by identity).

The optimizer reads the lr before incrementing ``global_step``, so after step
``k`` the rate it used is ``schedule(global_step - 1)``. Evaluating a schedule
cell compiles it the first time (about 0.1 s), so call this on logged steps only.
MindSpore is imported lazily, only to build the step tensor for a schedule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from monitor_cb.train.extract import Metrics, to_float


def find_optimizer(cb_params: Any) -> Any:
    """``cb_params.optimizer``, or the custom train cell's ``optimizer`` when Model got a train cell."""
    optimizer = cb_params.get("optimizer")
    if optimizer is None:
        optimizer = getattr(cb_params.get("train_network"), "optimizer", None)
    return optimizer


def global_step(optimizer: Any) -> int | None:
    """The optimizer's ``global_step`` counter (steps it has applied), or None if it has none."""
    counter = getattr(optimizer, "global_step", None)
    if counter is None:
        return None
    try:
        return int(to_float(counter))
    except (TypeError, ValueError):
        return None


def lr_metrics(optimizer: Any, step_index: int | None = None) -> Metrics:
    """``{"lr": first group's lr, "lr_group1": ..., ...}`` used at ``step_index`` (0-based).

    Args:
        optimizer: a ``mindspore.nn.Optimizer`` (or anything with ``learning_rate``).
        step_index: the optimizer step whose lr is wanted; default
            ``global_step - 1``, the step just applied.
    """
    return lr_reader(optimizer)(step_index)


def lr_reader(optimizer: Any) -> Callable[[int | None], Metrics]:
    """A function ``step_index -> lr metrics`` for ``optimizer`` (see :func:`lr_metrics`).

    Per-step lr arrays are copied to the host once, here, so each later read is an
    index; schedule cells are evaluated on each call.
    """
    if optimizer is None or getattr(optimizer, "learning_rate", None) is None:
        return lambda step_index=None: {}
    holders = [_per_step_array(h) or h for h in _unique_holders(optimizer.learning_rate)]

    def read(step_index: int | None = None) -> Metrics:
        if step_index is None:
            applied = global_step(optimizer)
            step_index = max((applied or 1) - 1, 0)
        out: Metrics = {}
        for i, holder in enumerate(holders):
            out["lr" if i == 0 else f"lr_group{i}"] = lr_value(holder, step_index)
        return out

    return read


def lr_value(holder: Any, step_index: int) -> float:
    """The value of one lr holder (Parameter, per-step array or schedule cell) at ``step_index``."""
    if isinstance(holder, PerStep):
        # An lr list shorter than training crashes MindSpore itself; clamp anyway.
        return holder.values[min(step_index, len(holder.values) - 1)]
    per_step = _per_step_array(holder)
    if per_step is not None:
        return lr_value(per_step, step_index)
    if _is_schedule(holder):
        import mindspore as ms

        return to_float(holder(ms.Tensor(step_index, ms.int32)))
    return to_float(holder)


def _unique_holders(learning_rate: Any) -> list[Any]:
    """Group lrs come one entry per parameter; keep the first of each distinct holder."""
    if _is_schedule(learning_rate) or not _is_sequence(learning_rate):
        return [learning_rate]
    seen: set[int] = set()
    holders = []
    for holder in learning_rate:
        if id(holder) not in seen:
            seen.add(id(holder))
            holders.append(holder)
    return holders


def _is_sequence(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return True
    # CellList / ParameterTuple: iterable containers that are not tensors.
    return type(value).__name__ in ("CellList", "ParameterTuple")


def _is_schedule(value: Any) -> bool:
    return any(klass.__name__ == "LearningRateSchedule" for klass in type(value).__mro__)


class PerStep:
    """The per-step lr list of an ``_IteratorLearningRate``, copied to the host."""

    def __init__(self, values: Sequence[float]) -> None:
        self.values = [float(v) for v in values]


def _per_step_array(holder: Any) -> PerStep | None:
    """The lr list of an ``_IteratorLearningRate`` (read host-side: no graph compile), else None."""
    if type(holder).__name__ != "_IteratorLearningRate":
        return None
    array = holder.learning_rate
    array = array.asnumpy() if hasattr(array, "asnumpy") else array
    return PerStep(array.reshape(-1).tolist() if hasattr(array, "reshape") else array)
