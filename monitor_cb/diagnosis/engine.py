"""``diagnose``: run every enabled detector over a run's frame, per rank, and sort the findings."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from functools import partial

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._cache import diagnosis_memo
from monitor_cb.diagnosis.divergence import detect_divergence
from monitor_cb.diagnosis.findings import Finding, sort_findings
from monitor_cb.diagnosis.layer_origin import detect_layer_origin
from monitor_cb.diagnosis.lr_schedule import detect_lr_anomaly
from monitor_cb.diagnosis.nonfinite import _WATCHED as NAN_WATCHED
from monitor_cb.diagnosis.nonfinite import detect_nan
from monitor_cb.diagnosis.overfit import detect_overfitting
from monitor_cb.diagnosis.periodic import detect_sawtooth
from monitor_cb.diagnosis.progress import detect_plateau, detect_stalled
from monitor_cb.diagnosis.role_view import role_view
from monitor_cb.diagnosis.settings import DiagnosisSettings
from monitor_cb.diagnosis.spikes import detect_grad_explosion, detect_loss_spike
from monitor_cb.diagnosis.stragglers import detect_rank_divergence, detect_straggler
from monitor_cb.diagnosis.throughput import detect_throughput_drop

Detector = Callable[[pd.DataFrame, DiagnosisSettings], list[Finding]]

# Detectors that read one rank's series; ``stalled`` judges the run as a whole.
SERIES_DETECTORS: dict[str, Detector] = {
    "nan": detect_nan,
    "grad_explosion": detect_grad_explosion,
    "loss_spike": detect_loss_spike,
    "divergence": detect_divergence,
    "lr_anomaly": detect_lr_anomaly,
    "throughput_drop": detect_throughput_drop,
    "overfitting": detect_overfitting,
    "sawtooth": detect_sawtooth,
    "plateau": detect_plateau,
}
# Detectors that compare the ranks of a multi-rank frame with each other (they take ``places=``).
RANK_DETECTORS: dict[str, Callable[..., list[Finding]]] = {
    "straggler": detect_straggler,
    "rank_divergence": detect_rank_divergence,
}


def diagnose(
    frame: pd.DataFrame,
    settings: DiagnosisSettings | None = None,
    *,
    status: str | None = None,
    now: float | None = None,
    last_write: float | None = None,
    logged: Mapping[str, np.ndarray] | None = None,
    places: Mapping[int, str] | None = None,
    roles: Mapping[str, Sequence[str]] | None = None,
) -> list[Finding]:
    """All findings for one run, sorted by step (then most severe first).

    The detectors judge roles, not names (:mod:`monitor_cb.diagnosis.role_view`): an HF Trainer's
    ``train/loss``, a Lightning ``val_loss`` or YOLO's three losses are the loss and eval loss they read,
    and each finding judged on such a metric names it.

    Args:
        frame: the run's frame (``RunStore.read(run_id).frame``): ``step``, ``t``, ``rank``, ``seg`` and metric columns.
            With several ranks, each rank is diagnosed on its own and findings carry its ``rank``.
        settings: thresholds (default :class:`DiagnosisSettings`; pages pass ``load_settings(root)``).
        status: the run's status (``RunInfo.status``); ``stalled`` is only judged for a live run.
        now: current Unix time for ``stalled`` (default ``time.time()``).
        last_write: when the run last wrote (``RunInfo.last_write``); default the frame's latest ``t``.
        logged: per column, True where it was logged (``RunFrame.masks``). With it a NaN
            where ``loss`` or ``grad_norm`` was simply not logged is never taken for a logged NaN.
        places: rank -> where it runs (``"host h, device d"``, from
            :func:`monitor_cb.diagnosis.stragglers.read_rank_places`), named in ``straggler`` and
            ``rank_divergence`` messages.
        roles: roles set by hand (``{"loss": ["train/total"]}``, a page's URL) over the settings' ``roles``
            (the log root's) and those told from the names.

    A detector that raises is skipped with one ``RuntimeWarning``, so a page never breaks on a
    strange frame.
    """
    settings = settings or DiagnosisSettings()
    if frame is None or len(frame) == 0:
        return []
    chosen = {**settings.chosen_roles(), **(roles or {})}
    view = role_view(frame, logged, chosen)
    with diagnosis_memo():  # a series' trend and noise are computed once for all detectors
        found = _diagnose(view.frame, settings, status, now, last_write, view.logged, places)
    return [view.explain(f) for f in found] if view.stands_for else found


def _diagnose(
    frame: pd.DataFrame,
    settings: DiagnosisSettings,
    status: str | None,
    now: float | None,
    last_write: float | None,
    logged: Mapping[str, np.ndarray] | None,
    places: Mapping[int, str] | None,
) -> list[Finding]:
    findings: list[Finding] = []
    parts = _by_rank(frame)
    for rank, part, rows in parts:
        found_here: list[Finding] = []
        for kind, detector in SERIES_DETECTORS.items():
            if settings.enabled(kind):
                if kind == "nan" and logged:
                    # only the watched columns: a lazy mapping (RunFrame.masks) builds no other mask
                    watched = {k: logged[k] for k in NAN_WATCHED if k in logged}
                    masks = {k: np.asarray(v, bool)[rows] for k, v in watched.items() if len(v) == len(frame)}
                    detector = partial(detect_nan, logged=masks)
                found_here += _safely(kind, detector, part, settings)
        if settings.enabled("layer_origin"):  # reads the others' findings: which parameter left first
            origin = partial(detect_layer_origin, triggers=found_here, logged=_part_masks(logged, rows, len(frame)))
            found_here += _safely("layer_origin", origin, part, settings)
        findings += found_here if rank is None else [replace(f, rank=rank) for f in found_here]
    if len(parts) > 1:  # the ranks side by side
        for kind, rank_detector in RANK_DETECTORS.items():
            if settings.enabled(kind):
                findings += _safely(kind, partial(rank_detector, places=places), frame, settings)
    if settings.enabled("stalled"):  # past gaps always; a live silence only for a running run
        findings += _safely(
            "stalled",
            lambda f, s: detect_stalled(f, s, status=status, now=now, last_write=last_write),
            frame,
            settings,
        )
    return sort_findings(findings)


class _PartMasks(Mapping[str, np.ndarray]):
    """The run's "was logged" masks cut to one rank's rows, each cut when first read (a family has many)."""

    def __init__(self, logged: Mapping[str, np.ndarray], rows: np.ndarray | slice, n: int) -> None:
        self._logged, self._rows, self._n = logged, rows, n

    def __getitem__(self, column: str) -> np.ndarray:
        mask = self._logged[column]
        if len(mask) != self._n:
            raise KeyError(column)
        return np.asarray(mask, bool)[self._rows]

    def __iter__(self) -> Iterator[str]:
        return iter(self._logged)

    def __len__(self) -> int:
        return len(self._logged)


def _part_masks(
    logged: Mapping[str, np.ndarray] | None, rows: np.ndarray | slice, n: int
) -> Mapping[str, np.ndarray] | None:
    return None if logged is None else _PartMasks(logged, rows, n)


def _by_rank(frame: pd.DataFrame) -> list[tuple[int | None, pd.DataFrame, np.ndarray | slice]]:
    """``[(None, frame, all rows)]`` for one rank, else ``(rank, rows of that rank, their selector)`` per rank."""
    everything = slice(None)
    if "rank" not in frame.columns:
        return [(None, frame, everything)]
    ranks = frame["rank"].to_numpy()
    unique = pd.unique(ranks[~pd.isna(ranks)]) if ranks.dtype == object else np.unique(ranks)
    if len(unique) <= 1:
        return [(None, frame, everything)]
    parts = []
    for r in sorted(unique):
        rows = ranks == r
        parts.append((int(r), _logged_by_rank(frame[rows].reset_index(drop=True)), rows))
    return parts


def _logged_by_rank(part: pd.DataFrame) -> pd.DataFrame:
    """One rank's rows without the columns it never logged (all NaN there: other ranks' metrics).

    Some metrics come from one rank only (eval on rank 0, a loss reduced to rank 0); in the merged
    frame they are NaN on every other rank's rows, which is "not logged", not a NaN to report.
    """
    empty = [c for c in part.columns if c not in ("step", "t", "rank", "seg") and part[c].isna().all()]
    return part.drop(columns=empty) if empty else part


def _safely(kind: str, detector: Detector, frame: pd.DataFrame, settings: DiagnosisSettings) -> list[Finding]:
    try:
        return detector(frame, settings)
    except Exception as exc:  # noqa: BLE001 - one broken detector must not take the page down
        warnings.warn(f"diagnosis detector {kind!r} failed and was skipped: {exc!r}", RuntimeWarning, stacklevel=3)
        return []
