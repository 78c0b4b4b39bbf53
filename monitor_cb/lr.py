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

from typing import Any

from monitor_cb.extract import Metrics, to_float


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
    if optimizer is None or getattr(optimizer, "learning_rate", None) is None:
        return {}
    if step_index is None:
        applied = global_step(optimizer)
        step_index = max((applied or 1) - 1, 0)
    values = [lr_value(holder, step_index) for holder in _unique_holders(optimizer.learning_rate)]
    out: Metrics = {}
    for i, value in enumerate(values):
        out["lr" if i == 0 else f"lr_group{i}"] = value
    return out


def lr_value(holder: Any, step_index: int) -> float:
    """The value of one lr holder (Parameter, per-step array or schedule cell) at ``step_index``."""
    per_step = _per_step_array(holder)
    if per_step is not None:
        # An lr list shorter than training crashes MindSpore itself; clamp anyway.
        return float(per_step[min(step_index, len(per_step) - 1)])
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


def _per_step_array(holder: Any) -> Any:
    """The lr array of an ``_IteratorLearningRate`` (read host-side: no graph compile)."""
    if type(holder).__name__ != "_IteratorLearningRate":
        return None
    array = holder.learning_rate
    return array.asnumpy() if hasattr(array, "asnumpy") else array
