"""A train cell that returns the gradient norm, and the norm for custom loops.

``TrainOneStepWithGradNorm(net_with_loss, optimizer)`` is a drop-in for
``nn.TrainOneStepCell`` whose outputs are ``(loss, grad_norm)``, computed in the
graph (GRAPH_MODE) from the reduced gradients before the update; ``LiveMonitor``
logs both. ``TrainOneStepWithLossScaleAndGradNorm`` does the same for
``nn.TrainOneStepWithLossScaleCell`` (``(loss, overflow, loss_scale, grad_norm)``).
The norm is always that of the true (unscaled) gradients. ``global_grad_norm(grads)``
computes the same norm from the grads tuple of ``mindspore.value_and_grad`` in a
custom loop (PyNative or ``@jit``). ``monitor_cb.grad_norm_model`` puts these cells
into a ``Model`` for you.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import mindspore as ms
from mindspore import nn, ops

_square_sum = ops.MultitypeFuncGraph("monitor_square_sum")


@_square_sum.register("Tensor")
def _tensor_square_sum(grad: ms.Tensor) -> ms.Tensor:
    return ops.reduce_sum(ops.square(ops.cast(grad, ms.float32)))


_scale_grad = ops.MultitypeFuncGraph("monitor_scale_grad")


@_scale_grad.register("Tensor", "Tensor")
def _tensor_scale_grad(factor: ms.Tensor, grad: ms.Tensor) -> ms.Tensor:
    return grad * ops.cast(factor, grad.dtype)


_hyper_map = ops.HyperMap()


PARAM_NORM_PREFIX = "grad_norm/"  # the family our per-parameter norms are written as: grad_norm/<param name>


def select_params(names: Sequence[str], pattern: bool | str | None) -> tuple[int, ...]:
    """Indices of the parameters whose norms are reported: all (``True``), those whose name
    ``re.search``-es ``pattern``, or none (``None``/``False``).

    Raises:
        ValueError: ``pattern`` is not a valid regular expression, or matches no parameter.
    """
    if pattern is None or pattern is False:
        return ()
    if pattern is True:
        return tuple(range(len(names)))
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"param_norms={pattern!r} is not a valid regular expression: {exc}") from None
    chosen = tuple(i for i, name in enumerate(names) if compiled.search(name))
    if not chosen:
        shown = ", ".join(list(names)[:5]) + (" ..." if len(names) > 5 else "")
        raise ValueError(f"param_norms={pattern!r} matches none of the trainable parameters ({shown})")
    return chosen


class _ParamNorms:
    """What a train cell needs for per-parameter norms: which gradients, their names, how often to log.

    The step returns the vector of every gradient's sum of squares, which the global norm sums
    anyway (one ``stack`` in place of ``addn``, nothing else in the graph); the host takes the
    chosen entries' square roots on the steps it logs (:func:`monitor_cb.train.extract.param_norm_metrics`).
    """

    def _init_param_norms(self, pattern: bool | str | None, interval: int, scale: float = 1.0) -> None:
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise ValueError(f"param_norm_interval must be a whole number >= 1, got {interval!r}")
        names = [w.name for w in self.weights]  # type: ignore[attr-defined]
        chosen = select_params(names, pattern)
        self.per_param = bool(chosen)
        self.param_norm_names = tuple(names[i] for i in chosen)
        self.param_norm_index = chosen
        self.param_norm_interval = interval
        self.param_norm_scale = float(scale)  # the gradients' loss scale, divided out on the host


def global_grad_norm(grads: Any) -> ms.Tensor:
    """Global L2 norm ``sqrt(sum(g**2))`` over a tuple/list of gradient tensors, in float32.

    Example:
        >>> loss, grads = grad_fn(x, y)         # mindspore.value_and_grad(..., weights)
        >>> norm = global_grad_norm(grads) / self.sens
        >>> writer.log(step=step, loss=loss, grad_norm=norm)
    """
    squares = _hyper_map(_square_sum, tuple(grads))
    return ops.sqrt(ops.addn(squares))


class TrainOneStepWithGradNorm(nn.TrainOneStepCell, _ParamNorms):
    """``nn.TrainOneStepCell`` that also returns the global gradient norm.

    Args:
        network: the network with its loss (``nn.WithLossCell`` or similar).
        optimizer: the optimizer.
        sens: loss scaling for the backward pass, as in ``nn.TrainOneStepCell`` (what
            ``FixedLossScaleManager(drop_overflow_update=False)`` sets); the gradients reach
            the optimizer scaled, the reported norm is divided by it.
        clip_norm: if given, clip the (unscaled) gradients to this global norm before
            the update; the returned norm is the pre-clip one.
        param_norms: also return each parameter's gradient norm (``True``: all trainable
            parameters; a regular expression: those whose name it matches), as one vector
            computed in the step from the squares the global norm sums anyway.
        param_norm_interval: ``LiveMonitor`` logs the vector every this many steps, as
            ``grad_norm/<param name>``.

    Outputs:
        ``(loss, grad_norm)``, both float scalars, then every gradient's sum of squares (one vector)
        when ``param_norms`` is set;
        ``LiveMonitor`` reads them with the ``"grad_norm"`` layout.
    """

    output_layout = "grad_norm"

    def __init__(
        self,
        network: nn.Cell,
        optimizer: nn.Optimizer,
        sens: float | None = None,
        clip_norm: float | None = None,
        param_norms: bool | str | None = None,
        param_norm_interval: int = 10,
    ) -> None:
        super().__init__(network, optimizer, sens=sens)
        self.clip = clip_norm is not None
        self.clip_norm = _clip_tensor(clip_norm)
        self._init_param_norms(param_norms, param_norm_interval, self.sens)

    def construct(self, *inputs: Any) -> Any:
        loss = self.network(*inputs)
        sens = ops.fill(loss.dtype, loss.shape, self.sens)
        grads = self.grad(self.network, self.weights)(*inputs, sens)
        grads = self.grad_reducer(grads)
        # The grads carry the loss scale (the optimizer divides it out): report the true norm.
        squares = _hyper_map(_square_sum, grads)
        if self.per_param:
            stacked = ops.stack(squares)  # each gradient's sum of squares: the host takes their roots
            norm = ops.sqrt(ops.reduce_sum(stacked)) / self.sens
        else:
            stacked = None
            norm = ops.sqrt(ops.addn(squares)) / self.sens
        grads = _clip(grads, norm, self.clip_norm) if self.clip else grads
        loss = ops.depend(loss, self.optimizer(grads))
        if self.per_param:
            return loss, norm, stacked
        return loss, norm


class TrainOneStepWithLossScaleAndGradNorm(nn.TrainOneStepWithLossScaleCell, _ParamNorms):
    """``nn.TrainOneStepWithLossScaleCell`` that also returns the global gradient norm.

    What ``Model`` builds for a loss scale manager with an update cell
    (``DynamicLossScaleManager``, ``FixedLossScaleManager(drop_overflow_update=True)``);
    MindSpore refuses those on the CPU. The norm is that of the unscaled gradients
    (non-finite on an overflow step, which the optimizer then skips).

    Args:
        network: the network with its loss.
        optimizer: the optimizer.
        scale_sense: the loss scale update cell or a scale tensor, as in the parent.
        clip_norm: if given, clip the unscaled gradients to this global norm.
        param_norms, param_norm_interval: as in :class:`TrainOneStepWithGradNorm`.

    Outputs:
        ``(loss, overflow, loss_scale, grad_norm)``: the ``"loss_scale_grad_norm"`` layout, then the
        per-parameter vector when ``param_norms`` is set.
    """

    output_layout = "loss_scale_grad_norm"

    def __init__(
        self,
        network: nn.Cell,
        optimizer: nn.Optimizer,
        scale_sense: Any,
        clip_norm: float | None = None,
        param_norms: bool | str | None = None,
        param_norm_interval: int = 10,
    ) -> None:
        super().__init__(network, optimizer, scale_sense)
        self.clip = clip_norm is not None
        self.clip_norm = _clip_tensor(clip_norm)
        self._init_param_norms(param_norms, param_norm_interval)

    def construct(self, *inputs: Any) -> Any:
        loss = self.network(*inputs)
        scaling_sens = self.scale_sense
        status = ms.Tensor([0] * 8, ms.int32)
        scaling_sens_filled = ops.ones_like(loss) * ops.cast(scaling_sens, ops.dtype(loss))
        grads = self.grad(self.network, self.weights)(*inputs, scaling_sens_filled)
        grads = _hyper_map(ops.partial(_unscale, scaling_sens), grads)
        grads = self.grad_reducer(grads)
        cond = self.get_overflow_status(status, grads)
        overflow = self.process_loss_scale(cond)
        squares = _hyper_map(_square_sum, grads)
        if self.per_param:
            stacked = ops.stack(squares)
            norm = ops.sqrt(ops.reduce_sum(stacked))
        else:
            stacked = None
            norm = ops.sqrt(ops.addn(squares))
        grads = _clip(grads, norm, self.clip_norm) if self.clip else grads
        if not overflow:
            loss = ops.depend(loss, self.optimizer(grads))
        if self.per_param:
            return loss, cond, scaling_sens, norm, stacked
        return loss, cond, scaling_sens, norm


_unscale = ops.MultitypeFuncGraph("monitor_unscale")


@_unscale.register("Tensor", "Tensor")
def _tensor_unscale(scale: ms.Tensor, grad: ms.Tensor) -> ms.Tensor:
    return grad * ops.cast(ops.reciprocal(scale), grad.dtype)


def _clip(grads: Any, norm: ms.Tensor, clip_norm: ms.Tensor) -> Any:
    """The grads scaled so that their global norm is at most ``clip_norm``."""
    factor = ops.minimum(clip_norm / (norm + 1e-6), 1.0)
    return _hyper_map(ops.partial(_scale_grad, factor), grads)


def _clip_tensor(clip_norm: float | None) -> ms.Tensor:
    if clip_norm is not None and not clip_norm > 0:
        raise ValueError(f"clip_norm must be a positive number or None, got {clip_norm!r}")
    return ms.Tensor(clip_norm if clip_norm is not None else 1.0, ms.float32)
