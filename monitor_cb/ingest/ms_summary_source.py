"""A MindSpore summary directory as live sources of the store: one per rank, one shared reader.

``SummaryCollector`` / ``SummaryRecord`` write ``events.out.events.summary.<time>.<rank>.<host>_MS``
files; one :class:`~monitor_cb.importers.ms_summary.SummaryRun` reads them all incrementally (from the
byte each read stopped at; a record cut off at the end waits), and each poll hands each rank's new
rows to that rank's table, as :mod:`monitor_cb.ingest.tensorboard_source` does for event files. The
status comes from activity (summary files record none), the config from the ``_lineage`` file.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monitor_cb.importers.ms_summary import SOURCE_FORMAT, HistogramSeries, SummaryRun
from monitor_cb.ingest.lines import BadLine
from monitor_cb.ingest.source import TableSource

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


class SummaryRankSource(TableSource):
    """One rank of a summary directory; polling it polls the shared reader for every rank."""

    def __init__(self, group: SummaryGroup, rank: int) -> None:
        super().__init__(rank)
        self.group = group
        self.path = group.path / f"rank_{rank}"
        self.meta_path = group.path / ".no-metadata"  # summary files keep no status: it comes from activity
        self.tail = _Activity()
        self._new = 0

    def poll(self) -> int:
        self.group.poll()
        with self.lock:
            taken, self._new = self._new, 0
            self.last_poll = time.time()
            return taken


class SummaryGroup:
    """The reader of one summary directory and its per-rank sources."""

    def __init__(self, path: Path, root: Path | None = None) -> None:
        self.path = path
        self.reader = SummaryRun(path, root if root is not None else path)
        self.lock = threading.Lock()
        self.sources: dict[int, SummaryRankSource] = {}
        self.meta: dict[str, Any] = {}

    def poll(self) -> int:
        """Read new records of every rank into the rank tables; returns how many rows were taken."""
        with self.lock:
            try:
                by_rank = self.reader.poll_batches(MAX_RECORDS_PER_POLL)
            except FileNotFoundError:
                return 0
            taken = 0
            for rank, batch in by_rank.items():
                source = self.source(rank)
                with source.lock:
                    added = source.table.append(batch)
                    source._new += added
                taken += added
            for rank in self.reader.ranks:
                self.source(rank)
            self._note_files()
            if taken or not self.meta:
                self.meta = self.reader.meta()
            return taken

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
