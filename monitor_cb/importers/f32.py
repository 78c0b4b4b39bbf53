"""float32 values as the shortest decimal that reads back as the same float32.

TensorBoard stores ``simple_value`` as a float32; its float64 widening shows noise digits
(``0.10000000149``, ``102340.9453125``). What a user typed or printed is the shortest decimal that
round-trips through float32 (``0.1``, ``102340.945``): numpy's ``repr`` of the ``np.float32``
(Dragon4, shortest mode). That takes ~1 µs a value, so arrays are done with exact float64
arithmetic instead and checked: the candidate with ``d`` significant digits is ``m / 10**p``
(or ``m * 10**p``), both exact doubles below 2**53 and 10**22, so IEEE division or multiplication
gives the double nearest the decimal, as ``float(str)`` would. The smallest ``d`` whose candidate
is the same float32 wins; the few values outside that exact range, or where the nearest
``d``-digit decimal misses but a farther one would not (at a power of two), use numpy's repr.
"""

from __future__ import annotations

import numpy as np

# float32 never needs more than 9 significant digits. At most one decimal of 6 digits or fewer lies
# within a float32's rounding interval (their spacing exceeds its ulp), so a 6-digit hit, trailing
# zeros and all, is already the shortest: fewer digits need no pass of their own.
_DIGITS = (6, 7, 8, 9)
_EXACT_POW = 22  # 10**22 is the largest power of ten that is an exact double
_POW10 = 10.0 ** np.arange(_EXACT_POW + 1)


def shortest_f32(value: float) -> float:
    """One float32 as its shortest round-trip decimal (NaN and infinities unchanged)."""
    f32 = np.float32(value)
    if not np.isfinite(f32):
        return float(f32)
    return float(str(f32))


def shortest_f32_array(values: np.ndarray) -> np.ndarray:
    """float64 array: each float32 of ``values`` as its shortest round-trip decimal (vectorised)."""
    with np.errstate(invalid="ignore", over="ignore"):
        f32 = np.asarray(values, np.float32)
        wide = f32.astype(np.float64)
    out = wide.copy()
    usable = np.isfinite(f32) & (f32 != 0)
    if not usable.any():
        return out
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        exponent = np.floor(np.log10(np.abs(np.where(usable, wide, 1.0)))).astype(np.int64)
        # every digit count's scale stays within exact powers of ten; the others go to numpy
        usable &= (exponent <= _EXACT_POW) & (exponent >= 8 - _EXACT_POW)
        found = np.zeros(len(f32), bool)
        todo = np.flatnonzero(usable)
        for digits in _DIGITS:
            x, e = wide[todo], exponent[todo]
            scale = digits - 1 - e  # x * 10**scale has `digits` digits before the point
            up = scale >= 0
            pow10 = _POW10[np.abs(scale)]
            mantissa = np.rint(np.where(up, x * pow10, x / pow10))
            candidate = np.where(up, mantissa / pow10, mantissa * pow10)
            hit = candidate.astype(np.float32) == f32[todo]
            out[todo[hit]] = candidate[hit]
            found[todo[hit]] = True
            todo = todo[~hit]
            if not len(todo):
                break
    for i in np.flatnonzero(np.isfinite(f32) & (f32 != 0) & ~found):
        out[i] = shortest_f32(float(wide[i]))
    return out
