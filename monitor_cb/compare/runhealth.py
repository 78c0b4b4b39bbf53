"""Health at a glance: each run's worst finding for the runs table, diagnosed once per change of the run.

Diagnosing a run takes from milliseconds to about half a second (a 1M-step run); the Runs page lists
a hundred runs in well under that. So :class:`HealthCache` never diagnoses on the page's request path: it
hands a run whose state changed (:func:`~monitor_cb.compare.runstats.state_key`, the same key the
statistics use) to a :class:`~monitor_cb.ingest.viewer_work.Background` worker once the page is drawn
(:meth:`HealthCache.submit_pending`) and shows the last result there is, or nothing while the first is
computed. A run that only grew is diagnosed again at most every
:data:`MIN_INTERVAL_S` (or 20 times its own cost), so a live run does not keep the worker busy.

The table's columns (usable in a filter expression, ``health == "error"``, and sortable, worst first):
``health`` (``error``, ``warning``, ``ok``; empty while pending), ``health.count`` (findings of that
severity) and ``health.step`` (the first step of one).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from monitor_cb.compare.runstats import Loader, state_key
from monitor_cb.ingest.viewer_work import Background

LEVELS = ("ok", "warning", "error")  # a finding's severity "info" counts as ok: a note is not a problem
ORDER = {level: i for i, level in enumerate(LEVELS)}  # sorting: ok < warning < error
MIN_INTERVAL_S = 10.0
COLUMNS = ("health", "health.count", "health.step")


@dataclass(frozen=True)
class Health:
    """A run's worst finding: its level, how many findings have it, the first step of one, its kind."""

    level: str = "ok"
    count: int = 0
    first_step: int | None = None
    kind: str = ""

    def columns(self) -> dict[str, Any]:
        """The runs table's cells."""
        return {"health": self.level, "health.count": self.count, "health.step": self.first_step}

    def text(self) -> str:
        """``error ×2 from step 218 (nan)``, ``ok``."""
        if self.level == "ok":
            return "ok"
        step = f" from step {self.first_step:,}" if self.first_step is not None else ""
        return f"{self.level} ×{self.count}{step} ({self.kind})"


PENDING_COLUMNS: dict[str, Any] = dict.fromkeys(COLUMNS)


def health_of(findings: Iterable[Any]) -> Health:
    """The worst level among ``findings`` (``info`` notes count as ok), how many have it, and the first step."""
    worst = [f for f in findings if f.severity in ("warning", "error")]
    if not worst:
        return Health()
    level = "error" if any(f.severity == "error" for f in worst) else "warning"
    of_level = sorted((f for f in worst if f.severity == level), key=lambda f: f.step)
    return Health(level, len(of_level), int(of_level[0].step), str(of_level[0].kind))


@dataclass(frozen=True)
class _Result:
    health: Health
    at: float  # when computed (Unix s)
    cost_s: float


def diagnose_health(
    frame: pd.DataFrame, masks: Mapping[str, np.ndarray] | None, info: Any, settings: Any, now: float
) -> Health:
    """``diagnose`` one run's frame and keep only its health."""
    from monitor_cb.diagnosis import diagnose

    found = diagnose(frame, settings, status=info.status, now=now, last_write=info.last_write, logged=masks)
    return health_of(found)


class HealthCache:
    """Per-run :class:`Health`, computed in the background once per change of a run; reading never waits.

    Args:
        load: a run's (frame, masks), as the statistics read it (:func:`~monitor_cb.compare.runstats.store_loader`).
        settings: the diagnosis thresholds in force (None: the defaults); the page sets :attr:`settings` on each
            render, and a change (the Settings page) diagnoses the runs again.
        background: the worker; None computes on the caller's thread (commands, tests).
        clock: Unix time (for the live-run throttle and ``stalled``).
    """

    def __init__(
        self,
        load: Loader,
        settings: Any = None,
        background: Background | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._load = load
        self.settings = settings
        self._background = background
        self._clock = clock
        self._lock = threading.Lock()
        self._inline: dict[str, tuple[Hashable, _Result]] = {}
        self._wanted: dict[Hashable, tuple[Hashable, Callable[[], _Result]]] = {}

    def get(self, info: Any) -> Health | None:
        """The run's health: current, or the last one computed while the new one is; None before the first."""
        settings = self.settings
        if settings is None:
            from monitor_cb.diagnosis.settings import DiagnosisSettings

            settings = self.settings = DiagnosisSettings()
        key = (state_key(info), settings, info.status)
        name = ("health", info.id)
        done = self._done(name)
        if done is not None and (done[0] == key or self._recent(done, key)):
            return done[1].health
        compute = self._compute(info, settings)
        if self._background is None:
            result = compute()
            with self._lock:
                self._inline[info.id] = (key, result)
            return result.health
        with self._lock:
            self._wanted[name] = (key, compute)  # queued by submit_pending, once the page is drawn
        return done[1].health if done is not None else None

    def submit_pending(self) -> int:
        """Hand the runs :meth:`get` found out of date to the worker; how many. Called once the page is drawn, so
        the worker's diagnoses (which share the CPU and the GIL) start after the render, not during it."""
        with self._lock:
            wanted, self._wanted = self._wanted, {}
        if self._background is not None:
            for name, (key, compute) in wanted.items():
                self._background.submit(name, key, compute)
        return len(wanted)

    def columns(self, info: Any) -> dict[str, Any]:
        """:meth:`get` as the runs table's cells (all None while pending)."""
        health = self.get(info)
        return PENDING_COLUMNS if health is None else health.columns()

    def pending(self, infos: Iterable[Any]) -> int:
        """How many of the runs have no health yet."""
        return sum(1 for info in infos if self._done(("health", info.id)) is None)

    @property
    def computed(self) -> int:
        """Diagnoses finished so far (the page reruns when this grows)."""
        return self._background.computed if self._background is not None else len(self._inline)

    def _done(self, name: tuple[str, str]) -> tuple[Hashable, _Result] | None:
        if self._background is None:
            with self._lock:
                return self._inline.get(name[1])
        done = self._background.result(name)
        return None if done is None or done.value is None else (done.key, done.value)

    def _recent(self, done: tuple[Hashable, _Result], key: tuple[Any, ...]) -> bool:
        """Same settings and status, only new records, and diagnosed lately: keep it (a live run grows every second)."""
        old_key, result = done
        same = isinstance(old_key, tuple) and old_key[1:] == key[1:]
        return same and self._clock() - result.at < max(MIN_INTERVAL_S, 20 * result.cost_s)

    def _compute(self, info: Any, settings: Any) -> Callable[[], _Result]:
        def compute() -> _Result:
            started, now = time.perf_counter(), self._clock()
            loaded = self._load(info)
            health = Health() if loaded is None else diagnose_health(*loaded, info=info, settings=settings, now=now)
            return _Result(health, now, time.perf_counter() - started)

        return compute


__all__ = ["COLUMNS", "LEVELS", "ORDER", "Health", "HealthCache", "diagnose_health", "health_of"]
