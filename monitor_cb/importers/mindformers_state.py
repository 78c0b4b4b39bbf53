"""TrainingStateMonitor's per-parameter lines of a MindFormers log, as metric columns.

With ``monitor_config`` (MindFormers 1.x, ``core/callback/callback.py``, ``_to_log``) or the 2.x
max-logits monitor (``pynative/callback/max_logits_monitor.py``) the log gets one line per value::

    [INFO] ... Epoch:[  1/  2], step:[    3/   20] local_norm/model.layers.0.attention.wq.weight: 0.1234
    [INFO] ... step:[    3/  100] max_attention_logit/max: 12.5          (2.x: no epoch)

The tag is kept as the metric name (``local_norm/<param>``, ``local_loss`` forms, ``adam_m_norm/<param>``,
``weight_stable_rank/<param>``, ``max_attention_logit/mean`` ...), so a per-parameter view can group
them by their prefix. A value that is not one number (a per-head list) is left out; several values
of one name at one step (``micro_local_<tag>_loss``, one per micro-batch) are averaged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# "step:[ s/ n] <tag>: " - a bracket then a space, where MFLossMonitor's line has "], "
STATE_LINE = r"step:\[\s*-?\d+\s*/\s*-?\d+\s*\]\s+\S+:\s"
_PARTS = r"(?:Epoch:\[\s*(-?\d+)\s*/\s*(-?\d+)\s*\],\s*)?step:\[\s*(-?\d+)\s*/\s*(-?\d+)\s*\]\s+(\S+):\s+(.*?)\s*$"


@dataclass
class StateLines:
    """The parts of TrainingStateMonitor lines, one entry per line (None / NaN where unreadable)."""

    epoch: Any  # polars Int64 series (null: the 2.x form, no epoch)
    epochs: Any
    step: Any
    per_epoch: Any
    tag: np.ndarray  # object
    value: np.ndarray  # float64, NaN where not one number
    scalar: np.ndarray  # bool: the value is one number (NaN and Inf included)


def split_state_lines(line: Any) -> StateLines:
    """Each line's epoch, step, tag and value (``0.12``, ``[0.12]``, ``nan``; a list is not a scalar)."""
    import polars as pl

    groups = line.str.extract_groups(_PARTS)
    ints = [groups.struct.field(str(i)).cast(pl.Int64, strict=False) for i in range(1, 5)]
    text = groups.struct.field("6").str.strip_chars("[] ")
    number = text.cast(pl.Float64, strict=False)
    return StateLines(
        *ints,
        tag=groups.struct.field("5").fill_null("").to_numpy().astype(object),
        value=number.fill_null(float("nan")).to_numpy(),
        scalar=number.is_not_null().to_numpy(),
    )


Columns = dict[str, tuple[np.ndarray, np.ndarray]]  # name -> (values, logged)


def pivot_by_step(steps: np.ndarray, tags: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, Columns]:
    """Consecutive lines of one step as one row: (index of each row's first line, {tag: values per row}).

    ``steps`` are the lines' global steps in line order; a step that comes back later (a restart)
    starts a new row. Each row's value of a tag is the mean of that step's values (NaN: not logged).
    """
    if not len(steps):
        return np.empty(0, np.int64), {}
    starts = np.flatnonzero(np.r_[True, steps[1:] != steps[:-1]])
    group = np.cumsum(np.r_[True, steps[1:] != steps[:-1]]) - 1
    names, which = np.unique(tags.astype(str), return_inverse=True)
    sums = np.zeros((len(starts), len(names)))
    counts = np.zeros((len(starts), len(names)))
    np.add.at(sums, (group, which), values)
    np.add.at(counts, (group, which), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1.0), np.nan)
    logged = counts > 0
    return starts, {str(name): (means[:, i], logged[:, i]) for i, name in enumerate(names)}
