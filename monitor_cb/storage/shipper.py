"""Ship a run's local files to object storage from one background thread, never in training's way.

The local files stay the source of truth and stay complete; the shipper only reads them. Every
``interval_s`` seconds, or as soon as ``max_records`` new records wait, it ships the new complete
lines of each metrics file as one closed chunk object (:mod:`monitor_cb.storage.chunks`), then
any metadata file that changed. A failed upload is retried with back-off, the same byte range
again, so a retry rewrites the same object. A restarted shipper (a resumed writer, a restarted
``sync``) lists what the bucket already holds, checks it against the local bytes and carries on
from there, so nothing is lost or sent twice. The training thread only ever bumps a counter.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monitor_cb.record import META_SUFFIX, METRICS_SUFFIX, meta_path_for
from monitor_cb.rootfile import META_CAP, UnsafeFileError, read_capped
from monitor_cb.storage.chunks import chunk_dir_name, chunk_name, contiguous_end, parse_chunk_name
from monitor_cb.storage.objects import ObjectStore
from monitor_cb.storage.urls import RemoteURL, StorageError, parse_url, redact_credentials

HEAD_BYTES = 4096  # compared with the remote copy on restart: tells a replaced file


class UploadWarning(UserWarning):
    """Uploading is behind or failed; the local files are complete and training continues."""


@dataclass(frozen=True, repr=False)
class UploadOptions:
    """Where and how often a run is shipped.

    Args:
        url: the run's remote location, ``s3://bucket/prefix/exp001`` (credentials from the SDK's
            environment variables and config files, never from here if you can help it).
        interval_s: ship at least this often while records arrive.
        max_records: ...or as soon as this many records wait.
        max_chunk_bytes: a backlog (after a network cut) is shipped in chunks of at most this size.
        endpoint_url: S3 API endpoint (MinIO, Ceph, Huawei OBS); default ``$MONITOR_ENDPOINT_URL``,
            ``$AWS_ENDPOINT_URL_S3``, ``$AWS_ENDPOINT_URL``, else AWS.
        storage_options: further fsspec options (merged over ``$MONITOR_STORAGE_OPTIONS``).
        close_timeout_s: at the end of training, wait at most this long for the last chunks.
        retry_max_s: longest wait between retries while the store is unreachable.
    """

    url: str
    interval_s: float = 2.0
    max_records: int = 1000
    max_chunk_bytes: int = 8 << 20
    endpoint_url: str | None = None
    storage_options: Mapping[str, Any] | None = field(default=None, compare=False)
    close_timeout_s: float = 10.0
    retry_max_s: float = 30.0

    def __post_init__(self) -> None:
        parse_url(self.url)  # a malformed URL fails here, before training starts
        if self.interval_s <= 0:
            raise ValueError(f"upload interval_s must be > 0, got {self.interval_s!r}")
        if self.max_records < 1 or self.max_chunk_bytes < 1024:
            raise ValueError("upload max_records must be >= 1 and max_chunk_bytes >= 1024")
        if self.close_timeout_s < 0 or self.retry_max_s <= 0:
            raise ValueError("upload close_timeout_s must be >= 0 and retry_max_s > 0")

    def __repr__(self) -> str:
        url = redact_credentials(self.url)
        return f"UploadOptions(url={url!r}, interval_s={self.interval_s}, max_records={self.max_records})"

    @classmethod
    def coerce(cls, value: str | os.PathLike[str] | UploadOptions | Mapping[str, Any]) -> UploadOptions:
        """A URL, a mapping of these fields, or the options themselves."""
        if isinstance(value, UploadOptions):
            return value
        if isinstance(value, Mapping):
            return cls(**value)
        if isinstance(value, (str, os.PathLike)):
            return cls(os.fspath(value))
        raise TypeError(f"upload must be a URL or UploadOptions, got {type(value).__name__}")


@dataclass
class _FileState:
    """What was shipped of one local metrics file."""

    remote_dir: str  # ".../metrics.rank0.jsonl.chunks"
    ready: bool = False  # the remote side was listed and checked
    shipped: int = 0  # bytes [0, shipped) are in the store
    retry_end: int | None = None  # a failed chunk's end: the retry ships exactly the same range
    ident: tuple[int, int] | None = None
    head: bytes = b""
    known: list[str] = field(default_factory=list)  # chunk objects this shipper knows of (for a reset)


@dataclass
class ShipStats:
    """Counters for progress lines and tests."""

    chunks: int = 0
    bytes: int = 0
    metas: int = 0
    failures: int = 0
    last_error: str | None = None
    last_ship: float = 0.0


class Shipper:
    """Ships the metrics and metadata files of a local run directory to a remote run location.

    Args:
        local_dir: the local run directory (or log root, for ``sync`` of several runs).
        options: where and how often.
        files: the metrics files to ship (a writer ships only its own rank's); default every
            ``*.jsonl`` under ``local_dir`` (hidden entries skipped), found again on every cycle.
        store: an opened store (tests); default opened from ``options``.
    """

    def __init__(
        self,
        local_dir: str | os.PathLike[str],
        options: UploadOptions,
        files: Callable[[], Iterable[Path]] | None = None,
        store: ObjectStore | None = None,
    ) -> None:
        self.local_dir = Path(local_dir)
        self.options = options
        if store is None:
            store, remote = ObjectStore.open(options.url, options.endpoint_url, options.storage_options)
        else:
            remote, _ = parse_url(options.url)
        self.store: ObjectStore = store
        self.remote: RemoteURL = remote
        self._scan = files is None
        self._files = files or (lambda: scan_local(self.local_dir))
        self.stats = ShipStats()
        self._state: dict[Path, _FileState] = {}
        self._meta_sent: dict[Path, tuple[int, int, int]] = {}
        self._waiting = 0  # records appended since the last ship (bumped by the writer thread)
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._stop = False
        self._flush_asked = False
        self._warned: set[str] = set()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ control (any thread)
    def start(self) -> Shipper:
        self._thread = threading.Thread(target=self._run, name="monitor-upload", daemon=True)
        self._thread.start()
        return self

    def notify(self, records: int = 1) -> None:
        """New records reached the local file (called by the writer thread; never blocks)."""
        self._waiting += records
        if self._waiting >= self.options.max_records:
            self._wake.set()

    def poke(self) -> None:
        """Metadata changed (start, status): ship at once rather than at the next interval."""
        self._flush_asked = True
        self._wake.set()

    def flush(self, timeout: float = 30.0) -> bool:
        """Ship everything now; True when nothing is left to ship within ``timeout``."""
        if self._thread is None:
            return self.ship_all(timeout)
        deadline = time.monotonic() + timeout
        delay = 0.1
        while True:
            self._idle.clear()
            self._flush_asked = True
            self._wake.set()
            self._idle.wait(max(deadline - time.monotonic(), 0))
            if self.backlog() == 0:
                return True
            if time.monotonic() + delay > deadline:
                return False
            time.sleep(delay)  # the store is failing: try again, less and less often
            delay = min(delay * 2, self.options.retry_max_s)

    def close(self, timeout: float | None = None) -> bool:
        """Ship what is left (for at most ``timeout``, default ``close_timeout_s``) and stop.

        Returns True when everything was shipped; otherwise warns once how to finish the upload.
        """
        timeout = self.options.close_timeout_s if timeout is None else timeout
        done = self.flush(timeout) if self._thread is not None else self.ship_all(timeout)
        self._stop = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(min(timeout, 5.0))
        if not done:
            self._warn_once(
                "close",
                f"{self.backlog():,} bytes of metrics from {self.local_dir} are not uploaded to {self.remote} "
                f"({self.stats.last_error or 'timed out'}); they are safe in the local files: "
                f"python -m monitor_cb sync {self.local_dir} {self.remote} --once ships them",
            )
        return done

    def backlog(self) -> int:
        """Bytes of complete local lines not shipped yet (metadata changes count as 1)."""
        left = 0
        for path in list(self._files()):
            state = self._state.get(path)
            size = _complete_size(path)
            left += max(size - (state.shipped if state and state.ready else 0), 0)
        for meta in self._metas():
            if meta.exists() and _signature(meta) != self._meta_sent.get(meta):
                left += 1
        return left

    # ------------------------------------------------------------------ the thread
    def _run(self) -> None:
        delay = 0.0
        next_due = time.monotonic()
        while not self._stop:
            wait = max(next_due - time.monotonic(), 0.0)
            self._wake.wait(wait)
            self._wake.clear()
            if self._stop:
                break
            now = time.monotonic()
            if now < next_due and not self._flush_asked and self._waiting < self.options.max_records:
                continue
            self._flush_asked = False
            if self._cycle():
                delay = 0.0
                next_due = time.monotonic() + self.options.interval_s
            else:
                delay = min(max(delay * 2, 0.5), self.options.retry_max_s)
                next_due = time.monotonic() + delay
            self._idle.set()
        self._idle.set()

    def ship_all(self, timeout: float = 30.0) -> bool:
        """Ship everything from the calling thread (``sync --once``, or no thread started)."""
        deadline = time.monotonic() + timeout
        delay = 0.25
        while True:
            if self._cycle() and self.backlog() == 0:
                return True
            if time.monotonic() + delay > deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, self.options.retry_max_s)

    def _cycle(self) -> bool:
        """One round: new chunks of every file, then changed metadata. False when the store failed."""
        self._waiting = 0
        try:
            for path in list(self._files()):
                self._ship_file(path)
            for meta in self._metas():
                self._ship_meta(meta)
        except StorageError as exc:
            self.stats.failures += 1
            self.stats.last_error = str(exc)
            self._warn_once("store", f"upload to {self.remote} failed ({exc}); retrying, training continues")
            return False
        except OSError as exc:  # the local file: unreadable for now
            self.stats.last_error = redact_credentials(exc)
            self._warn_once("local", f"cannot read {redact_credentials(exc)}; will retry")
            return False
        return True

    def _metas(self) -> list[Path]:
        """The metadata of the shipped files; for a whole directory also metadata without metrics yet."""
        found = {meta_path_for(path) for path in self._files()}
        if self._scan:
            found.update(scan_local(self.local_dir, META_SUFFIX))
        return sorted(found)

    def _remote_key(self, local: Path) -> str:
        relative = local.relative_to(self.local_dir).as_posix()
        return f"{self.remote.path}/{relative}"

    # ------------------------------------------------------------------ one metrics file
    def _ship_file(self, path: Path) -> None:
        state = self._state.get(path)
        if state is None:
            state = self._state[path] = _FileState(self._remote_key(path.with_name(chunk_dir_name(path.name))))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO swapped in never blocks
        except FileNotFoundError:
            return
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return
            if not state.ready:
                self._resume(state, fd, st.st_size)
                state.ident = (st.st_ino, st.st_dev)
            elif self._replaced(state, fd, st):
                self._warn_once(
                    f"replaced-{path}", f"{path} was truncated or replaced: shipping it again from the start"
                )
                self.store.delete(self._listed_chunks(state))
                state.shipped, state.retry_end, state.head, state.known = 0, None, b"", []
                state.ident = (st.st_ino, st.st_dev)
            while state.shipped < st.st_size:
                end = state.retry_end or _chunk_end(fd, state.shipped, st.st_size, self.options.max_chunk_bytes)
                if end is None or end > st.st_size:
                    state.retry_end = None
                    break  # only a partial line waits
                data = os.pread(fd, end - state.shipped, state.shipped)
                key = f"{state.remote_dir}/{chunk_name(state.shipped, end)}"
                state.retry_end = end
                self.store.put(key, data)
                state.retry_end = None
                state.known.append(key)
                if len(state.head) < HEAD_BYTES:
                    state.head = os.pread(fd, min(end, HEAD_BYTES), 0)
                state.shipped = end
                self.stats.chunks += 1
                self.stats.bytes += len(data)
                self.stats.last_ship = time.time()
        finally:
            os.close(fd)

    def _resume(self, state: _FileState, fd: int, size: int) -> None:
        """Learn what the store already holds of this file; start over when it holds another file's bytes."""
        entries = self.store.list_prefix(state.remote_dir + "/")
        chunks = []
        for entry in entries:
            span = parse_chunk_name(entry.name)
            if span is not None and entry.size == span[1] - span[0]:  # a cut-short object does not count
                chunks.append((span, entry.path))
        end = contiguous_end(span for span, _ in chunks)
        if end and not self._matches(chunks, end, fd, size):
            self._warn_once(
                f"mismatch-{state.remote_dir}",
                f"{self.store.url(state.remote_dir)} holds chunks of another file (the local file was replaced); "
                "replacing them",
            )
            self.store.delete([p for _, p in chunks])
            chunks, end = [], 0
        state.known = [p for _, p in chunks]
        state.shipped = end
        state.head = os.pread(fd, min(end, HEAD_BYTES), 0) if end else b""
        state.ready = True

    def _matches(self, chunks: list[tuple[tuple[int, int], str]], end: int, fd: int, size: int) -> bool:
        if size < end:
            return False
        first = min(chunks)
        last = max((c for c in chunks if c[0][1] == end), default=None)
        head = min(first[0][1], HEAD_BYTES)
        if self.store.read(first[1], 0, head) != os.pread(fd, head, 0):
            return False
        if last is None:
            return False
        (start, stop), key = last
        return self.store.read(key) == os.pread(fd, stop - start, start)

    def _replaced(self, state: _FileState, fd: int, st: os.stat_result) -> bool:
        if (st.st_ino, st.st_dev) != state.ident or st.st_size < state.shipped:
            return True
        return bool(state.head) and os.pread(fd, len(state.head), 0) != state.head

    def _listed_chunks(self, state: _FileState) -> list[str]:
        entries = self.store.list_prefix(state.remote_dir + "/")
        return sorted({*state.known, *(e.path for e in entries if parse_chunk_name(e.name))})

    # ------------------------------------------------------------------ metadata
    def _ship_meta(self, path: Path) -> None:
        signature = _signature(path)
        if signature is None or signature == self._meta_sent.get(path):
            return
        try:  # a FIFO or a device there never blocks the uploader; a huge file is not read
            text = read_capped(path, META_CAP).decode("utf-8", errors="replace")
        except FileNotFoundError:
            return
        except UnsafeFileError as exc:
            self._warn_once(f"meta-unsafe-{path}", f"{path} {exc.reason}; not uploaded")
            self._meta_sent[path] = signature
            return
        self.store.put(
            self._remote_key(path), redact_credentials(text).encode()
        )  # no credential leaves in the metadata
        self._meta_sent[path] = signature
        self.stats.metas += 1

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(redact_credentials(message), UploadWarning, stacklevel=3)


def scan_local(root: Path, suffix: str = METRICS_SUFFIX) -> list[Path]:
    """Files ending in ``suffix`` under ``root`` (hidden entries and symlinks skipped), sorted."""
    found: list[Path] = []
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            if entry.is_dir():
                stack.append(Path(entry.path))
            elif entry.name.endswith(suffix) and entry.is_file():
                found.append(Path(entry.path))
    return sorted(found)


def _chunk_end(fd: int, start: int, size: int, cap: int) -> int | None:
    """End of the next chunk: after the last newline within ``cap`` bytes (further for one over-long line)."""
    data = os.pread(fd, min(size - start, cap), start)
    cut = data.rfind(b"\n")
    if cut >= 0:
        return start + cut + 1
    offset = start + len(data)
    while offset < size:  # one line longer than the cap: ship it whole (the reader skips it as too long)
        more = os.pread(fd, min(size - offset, cap), offset)
        found = more.find(b"\n")
        if found >= 0:
            return offset + found + 1
        offset += len(more)
    return None


def _complete_size(path: Path, block: int = 65536) -> int:
    """Bytes up to the last newline (what can be shipped)."""
    try:
        with open(path, "rb") as handle:
            end = handle.seek(0, os.SEEK_END)
            while end > 0:
                low = max(end - block, 0)
                handle.seek(low)
                cut = handle.read(end - low).rfind(b"\n")
                if cut >= 0:
                    return low + cut + 1
                end = low
    except OSError:
        return 0
    return 0


def _signature(path: Path) -> tuple[int, int, int] | None:
    with contextlib.suppress(OSError):
        st = os.stat(path)
        return (st.st_mtime_ns, st.st_size, st.st_ino)
    return None
