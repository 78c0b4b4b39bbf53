"""Aggregates across a run's ranks, kept per run and redone only from the first step new records reached.

A live 8-rank run gets a few records per rank per second; its bands over a million steps must
not be recomputed from scratch on every refresh. :class:`Incremental` remembers, per rank table,
how many rows it had and how many edits (rows changed in place: an eval merged into a step, a
resume) it had seen. When tables only grew, the aggregate before the first new step is kept and
only the steps from there on are computed again; anything else (an edit, a rank appearing, a file
replaced) recomputes it whole.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from monitor_cb.ingest.rank_bands import RankBands, RankColumn, concat_bands, rank_bands

R = TypeVar("R")


class RankRows(Protocol):
    """What an aggregate reads of one rank's table (:class:`~monitor_cb.ingest.tiered.TieredTable`)."""

    rank: int
    n: int
    edits: int

    def step_at(self, row: int) -> int: ...

    def column_since(self, name: str, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...


@dataclass(frozen=True)
class NonFinite:
    """Logged NaN/±inf cells of one metric on every rank: step, rank, value and the row's ``t``."""

    metric: str
    steps: np.ndarray
    ranks: np.ndarray
    values: np.ndarray
    t: np.ndarray

    def before(self, step: int) -> NonFinite:
        keep = self.steps < step
        return NonFinite(self.metric, self.steps[keep], self.ranks[keep], self.values[keep], self.t[keep])

    def excluding(self, rank: int) -> NonFinite:
        keep = self.ranks != rank
        return NonFinite(self.metric, self.steps[keep], self.ranks[keep], self.values[keep], self.t[keep])

    def __len__(self) -> int:
        return int(self.steps.size)


def nonfinite_of(metric: str, columns: Sequence[RankColumn]) -> NonFinite:
    """The logged non-finite cells of ``metric`` in each rank's column, by step then rank."""
    parts = []
    for col in columns:
        rows = np.flatnonzero(col.logged & ~np.isfinite(col.values))
        parts.append((col.steps[rows], np.full(rows.size, col.rank, np.int64), col.values[rows], col.t[rows]))
    if not parts:
        return NonFinite(metric, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
    steps, ranks, values, t = (np.concatenate([p[i] for p in parts]) for i in range(4))
    order = np.lexsort((ranks, steps))
    return NonFinite(metric, steps[order], ranks[order], values[order], t[order])


def concat_nonfinite(first: NonFinite, second: NonFinite) -> NonFinite:
    return NonFinite(
        first.metric,
        *(np.concatenate([getattr(first, n), getattr(second, n)]) for n in ("steps", "ranks", "values", "t")),
    )


@dataclass(frozen=True)
class Kind(Generic[R]):
    """How one aggregate is made from rank columns, cut before a step and joined."""

    compute: Callable[[str, list[RankColumn]], R]
    before: Callable[[R, int], R]
    concat: Callable[[R, R], R]
    cells_only: bool = False  # reads only the NaN/±inf rows of each rank (TieredTable.nonfinite_since)


BANDS: Kind[RankBands] = Kind(rank_bands, lambda b, s: b.before(s), lambda a, b: concat_bands([a, b]))
NONFINITE: Kind[NonFinite] = Kind(nonfinite_of, lambda n, s: n.before(s), concat_nonfinite, cells_only=True)


class Incremental(Generic[R]):
    """One aggregate of one metric of one run, extended as the ranks' tables grow; thread-safe."""

    def __init__(self, kind: Kind[R], metric: str) -> None:
        self.kind = kind
        self.metric = metric
        self.value: R | None = None
        self.recomputed = 0  # whole recomputations (for tests and benchmarks)
        self._tokens: dict[Any, tuple[int, int, int]] = {}  # source key -> (table id, edits, rows)
        self._lock = threading.Lock()

    def get(self, tables: dict[Any, RankRows]) -> R:
        """The aggregate over ``tables`` (source key -> that rank's table) as they are now."""
        with self._lock:
            tokens = {key: (id(t), t.edits, t.n) for key, t in tables.items()}
            since = self._first_new_step(tables, tokens)
            if since is None and self.value is not None:
                return self.value
            if since is None or since == -1 or self.value is None:
                self.value = self._compute(tables, 0)
                self.recomputed += 1
            else:
                self.value = self.kind.concat(self.kind.before(self.value, since), self._compute(tables, since))
            self._tokens = tokens
            return self.value

    def _first_new_step(self, tables: dict[Any, RankRows], tokens: dict[Any, tuple[int, int, int]]) -> int | None:
        """None: nothing changed; -1: recompute everything; else the first step new rows reached."""
        if self.value is None or set(tokens) != set(self._tokens):
            return -1
        first: int | None = None
        for key, (ident, edits, rows) in tokens.items():
            old = self._tokens[key]
            if (ident, edits) != old[:2] or rows < old[2]:  # another table, or rows changed in place
                return -1
            if rows < old[2]:
                return -1
            if rows > old[2]:
                step = tables[key].step_at(old[2])
                first = step if first is None else min(first, step)
        return first

    def _compute(self, tables: dict[Any, RankRows], since: int) -> R:
        columns = []
        for table in tables.values():
            if self.kind.cells_only and hasattr(table, "nonfinite_since"):
                steps, values, t = table.nonfinite_since(self.metric, since)  # no scan of rows left on disk
                logged = np.ones(steps.size, bool)
            else:
                steps, values, logged, t = table.column_since(self.metric, since)
            columns.append(RankColumn(table.rank, steps, values, logged, t))
        return self.kind.compute(self.metric, columns)


__all__ = ["BANDS", "NONFINITE", "Incremental", "NonFinite", "nonfinite_of"]
