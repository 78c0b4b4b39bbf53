"""Incremental, full-resolution reader of TensorBoard event directories (MindFormers' ``tensorboard_dir``).

MindFormers writes scalars with tensorboardX into ``<tensorboard_dir>/rank_<id>/events.out.tfevents.*``.
:class:`TensorBoardRun` reads such a directory as ONE run whose ``rank_*`` subdirectories are its
ranks, and turns the events into records of our format (``docs/FORMAT.md``), keyed by our metric
names (``docs/TENSORBOARD.md``, :mod:`monitor_cb.importers.tags`)::

    run = TensorBoardRun("output/tensorboard")
    records = run.poll()        # everything so far: [{"step": 1, "t": ..., "rank": 0, "seg": 1, "loss": 2.3, ...}]
    records = run.poll()        # later: only what training appended since

Like TensorBoard's own ``directory_loader``, there is one loader per event file, each remembering where
it stopped; a half-written record at the end of a file is "not yet" and comes back complete on a later
poll. Unlike TensorBoard's multiplexer, nothing is sampled away: every scalar event is returned, NaN
and infinities as floats.

The event-file parser is the ``tensorboard`` package's ``event_file_loader`` (an optional dependency,
imported only when a run is read): without it, :class:`TensorBoardRun` raises
:class:`TensorBoardUnavailable` with :data:`TENSORBOARD_MISSING` as its message.
"""

from __future__ import annotations

import logging
import math
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monitor_cb.importers.tags import (
    TEXT_SUFFIX,
    convert,
    metric_name,
    samples_base,
    subdir_metric_name,
)
from monitor_cb.record import STEP_LIMIT

logger = logging.getLogger(__name__)

TENSORBOARD_MISSING = (
    "reading TensorBoard event files needs the optional 'tensorboard' package, which is not installed: "
    "run `pip install tensorboard` (TensorBoard runs are skipped until then)"
)

_RANK_DIR = re.compile(r"^rank_(\d+)$")
_STAMP = re.compile(r"tfevents\.(\d+)")
_F32 = struct.Struct("<f")


class TensorBoardUnavailable(ImportError):
    """The optional ``tensorboard`` package is missing; the message says how to install it."""


def load_event_file_loader() -> type:
    """The ``tensorboard`` package's raw event loader class, or :class:`TensorBoardUnavailable`."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
    except ImportError as exc:
        raise TensorBoardUnavailable(TENSORBOARD_MISSING) from exc
    return LegacyEventFileLoader


def tensorboard_available() -> bool:
    """Whether event files can be read here (the ``tensorboard`` package imports)."""
    try:
        load_event_file_loader()
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


def _shortest_f32(value: float) -> float:
    """The shortest decimal that is the same float32 (``0.10000000149`` -> ``0.1``).

    ``simple_value`` is a float32; printing its float64 widening would show noise digits.
    """
    if not math.isfinite(value):
        return value
    try:
        packed = _F32.pack(value)
        for digits in (6, 7, 8):
            candidate = float(f"{value:.{digits}g}")
            if _F32.pack(candidate) == packed:
                return candidate
    except (OverflowError, struct.error):
        pass
    return value


def _tensor_scalar(tensor: Any) -> float | None:
    """The number in a scalar ``TensorProto`` (TF2-style summaries), else None."""
    from tensorboard.util import tensor_util  # only reached with tensorboard installed

    try:
        array = tensor_util.make_ndarray(tensor)
    except Exception:  # noqa: BLE001 - an odd tensor is skipped, never fatal
        return None
    if array.size != 1 or array.dtype.kind not in "fiub":
        return None
    return float(array.reshape(-1)[0])


@dataclass
class _File:
    """One event file being followed, with the state needed to align its "vs samples" tags."""

    path: str
    rank: int
    subdir: str  # "" for a file directly in the rank directory, else the add_scalars series path
    seg: int
    loader: Any
    batch_size: float | None = None
    last_step: dict[str, int] = field(default_factory=dict)
    done: bool = False


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
        self._loader_class = load_event_file_loader()
        self.path = Path(path)
        self._files: dict[str, _File] = {}
        self._main_files: dict[int, list[tuple[int, int]]] = {}  # rank -> [(name stamp, seg)]
        self._warned: set[str] = set()
        self.texts: dict[str, str] = {}  # add_text summaries (MindFormers writes its config there)
        self.n_events = 0
        self.n_records = 0
        self.unaligned = 0  # "vs samples" values whose step could not be found (dropped)
        self.bad_steps: dict[int, int] = {}  # rank -> scalar values at a step outside 0..STEP_LIMIT-1 (dropped)
        self.first_wall_time: float | None = None
        self.last_wall_time: float | None = None
        self.last_write: float | None = None  # newest event-file mtime, Unix seconds

    # ------------------------------------------------------------------ public API
    @property
    def ranks(self) -> list[int]:
        """Ranks seen so far, sorted."""
        return sorted({state.rank for state in self._files.values()})

    @property
    def files(self) -> list[str]:
        """Event files followed so far."""
        return sorted(self._files)

    def poll(self, max_events: int | None = None) -> list[dict[str, Any]]:
        """Read what was appended since the last poll; new event files and rank directories included.

        Args:
            max_events: stop after about this many events (the rest comes on the next poll), to
                bound the work of one call on a large backlog. None reads everything there is.

        Returns:
            New records, sorted by ``(rank, seg, step)``.

        Raises:
            FileNotFoundError: the run directory itself is gone.
        """
        self._discover()
        out: dict[tuple[int, int, int], dict[str, Any]] = {}
        budget = max_events
        newest = self._newest_per_directory()
        for state in sorted(self._files.values(), key=lambda s: (s.rank, s.seg, s.subdir, s.path)):
            if state.done:
                continue
            if budget is not None and budget <= 0:
                break
            count = self._read(state, out, budget)
            if budget is not None:
                budget -= count
            elif count == 0 and newest[os.path.dirname(state.path)] != state.path:
                state.done = True  # a newer file in the same directory: this writer has moved on
        records = [out[key] for key in sorted(out)]
        self.n_records += len(records)
        return records

    def poll_by_rank(self, max_events: int | None = None) -> dict[int, list[dict[str, Any]]]:
        """:meth:`poll`, grouped by rank (what a per-rank table wants)."""
        grouped: dict[int, list[dict[str, Any]]] = {}
        for record in self.poll(max_events):
            grouped.setdefault(record["rank"], []).append(record)
        return grouped

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
            "config": dict(self.texts),
            "event_files": len(self._files),
            "unaligned_sample_values": self.unaligned,
            "bad_step_values": sum(self.bad_steps.values()),
        }

    # ------------------------------------------------------------------ discovery
    def _discover(self) -> None:
        if not self.path.is_dir():
            raise FileNotFoundError(f"TensorBoard run directory {self.path} is gone (or is not a directory)")
        found = self._scan()
        for gone in set(self._files) - {path for path, _, _ in found}:
            del self._files[gone]
        new = [item for item in found if item[0] not in self._files]
        # Files directly in a rank directory are its segments, numbered in name (= creation time) order;
        # add_scalars files in subdirectories join the segment they were created in.
        new.sort(key=lambda item: (bool(item[2]), item[1], _stamp(item[0]), item[0]))
        for path, rank, subdir in new:
            try:
                loader = self._loader_class(path)
            except Exception as exc:  # noqa: BLE001 - unreadable now; try again next poll
                self._warn_once(path, f"cannot open TensorBoard event file {path}: {exc}")
                continue
            if subdir:
                seg = self._segment_of(rank, path)
            else:
                segments = self._main_files.setdefault(rank, [])
                seg = len(segments) + 1
                segments.append((_stamp(path), seg))
            self._files[path] = _File(path=path, rank=rank, subdir=subdir, seg=seg, loader=loader)

    def _scan(self) -> list[tuple[str, int, str]]:
        """Event files under the run: (path, rank, subdirectory inside the rank directory)."""
        root = str(self.path)
        own = _RANK_DIR.match(self.path.name)
        direct_rank = int(own.group(1)) if own else 0
        found: list[tuple[str, int, str]] = []
        rank_dirs: list[tuple[str, int]] = []
        other_dirs: list[str] = []
        newest = self.last_write or 0.0
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
                elif is_event_file(entry.name):
                    found.append((entry.path, direct_rank, ""))
                    newest = max(newest, _mtime(entry.path))
        if found:  # events written into the root itself: its other subdirectories are add_scalars series
            for directory in other_dirs:
                newest = max(newest, self._walk(directory, root, direct_rank, found))
        for directory, rank in rank_dirs:
            newest = max(newest, self._walk(directory, directory, rank, found))
        self.last_write = newest or None
        return found

    @staticmethod
    def _walk(directory: str, rank_root: str, rank: int, found: list[tuple[str, int, str]]) -> float:
        newest = 0.0
        for dirpath, dirnames, filenames in os.walk(directory):  # does not follow directory links
            dirnames[:] = [name for name in dirnames if not name.startswith(".")]
            subdir = os.path.relpath(dirpath, rank_root)
            subdir = "" if subdir == "." else subdir.replace(os.sep, "/")
            for name in filenames:
                path = os.path.join(dirpath, name)
                if is_event_file(name) and not name.startswith(".") and not os.path.islink(path):
                    found.append((path, rank, subdir))
                    newest = max(newest, _mtime(path))
        return newest

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
    def _read(self, state: _File, out: dict[tuple[int, int, int], dict[str, Any]], budget: int | None) -> int:
        count = 0
        try:
            for event in state.loader.Load():
                count += 1
                self._apply(state, event, out)
                if budget is not None and count >= budget:
                    break
        except Exception as exc:  # noqa: BLE001 - a vanished or unreadable file must not stop the others
            self._warn_once(state.path, f"cannot read TensorBoard event file {state.path}: {exc}")
        self.n_events += count
        return count

    def _apply(self, state: _File, event: Any, out: dict[tuple[int, int, int], dict[str, Any]]) -> None:
        wall = float(event.wall_time)
        if self.first_wall_time is None or wall < self.first_wall_time:
            self.first_wall_time = wall
        if self.last_wall_time is None or wall > self.last_wall_time:
            self.last_wall_time = wall
        if not event.HasField("summary"):
            return  # file_version, graph, session_log, ...
        step = int(event.step)
        for value in event.summary.value:
            kind = value.WhichOneof("value")
            if kind == "simple_value":
                number: float | None = _shortest_f32(value.simple_value)
            elif kind == "tensor":
                if value.metadata.plugin_data.plugin_name == "text" or value.tensor.string_val:
                    self._text(state, value)
                    continue
                number = _tensor_scalar(value.tensor)
            else:
                continue  # histograms, images, audio: not scalars
            if number is not None:
                self._scalar(state, step, wall, value.tag, number, out)

    def _scalar(
        self,
        state: _File,
        step: int,
        wall: float,
        tag: str,
        number: float,
        out: dict[tuple[int, int, int], dict[str, Any]],
    ) -> None:
        base = None if state.subdir else samples_base(tag)
        target = step if base is None else self._align(state, base, step)
        if target is None:
            self.unaligned += 1
            return
        if not 0 <= target < STEP_LIMIT:  # as in our files: such a step would merge into another row
            self.bad_steps[state.rank] = self.bad_steps.get(state.rank, 0) + 1
            return
        if state.subdir:
            _record(out, state, step, wall)[subdir_metric_name(state.subdir, tag)] = number
            return
        if base is not None:
            record = _record(out, state, target, wall)
            record["samples"] = step
            record.setdefault(metric_name(base), convert(base, number))
            return
        _record(out, state, step, wall)[metric_name(tag)] = convert(tag, number)
        state.last_step[tag] = step
        if tag == "batch-size":
            state.batch_size = number

    @staticmethod
    def _align(state: _File, base: str, samples: int) -> int | None:
        """The step of a "vs samples" value: MindFormers writes it at ``step * global_batch_size``.

        The ``batch-size`` of the current step is written first, so ``samples / batch_size`` is exact;
        without it, the step of the latest plain ``base`` value (written just before) is used.
        """
        size = state.batch_size
        if size is not None and math.isfinite(size) and size >= 1 and samples % size == 0:
            return int(samples // size)
        return state.last_step.get(base)

    def _text(self, state: _File, value: Any) -> None:
        if not value.tensor.string_val:
            return
        tag = value.tag[: -len(TEXT_SUFFIX)] if value.tag.endswith(TEXT_SUFFIX) else value.tag
        if state.rank == min(self.ranks, default=state.rank) or tag not in self.texts:
            self.texts[tag] = value.tensor.string_val[0].decode("utf-8", "replace")


def _record(out: dict[tuple[int, int, int], dict[str, Any]], state: _File, step: int, wall: float) -> dict[str, Any]:
    key = (state.rank, state.seg, step)
    record = out.get(key)
    if record is None:
        record = out[key] = {"step": step, "t": wall, "rank": state.rank, "seg": state.seg}
    return record


def _stamp(path: str) -> int:
    match = _STAMP.search(os.path.basename(path))
    return int(match.group(1)) if match else 0


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
