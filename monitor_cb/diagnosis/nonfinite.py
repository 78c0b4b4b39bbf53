"""``nan``: a non-finite training loss (an error), and steps a loss scaler skipped (an info, unless they persist).

With mixed precision, a dynamic loss scaler skips the update of a step whose gradients overflowed
and lowers the scale: the grad norm logged for that step is NaN or Inf while the loss stays finite,
and training goes on. That is bookkeeping, not divergence, so such steps are counted in one info
note; only ``nan_skip_persist`` of them in a row (every update skipped) make a warning. A NaN or Inf
*loss* is always an error.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import column, episodes, frame_steps, run_lengths, train_rows
from monitor_cb.diagnosis.findings import Finding, explain, fmt_num, fmt_step
from monitor_cb.diagnosis.settings import DiagnosisSettings

_WATCHED = ("loss", "grad_norm")  # the columns whose "was logged" masks this detector reads


def detect_nan(
    frame: pd.DataFrame, settings: DiagnosisSettings, logged: Mapping[str, np.ndarray] | None = None
) -> list[Finding]:
    """An error at the first train row whose loss is NaN or ±Inf; skipped steps as an info or a warning.

    ``logged`` (column -> "was logged" mask, from ``RunFrame.masks``) tells a logged NaN from
    "not logged on this row", e.g. a grad norm a custom loop logs on some steps only, or a loss on a
    row that also holds an evaluation.
    """
    if len(frame) == 0:
        return []
    rows = train_rows(frame)
    steps = frame_steps(frame)
    overflow = _overflow(frame)
    loss, grad = column(frame, "loss"), column(frame, "grad_norm")
    findings: list[Finding] = []
    bad_loss = np.zeros(len(frame), dtype=bool)
    if loss is not None:
        where = _logged(logged, "loss", rows)
        bad_loss = where & ~np.isfinite(loss)
        hits = np.flatnonzero(bad_loss & ~overflow)
        if hits.size:
            at = int(hits[0])
            lead = _grad_lead(grad, _logged(logged, "grad_norm", rows), at)
            findings.append(_loss_error(frame, steps, at, hits.size, grad, lead))
    if grad is not None:
        where = _logged(logged, "grad_norm", rows)
        skipped = (where & ~np.isfinite(grad) & ~bad_loss) | (overflow & (where | bad_loss))
        if skipped.any() and not findings:
            findings += _skipped(steps, skipped, grad, where, settings)
    return findings


def _logged(logged: Mapping[str, np.ndarray] | None, name: str, rows: np.ndarray) -> np.ndarray:
    if logged is not None and name in logged and len(logged[name]) == len(rows):
        return np.asarray(logged[name], dtype=bool)
    return rows


def _grad_lead(grad: np.ndarray | None, where: np.ndarray, at: int) -> int:
    """The first row of the non-finite grad norms that lead straight into the NaN loss at ``at`` (else ``at``)."""
    if grad is None:
        return at
    logged = np.flatnonzero(where[:at])
    start = at
    for row in logged[::-1]:
        if np.isfinite(grad[row]):
            break
        start = int(row)
    return start


def _loss_error(
    frame: pd.DataFrame, steps: np.ndarray, at: int, count: int, grad: np.ndarray | None, lead: int
) -> Finding:
    value = float(column(frame, "loss")[at])
    what = f"loss became {fmt_num(value)} at step {fmt_step(steps[at])}"
    if lead < at:
        what = (
            f"grad norm became {fmt_num(float(grad[lead]))} at step {fmt_step(steps[lead])}, then the "
            f"loss became {fmt_num(value)} at step {fmt_step(steps[at])}"
        )
    elif grad is not None and not np.isfinite(grad[at]):
        what += f" (grad norm {fmt_num(float(grad[at]))})"
    lr = column(frame, "lr")
    lr_note = ""
    if lr is not None:
        finite = np.flatnonzero(np.isfinite(lr[: at + 1]))
        if finite.size:
            lr_note = f" at lr {fmt_num(float(lr[finite[-1]]))}"
    if at == 0 or not np.isfinite(column(frame, "loss")[:at]).any():
        advice = "It failed at the first logged step: check the data, the loss function and the initialisation"
    else:
        advice = (
            f"Training diverged{lr_note}: lower the learning rate, enable gradient clipping or loss scaling, and "
            "check the batch that came in at this step; resume from the last checkpoint before it"
        )
    why = f"a loss that is not a finite number is always an error ({count} non-finite loss value(s) logged)"
    first = {"loss": int(steps[at])} | ({"grad_norm": int(steps[lead])} if lead < at else {})
    details = {"column": "loss", "value": fmt_num(value), "count": int(count), "first": first}
    return Finding("nan", "error", int(steps[lead]), explain(what, advice, why), None, None, details, why)


def _skipped(
    steps: np.ndarray, skipped: np.ndarray, grad: np.ndarray, where: np.ndarray, settings: DiagnosisSettings
) -> list[Finding]:
    """Skipped steps (grad norm non-finite, loss finite): one info note, a warning for a run of them."""
    logged_idx = np.flatnonzero(where)
    flags = skipped[logged_idx]  # per logged point
    runs = run_lengths(flags)
    longest = int(runs.max()) if runs.size else 0
    count = int(flags.sum())
    first = int(logged_idx[np.argmax(flags)])
    out = []
    need = settings.nan_skip_persist
    for a, b in episodes(runs >= need):
        start = int(logged_idx[a - need + 1])
        end = int(logged_idx[b])
        length = int(runs[b])
        what = (
            f"the grad norm has been non-finite for {length} logged steps in a row from step {fmt_step(steps[start])} "
            "while the loss stayed finite: every update is being skipped (the loss scale keeps overflowing, or "
            "the gradients really are NaN/Inf)"
        )
        advice = (
            "Check the loss-scale settings and for NaN/Inf in the inputs or the model; the weights are not "
            "changing while this lasts"
        )
        why = f"{length} non-finite grad norms in a row (threshold nan_skip_persist = {need} in a row)"
        details = {"variant": "skipping", "count": length, "value": fmt_num(float(grad[start]))}
        out.append(
            Finding(
                "nan", "warning", int(steps[start]), explain(what, advice, why), int(steps[end]), None, details, why
            )
        )
    if out:
        return out
    what = (
        f"{count} step{'s' if count > 1 else ''} with a non-finite grad norm and a finite loss (first at step "
        f"{fmt_step(steps[first])}): the loss scaler skipped those updates"
    )
    why = (
        f"the loss stayed finite and at most {longest} such step(s) came in a row (a warning from "
        f"nan_skip_persist = {need} in a row): mixed-precision bookkeeping, not divergence"
    )
    details = {
        "variant": "skipped_steps",
        "count": count,
        "steps": [int(steps[i]) for i in np.flatnonzero(skipped)[:50]],
    }
    message = explain(what, "Nothing to do unless they become frequent", why)
    return [Finding("nan", "info", int(steps[first]), message, None, None, details, why)]


def _overflow(frame: pd.DataFrame) -> np.ndarray:
    if "overflow" not in frame.columns:
        return np.zeros(len(frame), dtype=bool)
    values = frame["overflow"].to_numpy()
    if values.dtype == bool:
        return values
    if values.dtype.kind in "iuf":
        return np.nan_to_num(values.astype(np.float64)) != 0
    return np.array([v is True or (isinstance(v, (int, float)) and v == v and v != 0) for v in values], dtype=bool)
