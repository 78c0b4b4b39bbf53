"""A run's status from its metadata and its files' activity.

The metadata says running / finished / failed / stopped. A run that says running
is *crashed* when its process is gone (same host only: a pid means nothing
elsewhere) or its file ends in a torn line nothing completes, and *stalled* when no
record came for several times its usual interval. Files without metadata (plain
``json.dumps`` logs) are judged by activity alone.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

import numpy as np

FINAL = ("finished", "failed", "stopped")
_PID_LIMIT = 1 << 31  # pid_t is 32 bits: a larger "pid" in a metadata file is garbage
# When ranks disagree, the most alarming status names the run.
PRIORITY = ("failed", "crashed", "stalled", "running", "stopped", "finished")


@dataclass(frozen=True)
class StatusPolicy:
    """Thresholds for the inferred statuses (seconds).

    Args:
        stall_factor: stalled after this many usual intervals without a record...
        stall_min_s: ...but never sooner than this.
        torn_grace_s: a torn last line this old means the writer died mid-line.
        assume_finished_after_s: a file without metadata idle this long is taken as finished.
    """

    stall_factor: float = 5.0
    stall_min_s: float = 60.0
    torn_grace_s: float = 30.0
    assume_finished_after_s: float = 3600.0


@dataclass(frozen=True)
class FileActivity:
    """What the status needs to know about one metrics file."""

    meta: dict[str, Any]
    last_write: float  # mtime, Unix s
    torn: bool  # bytes after the last newline
    interval: float | None  # usual seconds between records (median of the last ones), None if unknown


def file_status(activity: FileActivity, now: float, policy: StatusPolicy) -> tuple[str, str | None]:
    """(status, reason) of one rank's file."""
    meta = activity.meta
    said = meta.get("status")
    if said in FINAL:
        reason = meta.get("reason")
        return said, reason if reason is None or isinstance(reason, str) else str(reason)[:500]
    idle = now - activity.last_write
    if meta and process_gone(meta):
        return "crashed", f"process {meta.get('pid')} on {meta.get('host')} is gone"
    if activity.torn and idle > policy.torn_grace_s:
        return "crashed", f"the file ends in a torn line and nothing was written for {idle:.0f} s"
    stall_after = stall_threshold(activity.interval, policy)
    if idle > stall_after:
        if not meta and idle > policy.assume_finished_after_s:
            return "finished", f"no metadata file; nothing written for {idle:.0f} s"
        return "stalled", f"no record for {idle:.0f} s (threshold {stall_after:.0f} s)"
    return "running", None


def combine(statuses: list[tuple[str, str | None]]) -> tuple[str, str | None]:
    """One status for a run from its ranks' statuses."""
    if not statuses:
        return "running", None
    return min(statuses, key=lambda item: PRIORITY.index(item[0]))


def stall_threshold(interval: float | None, policy: StatusPolicy) -> float:
    """max(factor x usual interval, minimum)."""
    if interval is None:
        return policy.stall_min_s
    return max(policy.stall_factor * max(interval, 0.0), policy.stall_min_s)


def usual_interval(times: np.ndarray) -> float | None:
    """Median seconds between consecutive records, None with fewer than two timed records."""
    times = times[np.isfinite(times)]
    if len(times) < 2:
        return None
    return float(np.median(np.diff(times)))


def process_gone(meta: dict[str, Any]) -> bool:
    """True when the writer ran on this host and its pid is dead (or reused by a younger process)."""
    pid = meta.get("pid")
    if meta.get("host") != socket.gethostname() or type(pid) is not int or not 0 < pid < _PID_LIMIT:
        return False  # another host, or not a pid at all: nothing to say
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is pinned
        return not _pid_alive(pid)
    try:
        created = psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False
    start = meta.get("start_time")
    return type(start) in (int, float) and -1e18 < start < 1e18 and created > start + 5.0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
