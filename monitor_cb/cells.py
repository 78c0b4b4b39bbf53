"""A train cell that returns the gradient norm, and the norm for custom loops.

``TrainOneStepWithGradNorm(net_with_loss, optimizer)`` is a drop-in for
``nn.TrainOneStepCell`` whose outputs are ``(loss, grad_norm)``, computed in the
graph (GRAPH_MODE) from the reduced gradients before the update; ``LiveMonitor``
logs both. ``global_grad_norm(grads)`` computes the same norm from the grads
tuple of ``mindspore.value_and_grad`` in a custom loop (PyNative or ``@jit``).
"""

from __future__ import annotations

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


def global_grad_norm(grads: Any) -> ms.Tensor:
    """Global L2 norm ``sqrt(sum(g**2))`` over a tuple/list of gradient tensors, in float32.

    Example:
        >>> loss, grads = grad_fn(x, y)         # mindspore.value_and_grad(..., weights)
        >>> norm = global_grad_norm(grads)
        >>> writer.log(step=step, loss=loss, grad_norm=norm)
    """
    squares = _hyper_map(_square_sum, tuple(grads))
    return ops.sqrt(ops.addn(squares))


class TrainOneStepWithGradNorm(nn.TrainOneStepCell):
    """``nn.TrainOneStepCell`` that also returns the global gradient norm.

    Args:
        network: the network with its loss (``nn.WithLossCell`` or similar).
        optimizer: the optimizer.
        sens: loss scaling for the backward pass, as in ``nn.TrainOneStepCell``.
        clip_norm: if given, clip the gradients to this global norm before the
            update; the returned norm is the pre-clip one.

    Outputs:
        ``(loss, grad_norm)``, both float scalars; ``LiveMonitor`` reads them with
        the ``"grad_norm"`` layout.
    """

    output_layout = "grad_norm"

    def __init__(
        self, network: nn.Cell, optimizer: nn.Optimizer, sens: float | None = None, clip_norm: float | None = None
    ) -> None:
        super().__init__(network, optimizer, sens=sens)
        if clip_norm is not None and not clip_norm > 0:
            raise ValueError(f"clip_norm must be a positive number or None, got {clip_norm!r}")
        self.clip = clip_norm is not None
        self.clip_norm = ms.Tensor(clip_norm if clip_norm is not None else 1.0, ms.float32)

    def construct(self, *inputs: Any) -> tuple[ms.Tensor, ms.Tensor]:
        loss = self.network(*inputs)
        sens = ops.fill(loss.dtype, loss.shape, self.sens)
        grads = self.grad(self.network, self.weights)(*inputs, sens)
        grads = self.grad_reducer(grads)
        norm = global_grad_norm(grads)
        if self.clip:
            factor = ops.minimum(self.clip_norm / (norm + 1e-6), 1.0)
            grads = _hyper_map(ops.partial(_scale_grad, factor), grads)
        loss = ops.depend(loss, self.optimizer(grads))
        return loss, norm
