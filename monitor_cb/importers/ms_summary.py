"""Incremental reader of MindSpore summary directories (``SummaryCollector`` / ``SummaryRecord`` output).

MindSpore 2.x writes ``<summary_dir>/events.out.events.summary.<time>.<rank>.<host>_MS`` (and a
``..._lineage`` file beside it, holding the training's hyperparameters). MindInsight, the only reader,
is retired (no release after 2.3); TensorBoard skips these files (it reads ``*tfevents*`` only, and
the protos differ). :class:`SummaryRun` reads such a directory as ONE run whose ranks come from the
file names::

    run = SummaryRun("summary_dir", root="logs")
    batches = run.poll_batches()   # {rank: Batch}: scalars as columns, one row per (segment, step)
    batches = run.poll_batches()   # later: only records appended since
    run.histograms(0)              # {tag: HistogramSeries}
    run.meta()["config"]           # the lineage file's hyperparameters, masked

Each file remembers the byte its last read stopped at; a record cut off at the end waits for its
end (as MindInsight did). Framing and both checksums: :mod:`monitor_cb.importers.tfrecord`; the
protos, decoded by hand without MindSpore: :mod:`monitor_cb.importers.ms_proto`. Scalars are float32
read as their shortest decimal, under their tag as written (:func:`monitor_cb.importers.tags.tag_key`;
SummaryCollector's ``loss/auto`` plays the loss role). Histograms are kept
per tag (:class:`HistogramSeries`, at most :data:`MAX_HISTOGRAMS` per tag, thinned evenly); images,
tensors and graphs are not read (counted in the metadata).
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from monitor_cb.config_masking import mask_config
from monitor_cb.importers.f32 import shortest_f32_array
from monitor_cb.importers.ms_proto import Histogram, ProtoError, decode_event, decode_lineage
from monitor_cb.importers.ms_scan import record_order, scan_scalars
from monitor_cb.importers.tags import tag_key
from monitor_cb.importers.tfrecord import FOOTER, HEADER, RECORD_CAP, frame
from monitor_cb.ingest.batch import Batch
from monitor_cb.ingest.safepath import is_within
from monitor_cb.record import STEP_LIMIT
from monitor_cb.rootfile import UnsafeFileError, open_regular, read_capped

SOURCE_FORMAT = "ms_summary"
SUMMARY_MARK = ".out.events.summary."  # MindSpore's EVENT_FILE_NAME_MARK
LINEAGE_SUFFIX = "_lineage"
READ_WINDOW = 16 << 20  # bytes of a file read and framed at once (memory stays bounded on any file)
LINEAGE_CAP = 4 << 20  # a lineage file is a few hundred bytes; a larger one is refused
MAX_HISTOGRAMS = 2000  # histograms kept per tag (evenly thinned past it)
_NAME = re.compile(r"\.out\.events\.summary\.(\d+)\.(\d+)\.")
_U64 = struct.Struct("<Q")


def is_summary_file(name: str) -> bool:
    """A MindSpore summary file by its name (``_lineage`` files are not: they hold no values)."""
    return SUMMARY_MARK in name and not name.endswith(LINEAGE_SUFFIX) and not name.startswith(".")


def is_lineage_file(name: str) -> bool:
    return SUMMARY_MARK in name and name.endswith(LINEAGE_SUFFIX) and not name.startswith(".")


def rank_of(name: str) -> int:
    """The rank MindSpore put in the file name (``...summary.<time>.<rank>.<host>_MS``); 0 if none."""
    match = _NAME.search(name)
    return int(match.group(2)) if match else 0


def stamp_of(name: str) -> int:
    match = _NAME.search(name)
    return int(match.group(1)) if match else 0


def summary_metric_name(tag: str) -> str:
    """Our key for a summary scalar tag: the tag as written (docs/FORMAT.md "Metric names"; SummaryCollector's
    ``loss/auto`` plays the loss role, :mod:`monitor_cb.analysis.roles`)."""
    return tag_key(tag)


def is_ms_summary_dir(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds a MindSpore summary file (one ``scandir``; links are not followed)."""
    try:
        with os.scandir(path) as entries:
            return any(is_summary_file(e.name) and not e.is_symlink() and e.is_file() for e in entries)
    except OSError:
        return False


@dataclass(frozen=True)
class HistogramSeries:
    """One histogram tag of one rank over the steps it was recorded at (what a distributions view draws).

    ``edges[i]`` are the bucket edges at ``steps[i]`` (len(counts[i]) + 1 of them: each bucket's left
    edge, then the last bucket's right edge); min/max/count/sum and the non-finite counts are MindSpore's.
    """

    tag: str
    rank: int
    steps: np.ndarray  # int64
    walls: np.ndarray  # float64, Unix s
    edges: list[np.ndarray]
    counts: list[np.ndarray]
    min: np.ndarray
    max: np.ndarray
    count: np.ndarray  # int64: values summarised (NaN and infinities included)
    sum: np.ndarray
    nan_count: np.ndarray
    pos_inf_count: np.ndarray
    neg_inf_count: np.ndarray


@dataclass
class _HistogramBuffer:
    """A tag's histograms as they come; every ``stride``-th kept once there are more than the budget."""

    stride: int = 1
    seen: int = 0
    points: list[tuple[int, float, Histogram]] = field(default_factory=list)

    def add(self, step: int, wall: float, hist: Histogram) -> None:
        if self.points and self.points[-1][0] == step:  # recorded again at the same step (SummaryCollector's end)
            self.points[-1] = (step, wall, hist)
            return
        if self.seen % self.stride == 0:
            self.points.append((step, wall, hist))
            if len(self.points) > MAX_HISTOGRAMS:
                self.points = self.points[::2]
                self.stride *= 2
        self.seen += 1

    def series(self, tag: str, rank: int) -> HistogramSeries:
        pts = self.points
        hists = [h for _, _, h in pts]

        def column(attr: str, dtype: Any) -> np.ndarray:
            return np.array([getattr(h, attr) for h in hists], dtype)

        return HistogramSeries(
            tag=tag,
            rank=rank,
            steps=np.array([s for s, _, _ in pts], np.int64),
            walls=np.array([w for _, w, _ in pts], np.float64),
            edges=[_edges(h) for h in hists],
            counts=[np.array(h.counts, np.int64) for h in hists],
            min=column("min", np.float64),
            max=column("max", np.float64),
            count=column("count", np.int64),
            sum=column("sum", np.float64),
            nan_count=column("nan_count", np.int64),
            pos_inf_count=column("pos_inf_count", np.int64),
            neg_inf_count=column("neg_inf_count", np.int64),
        )


def _edges(hist: Histogram) -> np.ndarray:
    if not hist.lefts:
        return np.empty(0, np.float64)
    return np.array([*hist.lefts, hist.lefts[-1] + hist.widths[-1]], np.float64)


@dataclass
class _Scalars:
    """One read's scalar values as column chunks, each in file order, named by index into ``names``."""

    names: list[str] = field(default_factory=list)
    chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)

    def ids(self, names: list[str]) -> np.ndarray:
        """Our index of each of ``names`` (new ones appended)."""
        index = {name: i for i, name in enumerate(self.names)}
        out = []
        for name in names:
            if name not in index:
                index[name] = len(self.names)
                self.names.append(name)
            out.append(index[name])
        return np.array(out, np.int32)

    def add(self, step: np.ndarray, wall: np.ndarray, name_id: np.ndarray, value: np.ndarray) -> None:
        if len(step):
            self.chunks.append((step, wall, name_id, value))

    def __bool__(self) -> bool:
        return bool(self.chunks)


@dataclass
class SummaryFile:
    """One summary file being followed."""

    path: str
    rank: int
    seg: int
    offset: int = 0  # the next record starts here
    damaged: str | None = None  # why reading stopped for good (the rest cannot be framed)
    refused: str | None = None  # why it is not read at all (a FIFO, a link out of the root...)
    pending: int = 0  # bytes of a record not complete yet
    size: int = 0
    mtime: float = 0.0
    bad: int = 0  # records skipped: checksum, decode, a step out of range
    version: str | None = None


class SummaryRun:
    """Follow one MindSpore summary directory; :meth:`poll_batches` returns only what is new.

    Args:
        path: the summary directory (``summary_dir`` of SummaryCollector / SummaryRecord).
        root: never read a file that resolves outside this directory (default: ``path``).
    """

    def __init__(self, path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path)
        self.root = Path(root) if root is not None else self.path
        self.files: dict[str, SummaryFile] = {}
        self._hist: dict[int, dict[str, _HistogramBuffer]] = {}
        self.skipped_kinds: dict[str, int] = {}
        self.first_wall: float | None = None
        self.last_wall: float | None = None
        self._config: tuple[Any, dict[str, Any]] = (None, {})
        self.lineage_refused: tuple[str, str] | None = None  # (lineage file, why it is not read)

    # ------------------------------------------------------------------ files
    def discover(self) -> None:
        """Pick up summary files that appeared (segments numbered per rank in name order = creation order)."""
        if not self.path.is_dir():
            raise FileNotFoundError(f"summary directory {self.path} is gone (or is not a directory)")
        found: list[tuple[int, str, str]] = []
        with os.scandir(self.path) as entries:
            for entry in entries:
                if not is_summary_file(entry.name) or entry.path in self.files:
                    continue
                if entry.is_symlink() and is_within(Path(entry.path), self.root):
                    continue  # an alias of a file read under its own name (a link out of the root is refused)
                found.append((stamp_of(entry.name), entry.name, entry.path))
        for _, name, path in sorted(found):
            rank = rank_of(name)
            seg = 1 + sum(1 for f in self.files.values() if f.rank == rank)
            self.files[path] = SummaryFile(path, rank, seg)

    @property
    def ranks(self) -> list[int]:
        return sorted({f.rank for f in self.files.values() if f.refused is None})

    # ------------------------------------------------------------------ reading
    def poll_batches(self, max_records: int | None = None) -> dict[int, Batch]:
        """New scalar rows per rank (one row per (segment, step); the last value of a tag at a step wins)."""
        self.discover()
        parts: dict[int, list[tuple[int, _Scalars]]] = {}
        budget = max_records
        for state in sorted(self.files.values(), key=lambda f: (f.rank, f.seg)):
            if budget is not None and budget <= 0:
                break
            scalars, count = self._read(state, budget)
            if budget is not None:
                budget -= count
            if scalars:
                parts.setdefault(state.rank, []).append((state.seg, scalars))
        return {rank: _batch(rank, chunks) for rank, chunks in sorted(parts.items())}

    def _read(self, state: SummaryFile, budget: int | None) -> tuple[_Scalars, int]:
        scalars = _Scalars()
        taken = 0
        if state.damaged is not None or state.refused is not None:
            return scalars, 0
        try:
            with open_regular(state.path, root=self.root) as (fd, st):
                state.size, state.mtime = st.st_size, st.st_mtime
                if st.st_size < state.offset:  # truncated or replaced under us: read again from its start
                    state.offset = 0
                while state.offset < st.st_size and (budget is None or taken < budget):
                    data = os.pread(fd, _window(fd, state.offset, st.st_size), state.offset)
                    found = frame(np.frombuffer(data, np.uint8))
                    taken += self._take(state, data, found, scalars)
                    base = state.offset
                    state.offset += found.end
                    if found.damaged is not None:
                        reason = _shifted(found.damaged, base)
                        state.damaged = f"{state.path}: {reason}; the records after it are not read"
                        break
                    if found.n == 0:
                        break  # a record cut off at the end: not yet
                state.pending = st.st_size - state.offset if state.damaged is None else 0
        except UnsafeFileError as exc:
            state.refused = exc.reason
        except FileNotFoundError:
            pass
        return scalars, taken

    def _take(self, state: SummaryFile, data: bytes, found: Any, out: _Scalars) -> int:
        """The scalars and histograms of one read's records (scalar-only events through numpy, the rest
        field by field), in file order; bad records counted."""
        buf = np.frombuffer(data, np.uint8)
        good = np.flatnonzero(found.crc_ok)
        state.bad += found.n - len(good)
        fast = scan_scalars(buf, found.starts[good], found.lengths[good])
        fast_record = good[fast.record]
        in_range = (fast.step >= 0) & (fast.step < STEP_LIMIT)
        state.bad += len(np.unique(fast_record[~in_range]))
        keep = in_range
        slow = self._slow(state, data, found, good[~fast.handled])
        names = [summary_metric_name(tag) for tag in fast.tags]
        fast_ids = out.ids(names)[fast.tag[keep]] if names else np.empty(0, np.int32)
        record = np.concatenate([fast_record[keep], slow.record])
        slot = np.concatenate([fast.slot[keep], slow.slot])
        order = record_order(record, slot)
        step = np.concatenate([fast.step[keep], slow.step])[order]
        wall = np.concatenate([fast.wall[keep], slow.wall])[order]
        name_id = np.concatenate([fast_ids, out.ids(slow.names)])[order]
        value = np.concatenate([fast.value[keep], slow.value])[order]
        if len(wall):
            low, high = float(wall.min()), float(wall.max())
            self.first_wall = low if self.first_wall is None else min(self.first_wall, low)
            self.last_wall = high if self.last_wall is None else max(self.last_wall, high)
        out.add(step, wall, name_id, value)
        return found.n

    def _slow(self, state: SummaryFile, data: bytes, found: Any, records: np.ndarray) -> _SlowValues:
        """Records the numpy path left, decoded field by field: their scalars, and every histogram."""
        view = memoryview(data)
        hist = self._hist.setdefault(state.rank, {})
        got = _SlowValues()
        for record in records.tolist():
            start, length = int(found.starts[record]), int(found.lengths[record])
            try:
                event = decode_event(bytes(view[start : start + length]))
            except ProtoError:
                state.bad += 1
                continue
            if event.version is not None:
                state.version = event.version
            for kind, count in event.skipped.items():
                self.skipped_kinds[kind] = self.skipped_kinds.get(kind, 0) + count
            if not event.scalars and not event.histograms:
                continue
            if not 0 <= event.step < STEP_LIMIT:
                state.bad += 1
                continue
            wall = event.wall_time
            for slot, (tag, value) in enumerate(event.scalars):
                got.add(record, slot, event.step, wall, summary_metric_name(tag), value)
            if event.histograms:
                self.first_wall = wall if self.first_wall is None else min(self.first_wall, wall)
                self.last_wall = wall if self.last_wall is None else max(self.last_wall, wall)
            for tag, histogram in event.histograms:
                hist.setdefault(tag, _HistogramBuffer()).add(event.step, wall, histogram)
        return got

    # ------------------------------------------------------------------ what else the files say
    def histograms(self, rank: int | None = None) -> dict[str, HistogramSeries]:
        """Histograms read so far, per tag, of ``rank`` (default: the lowest rank that has any)."""
        if rank is None:
            rank = min(self._hist, default=0)
        return {tag: buf.series(tag, rank) for tag, buf in sorted(self._hist.get(rank, {}).items())}

    def config(self) -> dict[str, Any]:
        """The newest lineage file's hyperparameters (optimizer, learning rate, loss function, epochs,
        batch size...), masked like our own configs; {} without one."""
        lineage = self._lineage_file()
        if lineage is None:
            return {}
        try:
            st = os.stat(lineage)
            key = (lineage, st.st_size, st.st_mtime_ns)
        except OSError:
            return self._config[1]
        if key != self._config[0]:
            self._config = (key, self._read_lineage(lineage))
        return self._config[1]

    def _lineage_file(self) -> str | None:
        try:
            with os.scandir(self.path) as entries:
                names = sorted((stamp_of(e.name), e.path) for e in entries if is_lineage_file(e.name))
        except OSError:
            return None
        return names[-1][1] if names else None

    def _read_lineage(self, path: str) -> dict[str, Any]:
        try:
            data = read_capped(path, LINEAGE_CAP, root=self.root)
        except UnsafeFileError as exc:
            self.lineage_refused = (path, exc.reason)
            return {}
        except OSError:
            return {}
        found = frame(np.frombuffer(data, np.uint8))
        config: dict[str, Any] = {}
        for start, length, ok in zip(found.starts.tolist(), found.lengths.tolist(), found.crc_ok.tolist(), strict=True):
            if ok:
                try:
                    config.update(decode_lineage(data[start : start + length]))
                except ProtoError:
                    continue
        if "learning_rate" in config:  # a float32: its shortest decimal (0.01, not 0.009999999776482582)
            config["learning_rate"] = float(shortest_f32_array(np.array([config["learning_rate"]]))[0])
        if "final_loss" in config:
            config["final_loss"] = float(shortest_f32_array(np.array([config["final_loss"]]))[0])
        return mask_config(config)

    def meta(self) -> dict[str, Any]:
        """Run metadata in the spirit of our ``.meta.json`` (summary files keep no status)."""
        ranks = self.ranks
        files = list(self.files.values())
        return {
            "name": self.path.name,
            "status": None,
            "source_format": SOURCE_FORMAT,
            "source": str(self.path),
            "ranks": ranks,
            "world_size": max(ranks) + 1 if ranks else 0,
            "start_time": self.first_wall,
            "last_event_time": self.last_wall,
            "config": self.config(),
            "summary_files": len(files),
            "bad_records": sum(f.bad for f in files),
            "not_read": dict(self.skipped_kinds),  # images, tensors, graphs: values this reader leaves out
            "damaged": [f.damaged for f in files if f.damaged],
        }

    def bad_counts(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for f in self.files.values():
            out[f.rank] = out.get(f.rank, 0) + f.bad + (1 if f.damaged else 0)
        return out


class _SlowValues:
    """Scalars decoded field by field, with the record and place in it each came from."""

    def __init__(self) -> None:
        self._rows: list[tuple[int, int, int, float, float]] = []
        self.names: list[str] = []

    def add(self, record: int, slot: int, step: int, wall: float, name: str, value: float) -> None:
        self._rows.append((record, slot, step, wall, value))
        self.names.append(name)

    def _column(self, i: int, dtype: Any) -> np.ndarray:
        return np.array([row[i] for row in self._rows], dtype)

    @property
    def record(self) -> np.ndarray:
        return self._column(0, np.int64)

    @property
    def slot(self) -> np.ndarray:
        return self._column(1, np.int64)

    @property
    def step(self) -> np.ndarray:
        return self._column(2, np.int64)

    @property
    def wall(self) -> np.ndarray:
        return self._column(3, np.float64)

    @property
    def value(self) -> np.ndarray:
        return self._column(4, np.float32)


def _window(fd: int, offset: int, size: int) -> int:
    """Bytes to read at ``offset``: the window, or the whole next record when it is longer (up to the cap)."""
    head = os.pread(fd, 8, offset)
    span = 0
    if len(head) == 8:
        (length,) = _U64.unpack(head)
        span = HEADER + min(length, RECORD_CAP) + FOOTER
    return min(size - offset, max(READ_WINDOW, span))


def _shifted(reason: str, base: int) -> str:
    """A framing reason whose byte offset is relative to a read window, made relative to the file."""
    match = re.search(r"at byte ([\d,]+)", reason)
    if match is None:
        return reason
    at = int(match.group(1).replace(",", "")) + base
    return reason[: match.start(1)] + f"{at:,}" + reason[match.end(1) :]


def _batch(rank: int, chunks: list[tuple[int, _Scalars]]) -> Batch:
    """The rows of a rank's new values: one per (seg, step), ``t`` the wall time of its first value."""
    seg_parts, step_parts, wall_parts, name_parts, value_parts = [], [], [], [], []
    names: list[str] = []
    for seg, scalars in chunks:
        index = {name: i for i, name in enumerate(names)}
        remap = np.array([index.setdefault(name, len(index)) for name in scalars.names], np.int32)
        names.extend(name for name in scalars.names if name not in names)
        for step, wall, name_id, value in scalars.chunks:
            seg_parts.append(np.full(len(step), seg, np.int64))
            step_parts.append(step)
            wall_parts.append(wall)
            name_parts.append(remap[name_id])
            value_parts.append(value)
    seg = np.concatenate(seg_parts)
    step = np.concatenate(step_parts)
    wall = np.concatenate(wall_parts)
    name_id = np.concatenate(name_parts)
    values = shortest_f32_array(np.concatenate(value_parts))
    key = seg * STEP_LIMIT + step  # seg < 2**23: fits int64
    if len(key) > 1 and bool(np.all(key[1:] > key[:-1])):  # one value a step, in order: no sort needed
        rows, first, row_of = key, np.arange(len(key)), np.arange(len(key))
    else:
        rows, first, row_of = np.unique(key, return_index=True, return_inverse=True)
        row_of = row_of.reshape(-1)
    n = len(rows)
    batch = Batch(step=rows % STEP_LIMIT, seg=rows // STEP_LIMIT, rank=np.full(n, rank, np.int64), t=wall[first])
    for i, name in enumerate(names):
        mine = np.flatnonzero(name_id == i)
        column = np.full(n, np.nan)
        logged = np.zeros(n, bool)
        column[row_of[mine]] = values[mine]  # in file order: a later value at the step wins (as the TB reader)
        logged[row_of[mine]] = True
        batch.floats[name] = (column, logged)
    return batch


def read_histograms(
    run_dir: str | os.PathLike[str], rank: int | None = None, root: str | os.PathLike[str] | None = None
) -> dict[str, HistogramSeries]:
    """Every histogram of a summary directory, per tag, for one rank (default: the lowest that has any).

    For a distributions view: ``series.steps``, ``series.edges[i]`` / ``series.counts[i]`` (the buckets at
    ``steps[i]``), ``series.min``/``max``/``count``/``sum`` and the NaN/inf counts, as MindSpore recorded
    them (at most :data:`MAX_HISTOGRAMS` a tag). A live view keeps a :class:`SummaryRun` (or asks the
    store's run, :meth:`monitor_cb.ingest.ms_summary_source.SummaryGroup.histograms`) and polls it instead.
    """
    run = SummaryRun(run_dir, root)
    run.poll_batches()
    return run.histograms(rank)


def histogram_columns(histograms: dict[str, HistogramSeries]) -> dict[str, np.ndarray]:
    """Histograms as one row per bucket (for export): tag, rank, step, t, left, right, bucket count, and the
    histogram's own min, max, count and NaN/inf counts repeated on each of its buckets."""
    parts: dict[str, list[np.ndarray]] = {key: [] for key in _BUCKET_COLUMNS}
    for tag, series in histograms.items():
        for i, step in enumerate(series.steps.tolist()):
            edges, counts = series.edges[i], series.counts[i]
            n = len(counts)
            for key, value in (
                ("tag", tag),
                ("rank", series.rank),
                ("step", step),
                ("t", series.walls[i]),
                ("min", series.min[i]),
                ("max", series.max[i]),
                ("count", series.count[i]),
                ("nan_count", series.nan_count[i]),
                ("pos_inf_count", series.pos_inf_count[i]),
                ("neg_inf_count", series.neg_inf_count[i]),
            ):
                parts[key].append(np.full(n, value, object if key == "tag" else None))
            parts["left"].append(edges[:-1])
            parts["right"].append(edges[1:])
            parts["bucket_count"].append(counts)
    return {key: np.concatenate(chunks) if chunks else np.empty(0) for key, chunks in parts.items()}


_BUCKET_COLUMNS = (
    "tag",
    "rank",
    "step",
    "t",
    "left",
    "right",
    "bucket_count",
    "min",
    "max",
    "count",
    "nan_count",
    "pos_inf_count",
    "neg_inf_count",
)
