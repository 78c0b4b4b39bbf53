"""One series judged against its own noise: the scale it is compared on, its trend, its noise and its resolution.

Real training curves are noisy in very different ways: a per-batch loss spans a decade, an RL
objective crosses zero, a Trainer rounds to 4 decimals, an epoch-level loss is smooth. So every
detector that asks "is this point unusual?" asks it of the series' own noise:

* a positive series is compared on the log scale (per-batch noise is multiplicative, and "3x" means
  the same at any level); a series that reaches zero or below (a policy-gradient or GRPO objective)
  on the linear scale;
* the trend is the median of the block medians before a point, so a spike never moves it;
* the noise is the spread of the residuals around the block medians (not of the level, and not of
  first differences), with the 90th percentile as a floor so bursty noise counts;
* the logging resolution (``quantum``) is a floor for both: a loss that only moves between 0.0002
  and 0.0003 is moving by its rounding, not by 50%.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._cache import frame_memo
from monitor_cb.diagnosis._stats import Series, forward_median, positive, quantum, trailing_noise

_MEDIAN_SE = 1.2533  # a median of k Gaussian points has sd 1.2533 sigma / sqrt(k)


@dataclass(frozen=True)
class Noise:
    """A series on its comparison scale, with the trend and noise scale before each point.

    ``x``: the values on that scale (``log(values)`` when ``log``); ``level`` and ``sigma``: trailing
    trend and noise (NaN until ``min_points`` points came before); ``quantum``: the logging
    resolution of the raw values (0 if none); ``level_raw``: the trend back on the raw scale.
    """

    log: bool
    values: np.ndarray
    x: np.ndarray
    level: np.ndarray
    sigma: np.ndarray
    quantum: float

    @property
    def level_raw(self) -> np.ndarray:
        return np.exp(self.level) if self.log else self.level

    def median_sigma(self, points: int) -> np.ndarray:
        """The noise of the median of ``points`` consecutive points."""
        return self.sigma * (_MEDIAN_SE / np.sqrt(points) if points > 1 else 1.0)

    def forward(self, points: int) -> np.ndarray:
        """Median of each point and the ``points - 1`` after it, on the comparison scale."""
        return self.x if points <= 1 else forward_median(self.x, points)

    def rel_excess(self, rel: float) -> np.ndarray | float:
        """The excess over the trend that ``rel`` (0.3 = +30%) amounts to, on the comparison scale."""
        return np.log1p(rel) if self.log else rel * np.abs(self.level)


def frame_noise(
    frame: pd.DataFrame, name: str, s: Series, window: int, min_points: int, *, log: bool | None = None
) -> Noise:
    """:func:`series_noise` of column ``name`` of ``frame`` (its finite series ``s``), once per diagnose call."""
    key = ("noise", len(frame), name, len(s), window, min_points, log)
    return frame_memo(frame, key, lambda: series_noise(s.values, window, min_points, log=log))


def series_noise(values: np.ndarray, window: int, min_points: int, *, log: bool | None = None) -> Noise:
    """:class:`Noise` of ``values`` (finite) with trailing baselines of about ``window`` points."""
    log = positive(values) if log is None else log
    x = np.log(values) if log else values
    level, sigma = trailing_noise(x, window, min_points)
    q = quantum(values)
    with np.errstate(divide="ignore", invalid="ignore"):
        if log:
            # one logging step at the current level, and a millionth: a constant series has no noise
            floor = np.maximum(q / np.exp(level), 1e-6)
        else:
            floor = np.maximum(q, 1e-6 * np.abs(level))
            floor = np.where(floor > 0, floor, 1e-12)
    sigma = np.maximum(sigma, floor)
    return Noise(log, values, x, level, sigma, q)


__all__ = ["Noise", "frame_noise", "series_noise"]
