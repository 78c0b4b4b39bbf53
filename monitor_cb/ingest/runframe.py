"""One read of a run: its frame, its "was logged" masks and the data version, handed out together.

A metric column holds NaN both where NaN was logged and where the metric was not logged at all;
the masks tell the two apart. They travel with the frame they describe, so a reader never asks a
second question of the store (which may have read new rows in between). Nothing here keeps state
per caller: a :class:`RunFrame` is a frozen value that any thread may hold and share.

```python
data = store.read(run_id)          # all ranks merged; rank=3 for one rank
data.frame                         # pandas DataFrame: step, t, rank, seg, one column per metric
data.logged("eval_loss")           # bool per row: was it logged (a NaN included)?
diagnose(data.frame, logged=data.masks)   # masks as a read-only mapping, each built on first use
cache_key = (data.key, settings)   # data.key changes exactly when the rows do
```
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

# Columns every row has: their "logged" mask is all True and is not listed among the masks.
ALWAYS_LOGGED = frozenset({"step", "rank", "seg"})

# (masks of one part, its row count): a part is one rank's table
Part = tuple[Mapping[str, np.ndarray], int]


class Snapshot:
    """A frame and what its masks are made of, shared by every reader of the same data version.

    ``parts`` are per rank (in the order their rows were concatenated) the table's masks and row
    count; ``order`` is the row order of the merged frame (None for one rank, rows as stored).
    A merged mask is built on first use and kept, so fifty viewers of a run build it once.
    """

    __slots__ = ("_built", "_lock", "frame", "ignored", "order", "parts", "version")

    def __init__(
        self,
        frame: pd.DataFrame,
        parts: list[Part],
        order: np.ndarray | None,
        version: tuple[Any, ...],
        ignored: frozenset[tuple[int, str]] = frozenset(),
    ) -> None:
        self.frame = frame
        self.parts = parts
        self.order = order
        self.version = version
        self.ignored = ignored  # (part, column): text in a column other ranks hold numbers in, read as not logged
        self._built: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def has_mask(self, column: str) -> bool:
        return any(column in masks for masks, _ in self.parts)

    def mask_names(self) -> list[str]:
        """Columns with a mask, in frame order."""
        return [c for c in self.frame.columns if c not in ALWAYS_LOGGED and self.has_mask(c)]

    def mask(self, column: str) -> np.ndarray:
        """The read-only "was logged" mask of ``column`` (all True for step/rank/seg)."""
        if column in ALWAYS_LOGGED:
            return _read_only(np.ones(len(self.frame), bool))
        hit = self._built.get(column)
        if hit is not None:
            return hit
        if not self.has_mask(column):
            raise KeyError(f"no column {column!r} in this run; columns are {list(self.frame.columns)}")
        pieces = [
            masks[column] if column in masks and (i, column) not in self.ignored else np.zeros(rows, bool)
            for i, (masks, rows) in enumerate(self.parts)
        ]
        if self.order is None and len(pieces) == 1:
            mask = _read_only(pieces[0])  # the table's own read-only view: no copy
        else:
            mask = _read_only(np.concatenate(pieces)[self.order] if self.order is not None else np.concatenate(pieces))
        with self._lock:
            return self._built.setdefault(column, mask)


class LoggedMasks(Mapping[str, np.ndarray]):
    """Column -> read-only "was logged" mask, for the columns that have one; each built when first read.

    What chart builders (``logged=``), ``diagnose(logged=...)`` and the series helpers take.
    """

    __slots__ = ("_snapshot",)

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def __getitem__(self, column: str) -> np.ndarray:
        if column in ALWAYS_LOGGED or not self._snapshot.has_mask(column):
            raise KeyError(column)
        return self._snapshot.mask(column)

    def __contains__(self, column: object) -> bool:
        return isinstance(column, str) and column not in ALWAYS_LOGGED and self._snapshot.has_mask(column)

    def __iter__(self) -> Iterator[str]:
        return iter(self._snapshot.mask_names())

    def __len__(self) -> int:
        return len(self._snapshot.mask_names())

    def __repr__(self) -> str:
        return f"LoggedMasks({self._snapshot.mask_names()})"


@dataclass(frozen=True, eq=False)
class RunFrame:
    """One read of a run (:meth:`monitor_cb.ingest.RunStore.read`): frame, masks and data version together.

    Attributes:
        run_id: the run (``RunInfo.id``).
        rank: the rank read, None for all ranks merged.
        all_segments: whether rows a resumed segment repeated are kept.
        frame: rows sorted by step (then rank); this reader's own shallow copy, so adding a column
            touches no other reader.
        version: changes whenever the rows change (opaque, hashable).
        masks: column -> "was logged" mask (read-only), see :class:`LoggedMasks`.
    """

    run_id: str
    rank: int | None
    all_segments: bool
    frame: pd.DataFrame
    version: tuple[Any, ...]
    masks: LoggedMasks = field(repr=False)

    @classmethod
    def of(cls, run_id: str, snapshot: Snapshot, rank: int | None = None, all_segments: bool = False) -> RunFrame:
        return cls(run_id, rank, all_segments, snapshot.frame.copy(deep=False), snapshot.version, LoggedMasks(snapshot))

    @property
    def key(self) -> tuple[Any, ...]:
        """``(run_id, rank, all_segments, version)``: equal keys mean the same rows; the start of a cache key."""
        return (self.run_id, self.rank, self.all_segments, self.version)

    def logged(self, column: str) -> np.ndarray:
        """Per row: True where ``column`` was logged (a logged NaN included), False where it is absent.

        Raises:
            KeyError: the run has no such column.
        """
        return self.masks._snapshot.mask(column)

    def __len__(self) -> int:
        return len(self.frame)


def table_read(run_id: str, table: Any, all_segments: bool = False) -> RunFrame:
    """A :class:`RunFrame` of one :class:`~monitor_cb.ingest.table.RankTable` (an upload, a single file)."""
    version, frame, masks = table.frame_and_masks(all_segments)
    snapshot = Snapshot(frame, [(masks, len(frame))], None, (all_segments, version))
    return RunFrame.of(run_id, snapshot, None, all_segments)


def _read_only(values: np.ndarray) -> np.ndarray:
    if not values.flags.writeable:
        return values
    view = values.view()
    view.flags.writeable = False
    return view
