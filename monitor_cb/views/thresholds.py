"""User-typed alert thresholds (``loss > 10``), parsed with a message for each bad line."""

from __future__ import annotations

import re

_THRESHOLD_RE = re.compile(r"^\s*([A-Za-z_][\w.\-/]*)\s*(>|<)\s*([-+0-9.eE]+|inf|-inf)\s*$")


def parse_thresholds(text: str) -> tuple[dict[str, tuple[float | None, float | None]], list[str]]:
    """``"grad_norm > 10, loss < 0.01"`` -> ``{"grad_norm": (None, 10.0), "loss": (0.01, None)}``.

    Returns the thresholds (``(lower, upper)`` per metric; points beyond turn red) and the parts
    that could not be read, so the page can name them.
    """
    limits: dict[str, tuple[float | None, float | None]] = {}
    errors: list[str] = []
    for part in re.split(r"[,;\n]", text):
        if not part.strip():
            continue
        match = _THRESHOLD_RE.match(part)
        if match is None:
            errors.append(part.strip())
            continue
        name, op, number = match.groups()
        try:
            value = float(number)
        except ValueError:
            errors.append(part.strip())
            continue
        lower, upper = limits.get(name, (None, None))
        limits[name] = (lower, value) if op == ">" else (value, upper)
    return limits, errors
