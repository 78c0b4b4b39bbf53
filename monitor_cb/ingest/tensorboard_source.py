"""A TensorBoard event directory as live sources of the store: one per rank, one shared reader.

MindFormers writes ``tensorboard_dir/rank_{id}/events.out.tfevents.*``. One
:class:`~monitor_cb.importers.tensorboard.TensorBoardRun` reads every rank incrementally (full
resolution, NaN kept); each poll hands each rank's new records to that rank's table. The
``tensorboard`` package is optional: without it the run is listed with no records and one
warning says what to install.
"""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monitor_cb.ingest.source import TableSource

MAX_EVENTS_PER_POLL = 8_000_000  # bounds one refresh (~2 s); the rest comes on the next poll
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

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.activity = _Activity()
        self.sources: dict[int, TensorBoardRankSource] = {}
        self._reader: Any = None
        self.meta: dict[str, Any] = {}

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
        return self._reader
