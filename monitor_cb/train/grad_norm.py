"""``Model.train`` with the global gradient norm, in one line.

``Model(net, loss_fn, optimizer)`` trains with ``nn.TrainOneStepCell``, whose only output is the
loss, so no callback can see a gradient norm. ``grad_norm_model`` takes ``Model``'s arguments and
builds the train cell exactly as ``Model`` would (``amp.build_train_network``: amp level, loss
scale manager), then puts the grad-norm variant of that cell in its place:

    >>> model = grad_norm_model(net, loss_fn, optimizer, metrics={"acc": nn.Accuracy()})
    >>> model.train(epochs, dataset, callbacks=[LiveMonitor("logs/exp001")])  # logs grad_norm

* where ``Model`` builds ``nn.TrainOneStepCell`` (no loss scale manager, or
  ``FixedLossScaleManager(drop_overflow_update=False)``): :class:`~monitor_cb.train.cells.TrainOneStepWithGradNorm`,
  outputs ``(loss, grad_norm)``;
* where it builds ``nn.TrainOneStepWithLossScaleCell`` (a manager with an update cell; refused on
  the CPU by MindSpore): :class:`~monitor_cb.train.cells.TrainOneStepWithLossScaleAndGradNorm`, outputs
  ``(loss, overflow, loss_scale, grad_norm)``.

The norm is that of the unscaled gradients after the data-parallel reduction, before any clipping.
Boost, gradient accumulation and pipeline cells are refused with a message: such a cell has to
return the norm itself (then ``LiveMonitor(layout=...)``). MindFormers' ``MFTrainOneStepCell``
already returns it when ``runner_wrapper: use_clip_grad: True``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mindspore as ms
from mindspore import amp, nn
from mindspore.train import Model

from monitor_cb.train.cells import TrainOneStepWithGradNorm, TrainOneStepWithLossScaleAndGradNorm

_AMP_KWARGS = ("loss_scale_manager", "keep_batchnorm_fp32", "cast_model_type")
_FP32_EVAL_LEVELS = ("O2", "O3", "auto")  # as Model builds its eval network


def with_grad_norm(
    cell: nn.Cell, clip_norm: float | None = None, param_norms: bool | str | None = None, param_norm_interval: int = 10
) -> nn.Cell:
    """The grad-norm variant of a train cell that MindSpore built (same network, optimizer, loss scale).

    Raises:
        TypeError: ``cell`` is not a plain ``TrainOneStepCell`` / ``TrainOneStepWithLossScaleCell``.
    """
    if isinstance(cell, (TrainOneStepWithGradNorm, TrainOneStepWithLossScaleAndGradNorm)):
        return cell
    per_param = {"param_norms": param_norms, "param_norm_interval": param_norm_interval}
    if type(cell) is nn.TrainOneStepCell:
        sens = cell.sens if cell.sense_flag else None
        swapped = TrainOneStepWithGradNorm(cell.network, cell.optimizer, sens=sens, clip_norm=clip_norm, **per_param)
        return swapped.set_train()
    if type(cell) is nn.TrainOneStepWithLossScaleCell:
        scale = cell.loss_scaling_manager
        if scale is None:  # a fixed scale given as a tensor
            scale = ms.Tensor(cell.scale_sense.asnumpy())
        swapped = TrainOneStepWithLossScaleAndGradNorm(
            cell.network, cell.optimizer, scale, clip_norm=clip_norm, **per_param
        )
        return swapped.set_train()
    raise TypeError(
        f"cannot add a gradient norm to a {type(cell).__name__} (boost, gradient accumulation or pipeline "
        "cells compute their step differently); return the norm from your train cell and tell "
        "LiveMonitor its layout (LiveMonitor(..., layout='grad_norm'))"
    )


def grad_norm_train_cell(
    network: nn.Cell,
    optimizer: nn.Optimizer,
    loss_fn: nn.Cell | None = None,
    *,
    amp_level: str = "O0",
    boost_level: str = "O0",
    clip_norm: float | None = None,
    param_norms: bool | str | None = None,
    param_norm_interval: int = 10,
    **amp_kwargs: Any,
) -> nn.Cell:
    """The train cell ``Model(network, loss_fn, optimizer, amp_level=..., **amp_kwargs)`` would build,
    returning the gradient norm too (see the module docstring)."""
    cell = amp.build_train_network(network, optimizer, loss_fn, level=amp_level, boost_level=boost_level, **amp_kwargs)
    return with_grad_norm(cell, clip_norm, param_norms, param_norm_interval)


def grad_norm_model(
    network: nn.Cell,
    loss_fn: nn.Cell | None = None,
    optimizer: nn.Optimizer | None = None,
    metrics: Mapping[str, Any] | set[str] | None = None,
    eval_network: nn.Cell | None = None,
    eval_indexes: list[int] | None = None,
    amp_level: str = "O0",
    boost_level: str = "O0",
    *,
    clip_norm: float | None = None,
    param_norms: bool | str | None = None,
    param_norm_interval: int = 10,
    **kwargs: Any,
) -> Model:
    """``Model(network, loss_fn, optimizer, ...)`` whose train step also returns the global gradient norm.

    Takes ``Model``'s arguments (``loss_scale_manager`` and ``keep_batchnorm_fp32`` included) and
    builds the evaluation network as ``Model`` does when ``metrics`` and ``loss_fn`` are given
    without one. ``LiveMonitor`` then logs ``grad_norm`` (and ``max_grad_norm=`` can guard on it).

    Args:
        clip_norm: if given, also clip the gradients to this global norm (the logged norm is the pre-clip one).
        param_norms: also log each parameter's gradient norm as ``grad_norm/<param name>`` (a family the
            Layers page draws as one heatmap): ``True`` for every trainable parameter, or a regular
            expression their names must match (``r"attention"``). Computed inside the compiled step as
            one vector from the squares the global norm sums anyway.
        param_norm_interval: log that vector every this many steps (on the steps ``LiveMonitor`` logs).

    Raises:
        ValueError: no optimizer (the norm is measured inside the train step).
        TypeError: a boost level or parallel setting made MindSpore build a cell without a known
            grad-norm variant.
    """
    if optimizer is None:
        raise ValueError("grad_norm_model needs the optimizer: the gradient norm is measured inside the train step")
    amp_kwargs = {key: kwargs.pop(key) for key in _AMP_KWARGS if key in kwargs}
    cell = grad_norm_train_cell(
        network,
        optimizer,
        loss_fn,
        amp_level=amp_level,
        boost_level=boost_level,
        clip_norm=clip_norm,
        param_norms=param_norms,
        param_norm_interval=param_norm_interval,
        **amp_kwargs,
    )
    if metrics and eval_network is None and loss_fn is not None:
        eval_network = nn.WithEvalCell(network, loss_fn, amp_level in _FP32_EVAL_LEVELS)
        eval_indexes = [0, 1, 2]
    return Model(cell, metrics=metrics, eval_network=eval_network, eval_indexes=eval_indexes, **kwargs)
