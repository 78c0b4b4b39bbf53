"""Pure helpers: a train cell's outputs -> ``{metric name: value}``.

Nothing here imports MindSpore; values are read through duck typing
(``asnumpy()`` / ``item()``), so every function can be tested with numpy.

Each known output layout has its own explicitly named parser, listed in
:data:`LAYOUTS`. The caller picks one from what it knows about the train cell
(:func:`layout_for_cell`), never from the length of the tuple alone: MindFormers'
5-tuple and a user's 5 loss components look the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

Metrics = dict[str, Any]

# Keys of a loss dict that hold the total rather than a component.
_TOTAL_KEYS = ("loss", "total_loss", "total", "loss_total")


def to_float(value: Any) -> float:
    """A scalar (MindSpore/numpy 0-d or 1-element tensor, number, bool) as a Python float.

    Raises:
        TypeError: ``value`` holds more than one element or is not numeric.
        ValueError: ``value`` is numeric but no double can hold it (an int of 400 digits).
    """
    try:
        if isinstance(value, (bool, int, float)):
            return float(value)
        if hasattr(value, "asnumpy"):
            value = value.asnumpy()
        size = getattr(value, "size", 1)
        if size != 1:
            raise TypeError(f"expected a scalar, got a value with {size} elements")
        if hasattr(value, "item"):
            return float(value.item())
        return float(value)
    except OverflowError as exc:
        raise ValueError(f"a number too large for a double ({exc})") from None


def loss_metrics(value: Any, names: Sequence[str] | None = None) -> Metrics:
    """The loss a network returned, as ``{"loss": total, "loss_<name>": component, ...}``.

    Args:
        value: a scalar tensor / numpy value / float; a dict of component losses;
            or a tuple/list. Without ``names`` a tuple's first element is the loss
            (MindSpore's convention, as in ``LossMonitor``).
        names: names for the elements of a tuple/list of component losses. The
            element named ``loss``/``total`` is the total; otherwise the total is
            the sum of the components.
    """
    if isinstance(value, Mapping):
        return _components(list(value.items()))
    if isinstance(value, (tuple, list)):
        if not value:
            return {}
        if names:
            return _components(list(zip(names, value, strict=False)))
        return loss_metrics(value[0])
    return {"loss": to_float(value)}


def _components(items: list[tuple[Any, Any]]) -> Metrics:
    out: Metrics = {}
    total = None
    skipped: str | None = None
    for key, raw in items:
        name = str(key)
        if name in _TOTAL_KEYS:
            total = to_float(raw)
            continue
        suffix = name[5:] if name.startswith("loss_") else name
        try:
            out[f"loss_{suffix}"] = to_float(raw)
        except (TypeError, ValueError):
            skipped = name  # not one number (a per-sample vector): not a curve; the other components are
    if total is None and skipped is not None:
        raise TypeError(f"loss component {skipped!r} is not a scalar, so the components do not sum to the loss")
    out["loss"] = total if total is not None else math.fsum(out.values())
    return out


# ---------------------------------------------------------------- layouts
def parse_plain(outputs: Any, names: Sequence[str] | None = None) -> Metrics:
    """``nn.TrainOneStepCell`` and most custom cells: the loss (or a dict/tuple of losses)."""
    return loss_metrics(outputs, names)


def parse_grad_norm(outputs: Any, names: Sequence[str] | None = None) -> Metrics:
    """:class:`monitor_cb.train.cells.TrainOneStepWithGradNorm`: ``(loss, grad_norm)``."""
    loss, grad_norm = outputs[0], outputs[1]
    out = loss_metrics(loss, names)
    out["grad_norm"] = to_float(grad_norm)
    return out


def parse_loss_scale(outputs: Any, names: Sequence[str] | None = None) -> Metrics:
    """``nn.TrainOneStepWithLossScaleCell``: ``(loss, overflow, loss_scale)``."""
    loss, overflow, scale = outputs[0], outputs[1], outputs[2]
    out = loss_metrics(loss, names)
    out["overflow"] = bool(to_float(overflow))
    out["loss_scale"] = to_float(scale)
    return out


def parse_loss_scale_grad_norm(outputs: Any, names: Sequence[str] | None = None) -> Metrics:
    """``(loss, overflow, loss_scale, grad_norm)``, as
    :class:`~monitor_cb.train.cells.TrainOneStepWithLossScaleAndGradNorm` returns it."""
    out = parse_loss_scale(outputs, names)
    out["grad_norm"] = to_float(outputs[3])
    return out


def parse_mindformers(outputs: Any, names: Sequence[str] | None = None) -> Metrics:
    """MindFormers' ``MFTrainOneStepCell`` / ``MFPipelineWithLossScaleCell``.

    ``(loss, overflow, scaling_sens, learning_rate, global_norm[, local_norm, size])``;
    ``global_norm`` is None unless gradient clipping is on, and is the pre-clip norm.
    The lr is the one computed in-graph for this step. ``local_norm``/``size`` are
    per-parameter diagnostics and are not logged.
    """
    out = parse_loss_scale(outputs, names)
    lr, global_norm = outputs[3], outputs[4]
    if lr is not None:
        out["lr"] = to_float(lr)
    if global_norm is not None:
        out["grad_norm"] = to_float(global_norm)
    return out


Parser = Callable[[Any, "Sequence[str] | None"], Metrics]

LAYOUTS: dict[str, Parser] = {
    "plain": parse_plain,
    "grad_norm": parse_grad_norm,
    "loss_scale": parse_loss_scale,
    "loss_scale_grad_norm": parse_loss_scale_grad_norm,
    "mindformers": parse_mindformers,
}

# Class names (anywhere in the train cell's MRO) -> layout. Most specific first.
_CLASS_LAYOUTS: tuple[tuple[str, str], ...] = (
    ("TrainOneStepWithLossScaleAndGradNorm", "loss_scale_grad_norm"),
    ("TrainOneStepWithGradNorm", "grad_norm"),
    ("MFTrainOneStepCell", "mindformers"),
    ("MFPipelineWithLossScaleCell", "mindformers"),
    ("TrainOneStepWithLossScaleCell", "loss_scale"),
)


def layout_for_cell(cell: Any) -> str:
    """The output layout of a train cell (or cell class), from its ``output_layout`` attribute or its class.

    A custom cell declares its layout with a class attribute, e.g.
    ``output_layout = "mindformers"``; otherwise the class and its bases are
    matched by name against the known cells; anything else is ``"plain"``.
    """
    klass = cell if isinstance(cell, type) else type(cell)
    declared = getattr(klass, "output_layout", None)
    if isinstance(declared, str):
        return check_layout(declared)
    mro_names = [base.__name__ for base in klass.__mro__]
    for class_name, layout in _CLASS_LAYOUTS:
        if class_name in mro_names:
            return layout
    return "plain"


def check_layout(layout: str) -> str:
    """``layout`` itself if known, else a ValueError naming the known layouts."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown output layout {layout!r}; known layouts: {sorted(LAYOUTS)}")
    return layout


def parse_outputs(layout: str, outputs: Any, names: Sequence[str] | None = None) -> Metrics:
    """Parse a train cell's outputs with the named layout."""
    return LAYOUTS[check_layout(layout)](outputs, names)


def param_norm_metrics(
    outputs: Any, names: Sequence[str], index: Sequence[int], scale: float = 1.0, prefix: str = "grad_norm/"
) -> Metrics:
    """Per-parameter gradient norms from the vector of sums of squares a grad-norm cell returns last:
    ``{prefix + names[k]: sqrt(vector[index[k]]) / scale}``.

    Empty when the last output is not a vector covering ``index`` (a cell without ``param_norms``).
    """
    if not names or len(names) != len(index) or not isinstance(outputs, (tuple, list)) or not outputs:
        return {}
    vector = outputs[-1]
    values = vector.asnumpy() if hasattr(vector, "asnumpy") else vector
    try:
        flat = np.asarray(values, np.float64).reshape(-1)
    except (TypeError, ValueError):
        return {}
    if flat.size <= max(index):
        return {}
    with np.errstate(invalid="ignore"):
        norms = np.sqrt(flat[list(index)]) / scale
    return {f"{prefix}{name}": float(value) for name, value in zip(names, norms, strict=True)}


# ---------------------------------------------------------------- eval
def eval_metrics(results: Mapping[str, Any] | None) -> Metrics:
    """``Model.fit`` eval results as ``eval_<name>`` floats.

    MindSpore's own ``eval_loss`` entry is the last batch's loss only; a user
    ``"loss"`` metric (``nn.Loss``, the mean) takes precedence over it.
    """
    out: Metrics = {}
    for key, raw in sorted((results or {}).items(), key=lambda kv: kv[0] != "eval_loss"):
        name = key if str(key).startswith("eval_") else f"eval_{key}"
        try:
            out[name] = to_float(raw)
        except (TypeError, ValueError):
            continue  # a non-scalar metric (e.g. a confusion matrix) is not a curve
    return out
