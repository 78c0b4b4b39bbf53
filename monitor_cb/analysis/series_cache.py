"""Per-series caches for live charts: the EMA and the downsampling, extended with only the new rows.

A live refresh appends a few rows to a series of maybe 1M; smoothing and downsampling all of it
again costs tens of milliseconds per metric. :class:`SeriesCache` keeps, per series key (run,
column, x kind, ...), the smoothed values so far with the EMA's running state, and the
downsampled picks of every full block of rows, so a refresh smooths the new rows and downsamples
only the newest, unfinished block.

Results are exactly what the uncached functions return (:func:`ema_debiased`,
:func:`block_downsample`): the EMA continues pandas' own recurrence bit for bit, and a block's
picks depend only on that block's rows. A cached entry is used only while the rows it saw are
still the leading rows of the series (length not shrunk, sampled values unchanged); a reset or a
rewritten file recomputes it. Entries are evicted least recently used, by count and by bytes.
Everything is thread-safe: Streamlit runs each browser session in its own thread.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np

from monitor_cb.analysis.downsample import downsample_indices, thin_nonfinite
from monitor_cb.analysis.smoothing import ema_debiased

# Rows above which a tail is smoothed with pandas from scratch rather than by the Python recurrence.
_MAX_TAIL = 2_000
# Evenly spaced probes (plus the last rows) that must be unchanged for a cached prefix to be reused.
_PROBES = 48
_LAST_PROBES = 8
# A series is drawn in about BLOCKS full blocks; block sizes grow geometrically (ratio 2**0.25), so
# a growing run keeps its blocks until it is ~19% longer, and draws 84-100% of ``n_out`` points.
BLOCKS = 32
_SIZE_STEPS = 4
# Below this many rows per point, downsampling the whole series is cheap enough: no blocks.
MIN_ROWS_PER_POINT = 16


# ----------------------------------------------------------------------------- block downsampling
def block_size(n: int, n_out: int) -> int:
    """Rows per block for ``n`` rows and a budget of ``n_out`` points (0: too few rows for blocks)."""
    if n < MIN_ROWS_PER_POINT * n_out:
        return 0
    target = n / BLOCKS
    level = int(np.ceil(_SIZE_STEPS * np.log2(target)))
    size = round(2 ** (level / _SIZE_STEPS))
    while size < target:  # rounding must not make it smaller than the target
        level += 1
        size = round(2 ** (level / _SIZE_STEPS))
    return int(size)


def points_per_block(n_out: int) -> int:
    return max(int(np.ceil(n_out / BLOCKS)), 4)


@dataclass(frozen=True)
class BlockPicks:
    """One block's picks: finite rows kept (absolute indices) and its non-finite rows."""

    finite: np.ndarray
    bad: np.ndarray


def downsample_block(x: np.ndarray, y: np.ndarray, start: int, stop: int, points: int) -> BlockPicks:
    """Picks of rows ``[start, stop)``: MinMaxLTTB of the finite ones, every non-finite one."""
    ys = y[start:stop]
    finite = np.isfinite(ys)
    if finite.all():
        picked = downsample_indices(x[start:stop], ys, points)
        return BlockPicks(picked + start, np.empty(0, dtype=np.int64))
    good = np.flatnonzero(finite)
    picked = good[downsample_indices(x[start:stop][good], ys[good], points)] if good.size else good
    return BlockPicks(picked.astype(np.int64) + start, np.flatnonzero(~finite).astype(np.int64) + start)


def combine_blocks(blocks: list[BlockPicks], n: int, max_nonfinite: int | None) -> np.ndarray:
    """Sorted indices of all blocks' picks, non-finite rows thinned to ``max_nonfinite``, ends kept."""
    finite = np.concatenate([b.finite for b in blocks]) if blocks else np.empty(0, dtype=np.int64)
    bad = np.concatenate([b.bad for b in blocks]) if blocks else np.empty(0, dtype=np.int64)
    if max_nonfinite is not None:
        bad = thin_nonfinite(bad, max_nonfinite)
    out = np.union1d(finite, bad) if bad.size else finite
    ends = np.array([0, n - 1], dtype=np.int64) if n else np.empty(0, dtype=np.int64)
    return np.union1d(out, ends).astype(np.int64, copy=False)


def block_downsample(
    x: np.ndarray, y: np.ndarray, n_out: int, max_nonfinite: int | None = None, points: int | None = None
) -> np.ndarray:
    """Downsample in fixed blocks (see :func:`block_size`), each block to ``points_per_block(n_out)``.

    Spikes and non-finite rows are kept as in :func:`downsample_indices`; unlike it, picks of a
    full block never change when rows are appended, so they can be cached. Short series fall back
    to :func:`downsample_indices`. ``points`` overrides the points per block (a thinner trace).
    """
    n = y.size
    size = block_size(n, n_out)
    if size == 0:
        budget = n_out if points is None else max(points * BLOCKS, 4)
        return downsample_indices(x, y, budget, max_nonfinite=max_nonfinite)
    per = points or points_per_block(n_out)
    blocks = [
        downsample_block(x, y, s, min(s + size, n), _tail_points(per, min(size, n - s), size))
        for s in range(0, n, size)
    ]
    return combine_blocks(blocks, n, max_nonfinite)


def _tail_points(points: int, rows: int, size: int) -> int:
    """A partial block gets a share of the points proportional to its rows (at least 4)."""
    return points if rows >= size else max(int(np.ceil(points * rows / size)), 4)


# ----------------------------------------------------------------------------- EMA state
@dataclass
class _Ema:
    """TensorBoard's EMA of one series so far: values and pandas' running ``(weighted, old_wt)``."""

    buf: np.ndarray
    n: int = 0
    weighted: float = float("nan")
    old_wt: float = 1.0
    started: bool = False

    def extend(self, y: np.ndarray, weight: float) -> None:
        """Smooth ``y[self.n:]`` with the state reached at row ``self.n`` (pandas' recurrence, exactly)."""
        new = y[self.n :]
        self._reserve(y.size)
        if new.size > _MAX_TAIL:
            self._restart(y, weight)
            return
        factor = _pandas_factor(weight)
        weighted, old_wt, started = self.weighted, self.old_wt, self.started
        out = self.buf[self.n : y.size]
        for i, cur in enumerate(new.tolist()):
            if cur - cur != 0.0:  # NaN or ±inf: passed through, not fed to the filter
                out[i] = cur
                continue
            if not started:
                weighted, old_wt, started = cur, 1.0, True
            else:
                old_wt *= factor
                if weighted != cur:
                    weighted = (old_wt * weighted + cur) / (old_wt + 1.0)
                old_wt += 1.0
            out[i] = weighted
        self.weighted, self.old_wt, self.started, self.n = weighted, old_wt, started, y.size

    def _restart(self, y: np.ndarray, weight: float) -> None:
        smoothed = ema_debiased(y, weight)
        # a new buffer: views of the old one handed out earlier must not change
        self.buf = np.empty(max(y.size + y.size // 4, 1024), dtype=np.float64)
        self.buf[: y.size] = smoothed
        finite = np.flatnonzero(np.isfinite(y))
        self.n = y.size
        self.started = bool(finite.size)
        self.weighted = float(smoothed[finite[-1]]) if finite.size else float("nan")
        self.old_wt = _old_weight(int(finite.size), _pandas_factor(weight))

    def _reserve(self, n: int) -> None:
        if self.buf.size < n:
            grown = np.empty(max(n + n // 4, 1024), dtype=np.float64)
            grown[: self.n] = self.buf[: self.n]
            self.buf = grown


def _pandas_factor(weight: float) -> float:
    """What pandas multiplies its old weight by for ``ewm(alpha=1 - weight)``: it goes through ``com``."""
    com = 1.0 / (1.0 - weight) - 1.0
    return 1.0 - 1.0 / (1.0 + com)


def _old_weight(count: int, factor: float) -> float:
    """pandas' ``old_wt`` after ``count`` observations: 1, then ``old_wt * factor + 1`` each time.

    It reaches its floating-point fixed point within a few thousand steps (for weights below
    0.999), so the loop stops there instead of running ``count`` times.
    """
    old = 1.0
    for _ in range(max(count - 1, 0)):
        nxt = old * factor + 1.0
        if nxt == old:
            break
        old = nxt
    return old


# ----------------------------------------------------------------------------- the cache
@dataclass
class _Entry:
    """What is cached for one series: probes of the rows seen, EMAs by weight, picks by block layout."""

    n: int
    probe_at: np.ndarray
    probe_x: bytes
    probe_y: bytes
    emas: dict[float, _Ema] = field(default_factory=dict)
    blocks: dict[tuple[int, int], list[BlockPicks]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def nbytes(self) -> int:
        picks = sum(b.finite.nbytes + b.bad.nbytes for blocks in self.blocks.values() for b in blocks)
        return sum(e.buf.nbytes for e in self.emas.values()) + picks


def _probe_positions(n: int) -> np.ndarray:
    if n == 0:
        return np.empty(0, dtype=np.int64)
    spaced = np.linspace(0, n - 1, min(_PROBES, n)).astype(np.int64)
    return np.unique(np.concatenate([spaced, np.arange(max(n - _LAST_PROBES, 0), n)]))


def _values(arr: np.ndarray, at: np.ndarray) -> bytes:
    return np.ascontiguousarray(arr[at]).tobytes()


class SeriesCache:
    """Bounded, thread-safe cache of per-series EMA and block downsampling (one per process).

    Args:
        max_entries: series kept (least recently used evicted first).
        max_bytes: total bytes of smoothed values and picks kept.
    """

    def __init__(self, max_entries: int = 64, max_bytes: int = 256 * 2**20) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def ema(self, key: Hashable, x: np.ndarray, y: np.ndarray, weight: float) -> np.ndarray:
        """``ema_debiased(y, weight)``, computing only the rows appended since the last call for ``key``."""
        if weight == 0.0:
            return ema_debiased(y, weight)
        entry = self._entry(key, x, y)
        with entry.lock:
            state = entry.emas.get(weight)
            if state is None or state.n > y.size:
                state = entry.emas[weight] = _Ema(np.empty(0))
            state.extend(y, weight)
            # a read-only view, no copy: rows below ``n`` of a buffer are never written again
            out = state.buf[: y.size]
            out = out.view()
            out.flags.writeable = False
        self._trim()
        return out

    def downsample(
        self,
        key: Hashable,
        x: np.ndarray,
        y: np.ndarray,
        n_out: int,
        max_nonfinite: int | None = None,
        points: int | None = None,
    ) -> np.ndarray:
        """``block_downsample(x, y, n_out, max_nonfinite, points)``, reusing the picks of full blocks."""
        n = y.size
        size = block_size(n, n_out)
        if size == 0:
            return block_downsample(x, y, n_out, max_nonfinite, points)
        per = points or points_per_block(n_out)
        entry = self._entry(key, x, y)
        full = n // size
        with entry.lock:
            done = entry.blocks.setdefault((size, per), [])
            del done[full:]  # a block seen while it was the partial tail is redone once full
            for b in range(len(done), full):
                done.append(downsample_block(x, y, b * size, (b + 1) * size, per))
            blocks = list(done)
        if full * size < n:
            blocks.append(downsample_block(x, y, full * size, n, _tail_points(per, n - full * size, size)))
        self._trim()
        return combine_blocks(blocks, n, max_nonfinite)

    def _entry(self, key: Hashable, x: np.ndarray, y: np.ndarray) -> _Entry:
        """The entry for ``key``, emptied when the rows it saw are not the leading rows of ``x``/``y``."""
        n = y.size
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is not None and entry.n <= n and self._same_prefix(entry, x, y):
            fresh = entry
        else:
            fresh = _Entry(n, np.empty(0, dtype=np.int64), b"", b"")
        at = _probe_positions(n)
        with fresh.lock:
            fresh.n, fresh.probe_at, fresh.probe_x, fresh.probe_y = n, at, _values(x, at), _values(y, at)
        if fresh is not entry:
            with self._lock:
                self._entries[key] = fresh
                self._entries.move_to_end(key)
        return fresh

    @staticmethod
    def _same_prefix(entry: _Entry, x: np.ndarray, y: np.ndarray) -> bool:
        at = entry.probe_at
        return _values(x, at) == entry.probe_x and _values(y, at) == entry.probe_y

    def _trim(self) -> None:
        with self._lock:
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
            total = sum(e.nbytes() for e in self._entries.values())
            while len(self._entries) > 1 and total > self.max_bytes:
                _, gone = self._entries.popitem(last=False)
                total -= gone.nbytes()


SERIES_CACHE = SeriesCache()
