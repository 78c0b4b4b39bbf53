"""The frame the detectors read: each role under the format's key (``loss``, ``eval_loss``, ``lr``, ...).

The detectors are written against the format's keys. A run of another framework names them its own way
(``train/loss``, ``val_loss``, YOLO's three component losses), so before they run, each role the run's
metrics play (:mod:`monitor_cb.analysis.roles`) is put under the format's key: one metric as it is,
several (component losses with no total) as their sum, which is what such a framework optimises. A key
the run already has is replaced only when a user chose another metric for its role. Nothing is copied
for a run whose roles are played by the format's own keys (ours, MindFormers').
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from monitor_cb.analysis.roles import Casting, cast
from monitor_cb.diagnosis.findings import Finding
from monitor_cb.names import shown_name

# The roles the detectors read, each under this key of the format.
ROLE_KEYS: tuple[str, ...] = ("loss", "eval_loss", "lr", "grad_norm", "throughput", "step_time", "loss_scale")
# The roles each kind of finding is judged on (named in its message when played by another metric).
KIND_ROLES: dict[str, tuple[str, ...]] = {
    "nan": ("loss", "grad_norm"),
    "grad_explosion": ("grad_norm", "loss"),
    "loss_spike": ("loss",),
    "divergence": ("loss", "eval_loss"),
    "lr_anomaly": ("lr", "loss"),
    "throughput_drop": ("throughput", "step_time"),
    "overfitting": ("eval_loss", "loss"),
    "sawtooth": ("step_time",),
    "plateau": ("loss", "eval_loss"),
}


@dataclass(frozen=True)
class RoleView:
    """The detectors' frame and masks, and which metrics each format key stands for (only those renamed)."""

    frame: pd.DataFrame
    logged: Mapping[str, np.ndarray] | None
    stands_for: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def explain(self, finding: Finding) -> Finding:
        """``finding`` with a sentence naming the run's metrics behind the keys it was judged on."""
        said = [
            _naming(key, self.stands_for[key]) for key in KIND_ROLES.get(finding.kind, ()) if key in self.stands_for
        ]
        if not said:
            return finding
        note = "Here " + "; ".join(said) + "."
        details = {**finding.details, "roles": {k: list(v) for k, v in self.stands_for.items()}}
        return replace(finding, message=f"{finding.message} {note}", details=details)


def _naming(key: str, names: tuple[str, ...]) -> str:
    shown = ", ".join(shown_name(n, 60) for n in names)
    word = key.replace("_", " ")
    return f"the {word} is {shown}" if len(names) == 1 else f"the {word} is the sum of {shown}"


def role_view(
    frame: pd.DataFrame, logged: Mapping[str, np.ndarray] | None = None, chosen: Mapping[str, Any] | None = None
) -> RoleView:
    """The frame with each role under its format key (see the module doc); ``chosen``: roles set by hand."""
    metrics = [c for c in frame.columns if c not in ("step", "t", "rank", "seg")]
    casting: Casting = cast(metrics, chosen or {}, "set by hand")
    added: dict[str, np.ndarray] = {}
    masks: dict[str, np.ndarray] = {}
    stands_for: dict[str, tuple[str, ...]] = {}
    dropped: list[str] = []
    for key in ROLE_KEYS:
        names = casting.of(key)
        if names == (key,):
            continue
        if not names:
            if key in frame.columns and chosen and key in chosen:
                dropped.append(key)  # the user said no metric plays it
            continue
        values, mask = _combined(frame, logged, names)
        added[key] = values
        if mask is not None:
            masks[key] = mask
        stands_for[key] = names
    if not added and not dropped:
        return RoleView(frame, logged)
    out = frame.drop(columns=[c for c in (*dropped, *added) if c in frame.columns])
    out = out.assign(**added) if added else out
    if logged is None:
        return RoleView(out, None, stands_for)
    return RoleView(out, _Masks(logged, masks, frozenset(dropped) | frozenset(added)), stands_for)


class _Masks(Mapping[str, np.ndarray]):
    """The run's "was logged" masks with the role keys' own over them; never builds a mask not asked for
    (``RunFrame.masks`` is lazy: each mask built costs a pass over the column)."""

    def __init__(self, base: Mapping[str, np.ndarray], own: dict[str, np.ndarray], hidden: frozenset[str]) -> None:
        self._base, self._own, self._hidden = base, own, hidden

    def __getitem__(self, key: str) -> np.ndarray:
        if key in self._own:
            return self._own[key]
        if key in self._hidden:
            raise KeyError(key)
        return self._base[key]

    def __contains__(self, key: object) -> bool:
        return key in self._own or (key not in self._hidden and key in self._base)

    def __iter__(self) -> Iterator[str]:
        yield from self._own
        yield from (k for k in self._base if k not in self._hidden and k not in self._own)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _combined(
    frame: pd.DataFrame, logged: Mapping[str, np.ndarray] | None, names: tuple[str, ...]
) -> tuple[np.ndarray, np.ndarray | None]:
    """One metric's values, or the sum of several (NaN where any is NaN or missing); logged where all were."""
    columns = [pd.to_numeric(frame[n], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan) for n in names]
    values = columns[0].copy() if len(columns) == 1 else np.sum(columns, axis=0)
    if logged is None or not all(n in logged for n in names):
        return values, None
    mask = np.logical_and.reduce([np.asarray(logged[n], bool) for n in names])
    return values, mask
