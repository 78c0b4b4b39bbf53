"""The sidebar's run list: labels, ages and durations, the run filter, the picked run, refresh choices."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from monitor_cb.ingest.status import ACTIVE

# Sidebar refresh choices: label -> seconds (None = no automatic refresh).
REFRESH_CHOICES: dict[str, float | None] = {"off": None, "1 s": 1.0, "2 s": 2.0, "5 s": 5.0, "10 s": 10.0}
DEFAULT_REFRESH = "2 s"
ACTIVE_STATUSES = ACTIVE  # running, stalled, starting


class RunLike(Protocol):
    """The fields of ``monitor_cb.ingest.RunInfo`` this module reads."""

    id: str
    name: str
    status: str
    last_write: float
    last_step: int | None
    n_records: int
    meta: Mapping[str, Any]


def format_age(seconds: float | None) -> str:
    """A short human age: ``"4 s"``, ``"12 min"``, ``"3.5 h"``, ``"2 d"``; ``"–"`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} d"


def format_duration(seconds: float | None) -> str:
    """``"1:02:03"`` style (hours may exceed 24); ``"–"`` when unknown."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "–"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def run_label(run: RunLike, now: float) -> str:
    """One line for the run picker: id, status and, for a run that ended, when (plain text).

    No emoji (many Linux machines have no emoji font) and no age: a select box's labels are drawn
    once per page run, so "12 s ago" would go stale; a clock time does not. A running run's label
    changes only with its status, which makes the page redraw the picker.
    """
    if run.status in ACTIVE_STATUSES or not run.last_write:
        return f"{run.id} · {run.status}"
    return f"{run.id} · {run.status} · {format_clock(run.last_write, now)}"


def format_clock(t: float, now: float) -> str:
    """``"14:05"`` today, ``"Dec 02 14:05"`` this year, else ``"2024-12-02 14:05"`` (server local time)."""
    if not math.isfinite(t):
        return "–"
    when, today = time.localtime(t), time.localtime(now)
    if when[:3] == today[:3]:
        return time.strftime("%H:%M", when)
    if when.tm_year == today.tm_year:
        return time.strftime("%b %d %H:%M", when)
    return time.strftime("%Y-%m-%d %H:%M", when)


def filter_runs(runs: Iterable[RunLike], text: str) -> list[RunLike]:
    """Runs whose id, name or status contains every word of ``text`` (case-insensitive), order kept."""
    words = text.lower().split()
    if not words:
        return list(runs)
    return [r for r in runs if all(w in f"{r.id} {r.name} {r.status}".lower() for w in words)]


def pick_run(run_ids: Sequence[str], wanted: str | None) -> str | None:
    """The run to show: ``wanted`` (from the URL) when it still exists, else the newest (first) one."""
    if wanted is not None and wanted in run_ids:
        return wanted
    return run_ids[0] if run_ids else None


def resolve_wanted(runs: Sequence[RunLike], wanted: str | None) -> str | None:
    """The run id a URL's ``?run=`` means: the id itself; else the one run below that folder
    (``llama`` for ``llama/output/log``, a MindFormers job opened by its folder); else the one run of
    that name. None when it names no run (or several: no guess)."""
    if not wanted:
        return None
    ids = [r.id for r in runs]
    if wanted in ids:
        return wanted
    folder = wanted.strip("/")
    below = [i for i in ids if i.startswith(folder + "/")]
    if len(below) == 1:
        return below[0]
    named = [r.id for r in runs if r.name == folder]
    return named[0] if len(named) == 1 else None
