"""What the run list needs of each metrics file, kept per log root so a fresh server need not parse them.

``list_runs`` shows per run its ranks, record count, first and last step, last write, status and
bad lines. On a fresh server that meant parsing every file under the root (2.5 to 6.5 s for 1,000
runs of 300 steps). :class:`SummaryIndex` keeps one :class:`SourceSummary` per file in
``<cache dir>/index.json`` with the file's identity (inode, device, size, mtime and ctime in ns); a
file whose identity is unchanged is listed from its summary, with one ``stat`` and no read. A file
that changed at all is read as before. Rows are never taken from here: reading a run's rows goes
through the tail and the columnar cache, which compare the bytes themselves.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path, PurePath
from typing import Any

from monitor_cb.ingest.safepath import is_within
from monitor_cb.record import STEP_LIMIT
from monitor_cb.rootfile import STATE_CAP, FileIdentity, UnsafeFileError, identity, read_json, write_atomic

INDEX_NAME = "index.json"
FORMAT = 2  # 2: partial_count
WRITE_EVERY_S = 10.0  # the index is rewritten at most this often (and only when something changed)

Ident = FileIdentity  # inode, device, size, mtime_ns, ctime_ns


@dataclass(frozen=True)
class SourceSummary:
    """One file as the run list sees it (no rows)."""

    rank: int
    n: int
    first_step: int | None
    last_step: int | None
    last_write: float  # mtime, Unix s
    pending: int  # bytes after the last newline
    bad_count: int
    interval: float | None  # usual seconds between records
    partial_count: int = 0  # of bad_count: lines kept with a bad value dropped


def file_ident(path: PurePath) -> Ident | None:
    """The identity of a local file (None when it cannot be stat'ed or is no regular file)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    import stat as _stat

    if not _stat.S_ISREG(st.st_mode):
        return None
    return identity(st)


MIN_LINE_BYTES = len(b"{}\n")  # no record line is shorter (a bad line is at least one byte and its newline)


def plausible(summary: SourceSummary, ident: Ident) -> bool:
    """Whether ``summary`` can describe a file of ``ident``'s size and time: an index in a shared root may
    be forged (a 3,000-step run listed with 987,654 steps); one that cannot be true is not used, and
    the file is read instead.
    """
    size, mtime = ident[2], ident[3] / 1e9
    steps = (summary.first_step, summary.last_step)
    lines = (size // MIN_LINE_BYTES, size // 2 + 1)
    if not (0 <= summary.n <= lines[0] and 0 <= summary.bad_count <= lines[1] and 0 <= summary.pending <= size):
        return False
    if not 0 <= summary.partial_count <= summary.bad_count:
        return False
    if summary.n and (None in steps or not 0 <= steps[0] <= steps[1] < STEP_LIMIT):  # type: ignore[operator]
        return False
    return abs(summary.last_write - mtime) < 1.0


class SummaryIndex:
    """Summaries of the files under a root, loaded once and written back (atomically) when they changed.

    Args:
        places: the cache places (:func:`monitor_cb.ingest.colcache.places_for`); the index goes in
            the first one that can be written.
        root: the log root (keys are file paths relative to it).
    """

    def __init__(self, places: list[Any], root: PurePath) -> None:
        self.places = places
        self.root = root
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[Ident, SourceSummary]] | None = None
        self._dirty = False
        self._written_at = -float("inf")
        self.last_error: str | None = None
        self.refused: dict[str, str] = {}  # index files not read, and why (the store's "skipped" notes)

    def _key(self, path: PurePath) -> str | None:
        try:
            return PurePath(path).relative_to(self.root).as_posix()
        except ValueError:
            return None

    def get(self, path: PurePath) -> SourceSummary | None:
        """The summary of ``path`` if the file is exactly as it was when it was made."""
        key = self._key(path)
        if key is None:
            return None
        with self._lock:
            entries = self._load()
            hit = entries.get(key)
        if hit is None:
            return None
        ident = file_ident(path)
        if ident is None or ident != hit[0]:
            return None
        return hit[1] if plausible(hit[1], ident) else None

    def put(self, path: PurePath, ident: Ident, summary: SourceSummary) -> None:
        key = self._key(path)
        if key is None:
            return
        with self._lock:
            entries = self._load()
            if entries.get(key) != (ident, summary):
                entries[key] = (ident, summary)
                self._dirty = True

    def flush(self, force: bool = False) -> bool:
        """Write the index when it changed (at most every :data:`WRITE_EVERY_S` unless forced)."""
        now = time.monotonic()
        with self._lock:
            if not self._dirty or (not force and now - self._written_at < WRITE_EVERY_S):
                return False
            data = {
                "format": FORMAT,
                "files": {k: {"ident": list(i), **asdict(s)} for k, (i, s) in (self._entries or {}).items()},
            }
            self._dirty = False
            self._written_at = now
        payload = json.dumps(data, separators=(",", ":")).encode()
        for place in self.places:
            if _write_atomic(Path(place.directory) / INDEX_NAME, Path(place.boundary), payload):
                return True
        self.last_error = f"could not write {INDEX_NAME} under {[str(p.directory) for p in self.places]}"
        return False

    def _load(self) -> dict[str, tuple[Ident, SourceSummary]]:
        if self._entries is not None:
            return self._entries
        self._entries = {}
        for place in self.places:
            path = Path(place.directory) / INDEX_NAME
            try:
                data = read_json(path, STATE_CAP, root=place.boundary)
            except UnsafeFileError as exc:  # a FIFO, a device, a link out of the root, too large: never read
                self.refused[str(path)] = exc.reason
                continue
            except (OSError, ValueError, RecursionError):
                continue
            self.refused.pop(str(path), None)
            try:
                if data.get("format") != FORMAT:
                    continue
                for key, item in data["files"].items():
                    ident = tuple(int(x) for x in item.pop("ident"))
                    self._entries[str(key)] = (ident, SourceSummary(**item))  # type: ignore[arg-type]
                return self._entries
            except (ValueError, KeyError, TypeError, AttributeError):
                self._entries = {}  # a damaged index is no index
        return self._entries


def _write_atomic(path: Path, boundary: Path, payload: bytes) -> bool:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not is_within(path.parent, boundary):
            return False
        write_atomic(path, payload)  # a random temporary name: never a planted FIFO or link
    except OSError:
        return False
    return True
