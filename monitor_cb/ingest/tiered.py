"""A file's rows as its cached prefix on disk plus the rows read after it, loaded when asked for.

A run with 64 ranks (or a thousand finished runs in the list) must not hold every rank's rows in
memory to show what its charts show. A :class:`TieredTable` opened from the columnar cache keeps
the cached rows on disk (:class:`~monitor_cb.ingest.colcache.CachedRows`) and only the last
:data:`OVERLAY` of them in a small :class:`~monitor_cb.ingest.table.RankTable` that new records go
into: the run list, the status and the band across ranks read that. The first caller that wants
the rows themselves (a frame) makes it a plain table: the cached rows copied into memory, then the
small table's. Records that would change a row of the part left on disk (a resume that rewinds
further than the overlay) do the same first, so the result is always what one table reading the
whole file would hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from monitor_cb.ingest.batch import Batch
from monitor_cb.ingest.table import RankTable, TableState, concat_states

if TYPE_CHECKING:
    import pandas as pd

    from monitor_cb.ingest.colcache import CachedRows

OVERLAY = 1024  # cached rows kept in memory: a late eval record at a recent step lands here


class TieredTable:
    """RankTable's reading and appending interface over an optional on-disk prefix.

    Args:
        rank: the rank (records may not carry it).
    """

    def __init__(self, rank: int = 0) -> None:
        self._full: RankTable | None = RankTable(rank)
        self._tail: RankTable | None = None
        self._cached: CachedRows | None = None
        self._frozen = 0  # cached rows left on disk
        self._frozen_first: int | None = None
        self._frozen_last = -1  # the last step left on disk
        self._edits_base = 0  # keeps `edits` continuous when the table behind it changes
        self._pristine = False  # nothing appended since the cache was opened: its rows can be used as they are

    # ------------------------------------------------------------------ building
    @classmethod
    def from_cache(cls, cached: CachedRows, lazy: bool = True) -> TieredTable:
        """The cached rows; with ``lazy`` all but the last :data:`OVERLAY` of them stay on disk."""
        table = cls(cached.header.rank)
        state = cached.state()
        if not lazy or state.n <= OVERLAY:
            table._full = RankTable.from_state(state)
            return table
        frozen = state.n - OVERLAY
        table._full = None
        table._pristine = True
        table._tail = RankTable.from_state(state.rows(frozen))
        table._cached = cached
        table._frozen = frozen
        table._frozen_first = int(state.step[0])
        table._frozen_last = int(state.step[frozen - 1])
        return table

    @property
    def lazy(self) -> bool:
        """Whether rows are still left on disk."""
        return self._full is None

    def materialize(self) -> RankTable:
        """Every row in memory (a plain table from now on)."""
        if self._full is None:
            assert self._tail is not None and self._cached is not None
            before = self.edits
            if self._pristine:  # the cache file's rows as they are, mapped (copied only if ever written)
                self._full = RankTable.from_state(self._cached.state(), copy=False)
            else:
                frozen = self._cached.state().head(self._frozen)
                self._full = RankTable.from_state(concat_states(frozen, self._tail.state()))
            self._tail, self._cached = None, None
            self._edits_base = before - self._full.edits
        return self._full

    # ------------------------------------------------------------------ reading
    @property
    def rank(self) -> int:
        return (self._full or self._tail).rank  # type: ignore[union-attr]

    @rank.setter
    def rank(self, value: int) -> None:
        (self._full or self._tail).rank = value  # type: ignore[union-attr]

    @property
    def version(self) -> int:
        return (self._full or self._tail).version  # type: ignore[union-attr]

    @property
    def edits(self) -> int:
        """Changes made to existing rows so far (appends are not edits)."""
        return self._edits_base + (self._full or self._tail).edits  # type: ignore[union-attr]

    def step_at(self, row: int) -> int:
        if self._full is not None:
            return self._full.step_at(row)
        assert self._tail is not None and self._cached is not None
        if row >= self._frozen:
            return self._tail.step_at(row - self._frozen)
        return int(self._cached.state([]).step[row])

    def column_since(self, name: str, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(steps, values, logged, t) of one metric from ``step`` on; rows left on disk are mapped, not loaded."""
        if self._full is not None:
            return self._full.column_since(name, step)
        assert self._tail is not None and self._cached is not None
        tail = self._tail.column_since(name, step)
        if step > self._frozen_last:
            return tail
        state = self._cached.state([name]).head(self._frozen)
        start = int(np.searchsorted(state.step, step, side="left"))
        values, logged = state.floats.get(name, (np.full(state.n, np.nan), np.zeros(state.n, bool)))
        disk = (state.step[start:], values[start:], logged[start:], state.t[0][start:])
        return tuple(np.concatenate([a, b]) for a, b in zip(disk, tail, strict=True))  # type: ignore[return-value]

    def nonfinite_since(self, name: str, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(steps, values, t) of the logged NaN/±inf rows of one metric from ``step`` on; for rows left on
        disk from the cache file's list of them (no scan) when it has one."""
        listed = None if self._cached is None else self._cached.header.nonfinite.get(name)
        if self._full is not None or listed is None:
            steps, values, logged, t = self.column_since(name, step)
            rows = np.flatnonzero(logged & ~np.isfinite(values))
            return steps[rows], values[rows], t[rows]
        assert self._tail is not None
        disk_steps = np.asarray(listed[0], np.int64)
        keep = (disk_steps >= step) & (disk_steps <= self._frozen_last)
        steps, values, logged, t = self._tail.column_since(name, max(step, self._frozen_last + 1))
        rows = np.flatnonzero(logged & ~np.isfinite(values))
        return (
            np.concatenate([disk_steps[keep], steps[rows]]),
            np.concatenate([np.asarray(listed[1], np.float64)[keep], values[rows]]),
            np.concatenate([np.asarray(listed[2], np.float64)[keep], t[rows]]),
        )

    @property
    def n(self) -> int:
        return self._full.n if self._full is not None else self._frozen + self._tail.n  # type: ignore[union-attr]

    @property
    def first_step(self) -> int | None:
        return self._full.first_step if self._full is not None else self._frozen_first

    @property
    def last_step(self) -> int | None:
        return (self._full or self._tail).last_step  # type: ignore[union-attr]

    @property
    def history_rows(self) -> int:
        return self.materialize().history_rows

    def times(self, count: int) -> np.ndarray:
        table = self._full or self._tail
        assert table is not None
        if table.n >= count or self._full is not None:
            return table.times(count)
        return self.materialize().times(count)

    def frame(self, all_segments: bool = False) -> pd.DataFrame:
        return self.materialize().frame(all_segments)

    def frame_and_masks(self, all_segments: bool = False) -> tuple[int, pd.DataFrame, dict[str, np.ndarray]]:
        return self.materialize().frame_and_masks(all_segments)

    def logged(self, column: str, all_segments: bool = False) -> np.ndarray:
        return self.materialize().logged(column, all_segments)

    def state(self) -> TableState:
        """Every row as a :class:`TableState` (the part on disk mapped, not loaded)."""
        if self._full is not None:
            return self._full.state()
        assert self._tail is not None and self._cached is not None
        return concat_states(self._cached.state().head(self._frozen), self._tail.state())

    def columns(self, names: list[str]) -> TableState:
        """The main rows with only the metric columns ``names`` (for aggregating ranks): nothing else is read."""
        if self._full is not None:
            state = self._full.state()
            return _only(state, names)
        assert self._tail is not None and self._cached is not None
        frozen = self._cached.state(names).head(self._frozen)
        return concat_states(_only(frozen, names), _only(self._tail.state(), names))

    # ------------------------------------------------------------------ writing
    def append(self, batch: Batch) -> int:
        if self._full is None and not self._fits_tail(batch):
            self.materialize()
        self._pristine = False
        return (self._full or self._tail).append(batch)  # type: ignore[union-attr]

    def clear(self) -> None:
        rank, edits = self.rank, self.edits
        self._full, self._tail, self._cached = RankTable(rank), None, None
        self._edits_base = edits + 1 - self._full.edits
        self._frozen, self._frozen_first, self._frozen_last = 0, None, -1

    def _fits_tail(self, batch: Batch) -> bool:
        """Whether every record lands after the rows left on disk (so none of them can change)."""
        assert self._tail is not None
        if len(batch) == 0:
            return True
        steps = self._tail._resolve_steps(batch.step)  # pure: the steps append will give these records
        return bool(steps.min() > self._frozen_last)


def _only(state: TableState, names: list[str]) -> TableState:
    wanted = set(names)
    return TableState(
        state.rank,
        state.step,
        state.seg,
        state.t,
        {k: v for k, v in state.floats.items() if k in wanted},
        {k: v for k, v in state.texts.items() if k in wanted},
        None,
        state.last_step,
        state.last_seg,
        state.has_seg,
    )


__all__ = ["OVERLAY", "TieredTable"]
