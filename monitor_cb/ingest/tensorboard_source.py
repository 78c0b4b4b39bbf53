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

An event file read before that is gone or is not the same file any more (a run deleted and re-run, a file
replaced or rewritten in place) makes the whole run read anew, as a JSONL file that is not the one read
before is: old and new rows are never mixed.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from monitor_cb.config_masking import mask_config_texts
from monitor_cb.ingest.group_source import GroupRankSource, hand_out
from monitor_cb.ingest.status import usual_interval
from monitor_cb.rootfile import open_regular

if TYPE_CHECKING:
    from monitor_cb.importers.event_peek import EventPeek
    from monitor_cb.ingest.colcache import ColumnarCache, Fingerprint
    from monitor_cb.ingest.summary_index import SourceSummary

MAX_EVENTS_PER_POLL = 8_000_000  # bounds one refresh (~2 s); the rest comes on the next poll
# The reader's state, kept in the cache header's free-form "kinds". Its name carries the naming
# version: a cache written when tags were sanitised (``train_loss``) has no such key and is read afresh.
_STATE_KEY = "tensorboard_reader/names-as-written"
_SAMPLE = 4096
_warned_missing = False
_round = threading.local()  # this thread's polling round (see polling_round)


@contextlib.contextmanager
def polling_round() -> Iterator[None]:
    """A round of polls (a listing: the refresh, then every source): each run's files are looked at once.

    Every rank source of a run polls the one reader of the run; without a round, a listing of an 8-rank
    run listed its event files nine times. A round inside another is the outer one.
    """
    if getattr(_round, "token", None) is not None:
        yield
        return
    _round.token = object()
    try:
        yield
    finally:
        _round.token = None


@dataclass
class _Activity:
    """What the store reads of a file tail: last write time and whether a torn record waits."""

    mtime: float = 0.0
    pending: int = 0
    size: int = 0  # bytes of the run's event files (growth seen by this process: its status)


class TensorBoardRankSource(GroupRankSource):
    """One rank of a TensorBoard run; polling it polls the shared reader for every rank."""

    def __init__(self, group: TensorBoardGroup, rank: int) -> None:
        super().__init__(group, rank, group.activity)


@dataclass(frozen=True)
class _Listing:
    """A run listed from the ends of its event files: what each file was then, and each rank's summary."""

    idents: dict[str, tuple[int, int, int, int, int]]
    summaries: dict[int, SourceSummary]
    version: int
    reader: Any  # the TensorBoardRun that found the files (nothing read): it sees new files appear


class TensorBoardGroup:
    """The reader of one TensorBoard run directory and its per-rank sources."""

    def __init__(self, path: Path, cache: ColumnarCache | None = None, peek_min_bytes: int | None = None) -> None:
        self.path = path
        self.cache = cache
        self.peek_min_bytes = peek_min_bytes  # event files this long may be listed from their ends; None: never
        self.listed: _Listing | None = None
        self._peek_tried = peek_min_bytes is None
        self.lock = threading.Lock()
        self.activity = _Activity()
        self.sources: dict[int, TensorBoardRankSource] = {}
        self._reader: Any = None
        self.meta: dict[str, Any] = {}
        self.cached_offsets: dict[str, int] = {}  # event file -> bytes its cache file holds
        self.cache_hits = 0
        self._polled_in: object | None = None  # the polling round that polled the run last

    def poll(self) -> int:
        """Read new events of every rank into the rank tables; returns how many records were taken
        (nothing when this polling round already polled the run)."""
        with self.lock:
            token = getattr(_round, "token", None)
            if token is not None and token is self._polled_in:
                return 0
            self._polled_in = token
            if self.listed is not None:
                if self._listed_unchanged():
                    return 0
                self.listed = None  # a file changed: it is read now, and seen growing
            if not self._peek_tried:
                self._peek_tried = True
                if self._list_from_ends():
                    return 0
            reader = self._open()
            if reader is None:
                return 0
            try:
                by_rank = self._poll_reader(reader)
            except FileNotFoundError:
                return 0
            reader = self._reader
            taken = hand_out(by_rank, self.source)
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

    def _poll_reader(self, reader: Any) -> dict[int, Any]:
        """The reader's new batches; when a file it read is not the one it read, every row goes and a new
        reader reads the run from its files' starts (their cache files only when they still describe them)."""
        from monitor_cb.importers.tensorboard import EventFilesReplaced

        try:
            return reader.poll_batches(max_events=MAX_EVENTS_PER_POLL)  # type: ignore[no-any-return]
        except EventFilesReplaced:
            self._forget_rows()
        fresh = self._open()
        assert fresh is not None
        by_rank: dict[int, Any] = fresh.poll_batches(max_events=MAX_EVENTS_PER_POLL)
        for rank in set(self.sources) - set(fresh.ranks):
            del self.sources[rank]  # a rank of the deleted run only: the store's next listing drops it
        return by_rank

    def _forget_rows(self) -> None:
        """Drop the reader and every rank's rows (the files they came from are not there any more)."""
        self._reader = None
        self.cached_offsets = {}
        self.meta = {}
        for source in self.sources.values():
            with source.lock:
                source.table.clear()
                source.bad_count = 0
                source._new = 0

    def unlist(self) -> None:
        """Rows are asked for: the next poll reads the files (a run only listed from their ends so far)."""
        with self.lock:
            if self.listed is not None:
                self.listed = None
                self._polled_in = None  # rows are wanted: this round's poll of the listing read none

    def read_listed(self) -> None:
        """Read the files now when the run is only listed from their ends."""
        if self.listed is not None:
            self.unlist()
            self.poll()

    def _list_from_ends(self) -> bool:
        """List the run from the ends of its event files (:mod:`monitor_cb.importers.event_peek`) when each
        rank has one long file, no cache file describes any of them, and every file can be peeked at."""
        from monitor_cb.importers.event_peek import peek_events
        from monitor_cb.importers.tensorboard import TensorBoardRun, tensorboard_available
        from monitor_cb.ingest.table import _VERSIONS

        assert self.peek_min_bytes is not None
        if not tensorboard_available():
            return False
        try:
            reader = TensorBoardRun(self.path)
            singles = reader.single_files()
        except OSError:
            return False
        if not singles or len(singles) != len(reader.files) or self._has_cache_file(singles.values()):
            return False
        peeks: dict[int, EventPeek] = {}
        for rank, path in singles.items():
            peek = peek_events(path, self.path, self.peek_min_bytes)
            if peek is None:
                return False
            peeks[rank] = peek
        last_write = float(reader.last_write or 0.0)
        summaries = {rank: _summary(rank, peek, last_write) for rank, peek in peeks.items()}
        self.listed = _Listing({singles[r]: p.ident for r, p in peeks.items()}, summaries, next(_VERSIONS), reader)
        for rank in sorted(peeks):
            self.source(rank)
        self.activity.mtime = last_write
        self.activity.size = reader.total_bytes
        self.meta = _listed_meta(reader, peeks)
        return True

    def _listed_unchanged(self) -> bool:
        """Whether the run still has exactly the files it was listed from, each as it was then."""
        from monitor_cb.ingest.summary_index import file_ident

        assert self.listed is not None
        try:
            self.listed.reader.single_files()  # finds files that appeared since (a new rank, a resumed launch)
        except OSError:
            return False
        return sorted(self.listed.reader.files) == sorted(self.listed.idents) and all(
            file_ident(Path(path)) == ident for path, ident in self.listed.idents.items()
        )

    def _has_cache_file(self, paths: Any) -> bool:
        """Whether a cache file exists for any of ``paths`` (its rows are then read from it, as before)."""
        if self.cache is None:
            return False
        for path in paths:
            for place in self.cache.places:
                cached = self.cache.path_for(Path(path), place)
                if cached is not None and os.path.lexists(cached):
                    return True
        return False

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
                table = TieredTable.from_cache(cached) if usable else None
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
                table = source.table
                state, version = table.state(), table.version
                bad = source.bad_count
            self.cached_offsets[path] = offset
            what = _CacheWrite(Path(path), rank, state, saved, bad, fingerprint, source, table, version)
            job = _cache_job(self.cache, what)
            # the rows handed over never change (writes copy first): a server's refresh does not wait
            if self.cache.background is None:
                job()
            else:
                self.cache.background.submit(("cache", path), offset, job)


def _summary(rank: int, peek: EventPeek, last_write: float) -> SourceSummary:
    """A rank's line in the run list from its file's ends (what its decoded table would show)."""
    from monitor_cb.ingest.summary_index import SourceSummary

    return SourceSummary(
        rank=rank,
        n=peek.rows,
        first_step=peek.first_step,
        last_step=peek.last_step,
        last_write=last_write,
        pending=0,
        bad_count=0,
        interval=usual_interval(np.array(peek.times, dtype=float)),
    )


def _listed_meta(reader: Any, peeks: dict[int, EventPeek]) -> dict[str, Any]:
    """The run's metadata from its files' ends: the reader's, with the texts of the files' heads (a decode
    adds texts written later) and no counts of dropped values (a decode counts them)."""
    meta: dict[str, Any] = reader.meta()
    texts: dict[str, str] = {}
    for rank in sorted(peeks, reverse=True):  # the lowest rank's text wins, as when decoding
        texts.update(peeks[rank].texts)
    meta.update(
        start_time=min(p.first_wall for p in peeks.values()),
        last_event_time=max(p.last_wall for p in peeks.values()),
        config=mask_config_texts(texts),
        unaligned_sample_values=None,
        bad_step_values=None,
    )
    return meta


@dataclass
class _CacheWrite:
    """One rank's rows and what describes them, handed to the cache writer."""

    path: Path
    rank: int
    state: Any  # TableState: read-only views
    saved: dict[str, Any]
    bad: int
    fingerprint: Fingerprint
    source: Any = None  # the rank's source: its table becomes the mapped rows once written (if unchanged)
    table: Any = None
    version: int = -1


def _cache_job(cache: ColumnarCache, what: _CacheWrite) -> Callable[[], None]:
    from monitor_cb.ingest.colcache import CacheHeader, Summary, nonfinite_cells
    from monitor_cb.ingest.heap import release_free_memory
    from monitor_cb.ingest.tiered import OVERLAY

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
        if not cache.write(what.path, state, header) or what.source is None or state.n <= OVERLAY:
            return
        # the decoded rows leave the heap for the file just written (as JSONL files' rows do): 20 runs of 1M
        # steps read with no cache held 1.5 GB until the server stopped
        cached = cache.open(what.path, what.rank)
        if cached is None or cached.header.fingerprint != what.fingerprint:
            return
        if not what.source.adopt_cache(what.table, what.version, cached):
            return
        del state
        what.table = what.state = None  # this job's hold on the decoded rows, before the trim
        release_free_memory()  # glibc keeps the freed rows otherwise (6 runs of 1M steps: 594 -> 154 MB)

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
