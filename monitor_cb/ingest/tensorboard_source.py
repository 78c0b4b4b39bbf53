"""A TensorBoard event directory as live sources of the store: one per rank, one shared reader.

MindFormers writes ``tensorboard_dir/rank_{id}/events.out.tfevents.*``. One
:class:`~monitor_cb.importers.tensorboard.TensorBoardRun` reads every rank incrementally (full
resolution, NaN kept); each poll hands each rank's new records to that rank's table. The
``tensorboard`` package is optional: without it the run is listed with no records and one
warning says what to install.

Cached like JSONL files (:mod:`monitor_cb.ingest.colcache`): the rows of a rank with one event file
are kept as an Arrow file described by a fingerprint of the bytes they came from, with the reader's
state after them (offset, alignment state, texts); a reopen maps those rows and reads only what the
file gained since. A rank with several files (a resumed launch, ``add_scalars`` series) is read in full.
"""

from __future__ import annotations

import json
import os
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monitor_cb.ingest.source import TableSource
from monitor_cb.rootfile import open_regular

if TYPE_CHECKING:
    from monitor_cb.ingest.colcache import ColumnarCache, Fingerprint

MAX_EVENTS_PER_POLL = 8_000_000  # bounds one refresh (~2 s); the rest comes on the next poll
_STATE_KEY = "tensorboard_reader"  # the reader's state, kept in the cache header's free-form "kinds"
_SAMPLE = 4096
_warned_missing = False


@dataclass
class _Activity:
    """What the store reads of a file tail: last write time and whether a torn record waits."""

    mtime: float = 0.0
    pending: int = 0
    size: int = 0  # bytes of the run's event files (growth seen by this process: its status)


class TensorBoardRankSource(TableSource):
    """One rank of a TensorBoard run; polling it polls the shared reader for every rank."""

    def __init__(self, group: TensorBoardGroup, rank: int) -> None:
        super().__init__(rank)
        self.group = group
        self.path = group.path / f"rank_{rank}"
        self.meta_path = group.path / ".no-metadata"  # TensorBoard runs have none: status from activity
        self.tail = group.activity
        self._new = 0

    def poll(self) -> int:
        self.group.poll()
        with self.lock:
            taken, self._new = self._new, 0
            self.last_poll = time.time()
            return taken


class TensorBoardGroup:
    """The reader of one TensorBoard run directory and its per-rank sources."""

    def __init__(self, path: Path, cache: ColumnarCache | None = None) -> None:
        self.path = path
        self.cache = cache
        self.lock = threading.Lock()
        self.activity = _Activity()
        self.sources: dict[int, TensorBoardRankSource] = {}
        self._reader: Any = None
        self.meta: dict[str, Any] = {}
        self.cached_offsets: dict[str, int] = {}  # event file -> bytes its cache file holds
        self.cache_hits = 0

    def poll(self) -> int:
        """Read new events of every rank into the rank tables; returns how many records were taken."""
        with self.lock:
            reader = self._open()
            if reader is None:
                return 0
            try:
                by_rank = reader.poll_batches(max_events=MAX_EVENTS_PER_POLL)
            except FileNotFoundError:
                return 0
            taken = 0
            for rank, batch in by_rank.items():
                source = self.source(rank)
                with source.lock:
                    added = source.table.append(batch)
                    source._new += added
                taken += added
            for rank in reader.ranks:
                self.source(rank)
            for rank, count in reader.bad_steps.items():
                self.source(rank).bad_count = count  # values at a step out of range, dropped by the reader
            self.activity.mtime = float(reader.last_write or 0.0)
            self.activity.size = reader.total_bytes
            if taken or not self.meta:
                self.meta = reader.meta()
            if taken:
                self._write_cache(reader)
            return taken

    def source(self, rank: int) -> TensorBoardRankSource:
        found = self.sources.get(rank)
        if found is None:
            found = self.sources[rank] = TensorBoardRankSource(self, rank)
        return found

    def _open(self) -> Any:
        global _warned_missing
        if self._reader is not None:
            return self._reader
        from monitor_cb.importers.tensorboard import TENSORBOARD_MISSING, TensorBoardRun, tensorboard_available

        if not tensorboard_available():
            if not _warned_missing:
                _warned_missing = True
                warnings.warn(TENSORBOARD_MISSING, stacklevel=2)
            return None
        self._reader = TensorBoardRun(self.path)
        self._resume_from_cache(self._reader)
        return self._reader

    # ------------------------------------------------------------------ the columnar cache
    def _resume_from_cache(self, reader: Any) -> None:
        """Ranks with one event file start from their cache file when it describes that file's first bytes."""
        if self.cache is None:
            return
        from monitor_cb.ingest.tiered import TieredTable

        try:
            singles = reader.single_files()
        except OSError:
            return
        for rank, path in singles.items():
            cached = self.cache.open(Path(path), rank)
            if cached is None:
                continue
            header = cached.header
            try:
                saved = json.loads(header.kinds.get(_STATE_KEY, "null"))
                usable = isinstance(saved, dict) and saved.get("offset") == header.fingerprint.offset
                usable = usable and header.rank == rank and _still_holds(path, header.fingerprint, self.path)
                table = TieredTable.from_cache(cached, lazy=False) if usable else None
            except Exception as exc:  # noqa: BLE001 - a damaged cache file costs a full read, nothing more
                self.cache.last_error = f"{cached.path}: {str(exc)[:200]}"
                continue
            if table is None:
                continue
            source = self.source(rank)
            with source.lock:
                source.table = table
                source.bad_count = header.bad_count
            reader.resume_file(path, saved)
            self.cached_offsets[path] = header.fingerprint.offset
            self.cache_hits += 1

    def _write_cache(self, reader: Any) -> None:
        """Keep the rows of ranks with one event file once enough new bytes came (as JSONL files are kept)."""
        if self.cache is None:
            return
        for rank, path in reader.single_files().items():
            saved = reader.file_state(path)
            offset = int(saved["offset"])
            if not self.cache.due(offset, self.cached_offsets.get(path, 0)):
                continue
            fingerprint = _fingerprint(path, offset, self.path)
            if fingerprint is None:
                continue
            source = self.source(rank)
            with source.lock:
                state = source.table.state()
                bad = source.bad_count
            self.cached_offsets[path] = offset
            job = _cache_job(self.cache, _CacheWrite(Path(path), rank, state, saved, bad, fingerprint))
            # the rows handed over never change (writes copy first): a server's refresh does not wait
            if self.cache.background is None:
                job()
            else:
                self.cache.background.submit(("cache", path), offset, job)


@dataclass(frozen=True)
class _CacheWrite:
    """One rank's rows and what describes them, handed to the cache writer."""

    path: Path
    rank: int
    state: Any  # TableState: read-only views
    saved: dict[str, Any]
    bad: int
    fingerprint: Fingerprint


def _cache_job(cache: ColumnarCache, what: _CacheWrite) -> Callable[[], None]:
    from monitor_cb.ingest.colcache import CacheHeader, Summary, nonfinite_cells

    def write() -> None:
        state = what.state
        header = CacheHeader(
            fingerprint=what.fingerprint,
            rank=what.rank,
            n_main=state.n,
            kinds={_STATE_KEY: json.dumps(what.saved)},
            bad_count=what.bad,
            bad_lines=(),
            summary=Summary.of(state),
            last_step=state.last_step,
            last_seg=state.last_seg,
            has_seg=state.has_seg,
            nonfinite=nonfinite_cells(state),
        )
        cache.write(what.path, state, header)

    return write


def _fingerprint(path: str, offset: int, root: Path) -> Fingerprint | None:
    """What the first ``offset`` bytes of an event file are (head, the bytes before the offset, sampled blocks)."""
    from monitor_cb.ingest.colcache import Fingerprint, sample_hash

    try:
        with open_regular(path, root=root) as (fd, st):
            if st.st_size < offset or offset <= 0:
                return None
            head = os.pread(fd, min(offset, _SAMPLE), 0)
            low = max(0, offset - _SAMPLE)
            window = os.pread(fd, offset - low, low)
            samples = sample_hash(fd, offset)
    except OSError:
        return None
    return Fingerprint(offset, head, window, samples, (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns))


def _still_holds(path: str, fingerprint: Fingerprint, root: Path) -> bool:
    """Whether the event file still begins with the bytes the fingerprint describes."""
    now = _fingerprint(path, fingerprint.offset, root)
    return (
        now is not None
        and now.head == fingerprint.head
        and now.window == fingerprint.window
        and now.samples == fingerprint.samples
    )
