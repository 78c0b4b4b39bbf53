"""The labelled real-runs corpus (``../shared/real_runs``) as frames, and how a diagnosis scores on it.

The corpus is read where it lies (never copied): ``$MONITOR_REAL_RUNS``, else ``../shared/real_runs``
beside the repository root. Each run is read with :class:`~monitor_cb.ingest.store.RunStore`, the
same reader the dashboard and ``diagnose`` use, so a run here is diagnosed exactly as a user would
see it. Two views are scored:

* **live**: the union of warning/error findings over growing prefixes of the run, which is what the
  watcher would have sent while it trained (a finding that later goes away was still an alert);
* **events**: for each labelled event, whether the prefix ending some logged points after it holds
  a finding of the right kind near it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from monitor_cb.diagnosis._stats import column, train_rows
from monitor_cb.diagnosis.findings import Finding

ENV_CORPUS = "MONITOR_REAL_RUNS"
LABELS_FILE = "labels.json"
# The corpus's event kinds -> the finding kinds that count as finding them ("other": any kind).
EVENT_KINDS: dict[str, tuple[str, ...] | None] = {
    "nan": ("nan",),
    "grad_explosion": ("grad_explosion",),
    "loss_spike": ("loss_spike",),
    "divergence": ("divergence",),
    "overfitting": ("overfitting",),
    "lr_anomaly": ("lr_anomaly",),
    "plateau_stuck": ("plateau",),
    "throughput_drop": ("throughput_drop",),
    "stall": ("stalled",),
    "other": None,
}
EVENT_POINTS = 20  # an event counts as found within this many logged points after its labelled step
EVENT_EVALS = 6  # ... or this many evaluations, for overfitting
LIVE_CUTS = 40  # prefixes per run for the live view


@dataclass(frozen=True)
class Event:
    """One labelled event: its kind (corpus vocabulary), the step to alert at, the labeller's note."""

    kind: str
    step: int
    note: str = ""


@dataclass(frozen=True)
class RealRun:
    """One corpus run, read as ``diagnose`` reads any run."""

    name: str
    frame: pd.DataFrame
    logged: dict[str, np.ndarray]
    healthy: bool
    events: tuple[Event, ...]
    notes: str = ""
    split: str = field(default="A")


def corpus_dir(repo_root: str | os.PathLike[str] | None = None) -> Path | None:
    """The corpus folder: ``$MONITOR_REAL_RUNS``, else ``<repo>/../shared/real_runs``; None when absent."""
    env = os.environ.get(ENV_CORPUS)
    if env:
        path = Path(env)
    else:
        root = Path(repo_root) if repo_root is not None else Path(__file__).resolve().parents[2]
        path = root / ".." / "shared" / "real_runs"
    return path.resolve() if (path / LABELS_FILE).is_file() else None


def load_labels(root: Path) -> dict[str, dict[str, Any]]:
    """``labels.json``: run -> ``{"healthy", "events", "notes"}``."""
    return json.loads((root / LABELS_FILE).read_text(encoding="utf-8"))


def split_of(name: str) -> str:
    """A stable half of the corpus for a leave-half-out check: ``"A"`` or ``"B"`` (from a hash of the name)."""
    return "AB"[hashlib.sha1(name.encode()).digest()[0] % 2]


def iter_runs(root: Path, names: Sequence[str] | None = None) -> Iterator[RealRun]:
    """The corpus runs (all, or ``names``), each with its frame and logged masks."""
    from monitor_cb.ingest.store import RunStore

    labels = load_labels(root)
    store = RunStore(root)
    store.refresh(force=True)
    for name in names or sorted(labels):
        label = labels[name]
        data = store.read(name)
        frame = data.frame
        logged = {c: data.masks[c] for c in ("loss", "grad_norm") if c in data.masks}
        events = tuple(Event(e["kind"], int(e["step"]), e.get("note", "")) for e in label.get("events", []))
        yield RealRun(name, frame, logged, bool(label["healthy"]), events, label.get("notes", ""), split_of(name))


def diagnose_run(frame: pd.DataFrame, settings=None, logged: dict[str, np.ndarray] | None = None) -> list[Finding]:
    """``diagnose`` as the ``diagnose`` command runs it on a finished run."""
    from monitor_cb.diagnosis.engine import diagnose

    return diagnose(frame, settings, status="finished", logged=logged)


def prefix(run_frame: pd.DataFrame, logged: dict[str, np.ndarray] | None, rows: int):
    """The first ``rows`` rows of a frame and its logged masks."""
    masks = {k: v[:rows] for k, v in (logged or {}).items()}
    return run_frame.iloc[:rows], masks


def live_alarms(run: RealRun, settings=None, cuts: int = LIVE_CUTS) -> list[Finding]:
    """Warnings and errors seen at any of ``cuts`` growing prefixes (and the whole run), one per (kind, step, rank)."""
    n = len(run.frame)
    ends = sorted({int(x) for x in np.linspace(max(n // cuts, 1), n, cuts)} | {n})
    seen: dict[tuple, Finding] = {}
    for end in ends:
        part, masks = prefix(run.frame, run.logged, end)
        for f in diagnose_run(part, settings, masks):
            if f.level >= 1:
                seen.setdefault((f.kind, f.step, f.rank), f)
    return list(seen.values())


def train_steps(frame: pd.DataFrame) -> np.ndarray:
    """Steps of the rows that carry train metrics (the run's logged points)."""
    steps = frame["step"].to_numpy()
    return steps[train_rows(frame)]


def eval_rows(frame: pd.DataFrame) -> np.ndarray:
    """Row positions holding a logged eval loss (finite or not)."""
    values = column(frame, "eval_loss")
    if values is None:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(frame["eval_loss"].notna().to_numpy())


@dataclass(frozen=True)
class EventResult:
    """How one labelled event was diagnosed: the finding that found it (None: missed) and the window used."""

    run: str
    event: Event
    finding: Finding | None
    window: tuple[int, int]

    @property
    def found(self) -> bool:
        return self.finding is not None


def score_event(run: RealRun, event: Event, settings=None) -> EventResult:
    """Whether a finding of the right kind, warning or worse, is near the event when the watcher would look.

    The run is cut ``EVENT_POINTS`` logged points after the event (or ``EVENT_EVALS`` evaluations for
    overfitting and a stuck run, which are judged on evaluations, if later), as a watcher would see it
    then; a finding counts when its span reaches into the window from ``EVENT_POINTS`` points before
    the event to the cut.
    """
    frame = run.frame
    steps = frame["step"].to_numpy()
    points = train_steps(frame)
    at = int(np.searchsorted(points, event.step))
    lo_step = int(points[max(at - EVENT_POINTS, 0)]) if points.size else event.step
    cut_step = int(points[min(at + EVENT_POINTS, points.size - 1)]) if points.size else event.step
    if event.kind in ("overfitting", "plateau_stuck"):  # judged on evaluations
        ev = steps[eval_rows(frame)]
        j = int(np.searchsorted(ev, event.step))
        if ev.size:
            cut_step = max(cut_step, int(ev[min(j + EVENT_EVALS, ev.size - 1)]))
    rows = int(np.searchsorted(steps, cut_step, side="right"))
    part, masks = prefix(frame, run.logged, rows)
    kinds = EVENT_KINDS.get(event.kind)
    for f in diagnose_run(part, settings, masks):
        if f.level < 1 or (kinds is not None and f.kind not in kinds):
            continue
        if (f.end_step if f.end_step is not None else f.step) >= lo_step and f.step <= cut_step:
            return EventResult(run.name, event, f, (lo_step, cut_step))
    return EventResult(run.name, event, None, (lo_step, cut_step))


__all__ = [
    "ENV_CORPUS",
    "EVENT_KINDS",
    "Event",
    "EventResult",
    "RealRun",
    "corpus_dir",
    "diagnose_run",
    "iter_runs",
    "live_alarms",
    "load_labels",
    "score_event",
    "split_of",
    "train_steps",
]
