"""Follow one growing file by byte offset: only new complete lines, nothing twice.

A poll is one ``stat`` when nothing changed. When something did, the file is opened
and checked against what was read before: same inode, not shorter than the offset,
and the same bytes at the start and just before the offset (inode numbers are
reused, so identity alone cannot tell a recreated file). Any mismatch means the file
was truncated or replaced: reading restarts at zero and the caller is told, so old
and new data are never mixed.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from monitor_cb.ingest.lines import DEFAULT_LINE_CAP
from monitor_cb.rootfile import UnsafeFileError, identity, open_regular

if TYPE_CHECKING:
    from monitor_cb.ingest.colcache import Fingerprint

T = TypeVar("T")

FINGERPRINT_BYTES = 4096
WHOLE_MIN_BYTES = 64 << 20  # a first read this large goes to polars as a file (no copy into Python)
READ_CHUNK = 256 << 20  # bytes handed to the parser at once; bounds memory on huge files


@contextlib.contextmanager
def _open_regular(path: Path, root: Path | None = None) -> Iterator[tuple[int, os.stat_result] | None]:
    """``path`` opened for reading through :func:`monitor_cb.rootfile.open_regular`, with its stat; None
    when it cannot be opened, is no regular file or leads out of ``root``.

    Opened non-blocking, so a FIFO put where a metrics file was never hangs the reader. The metrics
    file has no size cap: it is tailed by offset, in bounded chunks.
    """
    with contextlib.ExitStack() as stack:
        try:
            opened = stack.enter_context(open_regular(path, root=root))
        except OSError:  # UnsafeFileError included
            opened = None
        yield opened


def _hole_end(fd: int, offset: int, size: int) -> int:
    """Where the data after ``offset`` resumes (``offset`` itself when there is data there, or the file
    system cannot say): a 3 GB sparse file planted as a metrics file is skipped, not read as zeros."""
    seek_data = getattr(os, "SEEK_DATA", None)
    if seek_data is None:
        return offset
    try:
        return min(os.lseek(fd, offset, seek_data), size)
    except OSError as exc:
        return size if exc.errno == errno.ENXIO else offset  # ENXIO: nothing but a hole up to the end


def _by_descriptor(fd: int, path: Path) -> str:
    """A path that names the file open as ``fd`` itself (Linux: ``/proc/self/fd/N``), for a reader that
    opens by name (polars): the file checked is the file read, even if ``path`` is swapped for a FIFO or
    a link out of the root in between."""
    proc = f"/proc/self/fd/{fd}"
    return proc if os.path.exists(proc) else str(path)


@dataclass(frozen=True)
class Chunk:
    """Complete lines read from ``offset``; ``reset`` means the file restarted before them."""

    offset: int
    data: bytes
    reset: bool = False


@dataclass(frozen=True)
class Skipped:
    """An over-long line (no newline within the cap) skipped from ``offset``."""

    offset: int


class FileTail:
    """Byte-offset reader of one metrics file (not thread-safe: the owner holds a lock).

    Args:
        path: the file.
        root: reading is refused when ``path`` resolves outside this directory.
        line_cap: a partial line longer than this is skipped rather than buffered.
    """

    def __init__(self, path: Path, root: Path | None = None, line_cap: int = DEFAULT_LINE_CAP) -> None:
        self.path = path
        self.root = root
        self.line_cap = line_cap
        self.offset = 0
        self.size = 0  # file size at the last poll
        self.mtime = 0.0  # file mtime at the last poll (Unix s)
        self.resets = 0
        self.missing = False
        self.refused: str | None = None  # why the file is not read (a FIFO, a device, a link out of the root)
        self._signature: tuple[int, ...] | None = None
        self._ident: tuple[int, int] | None = None
        self._head = b""
        self._window = b""
        self._skipping = False

    @property
    def unread(self) -> int:
        """Bytes of the file (as of the last look) not read yet."""
        try:
            return max(os.stat(self.path).st_size - self.offset, 0)
        except OSError:
            return 0

    @property
    def pending(self) -> int:
        """Bytes after the last newline: a line still being written, or torn by a crash."""
        return max(self.size - self.offset, 0)

    def poll(self, limit: int | None = None) -> Iterator[Chunk | Skipped]:
        """Yield what is new since the last poll; nothing when the file did not change.

        ``limit``: stop after about this many bytes (a long first read in steps, with progress
        between them); the next poll goes on from there.
        """
        try:
            st = os.stat(self.path)
        except OSError:
            self.missing = True
            return
        self.missing = False
        signature = identity(st)
        if signature == self._signature:
            return
        with contextlib.ExitStack() as stack:
            try:
                fd, _ = stack.enter_context(open_regular(self.path, root=self.root))
            except UnsafeFileError as exc:
                self.refused = exc.reason  # nothing of it is read; the store names it in its notes
                return
            except OSError:
                return
            self.refused = None
            yield from self._read(fd, limit)

    def _read(self, fd: int, limit: int | None = None) -> Iterator[Chunk | Skipped]:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return
        if self.offset and not self._same_file(fd, st):
            self._restart()
            yield Chunk(0, b"", reset=True)
        self.size, self.mtime = st.st_size, st.st_mtime
        self._ident = (st.st_ino, st.st_dev)
        chunk = READ_CHUNK if limit is None else max(min(READ_CHUNK, limit), self.line_cap + 1)
        start = self.offset
        while self.offset < st.st_size:
            if limit is not None and self.offset - start >= limit:
                return  # the rest at the next poll (the signature stays old, so it comes)
            hole = _hole_end(fd, self.offset, st.st_size)
            if hole - self.offset > self.line_cap:  # a sparse file's hole: zeros, no newline; skipped unread
                skipped = self._skip_to(fd, hole)
                if skipped is not None:
                    yield skipped
                continue
            data = os.pread(fd, min(st.st_size - self.offset, chunk), self.offset)
            if not data:
                break
            item = self._consume(fd, data)
            if item is None:
                break
            yield item
        # Only now: a reader that stopped half-way must see the change again next poll.
        self._signature = identity(st)

    def _consume(self, fd: int, data: bytes) -> Chunk | Skipped | None:
        start = self.offset
        end = data.rfind(b"\n") + 1
        if end == 0:
            if len(data) <= self.line_cap and not self._skipping:
                return None  # a line still being written: "not yet"
            self._advance(fd, start + len(data))
            was_skipping, self._skipping = self._skipping, True
            return None if was_skipping else Skipped(start)
        if self._skipping:  # the rest of an over-long line, up to its newline
            cut = data.find(b"\n") + 1
            self._skipping = False
            self._advance(fd, start + cut)
            return Chunk(start + cut, b"") if cut == end else self._consume(fd, data[cut:])
        self._advance(fd, start + end)
        return Chunk(start, data if end == len(data) else data[:end])  # no 64 MB copy in the usual case

    def _skip_to(self, fd: int, offset: int) -> Skipped | None:
        """Skip the bytes up to ``offset`` as part of an over-long line (reported once, where it starts)."""
        start = self.offset
        self._advance(fd, offset)
        was_skipping, self._skipping = self._skipping, True
        return None if was_skipping else Skipped(start)

    def _advance(self, fd: int, offset: int) -> None:
        self.offset = offset
        if len(self._head) < FINGERPRINT_BYTES:
            self._head = os.pread(fd, min(offset, FINGERPRINT_BYTES), 0)
        low = max(offset - FINGERPRINT_BYTES, 0)
        self._window = os.pread(fd, offset - low, low)

    def _same_file(self, fd: int, st: os.stat_result) -> bool:
        if (st.st_ino, st.st_dev) != self._ident or st.st_size < self.offset:
            return False
        if os.pread(fd, len(self._head), 0) != self._head:
            return False
        low = self.offset - len(self._window)
        return os.pread(fd, len(self._window), low) == self._window

    def rewind(self) -> None:
        """Read the file again from its start at the next poll (the caller cleared what it built)."""
        self.offset = 0
        self._head = b""
        self._window = b""
        self._skipping = False
        self._signature = None

    # ------------------------------------------------------------------ a whole file at once
    def read_whole(self, parse: Callable[[str, Any, int], T | None], min_bytes: int | None = None) -> T | None:
        """A first read of a large file handed to ``parse(path, mapped, size)`` whole (polars then reads
        the file itself, as fast as it reads any file); on success the bytes count as read.

        Only for a file not read yet, of complete lines (it ends with a newline); ``parse`` says None
        when it is not sure (a NaN or Infinity token needs rewriting before polars reads it), and
        then nothing changed.
        """
        if self.offset:
            return None
        with _open_regular(self.path, self.root) as opened:
            if opened is None:
                return None
            fd, st = opened
            size = st.st_size
            if size < max(WHOLE_MIN_BYTES if min_bytes is None else min_bytes, 1):
                return None
            mapped = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
            try:
                if mapped[size - 1 : size] != b"\n":
                    return None
                result = parse(_by_descriptor(fd, self.path), mapped, size)
            finally:
                with contextlib.suppress(BufferError):
                    mapped.close()
            if result is None:
                return None
            self.size, self.mtime = size, st.st_mtime
            self._ident = (st.st_ino, st.st_dev)
            self._advance(fd, size)
            self._signature = identity(st)
            return result

    # ------------------------------------------------------------------ the columnar cache
    def fingerprint(self) -> Fingerprint | None:
        """What the bytes read so far are (for the columnar cache); None when the file changed since."""
        from monitor_cb.ingest.colcache import Fingerprint, sample_hash

        if self.offset == 0 or self._skipping:
            return None
        with _open_regular(self.path, self.root) as opened:
            if opened is None or not self._same_file(*opened):
                return None
            fd, st = opened
            samples = sample_hash(fd, self.offset)
        ident = (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns)
        return Fingerprint(self.offset, self._head, self._window, samples, ident)

    def resume(self, fingerprint: Fingerprint) -> bool:
        """Continue after the prefix ``fingerprint`` describes, if the file still holds exactly those bytes.

        Compares the first and last bytes before the offset and the sampled blocks (a file
        truncated, replaced or rewritten in the middle fails); on success the next poll reads from
        the offset. Only a tail that has read nothing yet can resume.
        """
        from monitor_cb.ingest.colcache import sample_hash

        if self.offset or fingerprint.offset <= 0 or fingerprint.samples is None:
            return False
        offset = fingerprint.offset
        head, window = fingerprint.head, fingerprint.window
        with _open_regular(self.path, self.root) as opened:
            if opened is None or opened[1].st_size < offset:
                return False
            fd, st = opened
            if os.pread(fd, len(head), 0) != head or os.pread(fd, len(window), offset - len(window)) != window:
                return False
            if sample_hash(fd, offset) != fingerprint.samples:
                return False
        self.offset = offset
        self._head, self._window = head, window
        self._ident = (st.st_ino, st.st_dev)
        return True

    def _restart(self) -> None:
        self.offset = 0
        self._head = b""
        self._window = b""
        self._skipping = False
        self.resets += 1
