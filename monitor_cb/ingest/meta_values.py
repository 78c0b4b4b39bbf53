"""Numbers read from run metadata, which comes from disk and may hold anything."""

from __future__ import annotations

import math
from typing import Any


def finite_float(value: Any) -> float | None:
    """``value`` as a finite float, or None when it is not one (text, a list, NaN, a 400-digit int)."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None
