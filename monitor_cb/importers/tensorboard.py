"""Incremental, full-resolution reader of TensorBoard event directories (MindFormers' ``tensorboard_dir``).

MindFormers writes scalars with tensorboardX into ``<tensorboard_dir>/rank_<id>/events.out.tfevents.*``.
:class:`TensorBoardRun` reads such a directory as ONE run whose ``rank_*`` subdirectories are its
ranks, and turns the events into records of our format (``docs/FORMAT.md``), keyed by our metric
names (``docs/TENSORBOARD.md``, :mod:`monitor_cb.importers.tags`)::

    run = TensorBoardRun("output/tensorboard")
    records = run.poll()        # everything so far: [{"step": 1, "t": ..., "rank": 0, "seg": 1, "loss": 2.3, ...}]
    records = run.poll()        # later: only what training appended since

Like TensorBoard's own ``directory_loader``, each event file remembers where it stopped; a
half-written record at the end of a file is "not yet" and comes back complete on a later
poll. Unlike TensorBoard's multiplexer, nothing is sampled away: every scalar event is returned, NaN
and infinities as floats.

Files are read at native speed, not through TensorBoard's pure-Python ``LegacyEventFileLoader``
(35 µs an event): each file is mapped and its scalar records decoded with numpy
(:mod:`monitor_cb.importers.event_scan`), the rest (text, TF2 tensor summaries) with protobuf's C
parser; each file remembers the byte offset it stopped at. Events become columns, not dicts:
:meth:`TensorBoardRun.poll_batches` hands each rank a :class:`~monitor_cb.ingest.batch.Batch`.
Values are float32 read as the shortest decimal that is the same float32 (:mod:`monitor_cb.importers.f32`).

The ``Event`` proto comes from the ``tensorboard`` package (an optional dependency, imported only
when a run is read): without it, :class:`TensorBoardRun` raises :class:`TensorBoardUnavailable` with
:data:`TENSORBOARD_MISSING` as its message.
"""

from __future__ import annotations

import logging
import math
import mmap
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from monitor_cb.config_masking import mask_config_texts
from monitor_cb.importers.event_scan import ScanResult, record_span, scan
from monitor_cb.importers.f32 import shortest_f32
from monitor_cb.importers.tags import (
    TEXT_SUFFIX,
    metric_name,
    samples_base,
    subdir_metric_name,
    unit_divisor,
)
from monitor_cb.ingest.batch import Batch
from monitor_cb.record import STEP_LIMIT
from monitor_cb.rootfile import FileIdentity, identity, open_regular

logger = logging.getLogger(__name__)

TENSORBOARD_MISSING = (
    "reading TensorBoard event files needs the optional 'tensorboard' package, which is not installed: "
    "run `pip install tensorboard` (TensorBoard runs are skipped until then)"
)

_RANK_DIR = re.compile(r"^rank_(\d+)$")
_STAMP = re.compile(r"tfevents\.(\d+)")
SCAN_WINDOW = 64 << 20  # bytes of an event file decoded at once (memory stays bounded on any file)
CHECK_BYTES = 4096  # bytes at the start of a file, and before the offset read to, compared to know it is the same
_INTEGER_KEYS = frozenset({"batch_size", "samples"})  # whole numbers in records (import-tb writes them)
_F32 = struct.Struct("<f")


class TensorBoardUnavailable(ImportError):
    """The optional ``tensorboard`` package is missing; the message says how to install it."""


class EventFilesReplaced(Exception):
    """An event file read before is gone, or is not the file read before (a new inode, shorter, other bytes).

    The rows taken from it can no longer be told from the new file's: the caller reads the run anew
    with a new :class:`TensorBoardRun`, as a JSONL file that is not the one read before is read from zero.
    """

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"TensorBoard event file {path} {why}: the run is read anew")
        self.path = path


def load_event_proto() -> type:
    """The ``tensorboard`` package's ``Event`` protobuf class, or :class:`TensorBoardUnavailable`."""
    try:
        from tensorboard.compat.proto.event_pb2 import Event
    except ImportError as exc:
        raise TensorBoardUnavailable(TENSORBOARD_MISSING) from exc
    return Event


def tensorboard_available() -> bool:
    """Whether event files can be read here (the ``tensorboard`` package imports)."""
    try:
        load_event_proto()
    except TensorBoardUnavailable:
        return False
    return True


def is_event_file(name: str) -> bool:
    """TensorBoard's own test for an event file name (``events.out.tfevents.<time>.<host>...``)."""
    return "tfevents" in name


def is_tensorboard_run(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a TensorBoard run: event files in it or in its ``rank_<id>`` subdirectories.

    Cheap (one or two ``scandir``); needs no ``tensorboard`` package. Discovery should not descend
    into a directory for which this is true: its subdirectories are ranks or ``add_scalars`` series.
    """
    try:
        with os.scandir(path) as entries:
            rank_dirs = []
            for entry in entries:
                if entry.is_file() and is_event_file(entry.name):
                    return True
                if _RANK_DIR.match(entry.name) and entry.is_dir():
                    rank_dirs.append(entry.path)
    except OSError:
        return False
    for rank_dir in rank_dirs:
        try:
            with os.scandir(rank_dir) as entries:
                if any(entry.is_file() and is_event_file(entry.name) for entry in entries):
                    return True
        except OSError:
            continue
    return False


def _tensor_scalar(tensor: Any) -> float | None:
    """The number in a scalar ``TensorProto`` (TF2-style summaries), else None."""
    from tensorboard.util import tensor_util  # only reached with tensorboard installed

    try:
        array = tensor_util.make_ndarray(tensor)
    except Exception:  # noqa: BLE001 - an odd tensor is skipped, never fatal
        return None
    if array.size != 1 or array.dtype.kind not in "fiub":
        return None
    value = array.reshape(-1)[0]
    if array.dtype.kind == "f" and array.dtype.itemsize <= 4:  # float32 (or 16): its shortest decimal
        return shortest_f32(float(value))
    return float(value)


@dataclass
class _File:
    """One event file being followed, with the state needed to align its "vs samples" tags."""

    path: str
    rank: int
    subdir: str  # "" for a file directly in the rank directory, else the add_scalars series path
    seg: int
    offset: int = 0  # bytes read: the next record starts here
    batch_size: float | None = None
    last_step: dict[str, int] = field(default_factory=dict)
    done: bool = False
    read_as: FileIdentity | None = None  # the file's stat when it was last read to its end: unchanged, not opened
    inode: tuple[int, int] | None = None  # (inode, device) of the file read
    head: bytes = b""  # its first bytes, and the bytes just before the offset: the same file still holds them
    window: bytes = b""


class TensorBoardRun:
    """Follow one TensorBoard run directory; :meth:`poll` returns only records not returned before.

    Records are dicts in our format, decoded (NaN and infinities are floats): ``step`` (int, the
    event step), ``t`` (float, the wall time of the first event of that step in this poll), ``rank``,
    ``seg`` (1 for the rank's first event file, +1 for each later one: MindFormers starts a new file
    on each launch, so a resumed run gets a new segment, as our writer does), then the metrics.

    A record for a ``(rank, seg, step)`` can arrive in two polls when the writer flushed in the middle
    of a step; the second record then carries the remaining keys (FORMAT.md: such records merge).

    Args:
        path: the run directory (MindFormers' ``tensorboard_dir``, holding ``rank_<id>`` directories),
            or a directory holding event files itself (one rank: 0, or N when named ``rank_N``).

    Raises:
        TensorBoardUnavailable: the ``tensorboard`` package is not installed.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._event_class = load_event_proto()
        self.path = Path(path)
        self._files: dict[str, _File] = {}
        self._main_files: dict[int, list[tuple[int, int]]] = {}  # rank -> [(name stamp, seg)]
        self._warned: set[str] = set()
        self.texts: dict[str, str] = {}  # add_text summaries (MindFormers writes its config there)
        self.n_events = 0
        self.n_records = 0
        self.damaged = 0  # records protobuf could not decode (skipped)
        self.unaligned = 0  # "vs samples" values whose step could not be found (dropped)
        self.bad_steps: dict[int, int] = {}  # rank -> scalar values at a step outside 0..STEP_LIMIT-1 (dropped)
        self.first_wall_time: float | None = None
        self.last_wall_time: float | None = None
        self.last_write: float | None = None  # newest event-file mtime, Unix seconds
        self.total_bytes = 0  # bytes of the event files at the last poll
        self._stats: dict[str, os.stat_result] = {}  # each event file's stat at the last listing
        self.opened = 0  # event files opened to read (an unchanged file is not: a rescan costs a stat per file)

    # ------------------------------------------------------------------ public API
    @property
    def ranks(self) -> list[int]:
        """Ranks seen so far, sorted."""
        return sorted({state.rank for state in self._files.values()})

    @property
    def files(self) -> list[str]:
        """Event files followed so far."""
        return sorted(self._files)

    def poll_batches(self, max_events: int | None = None) -> dict[int, Batch]:
        """Read what was appended since the last poll, as one columnar batch per rank.

        New event files and rank directories are picked up. Rows are sorted by ``(seg, step)``.

        Args:
            max_events: stop after about this many events (the rest comes on the next poll), to
                bound the work of one call. None reads everything there is.

        Raises:
            FileNotFoundError: the run directory itself is gone.
        """
        self._discover()
        parts: dict[int, list[_Events]] = {}
        budget = max_events
        newest = self._newest_per_directory()
        for state in sorted(self._files.values(), key=lambda s: (s.rank, s.seg, s.subdir, s.path)):
            if state.done and self._unchanged(state):
                continue
            if budget is not None and budget <= 0:
                break
            events, count = self._read(state, budget)
            if budget is not None:
                budget -= count
            elif count == 0 and newest[os.path.dirname(state.path)] != state.path:
                state.done = True  # a newer file in the same directory: this writer has moved on
            parts.setdefault(state.rank, []).extend(e for e in events if len(e.target))
        batches = {rank: _batch(rank, events) for rank, events in sorted(parts.items()) if events}
        self.n_records += sum(len(batch) for batch in batches.values())
        return batches

    def poll(self, max_events: int | None = None) -> list[dict[str, Any]]:
        """:meth:`poll_batches` as records of our format (dicts), sorted by ``(rank, seg, step)``."""
        return [record for batch in self.poll_batches(max_events).values() for record in _records(batch)]

    def poll_by_rank(self, max_events: int | None = None) -> dict[int, list[dict[str, Any]]]:
        """:meth:`poll`, grouped by rank."""
        return {rank: _records(batch) for rank, batch in self.poll_batches(max_events).items()}

    def single_files(self) -> dict[int, str]:
        """Rank -> its event file, for ranks that have exactly one (no later launch, no add_scalars series).

        Such a rank's rows depend on that file alone: what the columnar cache can keep.
        """
        self._discover()
        by_rank: dict[int, list[_File]] = {}
        for state in self._files.values():
            by_rank.setdefault(state.rank, []).append(state)
        return {rank: files[0].path for rank, files in by_rank.items() if len(files) == 1 and not files[0].subdir}

    def file_state(self, path: str) -> dict[str, Any]:
        """What reading ``path`` on from its offset needs besides the bytes (kept with cached rows)."""
        state = self._files[path]
        return {
            "offset": state.offset,
            "batch_size": state.batch_size,
            "last_step": dict(state.last_step),
            "texts": dict(self.texts),
            "walls": [self.first_wall_time, self.last_wall_time],
            "bad_steps": self.bad_steps.get(state.rank, 0),
            "unaligned": self.unaligned,
        }

    def resume_file(self, path: str, saved: dict[str, Any]) -> None:
        """Go on reading ``path`` after rows taken from elsewhere (the columnar cache), as :meth:`file_state` said."""
        state = self._files[path]
        state.offset = int(saved["offset"])
        size = saved.get("batch_size")
        state.batch_size = float(size) if isinstance(size, (int, float)) else None
        state.last_step = {str(k): int(v) for k, v in dict(saved.get("last_step") or {}).items()}
        for tag, text in dict(saved.get("texts") or {}).items():
            self.texts.setdefault(str(tag), str(text))
        walls = [float(w) for w in saved.get("walls") or [] if isinstance(w, (int, float))]
        if walls:
            low, high = min(walls), max(walls)
            self.first_wall_time = low if self.first_wall_time is None else min(self.first_wall_time, low)
            self.last_wall_time = high if self.last_wall_time is None else max(self.last_wall_time, high)
        self.bad_steps[state.rank] = int(saved.get("bad_steps") or 0)
        self.unaligned = max(self.unaligned, int(saved.get("unaligned") or 0))

    def meta(self) -> dict[str, Any]:
        """Run metadata in the spirit of our ``.meta.json`` (TensorBoard keeps no status)."""
        ranks = self.ranks
        return {
            "name": self.path.name,
            "status": None,
            "source_format": "tensorboard",
            "source": str(self.path),
            "ranks": ranks,
            "world_size": max(ranks) + 1 if ranks else 0,
            "start_time": self.first_wall_time,
            "last_event_time": self.last_wall_time,
            "last_write": self.last_write,
            "config": mask_config_texts(self.texts),  # paths and credentials masked, as ours
            "event_files": len(self._files),
            "unaligned_sample_values": self.unaligned,
            "bad_step_values": sum(self.bad_steps.values()),
        }

    # ------------------------------------------------------------------ discovery
    def _discover(self) -> None:
        if not self.path.is_dir():
            raise FileNotFoundError(f"TensorBoard run directory {self.path} is gone (or is not a directory)")
        stats: dict[str, os.stat_result] = {}
        found = self._scan(stats)
        self._stats = stats
        self.total_bytes = sum(st.st_size for st in stats.values())
        for gone in set(self._files) - {path for path, _, _ in found}:
            if self._files[gone].offset:
                raise EventFilesReplaced(gone, "is gone")
            del self._files[gone]
        new = [item for item in found if item[0] not in self._files]
        # Files directly in a rank directory are its segments, numbered in name (= creation time) order;
        # add_scalars files in subdirectories join the segment they were created in.
        new.sort(key=lambda item: (bool(item[2]), item[1], _stamp(item[0]), item[0]))
        for path, rank, subdir in new:
            if subdir:
                seg = self._segment_of(rank, path)
            else:
                segments = self._main_files.setdefault(rank, [])
                seg = len(segments) + 1
                segments.append((_stamp(path), seg))
            self._files[path] = _File(path=path, rank=rank, subdir=subdir, seg=seg)

    def _scan(self, stats: dict[str, os.stat_result]) -> list[tuple[str, int, str]]:
        """Event files under the run: (path, rank, subdirectory inside the rank directory); each file's
        stat goes into ``stats`` (one ``lstat`` a file, from the directory listing)."""
        root = str(self.path)
        own = _RANK_DIR.match(self.path.name)
        direct_rank = int(own.group(1)) if own else 0
        found: list[tuple[str, int, str]] = []
        rank_dirs: list[tuple[str, int]] = []
        other_dirs: list[str] = []
        with os.scandir(root) as entries:
            for entry in entries:
                if entry.name.startswith(".") or entry.is_symlink():
                    continue  # like discovery: no hidden entries, never follow a link out of the run
                if entry.is_dir():
                    match = _RANK_DIR.match(entry.name)
                    if match:
                        rank_dirs.append((entry.path, int(match.group(1))))
                    else:
                        other_dirs.append(entry.path)
                elif is_event_file(entry.name) and _stat_into(entry, stats):
                    found.append((entry.path, direct_rank, ""))
        if found:  # events written into the root itself: its other subdirectories are add_scalars series
            for directory in other_dirs:
                _walk(directory, os.path.basename(directory), direct_rank, found, stats)
        for directory, rank in rank_dirs:
            _walk(directory, "", rank, found, stats)
        newest = max((st.st_mtime for st in stats.values()), default=0.0)
        self.last_write = max(self.last_write or 0.0, newest) or None
        return found

    def _segment_of(self, rank: int, path: str) -> int:
        """An add_scalars file belongs to the newest main file created before (or with) it."""
        stamp = _stamp(path)
        segments = [seg for file_stamp, seg in self._main_files.get(rank, []) if file_stamp <= stamp]
        return max(segments, default=1)

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(message)

    def _newest_per_directory(self) -> dict[str, str]:
        """The newest (last by name) event file of each directory."""
        newest: dict[str, str] = {}
        for path in self._files:
            directory = os.path.dirname(path)
            if path > newest.get(directory, ""):
                newest[directory] = path
        return newest

    # ------------------------------------------------------------------ reading
    def _read(self, state: _File, budget: int | None) -> tuple[list[_Events], int]:
        """New events of one file from its byte offset: (its scalars as rows-to-be, records read).

        The file is mapped and decoded :data:`SCAN_WINDOW` bytes at a time, so memory stays bounded
        whatever its size; a damaged record (a length of 0, as in a sparse file's zeros, or past any
        record) ends the reading of that file with one warning.
        """
        out: list[_Events] = []
        total = 0
        if self._unchanged(state):
            return out, 0
        try:
            with open_regular(state.path, root=self.path) as (fd, st):
                self.opened += 1
                size = st.st_size
                if state.offset and state.inode is not None:  # (a file resumed from its cache file was checked)
                    self._check_same(state, fd, st)
                if size <= state.offset:
                    state.read_as = identity(st)
                    return out, 0
                with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as mapped:
                    full = np.frombuffer(mapped, np.uint8)
                    try:
                        while state.offset < size and (budget is None or total < budget):
                            stop = min(size, state.offset + max(SCAN_WINDOW, record_span(full, state.offset)))
                            found = scan(full[:stop], state.offset, None if budget is None else budget - total)
                            if found.n_records:
                                out.append(self._events(state, found))
                            state.offset = found.end
                            total += found.n_records
                            self.n_events += found.n_records
                            if found.damaged:
                                state.done = True
                                self._warn_once(
                                    state.path,
                                    f"TensorBoard event file {state.path} is damaged at byte {found.end:,}: "
                                    "the records after it are not read",
                                )
                                break
                            if not found.n_records:
                                break  # a record cut short at the end: "not yet"
                    finally:
                        del full
                self._note_read(state, fd, st, stopped=budget is not None and total >= budget)
        except FileNotFoundError:
            return out, total
        except (OSError, ValueError) as exc:  # unsafe, vanished or unreadable: the other files go on
            self._warn_once(state.path, f"cannot read TensorBoard event file {state.path}: {exc}")
        return out, total

    def _unchanged(self, state: _File) -> bool:
        """Whether the file is as it was when last read to its end (by its stat at this listing): not opened."""
        st = self._stats.get(state.path)
        return st is not None and state.read_as is not None and identity(st) == state.read_as

    @staticmethod
    def _check_same(state: _File, fd: int, st: os.stat_result) -> None:
        """Raise :class:`EventFilesReplaced` unless the open file is the one read so far (inode, length, bytes)."""
        if (st.st_ino, st.st_dev) != state.inode:
            raise EventFilesReplaced(state.path, "was replaced by another file")
        if st.st_size < state.offset:
            raise EventFilesReplaced(state.path, f"shrank below the {state.offset:,} bytes read")
        if os.pread(fd, len(state.head), 0) != state.head or (
            os.pread(fd, len(state.window), state.offset - len(state.window)) != state.window
        ):
            raise EventFilesReplaced(state.path, "was rewritten")

    @staticmethod
    def _note_read(state: _File, fd: int, st: os.stat_result, stopped: bool) -> None:
        """Remember what the file read is (to know it later) and, unless the read stopped early, its stat."""
        state.inode = (st.st_ino, st.st_dev)
        if len(state.head) < CHECK_BYTES:
            state.head = os.pread(fd, min(state.offset, CHECK_BYTES), 0)
        low = max(state.offset - CHECK_BYTES, 0)
        state.window = os.pread(fd, state.offset - low, low)
        state.read_as = None if stopped else identity(st)

    def _events(self, state: _File, found: ScanResult) -> _Events:
        """The scan's scalars (fast ones and protobuf-decoded ones, in file order) as rows of the rank."""
        tags = list(found.tags)
        walls, steps, tag_ids, values, orders = [found.wall], [found.step], [found.tag], [found.value], [found.order]
        extra_wall: list[float] = []
        slow: list[tuple[int, float, int, int, float]] = []
        for order, payload in found.others:
            try:
                event = self._event_class.FromString(payload)
            except Exception:  # noqa: BLE001 - a damaged record is skipped, never fatal
                self.damaged += 1
                continue
            wall = float(event.wall_time)
            extra_wall.append(wall)
            for tag, number in self._scalars(state, event):
                if tag not in tags:
                    tags.append(tag)
                slow.append((order, wall, int(event.step), tags.index(tag), number))
        if slow:
            o, w, st, tg, v = (np.array(column) for column in zip(*slow, strict=True))
            orders.append(o.astype(np.int64))
            walls.append(w.astype(np.float64))
            steps.append(st.astype(np.int64))
            tag_ids.append(tg.astype(np.int32))
            values.append(v.astype(np.float64))
        order = np.concatenate(orders)
        by_order = np.argsort(order, kind="stable")
        wall = np.concatenate(walls)[by_order]
        self._note_walls(wall, extra_wall)
        return self._rows(
            state,
            wall,
            np.concatenate(steps)[by_order],
            np.concatenate(tag_ids)[by_order],
            np.concatenate(values)[by_order],
            tags,
        )

    def _note_walls(self, wall: np.ndarray, extra: list[float]) -> None:
        times = np.concatenate([wall, np.asarray(extra, np.float64)])
        times = times[np.isfinite(times)]
        if not len(times):
            return
        low, high = float(times.min()), float(times.max())
        self.first_wall_time = low if self.first_wall_time is None else min(self.first_wall_time, low)
        self.last_wall_time = high if self.last_wall_time is None else max(self.last_wall_time, high)

    def _scalars(self, state: _File, event: Any) -> list[tuple[str, float]]:
        """(tag, value) of each scalar of a protobuf-decoded event; text summaries are kept aside."""
        if not event.HasField("summary"):
            return []  # file_version, graph, session_log, ...
        found: list[tuple[str, float]] = []
        for value in event.summary.value:
            kind = value.WhichOneof("value")
            if kind == "simple_value":
                number: float | None = shortest_f32(value.simple_value)
            elif kind == "tensor":
                if value.metadata.plugin_data.plugin_name == "text" or value.tensor.string_val:
                    self._text(state, value)
                    continue
                number = _tensor_scalar(value.tensor)
            else:
                continue  # histograms, images, audio: not scalars
            if number is not None:
                found.append((value.tag, number))
        return found

    def _rows(
        self, state: _File, wall: np.ndarray, step: np.ndarray, tag_id: np.ndarray, value: np.ndarray, tags: list[str]
    ) -> _Events:
        """Each event's row (its step, or for a "vs samples" value the step it belongs to) and column."""
        n = len(step)
        target = step.copy()
        names: list[str] = []
        name_id = np.empty(n, np.int32)
        first_wins = np.zeros(n, bool)
        samples = np.zeros(n, bool)
        keep = np.ones(n, bool)
        kinds = [self._tag_kind(state, tag) for tag in tags]
        is_batch_size = np.isin(tag_id, [i for i, tag in enumerate(tags) if tag == "batch-size" and not state.subdir])
        # Per tag: its events (one sort of all of them) and its column; a whole-array pass only for the
        # few tags that need one ("vs samples", a unit to convert): 1,000 tags cost one sort, not 1,000 passes.
        index: dict[str, int] = {}
        column_of = np.zeros(len(tags), np.int32)
        last_steps: dict[str, int] = {}
        for i, ((name, base, scale), at) in enumerate(zip(kinds, _positions(tag_id, len(tags)), strict=True)):
            if not len(at):
                continue
            if base is not None or scale != 1.0:
                mine = np.zeros(n, bool)
                mine[at] = True
                if base is not None:
                    first_wins |= mine
                    samples |= mine
                    aligned = self._align(state, base, tags, tag_id, step, value, is_batch_size, mine)
                    keep &= ~(mine & (aligned < 0))
                    self.unaligned += int(np.count_nonzero(mine & (aligned < 0)))
                    target = np.where(mine, aligned, target)
                if scale != 1.0:
                    value = np.where(mine, value / scale, value)
            column_of[i] = index.setdefault(name, len(names))
            if column_of[i] == len(names):
                names.append(name)
            if base is None and not state.subdir:  # what the next poll's alignment starts from (set below:
                last_steps[tags[i]] = int(step[at[-1]])  # this poll's alignment starts from the previous one's)
        state.last_step.update(last_steps)
        name_id[:] = column_of[tag_id]
        if is_batch_size.any():
            state.batch_size = float(value[is_batch_size][-1])
        bad = keep & ((target < 0) | (target >= STEP_LIMIT))
        if bad.any():
            self.bad_steps[state.rank] = self.bad_steps.get(state.rank, 0) + int(np.count_nonzero(bad))
        keep &= ~bad
        return _Events(
            seg=state.seg,
            target=target[keep],
            wall=wall[keep],
            name_id=name_id[keep],
            value=value[keep],
            sample_step=np.where(samples, step, -1)[keep],
            first_wins=first_wins[keep],
            names=names,
        )

    def _tag_kind(self, state: _File, tag: str) -> tuple[str, str | None, float]:
        """(our column, the base tag of a "vs samples" tag or None, divisor into our unit)."""
        if state.subdir:
            return subdir_metric_name(state.subdir, tag), None, 1.0
        base = samples_base(tag)
        if base is not None:
            return metric_name(base), base, unit_divisor(base)
        return metric_name(tag), None, unit_divisor(tag)

    @staticmethod
    def _align(
        state: _File,
        base: str,
        tags: list[str],
        tag_id: np.ndarray,
        step: np.ndarray,
        value: np.ndarray,
        is_batch_size: np.ndarray,
        mine: np.ndarray,
    ) -> np.ndarray:
        """The step of each "vs samples" value (-1 where none): MindFormers writes it at ``step * gbs``.

        The ``batch-size`` written just before makes ``samples / batch_size`` exact; without it, the
        step of the latest plain ``base`` value (written just before) is used.
        """
        n = len(step)
        index = np.arange(n)
        last_bs = np.maximum.accumulate(np.where(is_batch_size, index, -1))
        size = np.where(
            last_bs >= 0, value[np.maximum(last_bs, 0)], np.nan if state.batch_size is None else state.batch_size
        )
        with np.errstate(invalid="ignore", divide="ignore"):
            usable = (
                np.isfinite(size)
                & (size >= 1)
                & (np.fmod(step, np.where(np.isfinite(size) & (size >= 1), size, 1)) == 0)
            )
            by_size = np.where(usable, step // np.where(usable, size, 1), -1).astype(np.int64)
        base_ids = [i for i, tag in enumerate(tags) if tag == base]
        is_base = np.isin(tag_id, base_ids)
        last_base = np.maximum.accumulate(np.where(is_base, index, -1))
        before = state.last_step.get(base, -1)
        by_base = np.where(last_base >= 0, step[np.maximum(last_base, 0)], before)
        return np.where(mine, np.where(usable, by_size, by_base), -1)

    def _text(self, state: _File, value: Any) -> None:
        if not value.tensor.string_val:
            return
        tag = value.tag[: -len(TEXT_SUFFIX)] if value.tag.endswith(TEXT_SUFFIX) else value.tag
        if state.rank == min(self.ranks, default=state.rank) or tag not in self.texts:
            self.texts[tag] = value.tensor.string_val[0].decode("utf-8", "replace")


@dataclass
class _Events:
    """One file's new scalar values, each with the row (``seg``, ``target`` step) and column it goes to."""

    seg: int
    target: np.ndarray  # int64
    wall: np.ndarray  # float64
    name_id: np.ndarray  # int32 into names
    value: np.ndarray  # float64, in our units
    sample_step: np.ndarray  # int64: the samples count of a "vs samples" value, else -1
    first_wins: np.ndarray  # bool: a "vs samples" value does not replace a value its row already has
    names: list[str]


def _batch(rank: int, parts: list[_Events]) -> Batch:
    """The rows of a rank's new values: one per (seg, step), ``t`` the wall time of its first value."""
    seg = np.concatenate([np.full(len(p.target), p.seg, np.int64) for p in parts])
    target = np.concatenate([p.target for p in parts])
    wall = np.concatenate([p.wall for p in parts])
    key = seg * STEP_LIMIT + target  # seg < 2**23: fits int64
    rows, first, row_of = np.unique(key, return_index=True, return_inverse=True)
    n = len(rows)
    batch = Batch(
        step=rows % STEP_LIMIT,
        seg=rows // STEP_LIMIT,
        rank=np.full(n, rank, np.int64),
        t=wall[first],
    )
    start = 0
    samples_rows: list[np.ndarray] = []
    samples_values: list[np.ndarray] = []
    for part in parts:
        end = start + len(part.target)
        part_rows = row_of[start:end]
        for name, mine in zip(part.names, _positions(part.name_id, len(part.names)), strict=True):
            if not len(mine):
                continue
            values, logged = batch.floats.get(name) or (np.full(n, np.nan), np.zeros(n, bool))
            where, got, first_only = part_rows[mine], part.value[mine], part.first_wins[mine]
            late = first_only & logged[where]  # a "vs samples" value under a value already there: dropped
            where, got = where[~late], got[~late]
            order = np.arange(len(where))
            # last value wins, except that "vs samples" values keep the first one
            pick = np.where(first_only[~late], -order, order)
            chosen = np.argsort(pick, kind="stable")
            values[where[chosen]] = got[chosen]
            logged[where] = True
            batch.floats[name] = (values, logged)
        has_samples = part.sample_step >= 0
        samples_rows.append(part_rows[has_samples])
        samples_values.append(part.sample_step[has_samples].astype(np.float64))
        start = end
    if samples_rows and sum(len(r) for r in samples_rows):
        values, logged = np.full(n, np.nan), np.zeros(n, bool)
        values[np.concatenate(samples_rows)] = np.concatenate(samples_values)
        logged[np.concatenate(samples_rows)] = True
        batch.floats["samples"] = (values, logged)
    return batch


def _positions(ids: np.ndarray, count: int) -> list[np.ndarray]:
    """For each id in ``range(count)``, where it occurs in ``ids`` (ascending): one sort, not a pass per id
    (a run with 1,000 tags compared every event 1,000 times)."""
    order = np.argsort(ids, kind="stable")
    bounds = np.searchsorted(ids[order], np.arange(count + 1))
    return [order[lo:hi] for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)]


def _records(batch: Batch) -> list[dict[str, Any]]:
    """A batch as records of our format (what ``import-tb`` writes); whole numbers of integer keys as int."""
    columns = [(name, values.tolist(), logged.tolist()) for name, (values, logged) in batch.floats.items()]
    out: list[dict[str, Any]] = []
    steps, segs, ranks, times = batch.step.tolist(), batch.seg.tolist(), batch.rank.tolist(), batch.t.tolist()
    for row in range(len(steps)):
        record: dict[str, Any] = {"step": steps[row], "t": times[row], "rank": ranks[row], "seg": segs[row]}
        for name, values, logged in columns:
            if logged[row]:
                value = values[row]
                record[name] = (
                    int(value) if name in _INTEGER_KEYS and math.isfinite(value) and value == int(value) else value
                )
        out.append(record)
    return out


def _stat_into(entry: os.DirEntry[str], stats: dict[str, os.stat_result]) -> bool:
    """Note a listed file's stat (not following links); False when it vanished meanwhile."""
    try:
        stats[entry.path] = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return True


def _walk(
    directory: str, subdir: str, rank: int, found: list[tuple[str, int, str]], stats: dict[str, os.stat_result]
) -> None:
    """The event files under ``directory`` (``subdir``: its path inside the rank directory, "" for the rank
    directory itself); hidden entries and links are skipped, directory links never followed."""
    try:
        with os.scandir(directory) as listing:
            entries = list(listing)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(".") or entry.is_symlink():
            continue
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_dir:
            _walk(entry.path, f"{subdir}/{entry.name}" if subdir else entry.name, rank, found, stats)
        elif is_event_file(entry.name) and _stat_into(entry, stats):
            found.append((entry.path, rank, subdir))


def _stamp(path: str) -> int:
    match = _STAMP.search(os.path.basename(path))
    return int(match.group(1)) if match else 0
