"""Follow one metrics file on object storage: only new chunks (or new bytes), nothing twice.

:class:`RemoteTail` has :class:`~monitor_cb.ingest.tail.FileTail`'s interface and meaning. A file
is either shipped as chunk objects (``<name>.chunks/<start>-<end>.jsonl``, the shipper's layout) or
is one plain object (copied with ``aws s3 sync``, say, and replaced whole as it grows). A poll is
one listing of the keys after the last chunk read, which also shows the metadata object; only new
chunks are fetched, each once, in offset order, bytes already read skipped. As a local tail
compares the bytes at the start and just before its offset, this one checks the last chunk it
read is still there unchanged; when it is not (deleted, replaced, compacted) or a plain object's
ETag changed, it compares those same bytes by range reads, and any mismatch (or an object now
shorter than what was read) restarts the file from zero with ``reset``, as a truncated or
replaced local file does. A chunk whose size disagrees with its name was cut short: it waits, like
a line still being written.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from monitor_cb.ingest.lines import DEFAULT_LINE_CAP
from monitor_cb.ingest.tail import FINGERPRINT_BYTES, READ_CHUNK, Chunk, Skipped
from monitor_cb.record import METRICS_SUFFIX
from monitor_cb.storage.chunks import chunk_dir_name, parse_chunk_name
from monitor_cb.storage.objects import Entry
from monitor_cb.storage.urls import StorageError

if TYPE_CHECKING:
    from monitor_cb.ingest.colcache import Fingerprint
    from monitor_cb.ingest.remote import RemotePath, RemoteRoot

_IDLE_AFTER_S = 60.0


class RemoteTail:
    """Byte-offset reader of one remote metrics file (not thread-safe: the owning source holds a lock)."""

    def __init__(self, root: RemoteRoot, path: RemotePath, line_cap: int = DEFAULT_LINE_CAP) -> None:
        self.root = root
        self.path = path
        self.line_cap = line_cap
        self.offset = 0  # bytes consumed, up to the last complete line
        self.size = 0  # bytes of the file known to exist
        self.mtime = 0.0  # last change seen (the newest object's time, Unix s)
        self.resets = 0
        self.missing = False
        key = path.key
        self._object_key = key
        self._chunk_prefix = f"{key.rsplit('/', 1)[0]}/{chunk_dir_name(path.name)}/"
        stem = path.name[: -len(METRICS_SUFFIX)] if path.name.endswith(METRICS_SUFFIX) else path.name
        self._prefix = f"{key.rsplit('/', 1)[0]}/{stem}."  # chunks, the plain object and the metadata
        self._meta_key = f"{self._prefix}meta.json"
        self._received = 0  # bytes fetched so far: offset + len(partial)
        self._partial = b""
        self._skipping = False
        self._anchor: tuple[str, str] | None = None  # (key, etag) of the last chunk read
        self._object_etag: str | None = None
        self._head = b""
        self._window = b""
        self._next_check = float("-inf")
        self._last_change = float("-inf")
        self._waiting = 0  # bytes of a cut-short chunk
        self._anchor_lost = False
        self._final = False  # its metadata said finished at the last poll
        self._verify = False  # resumed from the columnar cache: compare the bytes before reading on

    @property
    def pending(self) -> int:
        """Bytes after the last newline (a torn tail) or in a cut-short chunk."""
        return len(self._partial) + self._waiting

    def poll(self) -> Iterator[Chunk | Skipped]:
        """Yield what is new; nothing when nothing changed or it is not yet time to look again."""
        now = self.root.clock()
        if now < self._next_check:
            return
        if self._final and not self.root.spend_final_check():
            return  # due, but finished: wait for a rescan with budget left
        try:
            entries = self._list()
        except StorageError as exc:
            self.root.last_error = str(exc)
            self._next_check = now + self.root.read.idle_poll_s
            return
        chunks = [(span, e) for e in entries if e.path.startswith(self._chunk_prefix) for span in _span(e)]
        plain = next((e for e in entries if e.path == self._object_key), None)
        self.missing = not chunks and plain is None
        try:
            if chunks:
                yield from self._poll_chunks(chunks)
            elif plain is not None:
                yield from self._poll_object(plain)
        except StorageError as exc:
            self.root.last_error = str(exc)
        except FileNotFoundError:
            self._anchor = None  # it vanished between listing and reading: list in full next time
        self._schedule(now)

    # ------------------------------------------------------------------ listing
    def _list(self) -> list[Entry]:
        """Keys of this file after the last chunk read (that chunk included, as the check of continuity)."""
        store = self.root.store
        after = self._anchor[0][:-1] if self._anchor is not None else None  # sorts just before the anchor
        entries = store.list_prefix(self._prefix, start_after=after)
        if after is not None and (not entries or (entries[0].path, entries[0].etag) != self._anchor):
            entries = store.list_prefix(self._prefix)  # the anchor changed: look at everything
            self._anchor_lost = True
        else:
            self._anchor_lost = False
        mine = [e for e in entries if e.path.startswith(self._chunk_prefix) or e.path in (self._object_key,)]
        self.root.saw([e for e in entries if e.path == self._meta_key])
        if not any(e.path == self._meta_key for e in entries) and after is None:
            self.root.forget(self._meta_key)
        return mine

    def _schedule(self, now: float) -> None:
        read = self.root.read
        self._final = self.root.meta_final(_meta_path(self.path))
        if self._final:
            interval = read.final_poll_s
        elif now - self._last_change > _IDLE_AFTER_S:
            interval = read.idle_poll_s
        else:
            interval = read.poll_interval_s
        self._next_check = now + interval

    # ------------------------------------------------------------------ chunked files
    def _poll_chunks(self, chunks: list[tuple[tuple[int, int], Entry]]) -> Iterator[Chunk | Skipped]:
        chunks.sort(key=lambda c: (c[0][0], -c[0][1]))
        if (self._verify or (self._anchor is not None and self._anchor_lost)) and not self._still_same(chunks):
            yield from self._reset()
        self._verify = False
        self._waiting = 0
        todo: list[tuple[int, Entry]] = []  # (bytes to skip at its start, chunk)
        reach = self._received
        for (start, end), entry in chunks:
            if end <= reach:
                continue
            if start > reach:
                break  # a gap: the missing chunk is on its way
            if entry.size != end - start:
                self._waiting = entry.size
                break  # cut short (still uploading, or broken): wait
            todo.append((reach - start, entry))
            reach = end
        if not todo:
            return
        yield from self._fetch(todo)

    def _fetch(self, todo: list[tuple[int, Entry]]) -> Iterator[Chunk | Skipped]:
        store = self.root.store
        pieces: list[bytes] = []
        size = 0
        for skip, entry in todo:
            data = store.read(entry.path, skip if skip else None, None)
            pieces.append(data)
            size += len(data)
            self._anchor = (entry.path, entry.etag)
            self.mtime = max(self.mtime, entry.mtime)
            if size >= READ_CHUNK:
                yield from self._feed(b"".join(pieces))
                pieces, size = [], 0
        if pieces:
            yield from self._feed(b"".join(pieces))
        self._last_change = self.root.clock()

    def _still_same(self, chunks: list[tuple[tuple[int, int], Entry]]) -> bool:
        """The bytes read so far are still what the store holds (head and the window before the offset)."""
        return self._matches(chunks, 0, self._head) and self._matches(
            chunks, self.offset - len(self._window), self._window
        )

    def _matches(self, chunks: list[tuple[tuple[int, int], Entry]], start: int, expected: bytes) -> bool:
        """Whether the chunks hold ``expected`` at ``start`` (range reads of just those bytes)."""
        if not expected:
            return True
        stop = start + len(expected)
        pos = start
        got: list[bytes] = []
        for (lo, hi), entry in chunks:  # sorted by start, longest first
            if hi <= pos or entry.size != hi - lo:
                continue
            if lo > pos:
                return False  # a gap where we read bytes before: not the same file
            end = min(hi, stop)
            got.append(self.root.store.read(entry.path, pos - lo, end - lo))
            pos = end
            if pos >= stop:
                break
        return pos >= stop and b"".join(got) == expected

    # ------------------------------------------------------------------ plain objects
    def _poll_object(self, entry: Entry) -> Iterator[Chunk | Skipped]:
        self.missing = False
        self._waiting = 0
        if entry.etag == self._object_etag and entry.size == self.size:
            return
        store = self.root.store
        if (self._object_etag is not None or self._verify) and (
            entry.size < self._received or not self._object_same(entry)
        ):
            yield from self._reset()
        self._verify = False
        self._object_etag = entry.etag
        self.size = entry.size
        self.mtime = max(self.mtime, entry.mtime)
        while entry.size > self._received:
            data = store.read(entry.path, self._received, min(entry.size, self._received + READ_CHUNK))
            if not data:
                break
            self._last_change = self.root.clock()
            yield from self._feed(data)

    def _object_same(self, entry: Entry) -> bool:
        store = self.root.store
        if self._head and store.read(entry.path, 0, len(self._head)) != self._head:
            return False
        if not self._window:
            return True
        low = self.offset - len(self._window)
        return store.read(entry.path, low, self.offset) == self._window

    # ------------------------------------------------------------------ the columnar cache
    def fingerprint(self) -> Fingerprint | None:
        """What the bytes read so far are (head and the window before the offset; no sampled blocks,
        each would be a request)."""
        from monitor_cb.ingest.colcache import Fingerprint

        if self.offset == 0 or self._skipping or self._partial:
            return None
        return Fingerprint(self.offset, self._head, self._window)

    def resume(self, fingerprint: Fingerprint) -> bool:
        """Continue after the cached prefix; its bytes are compared with the store at the next poll
        (two range reads) before anything after them is read, and a mismatch starts the file over."""
        if self.offset or self._received or fingerprint.offset <= 0:
            return False
        self.offset = self._received = self.size = fingerprint.offset
        self._head, self._window = fingerprint.head, fingerprint.window
        self._verify = True
        return True

    # ------------------------------------------------------------------ bytes -> lines
    def _feed(self, data: bytes) -> Iterator[Chunk | Skipped]:
        """Append fetched bytes to the virtual file and yield its new complete lines (FileTail's rules)."""
        self._received += len(data)
        self.size = max(self.size, self._received)
        buffer = self._partial + data if self._partial else data
        start = self.offset
        if self._skipping:  # the rest of an over-long line, up to its newline
            cut = buffer.find(b"\n") + 1
            if cut == 0:
                self._advance(start, buffer, len(buffer))
                self._partial = b""
                return
            self._skipping = False
            self._advance(start, buffer, cut)
            buffer, start = buffer[cut:], start + cut
        end = buffer.rfind(b"\n") + 1
        if end:
            self._advance(start, buffer, end)
            yield Chunk(start, buffer if end == len(buffer) else buffer[:end])
        rest = buffer[end:]
        if len(rest) > self.line_cap:
            yield Skipped(start + end)
            self._skipping = True
            self._advance(start + end, rest, len(rest))
            rest = b""
        self._partial = rest

    def _advance(self, start: int, buffer: bytes, consumed: int) -> None:
        self.offset = start + consumed
        if len(self._head) < FINGERPRINT_BYTES and start <= len(self._head):
            self._head = self._head[:start] + buffer[: min(consumed, FINGERPRINT_BYTES - start)]
        window = buffer[max(consumed - FINGERPRINT_BYTES, 0) : consumed]
        self._window = (self._window + window)[-FINGERPRINT_BYTES:] if len(window) < FINGERPRINT_BYTES else window

    def rewind(self) -> None:
        """Read the file again from its start at the next poll (the owning source cleared what it built)."""
        self.offset = self._received = self.size = 0
        self._partial = b""
        self._skipping = False
        self._anchor = None
        self._object_etag = None
        self._head = self._window = b""
        self._final = False
        self._next_check = float("-inf")

    def _reset(self) -> Iterator[Chunk]:
        self.offset = self._received = self.size = 0
        self._partial = b""
        self._skipping = False
        self._anchor = None
        self._object_etag = None
        self._head = self._window = b""
        self.resets += 1
        yield Chunk(0, b"", reset=True)


def _span(entry: Entry) -> list[tuple[int, int]]:
    span = parse_chunk_name(entry.name)
    return [span] if span is not None else []


def _meta_path(path: RemotePath) -> RemotePath:
    from monitor_cb.record import meta_path_for

    return meta_path_for(path)  # type: ignore[return-value]
