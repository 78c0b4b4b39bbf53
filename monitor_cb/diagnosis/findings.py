"""What a detector reports: a :class:`Finding`, with ordered severities and people-friendly numbers."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Severity = Literal["info", "warning", "error"]
SEVERITIES: tuple[Severity, ...] = ("info", "warning", "error")
_RANK = {name: i for i, name in enumerate(SEVERITIES)}

KINDS: tuple[str, ...] = (
    "nan",
    "grad_explosion",
    "loss_spike",
    "divergence",
    "lr_anomaly",
    "throughput_drop",
    "overfitting",
    "sawtooth",
    "stalled",
    "plateau",
    "straggler",
    "rank_divergence",
    "layer_origin",
)


def severity_rank(severity: str) -> int:
    """0 for info, 1 for warning, 2 for error, so severities compare with ``<``."""
    return _RANK[severity]


@dataclass(frozen=True)
class Finding:
    """One diagnosed problem.

    Args:
        kind: one of :data:`KINDS` (``"nan"``, ``"grad_explosion"``, ...).
        severity: ``"info"``, ``"warning"`` or ``"error"`` (compare with :func:`severity_rank`).
        step: training step where the problem began (the chart marker goes here).
        message: plain language: what happened, the likely cause and what to do, ending with why it
            fired (the sentence in ``why``), so every place that shows the message shows the reason.
        end_step: last step of the episode (a band from ``step`` to ``end_step``); None = a point.
        rank: the rank it was seen on, for multi-rank frames; None = the run as a whole.
        details: numbers behind the message (JSON-safe), for tooltips and tests; the values compared
            and the thresholds they were compared with.
        why: why it fired: the numbers compared and the thresholds, in words ("" for none).
    """

    kind: str
    severity: Severity
    step: int
    message: str
    end_step: int | None = None
    rank: int | None = None
    details: dict[str, Any] = field(default_factory=dict, compare=False)
    why: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.severity not in _RANK:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {self.severity!r}")

    @property
    def level(self) -> int:
        """Numeric severity (0 info, 1 warning, 2 error)."""
        return _RANK[self.severity]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (non-finite floats in ``details`` become None)."""
        out = asdict(self)
        out["details"] = {k: _json_safe(v) for k, v in self.details.items()}
        return out


def explain(what: str, advice: str, why: str) -> str:
    """A finding's message: what happened, what to do, then ``Why: ...`` (the numbers and thresholds)."""
    parts = [what.rstrip(". ") + "."]
    if advice:
        parts.append(advice.rstrip(". ") + ".")
    if why:
        parts.append(f"Why: {why.rstrip('. ')}.")
    return " ".join(parts)


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """By step, then most severe first, then kind (a stable order for tables and tests)."""
    return sorted(findings, key=lambda f: (f.step, -f.level, f.kind, -1 if f.rank is None else f.rank))


def worst_severity(findings: list[Finding]) -> Severity | None:
    """The highest severity among ``findings``; None when there are none."""
    if not findings:
        return None
    return SEVERITIES[max(f.level for f in findings)]


def fmt_step(step: float | int) -> str:
    """``41200`` -> ``"41,200"``."""
    return f"{int(step):,}"


def fmt_num(value: float) -> str:
    """As a person writes it: ``0.0003`` -> ``"3.0e-04"``, ``1234.5`` -> ``"1,234"``, ``2.345`` -> ``"2.35"``."""
    if value is None or math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Inf" if value > 0 else "-Inf"
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if magnitude < 0.01:
        return f"{value:.1e}"
    if magnitude >= 1e7:
        return f"{value:.2g}"
    if magnitude >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def fmt_exact(value: float) -> str:
    """A value a message says was held exactly, to 6 significant digits: ``0.00325`` -> ``"3.25e-03"``.

    :func:`fmt_num` rounds to 2-3 digits, which is right for "about" but wrong for "exactly": a loss
    stuck at 0.00325 read "exactly 3.2e-03", a value the run never logged.
    """
    if value is None or not math.isfinite(value) or value == 0:
        return fmt_num(value)
    if abs(value) < 0.01 or abs(value) >= 1e7:
        mantissa, exponent = f"{value:.5e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{exponent}"
    return f"{value:,.6g}"


def fmt_ratio(ratio: float) -> str:
    """A multiplier: ``38.2`` -> ``"38×"``, ``2.46`` -> ``"2.5×"``."""
    if not math.isfinite(ratio):
        return "∞×"
    return f"{ratio:,.0f}×" if ratio >= 10 else f"{ratio:.1f}×"


def fmt_seconds(seconds: float) -> str:
    """Seconds per step: ``0.0093`` -> ``"9.3 ms"``, ``1.52`` -> ``"1.52 s"``."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    if abs(seconds) < 1:
        return f"{seconds * 1000:.3g} ms"
    return f"{seconds:.3g} s"


def fmt_pct(fraction: float) -> str:
    """``0.853`` -> ``"85%"``."""
    return f"{fraction * 100:.0f}%"


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        return _json_safe(value.item())
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value
