"""A MindFormers job's own log as live sources of the store: one per rank, each tailing its log file.

A job already running writes ``output/log/rank_N/info.log`` and, under msrun,
``output/msrun_log/worker_N.log`` (MFLossMonitor's or 2.x's lines, parsed by
:mod:`monitor_cb.importers.mindformers_log`; where they are: :mod:`monitor_cb.importers.mindformers_layout`).
Each rank's source first reads the rotated files (``info.log.5`` ... ``info.log.1``, oldest first),
then follows its log with the same :class:`~monitor_cb.ingest.tail.FileTail` as our JSONL files.
When the log is rotated between two polls, once or several times, the lines written to it before
the rotation are read from the rotated file that holds them (recognised by its first bytes), then
every file rotated after it, then the new log; when it is truncated in place, reading goes on from
its start. The rows already read are kept either way: the job goes on, and so do its steps.

A rotated file is read a slice at a time (never whole in memory). One that is not a regular file,
links out of the log root, is larger than :data:`ROTATED_CAP` or sparse (a log is never sparse) is
not read and is named in the store's "skipped" notes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from monitor_cb.importers.mindformers_log import (
    LOG_NAME,
    SOURCE_FORMAT,
    LogState,
    parse_lines,
    parse_log,
    rank_logs,
    read_file_lines,
    rotated_logs,
    run_name,
)
from monitor_cb.ingest.lines import DEFAULT_LINE_CAP, BadLine
from monitor_cb.ingest.source import TableSource
from monitor_cb.ingest.tail import Chunk, FileTail
from monitor_cb.rootfile import UnsafeFileError, open_regular

MINDFORMERS_LOG = SOURCE_FORMAT  # the RunDir kind
WHOLE_MIN_BYTES = 8 << 20  # a first read this large is parsed at once from the memory map
ROTATED_CAP = 1 << 30  # a rotated file larger than this (MindFormers rotates at 50 MB) is not read
ROTATED_SLICE = 16 << 20  # a rotated file is parsed this many bytes at a time
SPARSE_MIN = 64 << 20  # a rotated file this large with under half its bytes on disk is sparse
_HEAD = 512  # bytes that identify a log file after it is renamed


class MindFormersLogSource(TableSource):
    """One rank's log file (and its rotated predecessors) read into a rank table."""

    def __init__(self, log: Path, rank: int, root: Path | None, line_cap: int = DEFAULT_LINE_CAP) -> None:
        super().__init__(rank)
        log = log / LOG_NAME if log.is_dir() else log  # (a rank folder names its info.log)
        self.rank_dir = log.parent
        self.root = root
        self.path = log
        self.line_cap = line_cap
        self.meta_path = log.parent / ".no-metadata"  # not ours: the status comes from activity and the log
        self.tail = FileTail(self.path, root, line_cap)
        self.state = LogState()
        self.skipped: dict[str, str] = {}  # rotated files not read, and why (the store's "skipped" notes)
        self._backlog_done = False
        self._head = b""  # the first bytes of the log being followed
        self._read_to = 0  # how far into it the lines were read

    def poll(self) -> int:
        with self.lock:
            taken = 0
            if not self._backlog_done:
                self._backlog_done = True
                for path in rotated_logs(self.path):
                    taken += self._read_rotated(path, 0)
            if self.tail.offset == 0:
                taken += self.tail.read_whole(self._parse_whole, WHOLE_MIN_BYTES) or 0
            for item in self.tail.poll():
                if not isinstance(item, Chunk):
                    self._count_bad([BadLine(item.offset, f"line longer than {self.tail.line_cap} bytes")])
                    continue
                if item.reset:
                    taken += self._rotated_rest()
                if item.offset == 0:
                    self._head = item.data[:_HEAD]
                taken += self._take(item.data, item.offset)
                self._read_to = item.offset + len(item.data)
            self.last_poll = time.time()
            return taken

    def _parse_whole(self, path: str, mapped: Any, size: int) -> int | None:
        """A large log read at once from its memory map (a job attached to after hours)."""
        lines = read_file_lines(path, mapped, size)  # polars reads the file itself
        if lines is not None:
            parsed = parse_lines(lines, self.state, self.table.rank)
        else:  # (shorter than it was mapped: truncated meanwhile)
            parsed = parse_log(mapped[:size], self.state, self.table.rank)
        self._count_unparsed(parsed.unparsed_offsets, 0)
        self._head, self._read_to = bytes(mapped[:_HEAD]), size
        return self.table.append(parsed.batch) if len(parsed.batch) else 0

    def _rotated_rest(self) -> int:
        """The lines the log got after the last poll and before it was rotated away, then every file
        rotated after that one (two rotations between two polls leave a whole file unread)."""
        read_to, head = self._read_to, self._head
        self._read_to, self._head = 0, b""
        if not head:
            return 0
        rotated = rotated_logs(self.path)  # oldest first: ... info.log.2, info.log.1
        ours = next((i for i, path in enumerate(rotated) if self._starts_with(path, head)), None)
        if ours is None:
            return 0  # truncated in place, or rotated past the last kept file: what is gone is gone
        taken = self._read_rotated(rotated[ours], read_to)
        for path in rotated[ours + 1 :]:
            taken += self._read_rotated(path, 0)
        return taken

    def _starts_with(self, path: Path, head: bytes) -> bool:
        try:
            with open_regular(path, root=self.root) as (fd, _):
                return os.pread(fd, len(head), 0) == head
        except (OSError, UnsafeFileError):
            return False

    def _read_rotated(self, path: Path, start: int) -> int:
        """A rotated file's complete lines from byte ``start``, a slice at a time."""
        taken = 0
        try:
            for offset, data in self._rotated_slices(path, start):
                taken += self._take(data, offset)
        except UnsafeFileError as exc:
            self.skipped[str(path)] = exc.reason
        except OSError:
            pass  # gone meanwhile (rotated again)
        return taken

    def _rotated_slices(self, path: Path, start: int) -> Iterator[tuple[int, bytes]]:
        with open_regular(path, root=self.root) as (fd, st):
            if st.st_size > ROTATED_CAP:
                raise UnsafeFileError(path, f"holds {st.st_size:,} bytes, over the {ROTATED_CAP:,}-byte cap")
            on_disk = getattr(st, "st_blocks", 0) * 512
            if st.st_size >= SPARSE_MIN and on_disk < st.st_size // 2:
                raise UnsafeFileError(path, f"is sparse ({st.st_size:,} bytes, {on_disk:,} on disk): not a log")
            offset, end = start, st.st_size
            while offset < end:
                data = os.pread(fd, min(ROTATED_SLICE, end - offset), offset)
                if not data:
                    return
                cut = data.rfind(b"\n") + 1
                if cut == 0:  # no newline in a whole slice: an over-long line, skipped to its end
                    self._count_bad([BadLine(offset, f"line longer than {self.line_cap} bytes")])
                    nl = _next_newline(fd, offset + len(data), end)
                    offset = nl if nl is not None else end
                    continue
                yield offset, data[:cut]
                offset += cut

    def _take(self, data: bytes, offset: int) -> int:
        if not data:
            return 0
        parsed = parse_log(data, self.state, self.table.rank)
        self._count_unparsed(parsed.unparsed_offsets, offset)
        return self.table.append(parsed.batch) if len(parsed.batch) else 0

    def _count_unparsed(self, rows: list[int], offset: int) -> None:
        if rows:
            reason = "a step line without its epoch and step, or with a step out of range"
            self._count_bad([BadLine(offset, reason) for _ in rows])


def _next_newline(fd: int, offset: int, end: int) -> int | None:
    """The offset just after the next newline at or past ``offset`` (None: none before ``end``)."""
    while offset < end:
        data = os.pread(fd, min(1 << 20, end - offset), offset)
        if not data:
            return None
        at = data.find(b"\n")
        if at >= 0:
            return offset + at + 1
        offset += len(data)
    return None


class MindFormersLogGroup:
    """The rank sources of one MindFormers log directory (``output/log``, ``output/msrun_log`` or one ``rank_N``)."""

    def __init__(self, path: Path, root: Path | None = None, line_cap: int = DEFAULT_LINE_CAP) -> None:
        self.path = path
        self.root = root
        self.line_cap = line_cap
        self.sources: dict[int, MindFormersLogSource] = {}
        self._meta: tuple[tuple[Any, ...], dict[str, Any]] = ((), {})

    def poll(self) -> int:
        """Find ranks that appeared, and read every rank's new lines; returns the records taken."""
        for rank, log in rank_logs(self.path, self.root).items():
            if rank not in self.sources:
                self.sources[rank] = MindFormersLogSource(log, rank, self.root, self.line_cap)
        return sum(source.poll() for source in list(self.sources.values()))

    @property
    def meta(self) -> dict[str, Any]:
        """Rank 0's (else the first rank's) view: epochs, steps, total steps, finished or not, starting
        (lines but no step line yet), and the log's own first and last time stamps."""
        first = self.sources.get(0) or next(iter(self.sources.values()), None)
        said = first.state.meta() if first is not None else {}
        if first is not None:
            state = first.state
            if not any(source.state.stepped for source in self.sources.values()):
                said["starting"] = True
            if state.first_t is not None:
                said["start_time"] = state.first_t
            if state.last_t is not None:
                said["log_end_time"] = state.last_t
        key = tuple(sorted(said.items()))
        if key != self._meta[0] or not self._meta[1]:  # the same dict while nothing changed (the store's cache key)
            self._meta = (key, {"name": run_name(self.path), **said})
        return self._meta[1]
