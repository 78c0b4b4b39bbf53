"""A MindSpore summary directory as live sources of the store: one per rank, one shared reader.

``SummaryCollector`` / ``SummaryRecord`` write ``events.out.events.summary.<time>.<rank>.<host>_MS``
files; one :class:`~monitor_cb.importers.ms_summary.SummaryRun` reads them all incrementally (from the
byte each read stopped at; a record cut off at the end waits), and each poll hands each rank's new
rows to that rank's table, as :mod:`monitor_cb.ingest.tensorboard_source` does for event files. The
status comes from activity (summary files record none), the config from the ``_lineage`` file.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from monitor_cb.importers.ms_summary import SOURCE_FORMAT, HistogramSeries, SummaryRun
from monitor_cb.ingest.group_source import GroupRankSource, hand_out
from monitor_cb.ingest.lines import BadLine
from monitor_cb.ingest.status import usual_interval
from monitor_cb.rootfile import FileIdentity

if TYPE_CHECKING:
    from monitor_cb.importers.ms_peek import SummaryPeek
    from monitor_cb.ingest.summary_index import SourceSummary

MS_SUMMARY = SOURCE_FORMAT  # the RunDir kind
MAX_RECORDS_PER_POLL = 2_000_000  # bounds one refresh; the rest comes on the next poll


@dataclass
class _Activity:
    """What the store reads of a file tail: last write, a record still cut off, files refused."""

    mtime: float = 0.0
    pending: int = 0
    size: int = 0
    offset: int = 0
    refused: str | None = None  # the store names only the group's refused files (SummaryGroup.refused)


class SummaryRankSource(GroupRankSource):
    """One rank of a summary directory; polling it polls the shared reader for every rank."""

    def __init__(self, group: SummaryGroup, rank: int) -> None:
        super().__init__(group, rank, _Activity())


@dataclass(frozen=True)
class _Listing:
    """A run listed from the ends of its summary files: what each file was then, and each rank's line."""

    idents: dict[str, FileIdentity]
    summaries: dict[int, SourceSummary]
    version: int


class SummaryGroup:
    """The reader of one summary directory and its per-rank sources."""

    def __init__(self, path: Path, root: Path | None = None, peek_min_bytes: int | None = None) -> None:
        self.path = path
        self.root = root if root is not None else path
        self.reader = SummaryRun(path, self.root)
        self.lock = threading.Lock()
        self.sources: dict[int, SummaryRankSource] = {}
        self.meta: dict[str, Any] = {}
        self.peek_min_bytes = peek_min_bytes  # files this long may be listed from their ends; None: never
        self._peek_tried = peek_min_bytes is None
        self.listed: _Listing | None = None

    def poll(self) -> int:
        """Read new records of every rank into the rank tables; returns how many rows were taken."""
        with self.lock:
            if self.listed is not None:
                if self._listed_unchanged():
                    return 0
                self.listed = None  # a file changed or appeared: it is read now
            if not self._peek_tried:
                self._peek_tried = True
                if self._list_from_ends():
                    return 0
            try:
                by_rank = self.reader.poll_batches(MAX_RECORDS_PER_POLL)
            except FileNotFoundError:
                return 0
            taken = hand_out(by_rank, self.source)
            for rank in self.reader.ranks:
                self.source(rank)
            self._note_files()
            if taken or not self.meta:
                self.meta = self.reader.meta()
            return taken

    def unlist(self) -> None:
        """Rows are asked for: the next poll reads the files (a run only listed from their ends so far)."""
        with self.lock:
            self.listed = None

    def read_listed(self) -> None:
        if self.listed is not None:
            self.unlist()
            self.poll()

    def _list_from_ends(self) -> bool:
        """List the run from its files' ends (:mod:`monitor_cb.importers.ms_peek`) when each rank has one long
        summary file whose ends show one stride."""
        from monitor_cb.importers.ms_peek import peek_summary
        from monitor_cb.ingest.table import _VERSIONS

        assert self.peek_min_bytes is not None
        try:
            self.reader.discover()
        except OSError:
            return False
        files = list(self.reader.files.values())
        ranks = [f.rank for f in files]
        if not files or len(set(ranks)) != len(ranks):
            return False
        peeks = {f.rank: peek_summary(f.path, self.root, self.peek_min_bytes) for f in files}
        if any(p is None for p in peeks.values()):
            return False
        summaries = {rank: _summary(rank, peek) for rank, peek in peeks.items() if peek is not None}
        idents = {f.path: peeks[f.rank].ident for f in files}  # type: ignore[union-attr]
        self.listed = _Listing(idents, summaries, next(_VERSIONS))
        for rank, summary in summaries.items():
            source = self.source(rank)
            source.tail.mtime, source.tail.size = summary.last_write, peeks[rank].ident[2]  # type: ignore[union-attr]
        meta = self.reader.meta()
        meta.update(
            start_time=min(p.first_wall for p in peeks.values() if p is not None),
            last_event_time=max(p.last_wall for p in peeks.values() if p is not None),
        )
        self.meta = meta
        return True

    def _listed_unchanged(self) -> bool:
        """Whether the run still has exactly the files it was listed from, each as it was then."""
        from monitor_cb.ingest.summary_index import file_ident

        assert self.listed is not None
        try:
            self.reader.discover()
        except OSError:
            return False
        return sorted(self.reader.files) == sorted(self.listed.idents) and all(
            file_ident(Path(path)) == ident for path, ident in self.listed.idents.items()
        )

    def _note_files(self) -> None:
        """Each rank's activity (newest write, bytes waiting) and bad counts, from its files."""
        bad = self.reader.bad_counts()
        for rank, source in self.sources.items():
            files = [f for f in self.reader.files.values() if f.rank == rank]
            activity = source.tail
            activity.mtime = max((f.mtime for f in files), default=0.0)
            activity.pending = sum(f.pending for f in files)
            activity.size = activity.offset = sum(f.size for f in files)
            with source.lock:
                source.bad_count = bad.get(rank, 0)
                damaged = [BadLine(f.offset, f.damaged) for f in files if f.damaged]
                source.bad_lines = damaged[:]

    def refused(self) -> dict[str, str]:
        """Summary files not read, and why (a FIFO, a link out of the root...), for the store's notes."""
        out = {f.path: f.refused for f in self.reader.files.values() if f.refused}
        if self.reader.lineage_refused is not None:
            path, reason = self.reader.lineage_refused
            out[path] = reason
        return out

    def source(self, rank: int) -> SummaryRankSource:
        found = self.sources.get(rank)
        if found is None:
            found = self.sources[rank] = SummaryRankSource(self, rank)
        return found

    def histograms(self, rank: int | None = None) -> dict[str, HistogramSeries]:
        """Histograms read so far (see :meth:`SummaryRun.histograms`), after a poll."""
        self.poll()
        with self.lock:
            return self.reader.histograms(rank)


def _summary(rank: int, peek: SummaryPeek) -> SourceSummary:
    """A rank's line in the run list from its file's ends (what its decoded table would show)."""
    from monitor_cb.ingest.summary_index import SourceSummary

    return SourceSummary(
        rank=rank,
        n=peek.rows,
        first_step=peek.first_step,
        last_step=peek.last_step,
        last_write=peek.ident[3] / 1e9,
        pending=0,
        bad_count=0,
        interval=usual_interval(np.array(peek.times, dtype=float)),
    )
