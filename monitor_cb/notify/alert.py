"""The alert record and its plain-text rendering, shared by every channel.

An :class:`Alert` is one thing worth telling the user: a diagnosis finding
("loss became NaN at step 41,200") or a run lifecycle event ("run finished").
A *message* is a list of alerts: one alert, or a digest of several gathered
within the grouping window.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

SEVERITIES = ("info", "warning", "error")
_SEVERITY_ALIASES = {
    "debug": "info",
    "notice": "info",
    "ok": "info",
    "warn": "warning",
    "critical": "error",
    "fatal": "error",
    "severe": "error",
}
TITLE_PREFIX = "[monitor_cb]"  # DingTalk's "keyword" security setting can match this
DIGEST_LINES = 20
GUARD_STOP_KIND = "guard_stop"  # the kind of the alert a training process sends when its NaN guard stops it


def normalize_severity(value: Any) -> str:
    """``"warning"`` for ``"WARN"``; unknown values become ``"info"``."""
    text = str(getattr(value, "value", value) or "").strip().lower()
    text = _SEVERITY_ALIASES.get(text, text)
    return text if text in SEVERITIES else "info"


def severity_rank(value: Any) -> int:
    """0 for info, 1 for warning, 2 for error."""
    return SEVERITIES.index(normalize_severity(value))


@dataclass(frozen=True)
class Alert:
    """One notification-worthy event.

    Attributes:
        run: the run id (path relative to the log root), or a label such as ``"test"``.
        kind: what happened: a detector's finding kind (``"nan"``) or a lifecycle
            status (``"finished"``, ``"stopped"``, ...).
        severity: ``"info"``, ``"warning"`` or ``"error"``.
        message: one human sentence.
        step: the training step concerned, or None.
        time: Unix seconds when the event was observed.
        link: a URL to the dashboard page of the run, or None.
        run_name: the display name, when it differs from the id.
        key: the grouping key: the same key is sent once; default ``(run, kind)``.
        segment: the run's segment (a resumed run writes a new one), part of the id.
        id: the stable id receivers deduplicate on; default :func:`alert_id` of
            ``(run, kind, step, segment)``, so the same event found again (after a restart, by a
            second watcher) has the same id.
    """

    run: str
    kind: str
    severity: str
    message: str
    step: int | None = None
    time: float = field(default_factory=time.time)
    link: str | None = None
    run_name: str | None = None
    key: tuple[str, ...] | None = None
    segment: int | None = None
    id: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity", normalize_severity(self.severity))
        if self.key is None:
            object.__setattr__(self, "key", (self.run, self.kind))
        if not self.id:
            object.__setattr__(self, "id", alert_id(self.run, self.kind, self.step, self.segment))

    @property
    def label(self) -> str:
        """The run as shown to people: its name, with the id when they differ."""
        if self.run_name and self.run_name != self.run:
            return f"{self.run_name} ({self.run})"
        return self.run

    def to_json(self) -> dict[str, Any]:
        """The generic webhook's fields for this alert (see docs/NOTIFICATIONS.md)."""
        return {
            "id": self.id,
            "run": self.run,
            "run_name": self.run_name or self.run,
            "kind": self.kind,
            "severity": self.severity,
            "step": self.step,
            "message": self.message,
            "time": iso_time(self.time),
            "link": self.link,
        }


def alert_id(run: str, kind: str, step: int | None, segment: int | None, scope: tuple[Any, ...] | None = None) -> str:
    """``"a-"`` and 24 hex digits of a hash of ``(run, kind, step, segment)``, and of ``scope`` when given.

    A hash, not the run id itself, so the id is plain ASCII whatever the run is called (it goes in
    HTTP headers and email Message-IDs) and the same for the same event in every process. The watcher's
    scope is its log root (real path or URL) and the run's first start: the same run name under two roots,
    or a run deleted and run again under its name, is another run, whose alerts a receiver that
    deduplicates on the id must keep.
    """
    parts: list[Any] = [str(run), str(kind), step, segment] + ([list(scope)] if scope is not None else [])
    text = json.dumps(parts, separators=(",", ":"))
    return "a-" + hashlib.sha256(text.encode()).hexdigest()[:24]


def message_id(alerts: Sequence[Alert]) -> str:
    """The id of one message: the alert's own id, or for a digest ``"d-"`` and a hash of its alerts' ids.

    A retry resends the same batch (the outbox keeps it), so a retried digest has the same id too.
    """
    if len(alerts) == 1:
        return alerts[0].id
    joined = ",".join(a.id for a in alerts)
    return "d-" + hashlib.sha256(joined.encode()).hexdigest()[:24]


def iso_time(t: float) -> str:
    """RFC 3339 UTC time, second precision."""
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def top_severity(alerts: Sequence[Alert]) -> str:
    return SEVERITIES[max(severity_rank(a.severity) for a in alerts)]


def one_line(text: str, limit: int = 500) -> str:
    """Collapse newlines and control characters so run content cannot fake extra lines."""
    cleaned = "".join(ch if ch.isprintable() else " " for ch in str(text))
    cleaned = " ".join(cleaned.split())
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def alert_line(alert: Alert) -> str:
    """``"ERROR exp1: loss is NaN (step 41,200)"`` on one line."""
    step = f" (step {alert.step:,})" if alert.step is not None else ""
    head = f"{alert.severity.upper()} {one_line(alert.label, 200)} [{one_line(alert.kind, 60)}]"
    return f"{head}: {one_line(alert.message)}{step}"


def title(alerts: Sequence[Alert]) -> str:
    """A short subject line for a message."""
    if len(alerts) == 1:
        a = alerts[0]
        return one_line(f"{TITLE_PREFIX} {a.severity.upper()} {a.label}: {a.kind}", 200)
    runs = {a.run for a in alerts}
    return f"{TITLE_PREFIX} {len(alerts)} alerts from {len(runs)} run{'s' if len(runs) != 1 else ''}"


def body_lines(alerts: Sequence[Alert]) -> list[str]:
    """The message body as lines of plain text (no markup, no raw newlines inside a line)."""
    if len(alerts) == 1:
        a = alerts[0]
        lines = [alert_line(a), f"time: {iso_time(a.time)}"]
        if a.link:
            lines.append(f"link: {one_line(a.link)}")
        lines.append(f"id: {a.id}")
        return lines
    lines = [f"{alert_line(a)} id {a.id}" for a in alerts[:DIGEST_LINES]]
    if len(alerts) > DIGEST_LINES:
        rest = alerts[DIGEST_LINES:]
        lines.append(f"... and {len(rest)} more: ids {' '.join(a.id for a in rest)}")
    return lines


def plain_text(alerts: Sequence[Alert]) -> str:
    """Title and body as plain text."""
    return "\n".join([title(alerts), *body_lines(alerts)])
