"""A run's status from its metadata and its files' activity.

The metadata says running / finished / failed / stopped. A run that says running
is *crashed* when its process is gone (same host only: a pid means nothing
elsewhere) or its file ends in a torn line nothing completes, and *stalled* when no
record came for several times its usual interval.

A run that records no status (plain ``json.dumps`` logs, the article's ``metrics.jsonl``,
TensorBoard event directories) is judged only by what this process saw: *running* while it
saw the files grow, *ended* ("no status recorded") otherwise. A file's mtime is not evidence:
``cp`` sets it to now and ``cp -p`` / ``rsync -a`` keep the original, so a copied run would be
running or stalled depending on how it was copied. A run nobody saw running is never stalled
or crashed.
"""

from __future__ import annotations

import math
import socket
from dataclasses import dataclass
from typing import Any

import numpy as np

from monitor_cb.processes import pid_alive

ENDED = "ended"  # a run that records no status and was not seen growing (or stopped growing long ago)
FINAL = ("finished", "failed", "stopped", ENDED)
NO_STATUS = "no status recorded"
EPOCH_MIN = 946_684_800.0  # 2000-01-01: a record time before this is seconds since the run's start
# 2100-01-01: no record is written later, nor does a run last longer. A time past it (one event with wall time
# 1e300 made the Runs page show a 300-digit duration) is refused: not used for a span or a first/last time.
TIME_MAX = 4_102_444_800.0
_PID_LIMIT = 1 << 31  # pid_t is 32 bits: a larger "pid" in a metadata file is garbage
# When ranks disagree, the most alarming status names the run.
PRIORITY = ("failed", "crashed", "stalled", "running", "starting", "stopped", ENDED, "finished")
STARTING = "starting"  # a log that grows before its first step line (loading, compiling)
ACTIVE = frozenset({"running", "stalled", STARTING})  # statuses of a run still going


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
    grew_at: float | None = None  # when this process last saw the file grow (Unix s); None: never


@dataclass
class GrowthWatch:
    """Whether this process saw a file grow: the only sign of life of a run that records no status."""

    size: int | None = None
    grew_at: float | None = None

    def see(self, size: int, now: float) -> float | None:
        """Note the file's current size; returns when it was last seen growing (None: never)."""
        if size <= 0:
            return self.grew_at  # not read yet (or emptied): no baseline
        if self.size is not None and size > self.size:
            self.grew_at = now
        self.size = size
        return self.grew_at


def file_status(activity: FileActivity, now: float, policy: StatusPolicy) -> tuple[str, str | None]:
    """(status, reason) of one rank's file."""
    meta = activity.meta
    said = meta.get("status")
    if said in FINAL:
        reason = meta.get("reason")
        return said, reason if reason is None or isinstance(reason, str) else str(reason)[:500]
    if said != "running":
        return unrecorded_status(activity, now, policy)
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


def unrecorded_status(activity: FileActivity, now: float, policy: StatusPolicy) -> tuple[str, str | None]:
    """(status, reason) of a file whose run records no status: only growth seen by this process counts."""
    if activity.grew_at is None:
        return ENDED, NO_STATUS
    idle = max(now - activity.grew_at, 0.0)
    if activity.torn and idle > policy.torn_grace_s:
        return "crashed", f"the file ends in a torn line and stopped growing {idle:.0f} s ago"
    stall_after = stall_threshold(activity.interval, policy)
    if idle <= stall_after:
        if activity.meta.get("starting"):
            return STARTING, "the log grows, with no step line yet (loading, compiling)"
        return "running", None
    if idle > policy.assume_finished_after_s:
        return ENDED, f"{NO_STATUS}; nothing written for {idle:.0f} s"
    return "stalled", f"seen growing, then no record for {idle:.0f} s (threshold {stall_after:.0f} s); {NO_STATUS}"


def is_epoch(t: float | None) -> bool:
    """Whether a record time is a date (Unix seconds), not seconds since the run's start."""
    return t is not None and math.isfinite(t) and t >= EPOCH_MIN


def plausible_time(t: float | None) -> bool:
    """Whether a record or metadata time can be one: finite and within :data:`TIME_MAX` of 0 (as a date or a span)."""
    return t is not None and math.isfinite(t) and -TIME_MAX <= t <= TIME_MAX


def run_span(
    meta_start: float | None,
    meta_end: float | None,
    t_first: float | None,
    t_last: float | None,
    active: bool,
    now: float,
    log_end: float | None = None,
) -> float | None:
    """Seconds a run has lasted: metadata times first, else its records' own ``t``.

    ``now`` only counts against a date: records whose ``t`` counts from 0 give ``t_last - t_first``
    (their own span) and never a difference with the clock or a file's mtime. ``log_end``: the last
    time stamp of a log that states its own times (MindFormers' log): the end even while it runs, so
    a replayed or copied log, or a host whose clock differs, lasts what its own lines say. An implausible
    time (:func:`plausible_time`) counts as none.
    """
    meta_start, meta_end, t_first, t_last, log_end = (
        t if plausible_time(t) else None for t in (meta_start, meta_end, t_first, t_last, log_end)
    )
    start = meta_start if meta_start is not None else t_first
    if start is None:
        return None
    if log_end is not None and math.isfinite(log_end) and math.isfinite(start):
        return max(log_end - start, 0.0)
    if meta_start is None and not is_epoch(start):
        end = t_last
    elif active:
        end = now
    else:
        end = meta_end if meta_end is not None else t_last
    if end is None or not math.isfinite(end) or end < start:
        return None
    return end - start


def time_bounds(t: np.ndarray) -> tuple[float | None, float | None]:
    """First and last plausible record time (None, None without one; see :func:`plausible_time`)."""
    with np.errstate(invalid="ignore"):
        finite = np.flatnonzero(np.abs(t) <= TIME_MAX)
    if not finite.size:
        return None, None
    return float(t[finite[0]]), float(t[finite[-1]])


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
        return not pid_alive(pid)
    try:
        created = psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False
    start = meta.get("start_time")
    return type(start) in (int, float) and -1e18 < start < 1e18 and created > start + 5.0
