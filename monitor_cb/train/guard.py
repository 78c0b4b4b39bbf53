"""The NaN guard policy, framework-free.

``NanGuard.check(step, loss, grad_norm)`` is called once per training step and
returns a :class:`GuardVerdict`: whether this step is worth recording out of
the logging interval (the first non-finite value of a streak, an over-limit
gradient norm), whether to warn, and whether to stop. The callback does the
recording, flushing and ``run_context.request_stop()``; this module only
decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ON_NAN_MODES = ("warn", "stop")


@dataclass(frozen=True)
class GuardVerdict:
    """What the guard wants done about one step.

    Attributes:
        record: log this step even if it is not on the logging interval.
        warning: a message to warn with once, or None.
        stop: stop training after this step.
        reason: why it stops (``"stopped: non-finite loss at step 412"``), or None.
        kind: ``"loss"`` or ``"grad_norm"``: which check fired, or None.
    """

    record: bool = False
    warning: str | None = None
    stop: bool = False
    reason: str | None = None
    kind: str | None = None


OK = GuardVerdict()


class NanGuard:
    """Watch losses and gradient norms for non-finite values and explosions.

    Args:
        on_nan: ``"warn"`` (record and warn, the default) or ``"stop"`` (also
            stop training gracefully).
        patience: stop after this many consecutive steps with a non-finite loss.
        max_grad_norm: a gradient norm above this (or non-finite) is an event;
            None disables the check.
    """

    def __init__(self, on_nan: str = "warn", patience: int = 1, max_grad_norm: float | None = None) -> None:
        if on_nan not in ON_NAN_MODES:
            raise ValueError(f"on_nan must be one of {ON_NAN_MODES}, got {on_nan!r}")
        if int(patience) < 1:
            raise ValueError(f"nan_patience must be >= 1, got {patience!r}")
        if max_grad_norm is not None and not max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be a positive number or None, got {max_grad_norm!r}")
        self.on_nan = on_nan
        self.patience = int(patience)
        self.max_grad_norm = max_grad_norm
        self.streak = 0
        self.grad_streak = 0
        self.stopped = False

    @property
    def watches_grad_norm(self) -> bool:
        return self.max_grad_norm is not None

    def check(self, step: int, loss: float | None, grad_norm: float | None = None) -> GuardVerdict:
        """The verdict for one step's loss and (optional) gradient norm."""
        if self.stopped:
            return OK
        if loss is not None and not math.isfinite(loss):
            self.streak += 1
            first, due = self.streak == 1, self.streak >= self.patience
            return self._event(step, "non-finite loss", "loss", first=first, due=due)
        self.streak = 0
        if self.max_grad_norm is not None and grad_norm is not None and not grad_norm <= self.max_grad_norm:
            self.grad_streak += 1
            what = "non-finite gradient norm" if not math.isfinite(grad_norm) else "gradient norm above limit"
            detail = f" ({grad_norm:.4g} > {self.max_grad_norm:g})" if math.isfinite(grad_norm) else ""
            return self._event(step, what + detail, "grad_norm", first=self.grad_streak == 1, due=True)
        self.grad_streak = 0
        return OK

    def _event(self, step: int, what: str, kind: str, *, first: bool, due: bool) -> GuardVerdict:
        stop = due and self.on_nan == "stop"
        reason = f"stopped: {what} at step {step}" if stop else None
        self.stopped = stop
        warning = None
        if stop:
            warning = f"{what} at step {step}: stopping training ({reason})"
        elif first and self.on_nan == "stop":
            warning = f"{what} at step {step}; stopping after {self.patience} consecutive steps"
        elif first:
            warning = f"{what} at step {step}; training continues (on_nan='warn')"
        return GuardVerdict(record=first or stop, warning=warning, stop=stop, reason=reason, kind=kind)
