"""A MindFormers log directory as live sources of the store: one per rank, each tailing ``info.log``.

A job already running writes ``output/log/rank_N/info.log`` (MFLossMonitor's lines, parsed by
:mod:`monitor_cb.importers.mindformers_log`). Each rank's source first reads the rotated files
(``info.log.5`` ... ``info.log.1``, oldest first, through :func:`monitor_cb.rootfile.read_capped`),
then follows ``info.log`` with the same :class:`~monitor_cb.ingest.tail.FileTail` as our JSONL
files. When ``info.log`` is rotated between two polls, the lines written to it before the rotation
are read from ``info.log.1`` (recognised by its first bytes) before the new file; when it is
truncated in place, reading goes on from its start. The rows already read are kept either way:
the job goes on, and so do its steps.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from monitor_cb.importers.mindformers_log import (
    LOG_NAME,
    SOURCE_FORMAT,
    LogState,
    parse_log,
    rank_dirs,
    rotated_logs,
    run_name,
)
from monitor_cb.ingest.lines import DEFAULT_LINE_CAP, BadLine
from monitor_cb.ingest.source import TableSource
from monitor_cb.ingest.tail import Chunk, FileTail
from monitor_cb.rootfile import UnsafeFileError, read_capped

MINDFORMERS_LOG = SOURCE_FORMAT  # the RunDir kind
WHOLE_MIN_BYTES = 8 << 20  # a first read this large is parsed at once from the memory map
ROTATED_CAP = 1 << 30  # a rotated file larger than this (MindFormers rotates at 50 MB) is skipped
_HEAD = 512  # bytes that identify a log file after it is renamed


class MindFormersLogSource(TableSource):
    """One rank's ``info.log`` (and its rotated predecessors) read into a rank table."""

    def __init__(self, rank_dir: Path, rank: int, root: Path | None, line_cap: int = DEFAULT_LINE_CAP) -> None:
        super().__init__(rank)
        self.rank_dir = rank_dir
        self.root = root
        self.path = rank_dir / LOG_NAME
        self.meta_path = rank_dir / ".no-metadata"  # not ours: the status comes from activity and the log
        self.tail = FileTail(self.path, root, line_cap)
        self.state = LogState()
        self._backlog_done = False
        self._head = b""  # the first bytes of the info.log being followed
        self._read_to = 0  # how far into it the lines were read

    def poll(self) -> int:
        with self.lock:
            taken = 0
            if not self._backlog_done:
                self._backlog_done = True
                for path in rotated_logs(self.rank_dir):
                    data = self._read_file(path)
                    taken += self._take(data[: data.rfind(b"\n") + 1], 0)
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
        """A large ``info.log`` read at once from its memory map (a job attached to after hours)."""
        parsed = parse_log(mapped[:size], self.state, self.table.rank)  # one copy of the bytes
        self._count_unparsed(parsed.unparsed_offsets, 0)
        self._head, self._read_to = bytes(mapped[:_HEAD]), size
        return self.table.append(parsed.batch) if len(parsed.batch) else 0

    def _rotated_rest(self) -> int:
        """The lines ``info.log`` got after the last poll and before it became ``info.log.1``."""
        read_to, head = self._read_to, self._head
        self._read_to, self._head = 0, b""
        if not head:
            return 0
        data = self._read_file(self.rank_dir / f"{LOG_NAME}.1")
        if not data.startswith(head) or len(data) <= read_to:
            return 0  # truncated in place, or rotated twice: what is lost is lost
        rest = data[read_to:]
        return self._take(rest[: rest.rfind(b"\n") + 1], read_to)

    def _read_file(self, path: Path) -> bytes:
        try:
            return read_capped(path, ROTATED_CAP, root=self.root)
        except UnsafeFileError as exc:
            self._count_bad([BadLine(0, str(exc)[:300])])
        except OSError:
            pass  # gone meanwhile (rotated again)
        return b""

    def _take(self, data: bytes, offset: int) -> int:
        if not data:
            return 0
        parsed = parse_log(data, self.state, self.table.rank)
        self._count_unparsed(parsed.unparsed_offsets, offset)
        return self.table.append(parsed.batch) if len(parsed.batch) else 0

    def _count_unparsed(self, rows: list[int], offset: int) -> None:
        if rows:
            reason = "an MFLossMonitor line without its epoch and step"
            self._count_bad([BadLine(offset, reason) for _ in rows])


class MindFormersLogGroup:
    """The rank sources of one MindFormers log directory (``output/log`` or one ``rank_N``)."""

    def __init__(self, path: Path, root: Path | None = None, line_cap: int = DEFAULT_LINE_CAP) -> None:
        self.path = path
        self.root = root
        self.line_cap = line_cap
        self.sources: dict[int, MindFormersLogSource] = {}
        self._meta: tuple[tuple[Any, ...], dict[str, Any]] = ((), {})

    def poll(self) -> int:
        """Find ranks that appeared, and read every rank's new lines; returns the records taken."""
        for rank, rank_dir in rank_dirs(self.path).items():
            if rank not in self.sources:
                self.sources[rank] = MindFormersLogSource(rank_dir, rank, self.root, self.line_cap)
        return sum(source.poll() for source in list(self.sources.values()))

    @property
    def meta(self) -> dict[str, Any]:
        """Rank 0's (else the first rank's) view: epochs, steps, total steps, finished or not."""
        first = self.sources.get(0) or next(iter(self.sources.values()), None)
        said = first.state.meta() if first is not None else {}
        key = tuple(sorted(said.items()))
        if key != self._meta[0] or not self._meta[1]:  # the same dict while nothing changed (the store's cache key)
            self._meta = (key, {"name": run_name(self.path), **said})
        return self._meta[1]
