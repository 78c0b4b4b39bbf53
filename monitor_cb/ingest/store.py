"""RunStore: the reading side's one entry point, shared by every dashboard session.

One store per server process holds one :class:`MetricsSource` per file, so fifty
viewers of a run cost one read per poll. Run ids come only from discovery under the
root; anything else is refused, so a URL cannot make the store read elsewhere.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from monitor_cb.ingest.discover import DEFAULT_MAX_DEPTH, RunDir, discover_runs
from monitor_cb.ingest.dropnote import WriterDrops, writer_drops
from monitor_cb.ingest.lines import DEFAULT_LINE_CAP, BadLine
from monitor_cb.ingest.mindformers_source import MINDFORMERS_LOG, MindFormersLogGroup
from monitor_cb.ingest.ms_summary_source import MS_SUMMARY, SummaryGroup
from monitor_cb.ingest.parse import BULK_MIN_BYTES
from monitor_cb.ingest.peek import PEEK_MIN_BYTES, peek_file
from monitor_cb.ingest.runframe import RunFrame, Snapshot
from monitor_cb.ingest.source import MetricsSource, TableSource
from monitor_cb.ingest.status import FINAL, FileActivity, StatusPolicy, combine, file_status
from monitor_cb.ingest.summary_index import SourceSummary
from monitor_cb.ingest.tensorboard_source import TensorBoardGroup, polling_round
from monitor_cb.logroot import log_root
from monitor_cb.record import rank_from_filename
from monitor_cb.rootfile import META_CAP, UnsafeFileError, read_json
from monitor_cb.storage.urls import is_url

if TYPE_CHECKING:
    import pandas as pd

    from monitor_cb.ingest.rank_bands import RankBands
    from monitor_cb.ingest.rankagg import NonFinite

LOAD_STEP_BYTES = 32 << 20  # a first read larger than this goes in the background, in steps this size


@dataclass(frozen=True)
class LoadProgress:
    """How far the background first read of a run is: bytes of its files read, and rows so far."""

    bytes_read: int
    bytes_total: int
    rows: int

    @property
    def fraction(self) -> float:
        return min(self.bytes_read / self.bytes_total, 1.0) if self.bytes_total else 1.0


@dataclass(frozen=True)
class RunInfo:
    """What the run list shows about one run."""

    id: str
    name: str
    path: Path
    ranks: tuple[int, ...]
    n_records: int
    first_step: int | None
    last_step: int | None
    last_write: float
    status: str
    reason: str | None
    meta: dict[str, Any] = field(hash=False, compare=False)
    bad_lines: int = 0  # lines with a problem: skipped, or partly read (see partial_lines)
    partial_lines: int = 0  # of bad_lines: kept with a bad value dropped
    drops: WriterDrops = field(default_factory=WriterDrops)  # records the writers dropped (all ranks' metadata)
    source: str = "JSONL"  # what the run was read from: JSONL, TensorBoard, MindFormers log, MindSpore summary


class _Run:
    """A discovered run: its sources (one per file) and a cache of the merged frame."""

    def __init__(self, run_dir: RunDir) -> None:
        self.dir = run_dir
        self.sources: dict[Path, TableSource] = {}
        self.lock = threading.Lock()
        self.merged: dict[tuple[Any, ...], Snapshot] = {}  # data version -> merged ranks
        self.info: tuple[tuple[Any, ...], float, RunInfo] | None = None  # (state key, clock, info)
        self.tensorboard: TensorBoardGroup | None = None
        self.mflog: MindFormersLogGroup | None = None  # a MindFormers log directory (kind "mindformers_log")
        self.summary: SummaryGroup | None = None  # a MindSpore summary directory (kind "ms_summary")
        self.histograms: Any = None  # a TensorBoard run's histogram reader, made when first asked for
        self.aggregates: dict[tuple[str, str], Any] = {}  # (kind, metric) -> Incremental
        self.loader: tuple[threading.Thread, int] | None = None  # background first read, bytes to read
        self.read_at = -math.inf  # time.monotonic() of the last read of its files (RunStore.read)


class RunStore:
    """Discover runs under ``root`` and read them incrementally; thread-safe.

    Args:
        root: log root; default :func:`monitor_cb.logroot.log_root` (``$MONITOR_LOGDIR``, else ``./logs``).
            A URL (``s3://bucket/prefix``) or a :class:`~monitor_cb.ingest.remote.RemoteRoot` reads runs
            on object storage.
        policy: thresholds for stalled / crashed.
        rescan_interval_s: directories are listed again at most this often.
        max_depth: how deep runs may be nested under the root.
        line_cap: longer lines are skipped as bad.
        bulk_min_bytes: chunks at least this large are parsed with polars.
        clock: Unix time source (tests drive it).
        cache: keep the rows of settled prefixes in the columnar cache (:mod:`monitor_cb.ingest.colcache`):
            None follows ``$MONITOR_CACHE`` (on unless "off"), False never, True always, or the places to use.
        peek_min_bytes: a local metrics file this large that no index describes is listed from its ends and
            its line count (:mod:`monitor_cb.ingest.peek`) and parsed when its rows are asked for; so is a
            TensorBoard run whose ranks each have one event file this large and no cache file
            (:mod:`monitor_cb.importers.event_peek`). None: parse every file when listing it.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        policy: StatusPolicy | None = None,
        rescan_interval_s: float = 2.0,
        max_depth: int = DEFAULT_MAX_DEPTH,
        line_cap: int = DEFAULT_LINE_CAP,
        bulk_min_bytes: int = BULK_MIN_BYTES,
        clock: Callable[[], float] = time.time,
        cache: bool | list[Any] | None = None,
        peek_min_bytes: int | None = PEEK_MIN_BYTES,
    ) -> None:
        root = root if root is not None else log_root()
        self.remote = _remote_root(root)  # the RemoteRoot of a URL root; None for a local directory
        self.root = self.remote.path if self.remote is not None else Path(root)
        self.policy = policy or StatusPolicy()
        self.rescan_interval_s = rescan_interval_s
        self.max_depth = max_depth
        self.line_cap = line_cap
        self.bulk_min_bytes = bulk_min_bytes
        self.peek_min_bytes = peek_min_bytes
        self.clock = clock
        self._lock = threading.Lock()
        self._runs: dict[str, _Run] = {}
        self._scanned_at = -float("inf")
        self._meta: dict[Path, tuple[tuple[int, int] | None, dict[str, Any]]] = {}
        self._meta_refused: dict[Path, str] = {}  # metadata files not read, and why
        self._discover_refused: dict[str, str] = {}  # metrics files the listing left out, and why
        self._listed: tuple[float, list[RunInfo]] | None = None  # (monotonic time, the last listing)
        self.cache = _columnar_cache(root if self.remote is None else str(self.remote.url), self.root, cache)
        self.index = _summary_index(self.cache, self.root) if self.remote is None else None

    # ------------------------------------------------------------------ discovery
    def refresh(self, force: bool = False) -> None:
        """List the root's directories again (at most every ``rescan_interval_s`` unless forced)."""
        now = time.monotonic()
        with self._lock:
            if not force and now - self._scanned_at < self.rescan_interval_s:
                return
            self._scanned_at = now
            if self.remote is not None:
                found = self.remote.discover(self.max_depth)
            else:
                skipped: dict[str, str] = {}
                found = discover_runs(self.root, self.max_depth, skipped)
                self._discover_refused = skipped
            runs: dict[str, _Run] = {}
            for run_id, run_dir in found.items():
                run = self._runs.get(run_id) or _Run(run_dir)
                run.dir = run_dir
                if run_dir.kind == "tensorboard":
                    run.tensorboard = run.tensorboard or TensorBoardGroup(
                        run_dir.path, self.cache, self.peek_min_bytes if self.remote is None else None
                    )
                    run.tensorboard.poll()  # ranks appear as their event files are read
                    run.sources = {s.path: s for s in run.tensorboard.sources.values()}
                elif run_dir.kind == MINDFORMERS_LOG:
                    run.mflog = run.mflog or MindFormersLogGroup(run_dir.path, self.root, self.line_cap)
                    run.mflog.poll()  # ranks appear as their rank_N/info.log do
                    run.sources = {s.path: s for s in run.mflog.sources.values()}
                elif run_dir.kind == MS_SUMMARY:
                    run.summary = run.summary or SummaryGroup(
                        run_dir.path, self.root, self.peek_min_bytes if self.remote is None else None
                    )
                    run.summary.poll()  # ranks appear as their summary files are read
                    run.sources = {s.path: s for s in run.summary.sources.values()}
                else:
                    run.sources = {path: run.sources.get(path) or self._source(path) for path in run_dir.files}
                runs[run_id] = run
            self._runs = runs

    def _source(self, path: Path) -> MetricsSource:
        rank = rank_from_filename(path)
        tail = self.remote.tail(path, self.line_cap) if self.remote is not None else None
        source = MetricsSource(path, rank or 0, self.root, self.line_cap, self.bulk_min_bytes, tail, self.cache)
        if self.index is not None:
            from monitor_cb.ingest.summary_index import file_ident

            summary = self.index.get(path)
            if summary is not None:
                ident = file_ident(path)
                if ident is not None:
                    source.adopt_summary(ident, summary)
                    return source
        if self.remote is None and self.peek_min_bytes is not None:
            peek = peek_file(path, rank or 0, self.root, self.line_cap, self.peek_min_bytes)
            if peek is not None:  # listed from its ends; parsed when its rows are asked for
                source.adopt_summary(peek.ident, peek.summary, peeked=True)
        return source

    def _run(self, run_id: str) -> _Run:
        self.refresh()
        run = self._runs.get(run_id)
        if run is None:
            self.refresh(force=True)  # a run that appeared since the last listing
            run = self._runs.get(run_id)
        if run is None:
            raise KeyError(f"no run {run_id!r} under {self.root}; known runs: {sorted(self._runs)[:20]}")
        return run

    # ------------------------------------------------------------------ polling
    def poll(self) -> int:
        """Read new records of every known run; returns how many were taken.

        A run whose first read is under way in the background (:meth:`load_progress`) is left to it:
        a listing meanwhile would otherwise read the rest of its files at once, and wait for that.
        """
        sources = [
            source for run in list(self._runs.values()) if not _loading(run) for source in list(run.sources.values())
        ]
        if self.remote is not None:  # each poll is a request or more: many in flight at once
            return sum(self.remote.map(lambda source: source.poll(), sources))
        return sum(source.poll() for source in sources)

    @property
    def has_listed(self) -> bool:
        """Whether this store has listed its root before (a fresh root's first listing reads every file)."""
        return self._listed is not None

    def skipped_files(self) -> list[str]:
        """One note per file of the root not read because it is unsafe (``"skipped PATH: reason"``), sorted.

        A FIFO, a device, a link out of the root or a file past its cap is skipped wherever it sits
        (metadata, a metrics file, a cache file, the summary index); the rest of the root is read as
        usual, and a page or command shows these notes so the file can be found and removed.
        """
        refused: dict[str, str] = {str(path): reason for path, reason in list(self._meta_refused.items())}
        refused.update(self._discover_refused)
        for run in list(self._runs.values()):
            for source in list(run.sources.values()):
                reason = getattr(getattr(source, "tail", None), "refused", None)
                if reason is not None:
                    refused[str(source.path)] = reason
                refused.update(getattr(source, "skipped", None) or {})  # a log's rotated files
            if run.summary is not None:
                refused.update(run.summary.refused())
        for part in (self.cache, self.index):
            refused.update(getattr(part, "refused", None) or {})
        return [f"skipped {path}: {reason}" for path, reason in sorted(refused.items())]

    def list_runs(self, max_age: float = 0.0) -> list[RunInfo]:
        """Every run with its status, newest write first; cheap enough for every refresh.

        ``max_age``: a listing made at most this many seconds ago (by any session) is returned as it
        is, so thirty viewers refreshing every second list the root a few times a second, not thirty.
        """
        if max_age > 0:
            with self._lock:
                last = self._listed
            if last is not None and 0 <= time.monotonic() - last[0] <= max_age:
                return list(last[1])
        infos = self._list_runs()
        with self._lock:
            self._listed = (time.monotonic(), infos)
        return list(infos)

    def _list_runs(self) -> list[RunInfo]:
        with polling_round():  # a TensorBoard run's files are listed once, not once more per rank
            self.refresh()
            self.poll()
        if self.remote is not None:  # metadata objects that changed are fetched in parallel, then read from memory
            self.remote.map(
                self._read_meta, [s.meta_path for r in list(self._runs.values()) for s in r.sources.values()]
            )
        infos = [self._info(run) for run in list(self._runs.values())]
        self._update_index()
        return sorted(infos, key=lambda info: info.last_write, reverse=True)

    def _update_index(self) -> None:
        """Keep the root's summary index current, so the next server lists these files without reading them."""
        if self.index is None:
            return
        for run in list(self._runs.values()):
            for source in list(run.sources.values()):
                ident = source.ident() if isinstance(source, MetricsSource) else None
                if ident is not None:
                    self.index.put(source.path, ident, source.summary())
        self.index.flush()

    def run_info(self, run_id: str) -> RunInfo:
        """One run's :class:`RunInfo` (polled first)."""
        with polling_round():
            run = self._run(run_id)
            for source in list(run.sources.values()):
                source.poll()
        return self._info(run)

    def _info(self, run: _Run) -> RunInfo:
        """RunInfo, reused while nothing changed (for at most a second while the run may still change status)."""
        sources = list(run.sources.values())
        now = self.clock()
        if run.tensorboard is not None:
            metas = [run.tensorboard.meta for _ in sources]
        elif run.mflog is not None:
            metas = [run.mflog.meta for _ in sources]
        elif run.summary is not None:
            metas = [run.summary.meta for _ in sources]
        else:
            metas = [self._read_meta(source.meta_path) for source in sources]
        grew = [s.grew_at(now) for s in sources]
        key = tuple((id(s), s.summary_version(), id(m), g) for s, m, g in zip(sources, metas, grew, strict=True))
        cached = run.info
        if cached is not None and cached[0] == key and (cached[2].status in FINAL or 0 <= now - cached[1] < 1.0):
            return cached[2]
        info = self._fresh_info(run, [s.summary() for s in sources], metas, now, grew)
        run.info = (key, now, info)
        return info

    def _fresh_info(
        self, run: _Run, sources: list[SourceSummary], metas: list[dict[str, Any]], now: float, grew: list[float | None]
    ) -> RunInfo:
        statuses = []
        for source, meta, grew_at in zip(sources, metas, grew, strict=True):
            activity = FileActivity(meta, source.last_write, source.pending > 0, source.interval, grew_at)
            statuses.append(file_status(activity, now, self.policy))
        status, reason = combine(statuses)
        meta = next((m for m, s in zip(metas, sources, strict=True) if s.rank == 0 and m), None) or next(
            (m for m in metas if m), {}
        )
        firsts = [s.first_step for s in sources if s.n and s.first_step is not None]
        lasts = [s.last_step for s in sources if s.n and s.last_step is not None]
        return RunInfo(
            id=run.dir.id,
            name=str(meta.get("name") or (run.dir.path.name if run.dir.id != "." else self._root_name())),
            path=run.dir.path,
            ranks=tuple(sorted({s.rank for s in sources})),
            n_records=sum(s.n for s in sources),
            first_step=min(firsts) if firsts else None,
            last_step=max(lasts) if lasts else None,
            last_write=max((s.last_write for s in sources), default=0.0),
            status=status,
            reason=reason,
            meta=meta,
            bad_lines=sum(s.bad_count for s in sources),
            partial_lines=sum(s.partial_count for s in sources),
            drops=writer_drops({id(m): m for m in metas}.values()),  # a TensorBoard run shares one meta
            source=_source_name(run),
        )

    def _root_name(self) -> str:
        return self.root.name if self.remote is not None else self.root.resolve().name

    def _read_meta(self, path: Path) -> dict[str, Any]:
        if self.remote is not None:
            return self.remote.read_meta(path)  # type: ignore[arg-type]
        try:
            st = os.stat(path)
            key: tuple[int, int] | None = (st.st_mtime_ns, st.st_ino)
        except OSError:
            st, key = None, None
        cached = self._meta.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]  # the same object while unchanged: RunInfo caching relies on it
        if st is None:
            self._meta_refused.pop(path, None)
            self._meta[path] = (None, {})
            return self._meta[path][1]
        meta: dict[str, Any] = {}
        self._meta_refused.pop(path, None)
        try:
            data = read_json(path, META_CAP, root=self.root)
            meta = data if isinstance(data, dict) else {}
        except UnsafeFileError as exc:
            self._meta_refused[path] = exc.reason  # a FIFO, a device, a link out, too large: noted, never read
        except (OSError, ValueError, RecursionError):
            meta = {}
        self._meta[path] = (key, meta)
        return meta

    # ------------------------------------------------------------------ frames
    def read(
        self, run_id: str, rank: int | None = None, *, all_segments: bool = False, max_age: float = 0.0
    ) -> RunFrame:
        """The run's rows (new bytes read first) with their "was logged" masks and data version.

        Rows are sorted by step; for a step a resumed segment repeated, the latest segment wins.

        Args:
            run_id: a :attr:`RunInfo.id`.
            rank: one rank; default all ranks merged (sorted by step, then rank).
            all_segments: keep rows of earlier segments that a resume repeated.
            max_age: when the run's files were read at most this many seconds ago (by any session),
                their rows as read then, without reading again: thirty viewers refreshing every
                second then see a few data versions a second, and share the work on each.

        Raises:
            KeyError: no such run under the root, or no such rank in it.
        """
        return RunFrame.of(run_id, self._snapshot(run_id, rank, all_segments, max_age), rank, all_segments)

    # ------------------------------------------------------------------ long first reads
    def load_progress(self, run_id: str) -> LoadProgress | None:
        """None when the run can be read now; else how far its first read is (started here, in the background).

        A run with more than :data:`LOAD_STEP_BYTES` not read yet (a long run on a fresh server, with no
        cache file covering it) is read by a background thread in steps of that size, so a page can
        show progress and stay usable; reading it meanwhile waits for the step in progress only.
        """
        run = self._run(run_id)
        with run.lock:
            if run.loader is not None:
                thread, total = run.loader
                if thread.is_alive():
                    return self._progress(run, total)
                run.loader = None
                return None
            if self.remote is not None:
                return None
            sources = [s for s in run.sources.values() if isinstance(s, MetricsSource)]
            total = sum(s.tail.offset + s.tail.unread for s in sources)
            if sum(s.tail.unread for s in sources) <= LOAD_STEP_BYTES:
                return None
            thread = threading.Thread(
                target=_read_in_steps, args=(sources,), name=f"monitor-cb-load-{run_id}", daemon=True
            )
            run.loader = (thread, total)
            thread.start()
            return self._progress(run, total)

    def wait_loaded(self, run_id: str, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for the run's background first read; True when none runs now.

        A first read that its cache file covers takes a fraction of a second even for a 1M-step run:
        a page that waits a moment for it draws the charts at once, without a progress bar first.
        """
        loader = self._run(run_id).loader
        if loader is None:
            return True
        loader[0].join(max(0.0, timeout))
        return not loader[0].is_alive()

    @staticmethod
    def _progress(run: _Run, total: int) -> LoadProgress:
        sources = [s for s in run.sources.values() if isinstance(s, MetricsSource)]
        read = sum(s.tail.offset for s in sources)
        return LoadProgress(min(read, total), total, sum(s.table.n for s in sources))

    def histograms(self, run_id: str, rank: int | None = None) -> dict[str, Any]:
        """Tag -> ``HistogramSeries`` of the run's histograms (a MindSpore summary directory's, or a
        TensorBoard run's ``add_histogram`` summaries), for ``rank`` (default the lowest that has any);
        ``{}`` for a run that has none or a root in object storage. Polled: only new records are read."""
        run = self._run(run_id)
        if run.summary is not None:
            return run.summary.histograms(rank)
        if run.dir.kind != "tensorboard" or self.remote is not None:
            return {}
        from monitor_cb.importers.tb_histograms import TensorBoardHistograms

        with run.lock:
            if run.histograms is None:
                run.histograms = TensorBoardHistograms(run.dir.path, self.root)
            return run.histograms.histograms(rank)  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ across ranks
    def ranks_of(self, run_id: str) -> list[int]:
        """The run's ranks (polled; files only listed so far are read, their rows left on disk)."""
        return sorted({table.rank for table in self._rank_tables(run_id).values()})

    def bands(self, run_id: str, metric: str) -> RankBands:
        """Per step, ``metric`` across the run's ranks (min, median, mean, max, who holds them, the others'
        median at the highest), computed once and extended with new steps only."""
        return self._aggregate(run_id, "bands", metric)

    def nonfinite(self, run_id: str, metric: str) -> NonFinite:
        """Every rank's logged NaN/±inf cells of ``metric`` (the charts mark other ranks' ones on the drawn one)."""
        return self._aggregate(run_id, "nonfinite", metric)

    def _aggregate(self, run_id: str, kind: str, metric: str) -> Any:
        import contextlib

        from monitor_cb.ingest.rankagg import BANDS, NONFINITE, Incremental

        run = self._run(run_id)
        with run.lock:
            agg = run.aggregates.get((kind, metric))
            if agg is None:
                agg = run.aggregates[(kind, metric)] = Incremental(BANDS if kind == "bands" else NONFINITE, metric)
        sources = sorted(run.sources.values(), key=lambda s: str(s.path))
        for source in sources:
            source.read_rows()
        with contextlib.ExitStack() as held:  # the tables stay as they are while they are read (polls wait)
            for source in sources:
                held.enter_context(source.lock)
            return agg.get({source.path: source.table for source in sources})

    def _rank_tables(self, run_id: str) -> dict[Any, Any]:
        run = self._run(run_id)
        sources = list(run.sources.values())
        for source in sources:
            source.read_rows()
        return {source.path: source.table for source in sources}

    def rank_columns(self, run_id: str, column: str) -> dict[int, tuple[pd.DataFrame, dict[str, np.ndarray]]]:
        """rank -> (a frame of ``step``, ``t`` and ``column``, its "was logged" mask): one metric of every rank,
        for one line per rank (read from each rank's rows or cache file; nothing kept)."""
        import pandas as pd

        out = {}
        for table in self._rank_tables(run_id).values():
            steps, values, logged, t = table.column_since(column, 0)
            if logged.any():
                frame = pd.DataFrame({"step": steps, "t": t, column: values}, copy=False)
                out[table.rank] = (frame, {column: logged})
        return dict(sorted(out.items()))

    def rank_matrix(self, run_id: str, column: str, last: int | None = None) -> Any:
        """``column`` of every rank side by side (:class:`~monitor_cb.analysis.rank_matrix.RankMatrix`), only the last
        ``last`` steps when given: per-rank detail on demand, built from each rank's rows, no merged frame."""
        from monitor_cb.analysis.rank_matrix import RankMatrix

        tables = self._rank_tables(run_id)
        since = 0
        if last is not None:
            since = min((t.step_at(max(t.n - last, 0)) for t in tables.values() if t.n), default=0)
        cols = []
        for table in tables.values():
            steps, values, logged, _ = table.column_since(column, since)
            cols.append((table.rank, steps, values, logged))
        cols.sort(key=lambda c: c[0])
        steps = np.unique(np.concatenate([c[1] for c in cols])) if cols else np.zeros(0, np.int64)
        if last is not None:
            steps = steps[-last:]
        ranks = np.asarray([c[0] for c in cols], np.int64)
        values = np.full((steps.size, ranks.size), np.nan)
        mask = np.zeros((steps.size, ranks.size), bool)
        for j, (_, s, v, lg) in enumerate(cols):
            keep = np.isin(s, steps)
            at = np.searchsorted(steps, s[keep])
            values[at, j], mask[at, j] = np.where(lg[keep], v[keep], np.nan), lg[keep]
        return RankMatrix(steps, ranks, values, mask, np.full(values.shape, -1, np.int64))

    def bad_lines(self, run_id: str) -> list[tuple[Path, BadLine]]:
        """Skipped lines (first ones, with their byte offsets) of every file of the run."""
        run = self._run(run_id)
        for source in list(run.sources.values()):
            source.read_rows()
        return [(s.path, bad) for s in run.sources.values() for bad in list(s.bad_lines)]

    def _snapshot(self, run_id: str, rank: int | None, all_segments: bool, max_age: float = 0.0) -> Snapshot:
        with polling_round():
            run = self._run(run_id)
            if not (max_age > 0 and 0 <= time.monotonic() - run.read_at <= max_age):
                for source in list(run.sources.values()):
                    source.read_rows()
                run.read_at = time.monotonic()
        sources = sorted(run.sources.values(), key=lambda s: (s.table.rank, str(s.path)))
        if rank is not None:
            sources = [s for s in sources if s.table.rank == rank]
            if not sources:
                raise KeyError(f"run {run_id!r} has no rank {rank}")
        parts = [s.frame_and_masks(all_segments) for s in sources]
        version = (all_segments, *(v for v, _, _ in parts))
        if len(parts) == 1:
            _, frame, masks = parts[0]
            return Snapshot(frame, [(masks, len(frame))], None, version)
        with run.lock:
            hit = run.merged.get(version)
            if hit is None:
                merged, order, ignored = _concat_by_step([frame for _, frame, _ in parts])
                hit = Snapshot(merged, [(masks, len(frame)) for _, frame, masks in parts], order, version, ignored)
                run.merged = {version: hit, **{k: v for k, v in run.merged.items() if k[0] != all_segments}}
        return hit


def _loading(run: _Run) -> bool:
    """Whether the run's first read runs in the background now."""
    loader = run.loader
    return loader is not None and loader[0].is_alive()


def _read_in_steps(sources: list[MetricsSource]) -> None:
    """Read each file in steps of :data:`LOAD_STEP_BYTES` (its lock is free between steps), then once more
    as a whole (which writes its cache file)."""
    for source in sources:
        with source.lock:
            source._listed = None
        while True:
            before = source.tail.offset
            source.poll(limit=LOAD_STEP_BYTES)
            if source.tail.offset == before:
                break
        source.poll()
        if source.cache is not None and source.tail.offset > source.cached_offset:
            with source.lock:
                source._maybe_write_cache()


def _columnar_cache(root: Any, path: Any, setting: bool | list[Any] | None) -> Any:
    """The store's :class:`~monitor_cb.ingest.colcache.ColumnarCache`, or None when caching is off."""
    if setting is False:
        return None
    from monitor_cb.ingest.colcache import ColumnarCache, places_for

    if isinstance(setting, list):
        places = setting
    else:
        env = dict(os.environ)
        if setting is True and env.get("MONITOR_CACHE", "").lower() in ("off", "0", "false", "no"):
            env.pop("MONITOR_CACHE")
        places = places_for(root, env)
    if not places:
        return None
    from monitor_cb.ingest.viewer_work import Background

    cache = ColumnarCache(places, path)
    cache.background = Background()  # a server's refresh never waits for a cache file being written
    return cache


def _summary_index(cache: Any, root: Path) -> Any:
    """The root's :class:`~monitor_cb.ingest.summary_index.SummaryIndex` (kept where the cache is), or None."""
    if cache is None:
        return None
    from monitor_cb.ingest.summary_index import SummaryIndex

    return SummaryIndex(cache.places, root)


def _remote_root(root: Any) -> Any:
    """A :class:`~monitor_cb.ingest.remote.RemoteRoot` for a URL (or one given), else None."""
    if is_url(root):
        from monitor_cb.ingest.remote import RemoteRoot

        return RemoteRoot(root)
    module = sys.modules.get("monitor_cb.ingest.remote")  # a RemoteRoot given: its module is loaded
    return root if module is not None and isinstance(root, module.RemoteRoot) else None


def _concat_by_step(frames: list[pd.DataFrame]) -> tuple[pd.DataFrame, np.ndarray, frozenset[tuple[int, str]]]:
    """Rank frames (given in rank order) as one, sorted by step then rank; also the row order used.

    A stable sort of the concatenated steps keeps rank order within a step, and numpy's
    stable sort of integers is a radix sort: linear, several times cheaper than a lexsort.
    A column that is text in one rank and numeric in another stays numeric: the text
    part reads as not logged, and is returned as ``(frame index, column)``.
    """
    import pandas as pd

    steps = np.concatenate([frame["step"].to_numpy() for frame in frames])
    order = np.argsort(steps, kind="stable")
    names = list(dict.fromkeys(name for frame in frames for name in frame.columns))
    data: dict[str, np.ndarray] = {}
    ignored: set[tuple[int, str]] = set()
    for name in names:
        kinds = [frame[name].dtype.kind in "fiub" if name in frame else None for frame in frames]
        numeric = True in kinds
        text = not numeric
        parts = []
        for i, frame in enumerate(frames):
            if kinds[i] is not None and (kinds[i] or not numeric):
                parts.append(frame[name].to_numpy())
                continue
            if kinds[i] is not None:
                ignored.add((i, name))
            parts.append(np.full(len(frame), None if text else np.nan, object if text else np.float64))
        data[name] = np.concatenate(parts)[order]
    return pd.DataFrame(data, copy=False), order, frozenset(ignored)


def _source_name(run: _Run) -> str:
    """What a run is read from, as the Runs page groups it."""
    if run.tensorboard is not None:
        return "TensorBoard"
    if run.mflog is not None:
        return "MindFormers log"
    if run.summary is not None:
        return "MindSpore summary"
    return "JSONL"
