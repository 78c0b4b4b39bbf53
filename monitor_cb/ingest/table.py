"""Growable numpy columns for one metrics file: rows merged by (seg, step), frames as views.

Appending a poll's records writes into preallocated buffers (capacity doubles when
full), so the cost of a poll follows the new records, not the run length. Rows are
kept sorted and unique by (segment, step): records of one step (train metrics, then
eval metrics) merge into one row, later values winning. A DataFrame is made only
when asked and only if something changed; with one segment it is a view of the
buffers (no copy). Buffers are copied before an in-place write touches rows an
earlier frame can see, so a frame handed out never changes under its reader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from monitor_cb.ingest.batch import Batch

if TYPE_CHECKING:
    import pandas as pd

_STEP_LIMIT = 1 << 40  # steps above a trillion are garbage; keeps (seg, step) packable in an int64
_SEG_LIMIT = 1 << 22
_MIN_CAPACITY = 1024


class _Column:
    """One metric: values and a logged mask, in buffers of the table's capacity."""

    __slots__ = ("logged", "values")

    def __init__(self, values: np.ndarray, logged: np.ndarray) -> None:
        self.values = values
        self.logged = logged


class RankTable:
    """The rows of one rank's metrics file.

    Args:
        rank: the rank for the ``rank`` column (records may not carry it).
    """

    def __init__(self, rank: int = 0) -> None:
        self.rank = rank
        self.version = 0  # +1 on every change; frames are cached per version
        self.clear()

    def clear(self) -> None:
        """Forget every row (the file was truncated or replaced)."""
        self.n = 0
        self._cap = _MIN_CAPACITY
        self._key = np.empty(self._cap, np.int64)
        self._step = np.empty(self._cap, np.int64)
        self._seg = np.empty(self._cap, np.int64)
        self._rank = np.empty(self._cap, np.int64)  # constant, but a buffer makes the frame column a view
        self._t = _Column(np.empty(self._cap), np.empty(self._cap, bool))
        self.floats: dict[str, _Column] = {}
        self.texts: dict[str, _Column] = {}
        self._shared = 0  # rows visible through views handed out
        self._last_step = 0
        self._last_seg = 0  # 0: no segment seen yet
        self._has_seg = False
        self._multi_seg = False
        self._cache: dict[bool, tuple[int, pd.DataFrame, np.ndarray | None]] = {}
        self._first_step = (-1, 0)
        self.version += 1

    # ------------------------------------------------------------------ reading
    @property
    def last_step(self) -> int | None:
        return int(self._step[self.n - 1]) if self.n else None

    @property
    def first_step(self) -> int | None:
        if not self.n:
            return None
        if self._first_step[0] != self.version:
            self._first_step = (self.version, int(self._step[: self.n].min()))
        return self._first_step[1]

    def times(self, count: int) -> np.ndarray:
        """The last ``count`` record times (for the usual interval)."""
        return self._t.values[max(self.n - count, 0) : self.n].copy()

    def frame(self, all_segments: bool = False) -> pd.DataFrame:
        """Rows by step (latest segment wins per step), or every row with ``all_segments``."""
        return self._cached(all_segments)[1]

    def logged(self, column: str, all_segments: bool = False) -> np.ndarray:
        """Per row of :meth:`frame`: True where ``column`` was logged (even as NaN)."""
        index = self._cached(all_segments)[2]
        col = self.floats.get(column) or self.texts.get(column)
        if column == "t":
            col = self._t
        if column in ("step", "rank", "seg"):
            return np.ones(self.n if index is None else len(index), bool)
        if col is None:
            raise KeyError(f"no column {column!r}; columns are {sorted([*self.floats, *self.texts])}")
        return col.logged[: self.n].copy() if index is None else col.logged[index]

    def _cached(self, all_segments: bool) -> tuple[int, pd.DataFrame, np.ndarray | None]:
        hit = self._cache.get(all_segments)
        if hit is None or hit[0] != self.version:
            index = self._index(all_segments)
            hit = (self.version, self._build(index), index)
            self._cache[all_segments] = hit
        return hit

    def _index(self, all_segments: bool) -> np.ndarray | None:
        """Row order of a frame; None means "all rows as stored" (a view)."""
        if not self._multi_seg:
            return None
        n = self.n
        order = np.lexsort((self._seg[:n], self._step[:n]))  # by step, then segment
        if all_segments:
            return order
        steps = self._step[order]
        last_of_step = np.r_[steps[1:] != steps[:-1], True]
        return order[last_of_step]

    def _build(self, index: np.ndarray | None) -> pd.DataFrame:
        import pandas as pd

        n = self.n

        def take(buf: np.ndarray) -> np.ndarray:
            return buf[:n] if index is None else buf[index]

        data: dict[str, np.ndarray] = {
            "step": take(self._step),
            "t": take(self._t.values),
            "rank": take(self._rank),
            "seg": take(self._seg),
        }
        for name, col in self.floats.items():
            data[name] = take(col.values)
        for name, col in self.texts.items():
            data[name] = take(col.values)
        if index is None:
            self._shared = n
        return pd.DataFrame(data, copy=False)

    # ------------------------------------------------------------------ writing
    def append(self, batch: Batch) -> int:
        """Merge a batch in; returns the number of records taken."""
        m = len(batch)
        if m == 0:
            return 0
        if self.n == 0 and self.rank == 0:
            ranks = batch.rank[batch.rank >= 0]
            if len(ranks):
                self.rank = int(ranks[0])
        step = self._resolve_steps(batch.step)
        seg = self._resolve_segs(batch.seg, step)
        keys = seg * _STEP_LIMIT + step
        order = None if bool(np.all(keys[1:] >= keys[:-1])) else np.argsort(keys, kind="stable")
        sorted_keys = keys if order is None else keys[order]
        starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
        ends = np.r_[starts[1:], m] - 1
        merged = _GroupMerge(order, starts, ends)
        groups = _Groups(sorted_keys[starts], merged)
        groups.add("t", batch.t, ~np.isnan(batch.t))
        for name, (values, logged) in batch.floats.items():
            groups.add(name, values, logged)
        for name, (values, logged) in batch.texts.items():
            groups.add(name, values, logged, text=True)
        self._merge(groups)
        self._last_step = int(step[-1])
        self._last_seg = int(seg[-1])
        self.version += 1
        return m

    def _resolve_steps(self, raw: np.ndarray) -> np.ndarray:
        """Missing or absurd steps take the step before them (an event logged between steps)."""
        valid = (raw >= 0) & (raw < _STEP_LIMIT)
        if valid.all():
            return raw
        return _forward_fill(raw, valid, self._last_step)

    def _resolve_segs(self, raw: np.ndarray, step: np.ndarray) -> np.ndarray:
        """Segments as written; a file without them (plain ``json.dumps``) starts one where the step goes back."""
        valid = (raw > 0) & (raw < _SEG_LIMIT)
        if valid.any() or self._has_seg:
            self._has_seg = True
            seg = raw if valid.all() else _forward_fill(raw, valid, max(self._last_seg, 1))
        else:
            previous = np.r_[self._last_step if self.n else step[0], step[:-1]]
            seg = max(self._last_seg, 1) + np.cumsum(step < previous)
        if self.n == 0 and not self._multi_seg:
            self._multi_seg = bool(seg.min() != seg.max())
        elif not self._multi_seg:
            self._multi_seg = bool(seg.min() != seg.max() or seg[0] != self._seg[0])
        return seg

    def _merge(self, groups: _Groups) -> None:
        n = self.n
        keys = groups.keys
        if n and keys[0] <= self._key[n - 1]:
            pos = np.searchsorted(self._key[:n], keys)
            exists = (pos < n) & (self._key[np.minimum(pos, n - 1)] == keys)
            if exists.any():
                self._update_rows(pos[exists], groups, exists)
            fresh = ~exists
            if not fresh.any():
                return
            if keys[fresh][0] <= self._key[n - 1]:
                self._insert_rows(pos[fresh], groups, fresh)
                return
            groups = groups.subset(fresh)
        self._append_rows(groups)

    def _append_rows(self, groups: _Groups) -> None:
        n, k = self.n, len(groups.keys)
        if n == 0 and k > self._cap:
            self._adopt(groups)
            return
        self._reserve(n + k)
        self._key[n : n + k] = groups.keys
        self._step[n : n + k] = groups.keys % _STEP_LIMIT
        self._seg[n : n + k] = groups.keys // _STEP_LIMIT
        self._rank[n : n + k] = self.rank
        for name, (values, logged, text) in groups.columns.items():
            col = self._column(name, text)
            col.values[n : n + k] = values
            col.logged[n : n + k] = logged
        for name, col in self._all_columns():
            if name not in groups.columns:
                col.values[n : n + k] = None if col.values.dtype == object else np.nan
                col.logged[n : n + k] = False
        self.n = n + k

    def _adopt(self, groups: _Groups) -> None:
        """A first big load: the parsed arrays become the buffers, saving a copy of every column.

        The first append after it grows (copies) them once, as any full buffer would.
        """
        k = len(groups.keys)
        self._cap = k
        self._key = _writable(groups.keys)
        self._step = groups.keys % _STEP_LIMIT
        self._seg = groups.keys // _STEP_LIMIT
        self._rank = np.full(k, self.rank, np.int64)
        for name, (values, logged, text) in groups.columns.items():
            table = self._t if name == "t" else None
            col = table or _Column(_writable(values), _writable(logged))
            if table is not None:
                col.values, col.logged = _writable(values), _writable(logged)
            elif text:
                self.texts[name] = col
            else:
                self.floats[name] = col
        self.n = k
        self._shared = 0

    def _update_rows(self, rows: np.ndarray, groups: _Groups, which: np.ndarray) -> None:
        if rows.min() < self._shared:
            self._detach()
        for name, (values, logged, text) in groups.columns.items():
            col = self._column(name, text)
            hit = logged[which]
            col.values[rows[hit]] = values[which][hit]
            col.logged[rows[hit]] = True

    def _insert_rows(self, positions: np.ndarray, groups: _Groups, which: np.ndarray) -> None:
        """Rows landing between existing ones (steps out of order): rebuild the buffers once."""
        n = self.n
        sub = groups.subset(which)
        for name, (_, _, text) in sub.columns.items():
            self._column(name, text)

        def spliced(buf: np.ndarray, new: np.ndarray) -> np.ndarray:
            return np.insert(buf[:n], positions, new)

        key = spliced(self._key, sub.keys)
        columns = {}
        for name, col in self._all_columns():
            if name in sub.columns:
                values, logged, _ = sub.columns[name]
            else:
                values = np.full(len(sub.keys), None if col.values.dtype == object else np.nan, col.values.dtype)
                logged = np.zeros(len(sub.keys), bool)
            columns[name] = (spliced(col.values, values), spliced(col.logged, logged))
        total = len(key)
        self._cap = max(_MIN_CAPACITY, 2 * total)
        self._key = _grown(key, self._cap)
        self._step = _grown(key % _STEP_LIMIT, self._cap)
        self._seg = _grown(key // _STEP_LIMIT, self._cap)
        self._rank = np.full(self._cap, self.rank, np.int64)
        for name, col in self._all_columns():
            values, logged = columns[name]
            col.values = _grown(values, self._cap)
            col.logged = _grown(logged, self._cap)
        self.n = total
        self._shared = 0

    def _all_columns(self) -> list[tuple[str, _Column]]:
        return [("t", self._t), *self.floats.items(), *self.texts.items()]

    def _column(self, name: str, text: bool) -> _Column:
        if name == "t":
            return self._t
        table = self.texts if text else self.floats
        col = table.get(name)
        if col is None:  # a key that appears mid-run: a new column, not logged before
            values = np.empty(self._cap, object if text else np.float64)  # object arrays start as None
            if not text:
                values[: self.n] = np.nan  # only rows that exist; appends fill the rest
            col = table[name] = _Column(values, np.zeros(self._cap, bool))
        return col

    def _reserve(self, rows: int) -> None:
        if rows <= self._cap:
            return
        cap = self._cap
        while cap < rows:
            cap *= 2
        cap = max(cap, rows + rows // 4)  # a big first load is not followed by a doubling
        self._cap = cap
        self._key = _grown(self._key[: self.n], cap)
        self._step = _grown(self._step[: self.n], cap)
        self._seg = _grown(self._seg[: self.n], cap)
        self._rank = _grown(self._rank[: self.n], cap)
        for _, col in self._all_columns():
            col.values = _grown(col.values[: self.n], cap)
            col.logged = _grown(col.logged[: self.n], cap)
        self._shared = 0  # new buffers: earlier views keep the old ones

    def _detach(self) -> None:
        """Copy the buffers so views handed out keep their values (copy-on-write)."""
        self._key, self._step, self._seg = self._key.copy(), self._step.copy(), self._seg.copy()
        self._rank = self._rank.copy()
        for _, col in self._all_columns():
            col.values = col.values.copy()
            col.logged = col.logged.copy()
        self._shared = 0


class _GroupMerge:
    """Reduce batch rows with equal keys to one row: the last logged value of each column wins."""

    def __init__(self, order: np.ndarray | None, starts: np.ndarray, ends: np.ndarray) -> None:
        self.order, self.starts, self.ends = order, starts, ends
        self.trivial = len(ends) == 0 or len(starts) == int(ends[-1]) + 1  # no two rows share a key

    def __call__(self, values: np.ndarray, logged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.order is not None:
            values, logged = values[self.order], logged[self.order]
        if self.trivial:
            return values, logged
        last = np.maximum.accumulate(np.where(logged, np.arange(len(logged)), -1))[self.ends]
        hit = last >= self.starts
        return values[np.maximum(last, 0)], hit


class _Groups:
    """The merged rows of one batch: keys plus name -> (values, logged, is_text)."""

    def __init__(self, keys: np.ndarray, merge: _GroupMerge | None) -> None:
        self.keys = keys
        self.merge = merge
        self.columns: dict[str, tuple[np.ndarray, np.ndarray, bool]] = {}

    def add(self, name: str, values: np.ndarray, logged: np.ndarray, text: bool = False) -> None:
        assert self.merge is not None
        merged_values, merged_logged = self.merge(values, logged)
        if not self.merge.trivial:  # picked rows may hold another row's value where nothing was logged
            merged_values = np.where(merged_logged, merged_values, None if text else np.nan)
        self.columns[name] = (merged_values, merged_logged, text)

    def subset(self, which: np.ndarray) -> _Groups:
        sub = _Groups(self.keys[which], None)
        sub.columns = {name: (v[which], lg[which], text) for name, (v, lg, text) in self.columns.items()}
        return sub


def _forward_fill(raw: np.ndarray, valid: np.ndarray, initial: int) -> np.ndarray:
    index = np.maximum.accumulate(np.where(valid, np.arange(len(raw)), -1))
    return np.where(index >= 0, raw[np.maximum(index, 0)], initial).astype(np.int64)


def _writable(values: np.ndarray) -> np.ndarray:
    return values if values.flags.writeable and values.flags.owndata else values.copy()


def _grown(values: np.ndarray, capacity: int) -> np.ndarray:
    out = np.empty(capacity, values.dtype)
    out[: len(values)] = values
    if values.dtype == object:
        out[len(values) :] = None
    return out
