"""The headless watcher: tail every run under a log root, diagnose new records, alert once.

Each pass lists the runs (:meth:`RunStore.list_runs`, new runs included), and for every run whose
record count, last write or status changed it builds the frame, runs the detectors
(:func:`monitor_cb.diagnosis.diagnose`) and compares the findings and the lifecycle status with
what :class:`~monitor_cb.notify.state.WatchState` says was already reported. New things are queued
on the :class:`~monitor_cb.notify.delivery.Notifier`; the state is then saved atomically, so a
restart re-sends nothing old and misses nothing new.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from monitor_cb.notify.alert import GUARD_STOP_KIND, Alert, normalize_severity
from monitor_cb.notify.delivery import Notifier
from monitor_cb.notify.state import RunState, WatchState

log = logging.getLogger("monitor_cb.notify")

# Lifecycle statuses worth telling, with their severity ("stopped" is decided per reason).
LIFECYCLE_SEVERITY = {
    "finished": "info",
    "failed": "error",
    "stopped": "error",
    "stalled": "warning",
    "crashed": "error",
}
_USER_STOP_MARKERS = ("KeyboardInterrupt", "interrupted", "SIGINT", "SIGTERM", "user")


def lifecycle_message(status: str, info: Any) -> tuple[str, str]:
    """``(severity, message)`` for a run that reached ``status``."""
    step = getattr(info, "last_step", None)
    at = f" at step {step:,}" if isinstance(step, int) else ""
    reason = (getattr(info, "reason", None) or "").strip()
    if status == "finished":
        return "info", f"run finished{at}"
    if status == "stopped":
        by_user = any(m.lower() in reason.lower() for m in _USER_STOP_MARKERS)
        text = reason.removeprefix("stopped:").strip()
        where = "" if "step" in text else at  # "non-finite loss at step 60" already says where
        return ("warning" if by_user else "error"), f"stopped{where}" + (f": {text}" if text else "")
    if status == "failed":
        return "error", f"run failed{at}" + (f": {reason}" if reason else "")
    if status == "crashed":
        return "error", f"run crashed{at} (the writer process is gone without a final status)" + (
            f": {reason}" if reason else ""
        )
    return "warning", f"run stalled{at}: no new records" + (f" ({reason})" if reason else "")


class Watcher:
    """Diff runs against the saved state and queue new alerts.

    Args:
        root: the log root (``logs``).
        notifier: where alerts go.
        store: a :class:`monitor_cb.ingest.RunStore` over ``root``; default builds one.
        state_path: default ``<root>/.monitor/watch-state.json``.
        diagnose: the detector entry point; default :func:`monitor_cb.diagnosis.diagnose`.
        settings: detector settings passed to ``diagnose``.
        skip_older: runs first seen with their last write older than this (seconds) are recorded
            without alerts, so pointing the watcher at a full log root does not replay history;
            0 reports everything.
        link: run id -> dashboard URL, or None.
        clock: wall-clock time.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        notifier: Notifier,
        *,
        store: Any = None,
        state_path: str | os.PathLike[str] | None = None,
        diagnose: Callable[..., list[Any]] | None = None,
        settings: Any = None,
        skip_older: float = 3600.0,
        link: Callable[[str], str | None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        from monitor_cb.storage.urls import is_url

        self.root = root if is_url(root) else Path(root)  # type: ignore[assignment]
        self.notifier = notifier
        if store is None:
            from monitor_cb.ingest import RunStore

            store = RunStore(self.root)
        self.store = store
        if diagnose is None:
            from monitor_cb.diagnosis import diagnose as default_diagnose

            diagnose = default_diagnose
        self._diagnose = diagnose
        self._pass_last_write = "last_write" in _parameters(diagnose)
        self._pass_logged = "logged" in _parameters(diagnose)
        self.settings = settings  # None: the dashboard's saved settings, re-read every pass
        self._settings_problems: set[str] = set()
        self.state_path = Path(state_path) if state_path else _default_state_path(self.root)
        self.state = WatchState.load(self.state_path) if self.state_path is not None else WatchState()
        self._saved: dict[str, Any] | None = None
        self.skip_older = skip_older
        self._link = link or (lambda run_id: None)
        self._clock = clock

    def poll(self) -> list[Alert]:
        """One pass over every run; the alerts queued (already-reported ones excluded)."""
        now = self._clock()
        alerts: list[Alert] = []
        self._pass_settings = self._load_settings()
        try:
            refresh = getattr(self.store, "refresh", None)
            if refresh is not None:
                refresh(force=True)  # new runs are seen on this pass, not after the store's rescan interval
            runs = list(self.store.list_runs())
        except Exception as exc:  # noqa: BLE001 - a broken log root is logged; the next pass retries
            log.warning("watch: cannot list runs under %s: %s: %s", self.root, type(exc).__name__, exc)
            return alerts
        for info in runs:
            try:
                alerts.extend(self._check(info, now))
            except Exception as exc:  # noqa: BLE001 - one bad run must not stop the others
                log.warning("watch: run %s skipped this pass: %s: %s", info.id, type(exc).__name__, exc)
        for alert in alerts:
            log.info("alert %s %s [%s]: %s", alert.severity.upper(), alert.run, alert.kind, alert.message)
        self.notifier.notify_many(alerts)
        self.save()
        return alerts

    def _load_settings(self) -> Any:
        if self.settings is not None:
            return self.settings
        try:
            from monitor_cb.diagnosis import load_settings_checked
        except ImportError:
            return None
        try:
            settings, problems = load_settings_checked(self.root)
        except Exception as exc:  # noqa: BLE001 - fall back to the detectors' defaults
            problems, settings = [f"{type(exc).__name__}: {exc}"], None
        for problem in problems:
            if problem not in self._settings_problems:
                self._settings_problems.add(problem)
                log.warning("watch: diagnosis settings: %s", problem)
        return settings

    def save(self) -> None:
        """Write the state when it changed since the last save."""
        snapshot = self.state.to_json()
        if snapshot == self._saved or self.state_path is None:
            return
        try:
            self.state.save(self.state_path)
            self._saved = snapshot
        except OSError as exc:
            log.warning("watch: cannot save state %s: %s", self.state_path, exc.strerror or exc)

    def run(self, interval: float, stop: threading.Event, on_pass: Callable[[list[Alert]], None] | None = None) -> None:
        """Poll every ``interval`` seconds until ``stop`` is set."""
        while not stop.is_set():
            started = time.monotonic()
            alerts = self.poll()
            if on_pass:
                on_pass(alerts)
            stop.wait(max(0.0, interval - (time.monotonic() - started)))

    # -- one run ---------------------------------------------------------------------------

    def _check(self, info: Any, now: float) -> list[Alert]:
        state = self.state.runs.get(info.id)
        silent = False
        if state is None:
            state = RunState()
            age = now - info.last_write if info.last_write else 0.0
            silent = bool(self.skip_older) and age > self.skip_older
            if silent:
                log.info("watch: %s is %.0f s old; recorded without alerts", info.id, age)
        fingerprint = (int(info.n_records or 0), info.last_write, info.status)
        if fingerprint == (state.n_records, state.last_write, state.status) and info.id in self.state.runs:
            return []
        alerts = self._findings(info, state, now) if (info.n_records or 0) > 0 else []
        alerts.extend(self._lifecycle(info, state, now))
        state.n_records, state.last_write, state.status = fingerprint
        self.state.runs[info.id] = state  # only once the run was checked without error
        return [] if silent else alerts

    def _findings(self, info: Any, state: RunState, now: float) -> list[Alert]:
        data = self.store.read(info.id)
        extra: dict[str, Any] = {"last_write": info.last_write} if self._pass_last_write else {}
        if self._pass_logged:  # a column that stops being logged is not a NaN to alert about
            extra["logged"] = data.masks
        findings = self._diagnose(data.frame, self._pass_settings, status=info.status, now=now, **extra)
        alerts = []
        for finding in findings:
            rank = getattr(finding, "rank", None)
            finding_key = f"{finding.kind}@{finding.step}" + (f"#{rank}" if rank is not None else "")
            if state.seen_finding(finding_key):
                continue
            state.add_finding(finding_key)
            # One alert per (run, kind): 500 NaN steps, or NaN on 8 ranks, alert once.
            alert_key = f"stalled@{info.last_step}" if finding.kind == "stalled" else str(finding.kind)
            if alert_key in state.alerted:
                continue
            state.alerted.add(alert_key)
            alerts.append(
                self._alert(info, finding.kind, finding.severity, finding.message, finding.step, alert_key, now)
            )
        return alerts

    def _lifecycle(self, info: Any, state: RunState, now: float) -> list[Alert]:
        status = info.status
        if status not in LIFECYCLE_SEVERITY or status == state.status:
            return []
        alert_key = f"{status}@{info.last_step}"
        if alert_key in state.alerted:
            return []
        state.alerted.add(alert_key)
        if status == "stopped" and GUARD_STOP_KIND in _notified(info):
            return []  # the training process already said so itself
        severity, message = lifecycle_message(status, info)
        return [self._alert(info, status, severity, message, info.last_step, alert_key, now)]

    def _alert(self, info: Any, kind: str, severity: str, message: str, step: Any, key: str, now: float) -> Alert:
        return Alert(
            run=info.id,
            run_name=getattr(info, "name", None),
            kind=str(kind),
            severity=normalize_severity(severity),
            message=str(message),
            step=int(step) if isinstance(step, (int, float)) and step == step else None,
            time=now,
            link=self._link(info.id),
            key=(info.id, key),
        )


def _parameters(function: Callable[..., Any]) -> set[str]:
    import inspect

    try:
        return set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return set()


def _notified(info: Any) -> Iterable[str]:
    meta = getattr(info, "meta", None) or {}
    value = meta.get("notified") if isinstance(meta, dict) else None
    return value if isinstance(value, list) else []


def _default_state_path(root: Path) -> Path | None:
    """The state file under the root's hidden folder; None (state kept in memory) when that leads outside it."""
    from monitor_cb.ingest.hidden import OutsideRootError

    try:
        return WatchState.default_path(root)
    except OutsideRootError as exc:
        log.warning("watch: %s; the watcher's state is kept in memory only", exc)
        return None
