"""One metrics file as a live source: tail + parser + table behind one lock.

The dashboard shares one source per file between all browser sessions; the lock
makes concurrent polls read each byte once and never see a half-applied batch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from monitor_cb.ingest.heap import release_free_memory
from monitor_cb.ingest.lines import DEFAULT_LINE_CAP, BadLine
from monitor_cb.ingest.parse import BULK_MIN_BYTES, ChunkParser
from monitor_cb.ingest.status import GrowthWatch, usual_interval
from monitor_cb.ingest.table import RankTable
from monitor_cb.ingest.tail import Chunk, FileTail
from monitor_cb.ingest.tiered import OVERLAY, TieredTable
from monitor_cb.record import meta_path_for

if TYPE_CHECKING:
    import pandas as pd

    from monitor_cb.ingest.colcache import ColumnarCache
    from monitor_cb.ingest.summary_index import Ident, SourceSummary

MAX_BAD_KEPT = 1000  # bad lines remembered with their offsets; all are counted
_RECENT = 64  # records that define the usual interval


class TableSource:
    """What the store needs of a source: a rank table behind a lock, bad-line counts, activity.

    :class:`MetricsSource` fills it from a JSONL file; :mod:`monitor_cb.ingest.tensorboard_source`
    from TensorBoard event files.
    """

    path: Path
    meta_path: Path

    def __init__(self, rank: int) -> None:
        self.lock = threading.RLock()
        self.table = RankTable(rank)
        self.bad_count = 0
        self.partial_count = 0  # of bad_count: lines kept with a bad value dropped
        self.bad_lines: list[BadLine] = []
        self.last_poll = 0.0
        self._interval: tuple[int, float | None] = (-1, None)
        self.growth = GrowthWatch()  # whether this process saw the file grow (status of runs without one)

    def adopt_cache(self, table: Any, version: int, cached: Any) -> bool:
        """Make the rows just written to ``cached`` this source's table, kept on disk until asked for, when the
        table is still ``table`` at ``version`` with its rows in memory; True when it was swapped."""
        with self.lock:
            if self.table is not table or table.version != version or getattr(table, "lazy", False):
                return False
            self.table = TieredTable.from_cache(cached, lazy=True)  # type: ignore[assignment]
            return True

    def poll(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def read_rows(self) -> int:
        """Poll, with the rows themselves in memory afterwards (a file only listed so far is read)."""
        return self.poll()

    def frame(self, all_segments: bool = False) -> pd.DataFrame:
        with self.lock:
            return self.table.frame(all_segments)

    def frame_and_masks(self, all_segments: bool = False) -> tuple[int, pd.DataFrame, dict[str, np.ndarray]]:
        """The frame and its "was logged" masks, taken together so they always match."""
        with self.lock:
            return self.table.frame_and_masks(all_segments)

    def logged(self, column: str, all_segments: bool = False) -> np.ndarray:
        with self.lock:
            return self.table.logged(column, all_segments)

    def usual_interval(self) -> float | None:
        """Median seconds between the last records (cached per table version)."""
        with self.lock:
            version = self.table.version
            if self._interval[0] != version:
                self._interval = (version, usual_interval(self.table.times(_RECENT)))
            return self._interval[1]

    def summary(self) -> SourceSummary:
        """What the run list shows of this file (no rows copied)."""
        from monitor_cb.ingest.summary_index import SourceSummary

        with self.lock:
            table = self.table
            return SourceSummary(
                rank=table.rank,
                n=table.n,
                first_step=table.first_step if table.n else None,
                last_step=table.last_step if table.n else None,
                last_write=self.tail.mtime,  # type: ignore[attr-defined]
                pending=self.tail.pending,  # type: ignore[attr-defined]
                bad_count=self.bad_count,
                interval=self.usual_interval(),
                partial_count=self.partial_count,
            )

    def grew_at(self, now: float) -> float | None:
        """When this process last saw the file grow (None: never), noting its size now."""
        return self.growth.see(int(getattr(self.tail, "size", 0) or 0), now)  # type: ignore[attr-defined]

    def summary_version(self) -> tuple[int, ...]:
        """Changes whenever :meth:`summary` may (the store reuses a RunInfo while it does not)."""
        return (self.table.version, self.bad_count, hash(self.tail.mtime), self.tail.pending)  # type: ignore[attr-defined]

    def _count_bad(self, bad: list[BadLine]) -> None:
        self.bad_count += len(bad)
        self.partial_count += sum(1 for b in bad if b.partial)
        room = MAX_BAD_KEPT - len(self.bad_lines)
        if room > 0:
            self.bad_lines.extend(bad[:room])


class MetricsSource(TableSource):
    """A metrics file read incrementally into a :class:`RankTable`.

    Args:
        path: the metrics file.
        rank: its rank (from the file name).
        root: never read it if it resolves outside this directory.
        line_cap: longer lines are skipped as bad.
        bulk_min_bytes: chunks this large go through polars.
        tail: what follows the file; default a :class:`FileTail` (a remote root passes its own).
        cache: where the rows of the file's settled prefix are kept (:mod:`monitor_cb.ingest.colcache`);
            None: no cache.
        lazy: rows read from the cache stay on disk until a frame is asked for.
    """

    def __init__(
        self,
        path: Path,
        rank: int = 0,
        root: Path | None = None,
        line_cap: int = DEFAULT_LINE_CAP,
        bulk_min_bytes: int = BULK_MIN_BYTES,
        tail: FileTail | None = None,
        cache: ColumnarCache | None = None,
        lazy: bool = True,
    ) -> None:
        super().__init__(rank)
        self.table: TieredTable = TieredTable(rank)  # type: ignore[assignment]
        self.path = path
        self.tail = tail if tail is not None else FileTail(path, root, line_cap)
        self.parser = ChunkParser(line_cap, bulk_min_bytes)
        self.meta_path = meta_path_for(path)
        self.cache = cache
        self.lazy = lazy
        self.cached_offset = 0  # bytes of the file the cache file holds (0: none)
        self.cache_hit = False  # the rows came from the cache (for tests and benchmarks)
        self._cache_checked = cache is None
        self._listed: tuple[Ident, SourceSummary, int] | None = None  # from the root's index: not read yet
        self._peeked = False  # the listed summary is a peek (:mod:`monitor_cb.ingest.peek`), not the index's

    def poll(self, limit: int | None = None) -> int:
        """Read what is new (about ``limit`` bytes at most); returns the number of records taken (0 when idle)."""
        with self.lock:
            if self._listed is not None:
                if self._listed_unchanged():
                    return 0
                self._listed = None
            if not self._cache_checked:
                self._cache_checked = True
                self._from_cache()
            taken = self._read_new(limit)
            if self.parser.reread:
                # A key turned numeric after its text values went into the table: read the file
                # again knowing it, so those values are counted as bad and the column is numeric.
                self.parser.restart()
                self._clear()
                self.tail.rewind()
                taken = self._read_new(limit)
            self.last_poll = time.time()
            if taken and self.cache is not None and limit is None:  # (a read in steps writes once at its end)
                self._maybe_write_cache()
            return taken

    def _read_new(self, limit: int | None = None) -> int:
        taken = 0
        if limit is None and self.tail.offset == 0 and isinstance(self.tail, FileTail):
            batch = self.tail.read_whole(self.parser.parse_file)  # a large first read: polars reads the file
            if batch is not None:
                taken += self.table.append(batch)
        for item in self.tail.poll() if limit is None else self.tail.poll(limit):
            if isinstance(item, Chunk):
                if item.reset:
                    self._reset()
                if item.data:
                    batch, bad = self.parser.parse(item.data, item.offset)
                    taken += self.table.append(batch)
                    self._count_bad(bad)
            else:
                self._count_bad([BadLine(item.offset, f"line longer than {self.tail.line_cap} bytes")])
        return taken

    # ------------------------------------------------------------------ listed from the root's index
    def adopt_summary(self, ident: Ident, summary: SourceSummary, peeked: bool = False) -> None:
        """List this file from its summary until it changes or its rows are asked for (one stat per poll).

        ``peeked``: the summary comes from the file's ends (:func:`monitor_cb.ingest.peek.peek_file`), not
        from a complete read: it is never written to the root's index."""
        from monitor_cb.ingest.table import _VERSIONS

        with self.lock:
            if self.tail.offset == 0 and self.table.n == 0:
                self._listed = (ident, summary, next(_VERSIONS))
                self._peeked = peeked

    def _listed_unchanged(self) -> bool:
        from monitor_cb.ingest.summary_index import file_ident

        assert self._listed is not None
        return file_ident(self.path) == self._listed[0]

    def summary(self) -> SourceSummary:
        listed = self._listed
        return listed[1] if listed is not None else super().summary()

    def summary_version(self) -> tuple[int, ...]:
        listed = self._listed
        return (listed[2],) if listed is not None else super().summary_version()

    def grew_at(self, now: float) -> float | None:
        """As a read file's, with a listed file's size as the baseline (so its first growth counts)."""
        listed = self._listed
        size = int(self.tail.size or 0) or (listed[0][2] if listed is not None else 0)
        return self.growth.see(size, now)

    def ident(self) -> Ident | None:
        """The file's identity as last read completely (None for remote files, a file being read, or one only
        peeked at)."""
        listed = self._listed
        if listed is not None:
            return None if self._peeked else listed[0]
        signature = getattr(self.tail, "_signature", None)
        return signature if signature is not None and len(signature) == 5 else None  # type: ignore[return-value]

    def frame_and_masks(self, all_segments: bool = False) -> tuple[int, pd.DataFrame, dict[str, np.ndarray]]:
        self._read_listed()
        return super().frame_and_masks(all_segments)

    def frame(self, all_segments: bool = False) -> pd.DataFrame:
        self._read_listed()
        return super().frame(all_segments)

    def logged(self, column: str, all_segments: bool = False) -> np.ndarray:
        self._read_listed()
        return super().logged(column, all_segments)

    def read_rows(self) -> int:
        with self.lock:
            self._listed = None
            return self.poll()

    def _read_listed(self) -> None:
        """Rows are asked for: a file listed from the index is read now."""
        if self._listed is not None:
            self.read_rows()

    # ------------------------------------------------------------------ the columnar cache
    def _from_cache(self) -> None:
        """Start from the cache file when it describes exactly the bytes the file begins with."""
        assert self.cache is not None
        cached = self.cache.open(self.path, self.table.rank)
        if cached is None:
            return
        header = cached.header
        try:
            table = TieredTable.from_cache(cached, lazy=self.lazy)
        except Exception as exc:  # noqa: BLE001 - a damaged cache file costs a full parse, nothing more
            self.cache.last_error = f"{cached.path}: {str(exc)[:200]}"
            return
        if not self.tail.resume(header.fingerprint):
            return
        problem = self._cache_disagrees(cached, table)
        if problem is not None:  # forged or stale rows behind a genuine header: the JSONL is the truth
            self.tail.rewind()
            self.cache.last_error = f"{cached.path}: {problem}"
            self.cache._refuse(cached.path, f"{problem}; the run is read from its JSONL instead")
            return
        self.table = table
        self.parser.kinds = dict(header.kinds)
        self.bad_count = header.bad_count
        self.partial_count = header.partial_count
        self.bad_lines = [BadLine(offset, reason, partial) for offset, reason, partial in header.bad_lines]
        self.parser._texts_out = set(header.texts_out)
        self.cached_offset = header.fingerprint.offset
        self.cache_hit = True

    def _cache_disagrees(self, cached: Any, table: TieredTable) -> str | None:
        """What the JSONL says that the cache file's rows do not (its first and last lines, and the sampled
        blocks the tail compared), or None (:func:`monitor_cb.ingest.cacheproof.source_problem`)."""
        from monitor_cb.ingest.cacheproof import source_blocks, source_problem

        fingerprint = cached.header.fingerprint
        blocks = source_blocks(self.tail, fingerprint)
        if blocks is None:
            return "its source could not be read again to check it"
        skip = {offset for offset, _, _ in cached.header.bad_lines}
        try:
            return source_problem(cached.state(), blocks, skip)
        except Exception as exc:  # noqa: BLE001 - rows that cannot even be compared are not used
            return f"its rows cannot be compared with the JSONL ({str(exc)[:120]})"

    def _maybe_write_cache(self) -> None:
        """Write the rows read so far once enough bytes came after the last cache file (rewrites in the
        cache's background thread when it has one: the rows handed over never change, and a refresh does
        not wait; the first one now, so a first read of many ranks never holds them all)."""
        assert self.cache is not None
        offset = self.tail.offset
        if not self.cache.due(offset, self.cached_offset):
            return
        fingerprint = self.tail.fingerprint()
        if fingerprint is None:
            return
        first = self.cached_offset == 0
        self.cached_offset = offset
        job = self._cache_job(fingerprint)
        if self.cache.background is None or first:
            job()  # the first file of a first read: written now, so the rows leave memory at once (many ranks)
        else:
            self.cache.background.submit(("cache", str(self.path)), offset, job)

    def _cache_job(self, fingerprint: Any) -> Callable[[], None]:
        from monitor_cb.ingest.colcache import CacheHeader, Summary, nonfinite_cells

        assert self.cache is not None
        cache, table = self.cache, self.table
        state, version = table.state(), table.version
        bad = tuple((b.offset, b.reason, b.partial) for b in self.bad_lines)
        kinds, texts_out, bad_count = dict(self.parser.kinds), tuple(sorted(self.parser._texts_out)), self.bad_count
        partial_count = self.partial_count

        def write() -> None:
            nonlocal state, table
            header = CacheHeader(
                fingerprint=fingerprint,
                rank=state.rank,
                n_main=state.n,
                kinds=kinds,
                bad_count=bad_count,
                bad_lines=bad,
                summary=Summary.of(state),
                last_step=state.last_step,
                last_seg=state.last_seg,
                has_seg=state.has_seg,
                nonfinite=nonfinite_cells(state),
                texts_out=texts_out,
                partial_count=partial_count,
            )
            if not cache.write(self.path, state, header) or not self.lazy or state.n <= OVERLAY:
                return
            # the rows just written stay on disk until asked for: a run's other ranks cost no memory
            cached = cache.open(self.path, state.rank)
            if cached is None or cached.header.fingerprint != fingerprint:
                return
            if not self.adopt_cache(table, version, cached):
                return
            state = table = None  # type: ignore[assignment]  # this job's hold on the rows, before the trim
            release_free_memory()  # glibc keeps the rows just dropped otherwise

        return write

    def _reset(self) -> None:
        self.parser = ChunkParser(self.parser.line_cap, self.parser.bulk_min_bytes)
        self._clear()

    def _clear(self) -> None:
        self.table.clear()
        self.cached_offset = 0
        self.bad_count = 0
        self.partial_count = 0
        self.bad_lines = []
