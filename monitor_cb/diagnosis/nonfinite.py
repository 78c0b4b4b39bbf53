"""``nan``: the first non-finite training loss or gradient norm."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import column, frame_steps, train_rows
from monitor_cb.diagnosis.findings import Finding, fmt_num, fmt_step
from monitor_cb.diagnosis.settings import DiagnosisSettings

_WATCHED = ("loss", "grad_norm")


def detect_nan(
    frame: pd.DataFrame, settings: DiagnosisSettings, logged: Mapping[str, np.ndarray] | None = None
) -> list[Finding]:
    """One error at the first train row whose loss or grad norm is NaN or ±Inf.

    ``logged`` (column -> "was logged" mask, from ``RunFrame.masks``) rules out NaN that only
    means "not logged on this row", e.g. a grad norm a custom loop logs on some steps only.

    An infinite grad norm on a row flagged ``overflow`` is loss scaling doing its job (the update is
    skipped and the scale lowered), so it does not count unless the loss is non-finite too.
    """
    del settings  # nothing to tune: any non-finite loss is an error
    if len(frame) == 0:
        return []
    rows = train_rows(frame)
    overflow = _overflow(frame)
    first: dict[str, int] = {}
    for name in _WATCHED:
        values = column(frame, name)
        if values is None:
            continue
        bad = rows & ~np.isfinite(values)
        if logged is not None and name in logged:
            bad &= logged[name]
        if name == "grad_norm":
            bad &= ~overflow
        hits = np.flatnonzero(bad)
        if hits.size:
            first[name] = int(hits[0])
    if not first:
        return []
    steps = frame_steps(frame)
    at = min(first.values())
    name = min(first, key=lambda k: (first[k], _WATCHED.index(k)))
    value = float(column(frame, name)[at])
    return [
        Finding(
            kind="nan",
            severity="error",
            step=int(steps[at]),
            message=_message(frame, first, steps, name, value),
            details={"column": name, "value": fmt_num(value), "first": {k: int(steps[v]) for k, v in first.items()}},
        )
    ]


def _message(frame: pd.DataFrame, first: dict[str, int], steps: np.ndarray, name: str, value: float) -> str:
    label = {"loss": "loss", "grad_norm": "grad norm"}[name]
    text = f"{label} became {fmt_num(value)} at step {fmt_step(steps[first[name]])}"
    others = [k for k in first if k != name]
    if others:
        other = others[0]
        other_value = float(column(frame, other)[first[other]])
        text += f" ({_label(other)} {fmt_num(other_value)} from step {fmt_step(steps[first[other]])})"
    at = first[name]
    lr_note = ""
    lr = column(frame, "lr")
    if lr is not None:
        finite = np.flatnonzero(np.isfinite(lr[: at + 1]))
        if finite.size:
            lr_note = f" at lr {fmt_num(float(lr[finite[-1]]))}"
    if at == 0:
        return text + ". It failed at the first logged step: check the data, the loss function and the initialisation."
    return (
        text + f". Training diverged{lr_note}: lower the learning rate, enable gradient clipping or loss scaling, "
        "and check the batch that came in at this step; resume from the last checkpoint before it."
    )


def _label(name: str) -> str:
    return "grad norm" if name == "grad_norm" else name


def _overflow(frame: pd.DataFrame) -> np.ndarray:
    if "overflow" not in frame.columns:
        return np.zeros(len(frame), dtype=bool)
    values = frame["overflow"].to_numpy()
    if values.dtype == bool:
        return values
    if values.dtype.kind in "iuf":
        return np.nan_to_num(values.astype(np.float64)) != 0
    return np.array([v is True or (isinstance(v, (int, float)) and v == v and v != 0) for v in values], dtype=bool)
