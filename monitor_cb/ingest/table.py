"""Growable numpy columns for one metrics file: one row per step, frames as views.

Appending a poll's records writes into preallocated buffers (capacity doubles when
full), so the cost of a poll follows the new records, not the run length. The main
buffers hold one row per step, sorted by step: records of one (segment, step) (train
metrics, then eval metrics) merge into one row, later values winning; a later
segment (a resumed run) replaces the row and the replaced row moves to a history
kept for ``all_segments``. So the display frame is always a plain view of the
buffers, resumed or not. Buffers are copied before an in-place write touches rows
an earlier frame can see, so a frame handed out never changes under its reader.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from monitor_cb.ingest.batch import Batch
from monitor_cb.record import SEG_LIMIT as _SEG_LIMIT
from monitor_cb.record import STEP_LIMIT as _STEP_LIMIT

if TYPE_CHECKING:
    import pandas as pd
_MIN_CAPACITY = 1024
# Versions come from one counter for the whole process, so a version names one state of one table:
# a table cleared (file replaced) or made anew (run rediscovered) never repeats an earlier version.
_VERSIONS = itertools.count(1)

# (steps, segs, name -> (values, logged, is_text)) of rows a later segment replaced
_HistoryPart = tuple[np.ndarray, np.ndarray, dict[str, tuple[np.ndarray, np.ndarray, bool]]]


# name -> (values, logged) of a table's rows
Columns = dict[str, tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class TableState:
    """A table's rows and the state its next append depends on, as plain arrays (what the columnar cache stores).

    ``floats`` and ``texts`` keep the table's column order; ``t`` is among the floats' neighbours as its own
    field. ``history`` holds the rows later segments replaced, as one part (steps, segs, columns).
    """

    rank: int
    step: np.ndarray
    seg: np.ndarray
    t: tuple[np.ndarray, np.ndarray]
    floats: Columns = field(default_factory=dict)
    texts: Columns = field(default_factory=dict)
    history: tuple[np.ndarray, np.ndarray, Columns] | None = None
    last_step: int = 0
    last_seg: int = 0
    has_seg: bool = False

    @property
    def n(self) -> int:
        return len(self.step)

    def head(self, rows: int) -> TableState:
        """The first ``rows`` main rows (views), with this state's history and append state."""
        cut = {name: (v[:rows], lg[:rows]) for name, (v, lg) in self.floats.items()}
        texts = {name: (v[:rows], lg[:rows]) for name, (v, lg) in self.texts.items()}
        return TableState(
            self.rank, self.step[:rows], self.seg[:rows], (self.t[0][:rows], self.t[1][:rows]), cut, texts,
            self.history, self.last_step, self.last_seg, self.has_seg,
        )  # fmt: skip

    def rows(self, start: int) -> TableState:
        """Main rows from ``start`` on (views), without history: what a tail table starts from."""
        cut = {name: (v[start:], lg[start:]) for name, (v, lg) in self.floats.items()}
        texts = {name: (v[start:], lg[start:]) for name, (v, lg) in self.texts.items()}
        return TableState(
            self.rank, self.step[start:], self.seg[start:], (self.t[0][start:], self.t[1][start:]), cut, texts,
            None, self.last_step, self.last_seg, self.has_seg,
        )  # fmt: skip


def concat_states(first: TableState, second: TableState) -> TableState:
    """``first``'s main rows then ``second``'s (all of whose steps come later); histories joined; append state
    from ``second``. Columns missing on one side are not logged there."""
    n1, n2 = first.n, second.n

    def joined(a: Columns, b: Columns, text: bool) -> Columns:
        out: Columns = {}
        for name in dict.fromkeys([*a, *b]):
            parts = [_or_missing(a.get(name), n1, text), _or_missing(b.get(name), n2, text)]
            out[name] = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
        return out

    t = joined({"t": first.t}, {"t": second.t}, False)["t"]
    histories = [h for h in (first.history, second.history) if h is not None and len(h[0])]
    history = None
    if histories:
        history = histories[0] if len(histories) == 1 else _join_history(histories)
    return TableState(
        second.rank if n2 else first.rank,
        np.concatenate([first.step, second.step]),
        np.concatenate([first.seg, second.seg]),
        t,
        joined(first.floats, second.floats, False),
        joined(first.texts, second.texts, True),
        history,
        second.last_step,
        second.last_seg,
        second.has_seg,
    )


def _or_missing(got: tuple[np.ndarray, np.ndarray] | None, rows: int, text: bool) -> tuple[np.ndarray, np.ndarray]:
    if got is not None:
        return got
    return np.full(rows, None if text else np.nan, object if text else np.float64), np.zeros(rows, bool)


def _join_history(parts: list[tuple[np.ndarray, np.ndarray, Columns]]) -> tuple[np.ndarray, np.ndarray, Columns]:
    names = dict.fromkeys(name for part in parts for name in part[2])
    columns: Columns = {}
    for name in names:
        text = any(part[2][name][0].dtype == object for part in parts if name in part[2])
        pieces = [_or_missing(part[2].get(name), len(part[0]), text) for part in parts]
        columns[name] = (np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces]))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), columns


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
        self.version = 0  # a new value from _VERSIONS on every change; frames are cached per version
        self.edits = -1  # changes made to existing rows (appends are not edits): aggregates redo only new rows
        self.clear()

    def clear(self) -> None:
        """Forget every row (the file was truncated or replaced)."""
        self.edits += 1
        self.n = 0
        self._cap = _MIN_CAPACITY
        self._step = np.empty(self._cap, np.int64)
        self._seg = np.empty(self._cap, np.int64)
        self._rank = np.empty(self._cap, np.int64)  # constant, but a buffer makes the frame column a view
        self._t = _Column(np.empty(self._cap), np.empty(self._cap, bool))
        self.floats: dict[str, _Column] = {}
        self.texts: dict[str, _Column] = {}
        self._history: list[_HistoryPart] = []
        self._shared = 0  # rows visible through views handed out
        self._last_step = 0
        self._last_seg = 0  # 0: no segment seen yet
        self._has_seg = False
        self._cache: dict[bool, tuple[int, pd.DataFrame, dict[str, np.ndarray]]] = {}
        self.version = next(_VERSIONS)

    # ------------------------------------------------------------------ reading
    @property
    def last_step(self) -> int | None:
        return int(self._step[self.n - 1]) if self.n else None

    @property
    def first_step(self) -> int | None:
        return int(self._step[0]) if self.n else None

    @property
    def history_rows(self) -> int:
        """Rows replaced by a later segment (kept for ``all_segments``)."""
        return sum(len(part[0]) for part in self._history)

    def times(self, count: int) -> np.ndarray:
        """``t`` of the last ``count`` steps (for the usual interval)."""
        return self._t.values[max(self.n - count, 0) : self.n].copy()

    def step_at(self, row: int) -> int:
        return int(self._step[row])

    def column_since(self, name: str, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(steps, values, logged, t) of the rows from ``step`` on, for one metric (read-only views;
        all NaN / not logged where the table has no such column)."""
        n = self.n
        start = int(np.searchsorted(self._step[:n], step, side="left"))
        col = self.floats.get(name)
        self._shared = max(self._shared, n)  # views handed out: later writes copy first
        steps, t = _read_only(self._step[start:n]), _read_only(self._t.values[start:n])
        if col is None:
            return steps, np.full(n - start, np.nan), np.zeros(n - start, bool), t
        return steps, _read_only(col.values[start:n]), _read_only(col.logged[start:n]), t

    def frame(self, all_segments: bool = False) -> pd.DataFrame:
        """One row per step (latest segment wins), or with ``all_segments`` also the replaced rows."""
        return self._cached(all_segments)[1]

    def frame_and_masks(self, all_segments: bool = False) -> tuple[int, pd.DataFrame, dict[str, np.ndarray]]:
        """(version, frame, per-column "was logged" masks); the masks are read-only and never change later."""
        return self._cached(all_segments)

    def logged(self, column: str, all_segments: bool = False) -> np.ndarray:
        """Per row of :meth:`frame`: True where ``column`` was logged (even as NaN)."""
        _, frame, masks = self._cached(all_segments)
        return mask_of(masks, column, len(frame))

    def _cached(self, all_segments: bool) -> tuple[int, pd.DataFrame, dict[str, np.ndarray]]:
        all_segments = all_segments and bool(self._history)
        hit = self._cache.get(all_segments)
        if hit is None or hit[0] != self.version:
            hit = (self.version, *(self._build_all() if all_segments else self._build_view()))
            self._cache[all_segments] = hit
        return hit

    def _columns_order(self) -> list[tuple[str, _Column]]:
        return [*self.floats.items(), *self.texts.items()]

    def _build_view(self) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
        import pandas as pd

        n = self.n
        data: dict[str, np.ndarray] = {
            "step": self._step[:n],
            "t": self._t.values[:n],
            "rank": self._rank[:n],
            "seg": self._seg[:n],
        }
        for name, col in self._columns_order():
            data[name] = col.values[:n]
        masks = {name: _read_only(col.logged[:n]) for name, col in self._all()}
        self._shared = n  # from now on rows < n are copied before any write (copy-on-write)
        return pd.DataFrame(data, copy=False), masks

    def _build_all(self) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
        """Main rows plus replaced ones, sorted by step then segment (copies: asked for rarely)."""
        import pandas as pd

        n = self.n
        parts: list[_HistoryPart] = [
            (self._step[:n], self._seg[:n], {name: (c.values[:n], c.logged[:n], False) for name, c in self._all()}),
            *self._history,
        ]
        steps = np.concatenate([part[0] for part in parts])
        segs = np.concatenate([part[1] for part in parts])
        order = np.lexsort((segs, steps))
        data: dict[str, np.ndarray] = {
            "step": steps[order],
            "t": np.empty(0),
            "rank": np.full(len(order), self.rank, np.int64),
            "seg": segs[order],
        }
        masks: dict[str, np.ndarray] = {}
        for name, col in [("t", self._t), *self._columns_order()]:
            text = col.values.dtype == object
            values, logged = [], []
            for part_steps, _, columns in parts:
                got = columns.get(name)
                if got is None:
                    values.append(np.full(len(part_steps), None if text else np.nan, col.values.dtype))
                    logged.append(np.zeros(len(part_steps), bool))
                else:
                    values.append(got[0])
                    logged.append(got[1])
            data[name] = np.concatenate(values)[order]
            masks[name] = _read_only(np.concatenate(logged)[order])
        return pd.DataFrame(data, copy=False), masks

    # ------------------------------------------------------------------ state
    def state(self) -> TableState:
        """The rows as read-only views (they never change later: writes copy first) and the append state."""
        n = self.n
        self._shared = n
        history = _join_history(self._history) if len(self._history) > 1 else (self._history or [None])[0]
        if history is not None:
            history = (history[0], history[1], {name: (c[0], c[1]) for name, c in history[2].items()})
        return TableState(
            rank=self.rank,
            step=_read_only(self._step[:n]),
            seg=_read_only(self._seg[:n]),
            t=(_read_only(self._t.values[:n]), _read_only(self._t.logged[:n])),
            floats={name: (_read_only(c.values[:n]), _read_only(c.logged[:n])) for name, c in self.floats.items()},
            texts={name: (_read_only(c.values[:n]), _read_only(c.logged[:n])) for name, c in self.texts.items()},
            history=history,
            last_step=self._last_step,
            last_seg=self._last_seg,
            has_seg=self._has_seg,
        )

    @classmethod
    def from_state(cls, state: TableState, headroom: float = 0.25, copy: bool = True) -> RankTable:
        """A table holding ``state``'s rows, ready to append.

        With ``copy`` the rows go into the table's own buffers (with room to grow); without, the
        state's arrays (read-only: a mapped cache file, say) become the buffers as they are, and the
        first write of any kind copies them first (a finished run is never copied).
        """
        table = cls(state.rank)
        n = state.n
        if not copy and n:
            return table._adopt_state(state)
        cap = max(_MIN_CAPACITY, n + int(n * headroom))
        table._cap = cap
        table._step = _grown(np.asarray(state.step, np.int64), cap)
        table._seg = _grown(np.asarray(state.seg, np.int64), cap)
        table._rank = np.full(cap, state.rank, np.int64)

        def column(pair: tuple[np.ndarray, np.ndarray], dtype: type) -> _Column:
            return _Column(_grown(np.asarray(pair[0], dtype), cap), _grown(np.asarray(pair[1], bool), cap))

        table._t = column(state.t, np.float64)
        for name, pair in state.floats.items():
            table.floats[name] = column(pair, np.float64)
        for name, pair in state.texts.items():
            table.texts[name] = column(pair, object)
        if state.history is not None and len(state.history[0]):
            steps, segs, columns = state.history
            text = {name: values.dtype == object for name, (values, _) in columns.items()}
            table._history = [(steps, segs, {name: (v, lg, text[name]) for name, (v, lg) in columns.items()})]
        table.n = n
        table._last_step, table._last_seg, table._has_seg = state.last_step, state.last_seg, state.has_seg
        return table

    def _adopt_state(self, state: TableState) -> RankTable:
        n = state.n
        self._cap = n
        self._step, self._seg = state.step, state.seg
        self._rank = np.broadcast_to(np.int64(state.rank), (n,))  # one value, no buffer (read-only, like the rest)
        self._t = _Column(state.t[0], state.t[1])
        self.floats = {name: _Column(v, lg) for name, (v, lg) in state.floats.items()}
        self.texts = {name: _Column(v, lg) for name, (v, lg) in state.texts.items()}
        if state.history is not None and len(state.history[0]):
            steps, segs, columns = state.history
            self._history = [(steps, segs, {name: (v, lg, v.dtype == object) for name, (v, lg) in columns.items()})]
        self.n = n
        self._shared = n  # every row is read-only: an in-place write copies first, an append grows
        self._last_step, self._last_seg, self._has_seg = state.last_step, state.last_seg, state.has_seg
        return self

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
        if bool(np.all(keys[1:] > keys[:-1])):  # the usual batch: one record per step, in order
            groups = _Groups(keys, _GroupMerge(None, None, None), step if step.dtype == np.int64 else None)
        else:
            order = None if bool(np.all(keys[1:] >= keys[:-1])) else np.argsort(keys, kind="stable")
            sorted_keys = keys if order is None else keys[order]
            starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
            ends = np.r_[starts[1:], m] - 1
            groups = _Groups(sorted_keys[starts], _GroupMerge(order, starts, ends))
        groups.add("t", batch.t, ~np.isnan(batch.t))
        for name, (values, logged) in batch.floats.items():
            groups.add(name, values, logged)
            if name in self.texts:  # a column one name cannot be twice: numbers win (the parser counts the text)
                self._drop_text(name)
        for name, (values, logged) in batch.texts.items():
            if name not in batch.floats and name not in self.floats:
                groups.add(name, values, logged, text=True)
        first_seg, last_seg = int(groups.keys[0] // _STEP_LIMIT), int(groups.keys[-1] // _STEP_LIMIT)
        if first_seg == last_seg:  # (keys are sorted)
            self._merge_segment(first_seg, groups)
        else:  # older segments first, so later ones replace them
            group_segs = groups.keys // _STEP_LIMIT
            bounds = [0, *(np.flatnonzero(np.diff(group_segs)) + 1), len(group_segs)]
            for lo, hi in itertools.pairwise(bounds):
                self._merge_segment(int(group_segs[lo]), groups.subset(slice(lo, hi)))
        self._last_step = int(step[-1])
        self._last_seg = int(seg[-1])
        self.version = next(_VERSIONS)
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
            return raw if valid.all() else _forward_fill(raw, valid, max(self._last_seg, 1))
        # _last_seg is 0 until a first append (also in a table restored from a state with no rows)
        previous = np.r_[self._last_step if self._last_seg else step[0], step[:-1]]
        return max(self._last_seg, 1) + np.cumsum(step < previous)

    def _merge_segment(self, seg: int, groups: _Groups) -> None:
        """Merge rows of one segment (steps sorted, unique) into the one-row-per-step buffers."""
        steps = groups.steps if groups.steps is not None else groups.keys % _STEP_LIMIT
        n = self.n
        if n == 0 or steps[0] > self._step[n - 1]:
            self._append_rows(seg, steps, groups)
            return
        pos = np.searchsorted(self._step[:n], steps)
        hit = (pos < n) & (self._step[np.minimum(pos, n - 1)] == steps)
        if hit.any():
            which = np.flatnonzero(hit)
            rows = pos[which]
            existing = self._seg[rows]
            same, newer, older = existing == seg, existing < seg, existing > seg
            if same.any():
                self._update_rows(rows[same], groups.subset(which[same]))
            if newer.any():
                self._replace_rows(rows[newer], seg, groups.subset(which[newer]))
            if older.any():  # a record of an older segment than the row's: history only
                sub = groups.subset(which[older])
                self._history.append((sub.keys % _STEP_LIMIT, sub.keys // _STEP_LIMIT, sub.columns))
        fresh = ~hit
        if not fresh.any():
            return
        sub = groups if fresh.all() else groups.subset(fresh)
        if steps[fresh][0] > self._step[n - 1]:
            self._append_rows(seg, steps[fresh], sub)
        else:
            self._insert_rows(pos[fresh], seg, steps[fresh], sub)

    def _append_rows(self, seg: int, steps: np.ndarray, groups: _Groups) -> None:
        n, k = self.n, len(steps)
        if n == 0 and k > self._cap:
            self._adopt(seg, steps, groups)
            return
        self._reserve(n + k)
        self._step[n : n + k] = steps
        self._seg[n : n + k] = seg
        self._rank[n : n + k] = self.rank
        for name, (values, logged, text) in groups.columns.items():
            col = self._column(name, text)
            col.values[n : n + k] = values
            col.logged[n : n + k] = logged
        for name, col in self._all():
            if name not in groups.columns:
                col.values[n : n + k] = None if col.values.dtype == object else np.nan
                col.logged[n : n + k] = False
        self.n = n + k

    def _adopt(self, seg: int, steps: np.ndarray, groups: _Groups) -> None:
        """A first big load: the parsed arrays become the buffers as they are (read-only ones too: the
        parser's zero-copy views), saving a copy of every column.

        Every row counts as handed out, so the first write of any kind copies them first: an append
        grows them (as any full buffer would), an in-place change detaches them.
        """
        k = len(steps)
        self._cap = k
        self._step = steps
        self._seg = np.full(k, seg, np.int64)
        self._rank = np.full(k, self.rank, np.int64)
        for name, (values, logged, text) in groups.columns.items():
            col = _Column(values, logged)
            if name == "t":
                self._t = col
            elif text:
                self.texts[name] = col
            else:
                self.floats[name] = col
        self.n = k
        self._shared = k

    def _update_rows(self, rows: np.ndarray, groups: _Groups) -> None:
        """Same segment, same step: fill in the values this record logged."""
        self.edits += 1
        if rows.min() < self._shared:
            self._detach()
        for name, (values, logged, text) in groups.columns.items():
            col = self._column(name, text)
            col.values[rows[logged]] = values[logged]
            col.logged[rows[logged]] = True

    def _replace_rows(self, rows: np.ndarray, seg: int, groups: _Groups) -> None:
        """A later segment logged these steps again: its rows win, the old ones go to history."""
        self.edits += 1
        if rows.min() < self._shared:
            self._detach()
        self._history.append(
            (
                self._step[rows],
                self._seg[rows],
                {name: (c.values[rows], c.logged[rows], False) for name, c in self._all()},
            )
        )
        self._seg[rows] = seg
        for name, (_, _, text) in groups.columns.items():
            self._column(name, text)
        for name, col in self._all():
            got = groups.columns.get(name)
            if got is None:
                col.values[rows] = None if col.values.dtype == object else np.nan
                col.logged[rows] = False
            else:
                col.values[rows] = got[0]
                col.logged[rows] = got[1]

    def _insert_rows(self, positions: np.ndarray, seg: int, steps: np.ndarray, groups: _Groups) -> None:
        """Rows landing between existing steps: rebuild the buffers once for the whole batch."""
        self.edits += 1
        n = self.n
        for name, (_, _, text) in groups.columns.items():
            self._column(name, text)
        k = len(steps)
        total = n + k
        cap = max(_MIN_CAPACITY, 2 * total)

        def spliced(buf: np.ndarray, new: np.ndarray) -> np.ndarray:
            return _grown(np.insert(buf[:n], positions, new), cap)

        self._step = spliced(self._step, steps)
        self._seg = spliced(self._seg, np.full(k, seg, np.int64))
        self._rank = np.full(cap, self.rank, np.int64)
        for name, col in self._all():
            got = groups.columns.get(name)
            if got is None:
                values = np.full(k, None if col.values.dtype == object else np.nan, col.values.dtype)
                logged = np.zeros(k, bool)
            else:
                values, logged = got[0], got[1]
            col.values = spliced(col.values, values)
            col.logged = spliced(col.logged, logged)
        self._cap = cap
        self.n = total
        self._shared = 0

    def _drop_text(self, name: str) -> None:
        """Forget a text column whose name now holds numbers (in history too)."""
        del self.texts[name]
        for _, _, columns in self._history:
            got = columns.get(name)
            if got is not None and got[0].dtype == object:
                del columns[name]

    def _all(self) -> list[tuple[str, _Column]]:
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
        self._step = _grown(self._step[: self.n], cap)
        self._seg = _grown(self._seg[: self.n], cap)
        self._rank = _grown(self._rank[: self.n], cap)
        for _, col in self._all():
            col.values = _grown(col.values[: self.n], cap)
            col.logged = _grown(col.logged[: self.n], cap)
        self._shared = 0  # new buffers: earlier views keep the old ones

    def _detach(self) -> None:
        """Copy the buffers so views handed out keep their values (copy-on-write)."""
        self._step, self._seg, self._rank = self._step.copy(), self._seg.copy(), self._rank.copy()
        for _, col in self._all():
            col.values = col.values.copy()
            col.logged = col.logged.copy()
        self._shared = 0


class _GroupMerge:
    """Reduce batch rows with equal keys to one row: the last logged value of each column wins."""

    def __init__(self, order: np.ndarray | None, starts: np.ndarray | None, ends: np.ndarray | None) -> None:
        """``starts``/``ends``: each key's first and last row in key order; None: every key is one row."""
        self.order, self.starts, self.ends = order, starts, ends
        # no two rows share a key
        self.trivial = starts is None or ends is None or len(ends) == 0 or len(starts) == int(ends[-1]) + 1

    def __call__(self, values: np.ndarray, logged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.order is not None:
            values, logged = values[self.order], logged[self.order]
        if self.trivial:
            return values, logged
        last = np.maximum.accumulate(np.where(logged, np.arange(len(logged)), -1))[self.ends]
        hit = last >= self.starts
        return values[np.maximum(last, 0)], hit


class _Groups:
    """The merged rows of one batch: (seg, step) keys plus name -> (values, logged, is_text)."""

    def __init__(self, keys: np.ndarray, merge: _GroupMerge | None, steps: np.ndarray | None = None) -> None:
        self.keys = keys
        self.merge = merge
        self.steps = steps  # keys % STEP_LIMIT when at hand (a division less for a long batch)
        self.columns: dict[str, tuple[np.ndarray, np.ndarray, bool]] = {}

    def add(self, name: str, values: np.ndarray, logged: np.ndarray, text: bool = False) -> None:
        assert self.merge is not None
        merged_values, merged_logged = self.merge(values, logged)
        if not self.merge.trivial:  # picked rows may hold another row's value where nothing was logged
            merged_values = np.where(merged_logged, merged_values, None if text else np.nan)
        self.columns[name] = (merged_values, merged_logged, text)

    def subset(self, which: np.ndarray | slice) -> _Groups:
        sub = _Groups(self.keys[which], None, None if self.steps is None else self.steps[which])
        sub.columns = {name: (v[which], lg[which], text) for name, (v, lg, text) in self.columns.items()}
        return sub


def mask_of(masks: dict[str, np.ndarray], column: str, rows: int) -> np.ndarray:
    """A writable copy of one column's "was logged" mask; step/rank/seg are always logged."""
    if column in ("step", "rank", "seg"):
        return np.ones(rows, bool)
    mask = masks.get(column)
    if mask is None:
        raise KeyError(f"no column {column!r}; columns are {sorted(masks)}")
    return mask.copy()


def _read_only(values: np.ndarray) -> np.ndarray:
    view = values.view()
    view.flags.writeable = False
    return view


def _forward_fill(raw: np.ndarray, valid: np.ndarray, initial: int) -> np.ndarray:
    index = np.maximum.accumulate(np.where(valid, np.arange(len(raw)), -1))
    return np.where(index >= 0, raw[np.maximum(index, 0)], initial).astype(np.int64)


def _grown(values: np.ndarray, capacity: int) -> np.ndarray:
    out = np.empty(capacity, values.dtype)
    out[: len(values)] = values
    if values.dtype == object:
        out[len(values) :] = None
    return out
