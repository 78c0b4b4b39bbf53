"""What the watcher already reported, per run, persisted atomically between restarts.

``<logroot>/.monitor/watch-state.json``::

    {"version": 1, "runs": {"exp1": {"n_records": 812, "last_write": 1764698400.6, "status": "stopped",
                                     "findings": ["nan@412"], "alerted": ["nan", "stopped@414"]}}}

``findings`` are finding keys already seen (``kind@step`` plus ``#rank`` for a rank); ``alerted`` are
the alert keys already sent: a finding kind (sent once per run) or ``status@last_step`` for a
lifecycle event (a resumed run that stops again at a later step is reported again).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("monitor_cb.notify")

STATE_VERSION = 1
STATE_DIR = ".monitor"
STATE_FILE = "watch-state.json"
MAX_FINDING_KEYS = 2000  # per run; the oldest are forgotten (their kinds stay in "alerted")


@dataclass
class RunState:
    """The watcher's memory of one run."""

    n_records: int = -1
    last_write: float | None = None
    status: str | None = None
    findings: list[str] = field(default_factory=list)
    alerted: set[str] = field(default_factory=set)

    def seen_finding(self, key: str) -> bool:
        return key in self.findings

    def add_finding(self, key: str) -> None:
        self.findings.append(key)
        if len(self.findings) > MAX_FINDING_KEYS:
            del self.findings[: len(self.findings) - MAX_FINDING_KEYS]

    def to_json(self) -> dict[str, Any]:
        return {
            "n_records": self.n_records,
            "last_write": self.last_write,
            "status": self.status,
            "findings": list(self.findings),
            "alerted": sorted(self.alerted),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunState:
        return cls(
            n_records=int(data.get("n_records", -1)),
            last_write=data.get("last_write"),
            status=data.get("status"),
            findings=[str(k) for k in data.get("findings", [])],
            alerted={str(k) for k in data.get("alerted", [])},
        )


@dataclass
class WatchState:
    """All runs' state; :meth:`load` tolerates a missing or damaged file (starting afresh, with a warning)."""

    runs: dict[str, RunState] = field(default_factory=dict)

    @staticmethod
    def default_path(root: str | os.PathLike[str]) -> Path:
        """``<root>/.monitor/watch-state.json``; raises ``OutsideRootError`` when that leads out of the root."""
        from monitor_cb.ingest.hidden import hidden_path

        return hidden_path(root, STATE_FILE)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> WatchState:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError) as exc:
            log.warning("watch state %s is unreadable (%s); starting afresh", path, type(exc).__name__)
            return cls()
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            log.warning("watch state %s has an unknown version; starting afresh", path)
            return cls()
        runs = data.get("runs") or {}
        return cls({str(k): RunState.from_json(v) for k, v in runs.items() if isinstance(v, dict)})

    def to_json(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, "runs": {k: v.to_json() for k, v in sorted(self.runs.items())}}

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write atomically: a temp file in the same directory, fsync, rename."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = self.to_json()
        fd, tmp = tempfile.mkstemp(prefix=".watch-state.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, separators=(",", ":"))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
