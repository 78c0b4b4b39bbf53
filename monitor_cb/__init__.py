"""Live training monitor for MindSpore and MindFormers.

``from monitor_cb import LiveMonitor`` adds the callback to ``Model.train``
(``grad_norm_model`` builds a ``Model`` whose steps also return the gradient norm);
``MetricsWriter`` serves custom training loops. MindSpore is imported only when
a MindSpore-specific name is first used, so the dashboard and the reading side
never pay for ``import mindspore``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from monitor_cb.record import SCHEMA_VERSION
from monitor_cb.train.writer import MetricsWriter, MonitorWarning

__version__ = "0.1.0"

# name -> module that defines it; these modules import MindSpore.
_LAZY = {
    "LiveMonitor": "monitor_cb.train.callback",
    "TrainOneStepWithGradNorm": "monitor_cb.train.cells",
    "TrainOneStepWithLossScaleAndGradNorm": "monitor_cb.train.cells",
    "grad_norm_model": "monitor_cb.train.grad_norm",
    "global_grad_norm": "monitor_cb.train.cells",
    "lr_metrics": "monitor_cb.train.lr",  # no MindSpore import itself; lazy to keep `import monitor_cb` minimal
}

__all__ = [
    "SCHEMA_VERSION",
    "LiveMonitor",
    "MetricsWriter",
    "MonitorWarning",
    "TrainOneStepWithGradNorm",
    "TrainOneStepWithLossScaleAndGradNorm",
    "global_grad_norm",
    "grad_norm_model",
    "lr_metrics",
]

if TYPE_CHECKING:  # pragma: no cover
    from monitor_cb.train.callback import LiveMonitor
    from monitor_cb.train.cells import TrainOneStepWithGradNorm, TrainOneStepWithLossScaleAndGradNorm, global_grad_norm
    from monitor_cb.train.grad_norm import grad_norm_model
    from monitor_cb.train.lr import lr_metrics


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'monitor_cb' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
