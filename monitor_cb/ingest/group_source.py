"""One rank of a run whose files one reader reads for every rank: the shared part of those sources.

TensorBoard event directories and MindSpore summary directories are read by one reader a run, which
hands each rank's new rows to that rank's table; a run may first be listed from its files' ends
(nothing decoded) until its rows are asked for. A rank's source polls the group and serves its table.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from monitor_cb.ingest.source import TableSource

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from monitor_cb.ingest.summary_index import SourceSummary


class RankGroup(Protocol):
    """What a rank source needs of its run's reader."""

    path: Path
    listed: Any  # None, or a listing with ``summaries`` (rank -> SourceSummary) and ``version``

    def poll(self) -> int: ...
    def unlist(self) -> None: ...
    def read_listed(self) -> None: ...


class GroupRankSource(TableSource):
    """One rank of a group-read run; polling it polls the shared reader for every rank."""

    def __init__(self, group: RankGroup, rank: int, tail: Any) -> None:
        super().__init__(rank)
        self.group = group
        self.path = group.path / f"rank_{rank}"
        self.meta_path = group.path / ".no-metadata"  # such runs keep no metadata: status from activity
        self.tail = tail
        self._new = 0

    def poll(self) -> int:
        self.group.poll()
        with self.lock:
            taken, self._new = self._new, 0
            self.last_poll = time.time()
            return taken

    # ------------------------------------------------------------------ listed from the files' ends
    def read_rows(self) -> int:
        self.group.unlist()
        return self.poll()

    def frame(self, all_segments: bool = False) -> pd.DataFrame:
        self.group.read_listed()
        return super().frame(all_segments)

    def frame_and_masks(self, all_segments: bool = False) -> tuple[int, pd.DataFrame, dict[str, np.ndarray]]:
        self.group.read_listed()
        return super().frame_and_masks(all_segments)

    def logged(self, column: str, all_segments: bool = False) -> np.ndarray:
        self.group.read_listed()
        return super().logged(column, all_segments)

    def summary(self) -> SourceSummary:
        listed = self.group.listed
        if listed is not None and self.table.rank in listed.summaries:
            return listed.summaries[self.table.rank]
        return super().summary()

    def summary_version(self) -> tuple[int, ...]:
        listed = self.group.listed
        return (listed.version,) if listed is not None else super().summary_version()


def hand_out(batches: Mapping[int, Any], source_of: Callable[[int], GroupRankSource]) -> int:
    """Append each rank's new batch to its source's table (under the source's lock); the rows taken."""
    taken = 0
    for rank, batch in batches.items():
        source = source_of(rank)
        with source.lock:
            added = source.table.append(batch)
            source._new += added
        taken += added
    return taken
