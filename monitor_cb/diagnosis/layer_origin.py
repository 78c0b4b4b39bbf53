"""``layer_origin``: when the loss or the global gradient norm blows up, which parameter left its baseline first.

The global gradient norm says *that* gradients exploded, not *where*. A run that logs a family of
per-parameter series (``grad_norm/<param>``, MindFormers' ``local_norm/<param>``,
``adam_m_norm/<param>``, ...) holds the answer: the parameter whose own value left its baseline
first, and by most, in the points before the blow-up. This detector runs after the others, on
their findings: each corroborated ``loss_spike``, ``grad_explosion`` or ``nan`` (a warning or an
error) is a trigger, and for each the family members are compared with their own median over the
``baseline_window`` points before a window of ``layer_window`` points ending at the trigger. A
member departs when it reaches ``layer_ratio`` times that baseline (or NaN/Inf). No trigger, or no
member departing, means no finding: a healthy run, or a blow-up no parameter of the family shows,
stays quiet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from monitor_cb.analysis.families import Family, parameter_families
from monitor_cb.analysis.roles import automatic
from monitor_cb.diagnosis.findings import Finding, explain, fmt_step
from monitor_cb.diagnosis.settings import DiagnosisSettings

TRIGGER_KINDS = ("nan", "grad_explosion", "loss_spike")
TRIGGER_WORDS = {"nan": "the NaN/Inf", "grad_explosion": "the gradient explosion", "loss_spike": "the loss spike"}
# families that measure gradients come first when two name the same step
PREFERRED = ("grad_norm", "local_norm", "device_local_norm", "adam_m_norm", "adam_v_norm")
GRADIENT_FAMILIES = ("grad_norm", "local_norm", "device_local_norm")
MAX_TRIGGERS = 10
NAMED_OTHERS = 3


@dataclass(frozen=True)
class Departure:
    """A member that left its baseline: where it first did, and its peak factor (inf for NaN/Inf)."""

    family: str
    member: str
    column: str
    step: int
    factor: float
    baseline: float


def detect_layer_origin(
    frame: pd.DataFrame,
    settings: DiagnosisSettings,
    triggers: list[Finding],
    logged: Mapping[str, np.ndarray] | None = None,
) -> list[Finding]:
    """One finding per trigger whose window shows a family member leaving its baseline (see the module).

    ``logged``: column -> "was logged" mask aligned with ``frame`` (``RunFrame.masks``); without it a
    NaN counts as logged where another member of its family was logged in the same row.
    """
    names = [c for c in frame.columns if isinstance(c, str)]
    casting = automatic(names)
    families = parameter_families(names, exclude=(n for n in names if casting.role_of(n) is not None))
    if not families or "step" not in frame.columns:
        return []
    families.sort(key=lambda f: (PREFERRED.index(f.name) if f.name in PREFERRED else len(PREFERRED), f.name))
    steps = pd.to_numeric(frame["step"], errors="coerce").to_numpy(np.float64)
    findings: list[Finding] = []
    leads: dict[tuple[str, int], int] = {}  # (column, step) of a lead already named -> its finding
    for trigger in sorted((t for t in triggers if _is_trigger(t)), key=lambda t: t.step)[:MAX_TRIGGERS]:
        departures = [d for fam in families for d in _departures(frame, steps, fam, trigger.step, settings, logged)]
        if not departures:
            continue
        finding = _finding(trigger, departures, settings)
        lead = (str(finding.details["column"]), finding.step)
        if lead in leads:  # the same episode seen from a later trigger (the NaN after the spike): one finding
            i = leads[lead]
            if finding.level > findings[i].level:
                findings[i] = replace(findings[i], severity=finding.severity)
            continue
        leads[lead] = len(findings)
        findings.append(finding)
    return findings


def _is_trigger(finding: Finding) -> bool:
    return finding.kind in TRIGGER_KINDS and finding.severity != "info"


def _departures(
    frame: pd.DataFrame,
    steps: np.ndarray,
    family: Family,
    at: int,
    settings: DiagnosisSettings,
    masks: Mapping[str, np.ndarray] | None,
) -> list[Departure]:
    """Members of ``family`` that left their baseline in the window ending at step ``at``."""
    upto = np.flatnonzero(steps <= at)
    if upto.size == 0:
        return []
    end, need, take = int(upto[-1]) + 1, settings.layer_window + settings.baseline_window, 256
    while True:  # the last rows only: enough of them to hold the window and its baseline
        begin = max(0, end - take)
        values = _numbers(frame.iloc[begin:end], family.columns)
        logged = _logged(values, family, masks, len(frame), begin)
        rows = np.flatnonzero(logged.any(axis=1))  # rows where the family was logged
        if rows.size >= need or begin == 0:
            break
        take *= 4
    steps = steps[begin:end]
    window, history = rows[-settings.layer_window :], rows[: -settings.layer_window][-settings.baseline_window :]
    if history.size < settings.min_baseline or window.size == 0:
        return []
    with np.errstate(invalid="ignore", divide="ignore"):
        hist = np.abs(values[history])
        hist[~np.isfinite(hist)] = np.nan
        base = np.nanmedian(np.where(np.isfinite(hist).any(axis=0), hist, 0.0), axis=0)
        win = values[window]
        ratio = np.abs(win) / base
        bad = logged[window] & ~np.isfinite(win)
        out_high = (ratio >= settings.layer_ratio) & (base > 0)
    left = out_high | bad
    found = []
    for j in np.flatnonzero(left.any(axis=0)):
        first = int(np.argmax(left[:, j]))
        peak = np.where(bad[:, j], np.inf, np.nan_to_num(ratio[:, j], nan=0.0, posinf=np.inf))
        found.append(
            Departure(
                family.name,
                family.members[j],
                family.columns[j],
                int(steps[window[first]]),
                float(np.max(peak)),
                float(base[j]),
            )
        )
    return found


def _numbers(rows: pd.DataFrame, columns: tuple[str, ...]) -> np.ndarray:
    """The columns as floats; text in a column reads as NaN (not logged), never as an error."""
    block = rows[list(columns)]
    try:
        return block.to_numpy(np.float64)
    except (TypeError, ValueError):
        return block.apply(pd.to_numeric, errors="coerce").to_numpy(np.float64)


def _logged(
    values: np.ndarray, family: Family, masks: Mapping[str, np.ndarray] | None, n: int, begin: int
) -> np.ndarray:
    """Per row and member: was it logged (a logged NaN included)."""
    if masks is not None and all(c in masks and len(masks[c]) == n for c in family.columns):
        cut = slice(begin, begin + len(values))
        return np.column_stack([np.asarray(masks[c][cut], bool) for c in family.columns])
    present = ~np.isnan(values)
    return present | present.any(axis=1, keepdims=True)  # a family is logged together


def _finding(trigger: Finding, departures: list[Departure], settings: DiagnosisSettings) -> Finding:
    departures.sort(key=lambda d: (d.step, -d.factor, d.member))
    lead = departures[0]
    ahead = trigger.step - lead.step
    factor = _times(lead.factor)
    trigger_words = TRIGGER_WORDS[trigger.kind]
    when = f"{fmt_step(ahead)} steps before {trigger_words}" if ahead > 0 else f"at the step of {trigger_words}"
    others = [d for d in departures[1:] if d.column != lead.column]
    also = ""
    if others:
        named = ", ".join(f"{d.member} ({_times(d.factor)}, step {fmt_step(d.step)})" for d in others[:NAMED_OTHERS])
        more = len(others) - NAMED_OTHERS
        also = f"; then {named}" + (f" and {more} more" if more > 0 else "")
    what_kind = "Gradient explosion" if lead.family in GRADIENT_FAMILIES else f"A {lead.family} jump"
    what = f"{what_kind} starting in {lead.member} ({lead.family}) at step {fmt_step(lead.step)}: "
    what += f"{factor} its baseline, {when}{also}"
    why = (
        f"{lead.column} reached {factor} its median over the {settings.baseline_window} points before the "
        f"{settings.layer_window} points ending at step {fmt_step(trigger.step)} "
        f"(threshold {settings.layer_ratio:g}x), the first of its family to do so"
    )
    advice = "Look at that layer first (its learning rate, initialisation, inputs); per-layer clipping may help"
    return Finding(
        kind="layer_origin",
        severity=trigger.severity,
        step=lead.step,
        end_step=trigger.step if trigger.step > lead.step else None,
        message=explain(what, advice, why),
        details={
            "family": lead.family,
            "member": lead.member,
            "column": lead.column,
            "factor": lead.factor,
            "baseline": lead.baseline,
            "trigger_kind": trigger.kind,
            "trigger_step": trigger.step,
            "steps_ahead": ahead,
            "others": [d.column for d in others[:10]],
        },
        why=why,
    )


def _times(factor: float) -> str:
    if not np.isfinite(factor):
        return "NaN/Inf instead of"
    return f"{factor:.0f}x" if factor >= 10 else f"{factor:.1f}x"
