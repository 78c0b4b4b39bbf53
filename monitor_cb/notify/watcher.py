"""The headless watcher: tail every run under a log root, diagnose new records, alert once.

Each pass lists the runs (:meth:`RunStore.list_runs`, new runs included), and for every run whose
record count, last write or status changed it builds the frame, runs the detectors
(:func:`monitor_cb.diagnosis.diagnose`) and compares the findings and the lifecycle status with
what :class:`~monitor_cb.notify.state.WatchState` says was already reported. New alerts go into
the state's outbox and the state is saved atomically *before* anything is sent; the
:class:`~monitor_cb.notify.outbox.OutboxSender` then delivers them (at least once, in order per
channel, retried across passes and restarts until delivered or expired). So a restart re-sends
nothing already delivered, resumes what was not, and misses nothing new.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from monitor_cb.notify.alert import GUARD_STOP_KIND, Alert, alert_id, normalize_severity
from monitor_cb.notify.config import NotifyConfig
from monitor_cb.notify.outbox import OutboxSender, pending_lines
from monitor_cb.notify.state import RunState, WatchState, legacy_state

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
# Findings that say a check could not be made ("throughput was not judged"): the pages show them as notes;
# they are no problem of the run, so no alert (every run that logs no throughput would send one).
NOTE_VARIANTS = frozenset({"not_judged"})


def is_note(finding: Any) -> bool:
    """Whether a finding is a note about the diagnosis itself rather than a problem to alert about."""
    details = getattr(finding, "details", None) or {}
    return details.get("variant") in NOTE_VARIANTS


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
    """Diff runs against the saved state, put new alerts in the outbox, deliver it.

    Args:
        root: the log root (``logs``).
        config: the channels and delivery settings.
        store: a :class:`monitor_cb.ingest.RunStore` over ``root``; default builds one.
        state_path: default: this user's own state folder (:func:`~monitor_cb.notify.state.own_state_path`).
        diagnose: the detector entry point; default :func:`monitor_cb.diagnosis.diagnose`.
        settings: detector settings passed to ``diagnose``.
        skip_older: runs first seen with their last write older than this (seconds) are recorded
            without alerts, so pointing the watcher at a full log root does not replay history;
            0 reports everything.
        link: run id -> dashboard URL, or None.
        clock: wall-clock time.
        expire_after: seconds an undelivered alert is retried before it is given up (default: the config's).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        config: NotifyConfig,
        *,
        store: Any = None,
        state_path: str | os.PathLike[str] | None = None,
        diagnose: Callable[..., list[Any]] | None = None,
        settings: Any = None,
        skip_older: float = 3600.0,
        link: Callable[[str], str | None] | None = None,
        clock: Callable[[], float] = time.time,
        expire_after: float | None = None,
    ) -> None:
        from monitor_cb.storage.urls import is_url

        self.root = root if is_url(root) else Path(root)  # type: ignore[assignment]
        self._root_id = str(root) if is_url(root) else os.path.realpath(root)  # part of every alert's id
        self.config = config
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
        self.state_path = Path(state_path) if state_path else WatchState.default_path(self.root)
        self.state = WatchState.load(self.state_path)
        if state_path is None and not self.state_path.exists():
            self.state = legacy_state(self.root) or self.state
        self._saved: dict[str, Any] | None = None
        self.skip_older = skip_older
        self._link = link or (lambda run_id: None)
        self._clock = clock
        self.lock = threading.RLock()  # guards self.state: the channel threads record outcomes in it
        self.outbox = OutboxSender(
            config, self.state, self._save_locked, lock=self.lock, clock=clock, expire_after=expire_after
        )

    def poll(self) -> list[Alert]:
        """One pass over every run; the alerts queued (already-reported ones excluded), saved before delivery."""
        with self.lock:
            alerts = self._poll()
            now = self._clock()
            for alert in alerts:
                channels = self.outbox.channels_for(alert, now)
                if not channels and self.config.routes:
                    log.info("alert %s [%s]: no channel wants it now (severity, quiet hours)", alert.run, alert.kind)
                self.outbox.outbox.add(alert, channels, now)
            self.outbox.expire(now)
            self.save()  # durable before any delivery
        self.outbox.wake()
        return alerts

    def _poll(self) -> list[Alert]:
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
            untrusted = _untrusted_settings(self.root)
            if untrusted:  # whoever can write the shared root must not be able to switch alerts off
                from monitor_cb.diagnosis import DiagnosisSettings

                settings, problems = DiagnosisSettings(), [untrusted]
        except Exception as exc:  # noqa: BLE001 - fall back to the detectors' defaults
            problems, settings = [f"{type(exc).__name__}: {exc}"], None
        for problem in problems:
            if problem not in self._settings_problems:
                self._settings_problems.add(problem)
                log.warning("watch: diagnosis settings: %s", problem)
        return settings

    def save(self) -> None:
        """Write the state when it changed since the last save."""
        with self.lock:
            self._save_locked()

    def _save_locked(self) -> None:
        snapshot = self.state.to_json()
        if snapshot == self._saved:
            return
        try:
            self.state.save(self.state_path)
            self._saved = snapshot
        except OSError as exc:
            log.warning("watch: cannot save state %s: %s", self.state_path, exc.strerror or exc)

    def deliver(self, timeout: float) -> bool:
        """Send what is pending now (``--once``); True when nothing is left undelivered."""
        return self.outbox.drain(timeout)

    def pending(self) -> dict[str, int]:
        """Per channel, the alerts not yet delivered."""
        with self.lock:
            return self.outbox.outbox.pending_counts()

    def report(self) -> list[str]:
        """One line per channel: pending, oldest, next try, delivered, expired, last error."""
        with self.lock:
            return pending_lines(self.state.outbox, self._clock())

    def run(
        self,
        interval: float,
        stop: threading.Event,
        on_pass: Callable[[list[Alert]], None] | None = None,
        close_timeout: float = 10.0,
    ) -> None:
        """Poll every ``interval`` seconds until ``stop`` is set, delivering in the background."""
        self.outbox.start()
        shown: dict[str, int] = {}
        try:
            while not stop.is_set():
                started = time.monotonic()
                alerts = self.poll()
                if on_pass:
                    on_pass(alerts)
                pending = self.pending()
                if pending != shown and (any(pending.values()) or any(shown.values())):
                    for line in self.report():  # said when what is pending changes, not every pass
                        log.info("outbox %s", line)
                shown = pending
                stop.wait(max(0.0, interval - (time.monotonic() - started)))
        finally:
            self.outbox.close(close_timeout)

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
        started = _started(info)
        if _rerun(state, fingerprint[0], started):
            log.info("watch: %s was deleted and run again under its name: its alerts are new", info.id)
            state.forget_reports()
        alerts = self._findings(info, state, now) if (info.n_records or 0) > 0 else []
        alerts.extend(self._lifecycle(info, state, now))
        state.n_records, state.last_write, state.status = fingerprint
        state.started = started if started is not None else state.started
        self.state.runs[info.id] = state  # only once the run was checked without error
        return [] if silent else alerts

    def _findings(self, info: Any, state: RunState, now: float) -> list[Alert]:
        data = self.store.read(info.id)
        extra: dict[str, Any] = {"last_write": info.last_write} if self._pass_last_write else {}
        if self._pass_logged:  # a column that stops being logged is not a NaN to alert about
            extra["logged"] = data.masks
        findings = self._diagnose(data.frame, self._pass_settings, status=info.status, now=now, **extra)
        segments = _segments_at(data.frame, [getattr(f, "step", None) for f in findings])
        alerts = []
        for finding in findings:
            if is_note(finding):
                continue
            rank = getattr(finding, "rank", None)
            # a resumed or re-run segment's finding is its own, even at a step an older segment had one at
            seg = _segment_suffix(segments.get(finding.step))
            finding_key = f"{finding.kind}@{finding.step}" + (f"#{rank}" if rank is not None else "") + seg
            if state.seen_finding(finding_key):
                continue
            state.add_finding(finding_key)
            # One alert per (run, segment, kind): 500 NaN steps, or NaN on 8 ranks, alert once.
            alert_key = (f"stalled@{info.last_step}" if finding.kind == "stalled" else str(finding.kind)) + seg
            if alert_key in state.alerted:
                continue
            state.alerted.add(alert_key)
            alerts.append(
                self._alert(
                    info,
                    finding.kind,
                    finding.severity,
                    finding.message,
                    finding.step,
                    alert_key,
                    now,
                    segments.get(finding.step),
                )
            )
        return alerts

    def _lifecycle(self, info: Any, state: RunState, now: float) -> list[Alert]:
        status = info.status
        # the same status after new writes is a new event: a run resumed and finished again between two passes
        moved_on = int(info.n_records or 0) != state.n_records or info.last_write != state.last_write
        if status not in LIFECYCLE_SEVERITY or (status == state.status and not moved_on):
            return []
        alert_key = f"{status}@{info.last_step}" + _segment_suffix(_segment(info))  # resumed: a new segment
        if alert_key in state.alerted:
            return []
        state.alerted.add(alert_key)
        if status == "stopped" and GUARD_STOP_KIND in _notified(info):
            return []  # the training process already said so itself
        severity, message = lifecycle_message(status, info)
        return [self._alert(info, status, severity, message, info.last_step, alert_key, now)]

    def _alert(
        self,
        info: Any,
        kind: str,
        severity: str,
        message: str,
        step: Any,
        key: str,
        now: float,
        row_segment: int | None = None,
    ) -> Alert:
        """``row_segment``: the segment of the row a finding is on, for a run whose metadata names none (a
        TensorBoard run's later event file): its id then differs from an older segment's at that step."""
        _step = int(step) if isinstance(step, (int, float)) and step == step else None
        segment = _segment(info)
        segment = segment if segment is not None else row_segment
        return Alert(
            run=info.id,
            run_name=getattr(info, "name", None),
            kind=str(kind),
            severity=normalize_severity(severity),
            message=str(message),
            step=_step,
            time=now,
            link=self._link(info.id),
            key=(info.id, key),
            segment=segment,
            id=alert_id(info.id, str(kind), _step, segment, (self._root_id, _started(info))),
        )


def _parameters(function: Callable[..., Any]) -> set[str]:
    import inspect

    try:
        return set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return set()


def _segment(info: Any) -> int | None:
    """The run's current writer segment (part of an alert's id), when its metadata names one."""
    meta = getattr(info, "meta", None) or {}
    value = meta.get("segment") if isinstance(meta, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _started(info: Any) -> float | None:
    """When the run first started (its metadata's ``first_start_time``, kept across resumes; a TensorBoard
    run's first event time), or None."""
    meta = getattr(info, "meta", None) or {}
    for name in ("first_start_time", "start_time"):
        value = meta.get(name) if isinstance(meta, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
            return float(value)
    return None


def _rerun(state: RunState, n_records: int, started: float | None) -> bool:
    """Whether the run is not the one the state describes: it started at another time, or (when no start time
    tells) has fewer records. (A listing's record count may move a little once a long file is read: with a
    start time, that is not taken for a re-run.)"""
    if started is not None and state.started is not None:
        return started != state.started
    return 0 <= n_records < state.n_records


def _segments_at(frame: Any, steps: list[Any]) -> dict[Any, int]:
    """The segment of the row drawn at each of ``steps`` (the latest segment wins a step, as on the chart)."""
    wanted = {s for s in steps if isinstance(s, int) and not isinstance(s, bool)}
    if not wanted or "seg" not in getattr(frame, "columns", ()) or "step" not in frame.columns:
        return {}
    import numpy as np

    step = frame["step"].to_numpy()
    mine = np.isin(step, list(wanted))
    found: dict[Any, int] = {}
    for at, seg in zip(step[mine].tolist(), frame["seg"].to_numpy()[mine].tolist(), strict=True):
        if seg == seg:  # not NaN
            found[at] = max(found.get(at, 0), int(seg))
    return found


def _segment_suffix(segment: int | None) -> str:
    """What tells a later segment's report key from the first's ("" for the first: keys saved before stay)."""
    return f"/s{segment}" if segment is not None and segment > 1 else ""


def _notified(info: Any) -> Iterable[str]:
    meta = getattr(info, "meta", None) or {}
    value = meta.get("notified") if isinstance(meta, dict) else None
    return value if isinstance(value, list) else []


def _untrusted_settings(root: Any) -> str:
    """Why the root's diagnosis settings must not decide what the watcher alerts on, or '' when they may.

    They may when the file and its folder are the watcher's user's (or root's) and nobody else can
    write them, as for notification settings (:func:`monitor_cb.notify.trust.read_private`): a
    colleague who can write a shared root could otherwise switch the NaN alert off for everyone.
    """
    from monitor_cb.diagnosis.settings import settings_path
    from monitor_cb.notify.trust import UntrustedSettingsError, read_private

    try:
        read_private(settings_path(root), purpose="diagnosis settings", risk="switch the watcher's alerts off")
    except UntrustedSettingsError as exc:
        return f"{exc}; watching with the default diagnosis settings"
    except OSError:  # missing, a FIFO, too large: load_settings_checked already said so (or there is nothing)
        return ""
    return ""
