"""A log root on object storage: discovery, metadata and tails, with listings cached.

The store keeps working on paths; for a URL root those are :class:`RemotePath` (a pure POSIX path
that prints as its URL) and a :class:`RemoteRoot` does what ``os.scandir``, ``os.stat`` and file
reads do for a local root. What it costs per dashboard refresh is bounded by the *active* runs, not
by all runs: the root listing is one request per rescan; a run's directory is listed again every
``active_relist_s`` while it may change and every ``idle_relist_s`` (a few per rescan) once its
metadata says finished; each metrics file is followed by one "keys after the last chunk" listing
per poll (:mod:`monitor_cb.ingest.remote_tail`), which also shows its metadata object's ETag, so
metadata is fetched only when it changed. A failed listing keeps the last good one and is
reported in :attr:`RemoteRoot.last_error` (credentials removed).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, TypeVar

from monitor_cb.ingest.discover import RunDir
from monitor_cb.record import META_SUFFIX, METRICS_SUFFIX
from monitor_cb.storage.chunks import metrics_name_of
from monitor_cb.storage.objects import Entry, ObjectStore
from monitor_cb.storage.urls import RemoteURL, StorageError

T = TypeVar("T")
R = TypeVar("R")
_META_CAP = 1 << 20
FINAL = ("finished", "failed", "stopped")


class RemotePath(PurePosixPath):
    """``bucket/prefix/run`` in an object store; ``str()`` gives the URL, :attr:`key` the store path."""

    protocol = "s3"
    _classes: dict[str, type[RemotePath]] = {}  # noqa: RUF012 - one subclass per protocol, shared

    @classmethod
    def for_protocol(cls, protocol: str) -> type[RemotePath]:
        found = cls._classes.get(protocol)
        if found is None:
            name = f"{protocol.capitalize()}Path"
            found = cls._classes[protocol] = type(name, (RemotePath,), {"protocol": protocol})
        return found

    @property
    def key(self) -> str:
        return PurePosixPath.__str__(self)

    def __str__(self) -> str:
        return f"{self.protocol}://{self.key}"


@dataclass(frozen=True)
class RemoteReadOptions:
    """How often a remote root is listed again (seconds) and how many idle runs one rescan re-lists.

    Args:
        poll_interval_s: a metrics file is listed at most this often while it grows.
        idle_poll_s: ...and this often once nothing came for a minute.
        final_poll_s: ...and at most this often once its metadata says finished, failed or stopped
            (a resumed run, a deleted one), within the per-rescan budget below.
        active_relist_s: a running run's directory is listed again this often (new ranks).
        idle_relist_s: a finished run's directory is listed again this often (deleted, resumed)...
        idle_relists_per_scan: ...at most this many directories, and this many finished files, per rescan.
        parallel_requests: requests in flight at once (listing directories, polling files, reading
            metadata): a bucket answers in tens of ms, so 1,000 runs read one request at a time take minutes.
    """

    poll_interval_s: float = 1.0
    idle_poll_s: float = 5.0
    final_poll_s: float = 120.0
    active_relist_s: float = 10.0
    idle_relist_s: float = 300.0
    idle_relists_per_scan: int = 10
    parallel_requests: int = 16


@dataclass
class _Listing:
    entries: list[Entry]
    at: float
    run: bool = False  # holds metrics files


class RemoteRoot:
    """The object-store side of a :class:`~monitor_cb.ingest.store.RunStore` whose root is a URL; thread-safe.

    Args:
        url: ``s3://bucket/prefix`` (credentials from the SDK's environment and config files).
        endpoint_url: S3 API endpoint (MinIO, Ceph, OBS); default from the environment.
        options: further fsspec storage options.
        read: polling and re-listing intervals.
        clock: monotonic seconds (tests drive it).
    """

    def __init__(
        self,
        url: str | RemoteURL,
        *,
        endpoint_url: str | None = None,
        options: dict[str, Any] | None = None,
        read: RemoteReadOptions | None = None,
        clock: Callable[[], float] = time.monotonic,
        store: ObjectStore | None = None,
    ) -> None:
        if store is None:
            store, remote = ObjectStore.open(url, endpoint_url, options)
        else:
            from monitor_cb.storage.urls import parse_url

            remote, _ = parse_url(url)
        self.store = store
        self.url = remote
        self.path = RemotePath.for_protocol(remote.protocol)(remote.path)
        self.read = read or RemoteReadOptions()
        self.clock = clock
        self.last_error: str | None = None
        self._lock = threading.RLock()
        self._listings: dict[str, _Listing] = {}
        self._objects: dict[str, Entry] = {}  # latest listed state of metadata objects, by key
        self._by_dir: dict[str, set[str]] = {}  # directory key -> its metadata keys
        self._final_budget = 0
        self._metas: dict[str, tuple[str, dict[str, Any]]] = {}  # key -> (etag read, parsed)
        self._pool: ThreadPoolExecutor | None = None

    def __str__(self) -> str:
        return str(self.url)

    @property
    def requests(self) -> int:
        return self.store.requests

    def holds_nothing(self) -> bool:
        """Whether no object at all is stored under the root's prefix (a mistyped prefix, or nothing shipped yet).

        One listing request; False when it fails (the failure is in :attr:`last_error` already).
        """
        try:
            return self.store.list_dir(self.path.key) is None
        except StorageError:
            return False

    def map(self, func: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``[func(item) ...]`` with at most ``read.parallel_requests`` running at once (the first error raised)."""
        items = list(items)
        workers = self.read.parallel_requests
        if len(items) < 2 or workers < 2:
            return [func(item) for item in items]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(workers, thread_name_prefix="monitor-cb-remote")
            pool = self._pool
        return list(pool.map(func, items))

    # ------------------------------------------------------------------ discovery
    def discover(self, max_depth: int) -> dict[str, RunDir]:
        """Every run under the root, as :func:`monitor_cb.ingest.discover.discover_runs` finds local ones.

        Raises:
            StorageError: the root cannot be listed and never could (otherwise the last listing is used).
        """
        runs: dict[str, RunDir] = {}
        budget = [self.read.idle_relists_per_scan]
        self._final_budget = self.read.idle_relists_per_scan  # finished files re-checked until the next rescan
        level: list[tuple[str, tuple[str, ...]]] = [(self.path.key, ())]
        while level:  # one level of directories at a time, listed in parallel
            listings = self.map(lambda item: self._listing(item[0], is_root=not item[1], budget=budget), level)
            deeper: list[tuple[str, tuple[str, ...]]] = []
            for (key, parts), entries in zip(level, listings, strict=True):
                if not entries:
                    continue
                files: list[str] = []
                subdirs: list[str] = []
                for entry in entries:
                    name = entry.name
                    if name.startswith("."):
                        continue
                    if entry.is_dir:
                        metrics = metrics_name_of(name)
                        if metrics is not None:
                            files.append(metrics)
                        else:
                            subdirs.append(name)
                    elif name.endswith(METRICS_SUFFIX):
                        files.append(name)
                    elif name.endswith(META_SUFFIX):
                        self._note(entry)
                run_id = "/".join(parts) or "."
                base = self._remote_path(key)
                if files:
                    with self._lock:
                        self._listings[key].run = True
                    runs[run_id] = RunDir(run_id, base, tuple(base / name for name in sorted(set(files))))  # type: ignore[arg-type]
                if len(parts) < max_depth:
                    deeper.extend((f"{key}/{sub}", (*parts, sub)) for sub in sorted(subdirs))
            level = deeper
        return runs

    def _listing(self, key: str, is_root: bool, budget: list[int]) -> list[Entry] | None:
        with self._lock:  # decide under the lock; the request itself runs outside it (listings go in parallel)
            cached = self._listings.get(key)
            now = self.clock()
            if cached is not None and not is_root:
                age = now - cached.at
                if not cached.run or self._active(key):
                    if age < self.read.active_relist_s:
                        return cached.entries
                elif age < self.read.idle_relist_s or budget[0] <= 0:
                    return cached.entries
                else:
                    budget[0] -= 1
        try:
            entries = self.store.list_dir(key)
        except StorageError as exc:
            self.last_error = str(exc)
            if cached is None and is_root:
                raise
            return cached.entries if cached is not None else None
        self.last_error = None
        with self._lock:
            if entries is None:
                self._listings.pop(key, None)
                return None
            self._listings[key] = _Listing(entries, now, cached.run if cached else False)
        return entries

    def _active(self, key: str) -> bool:
        """A run directory that may still change: some metadata missing or not final."""
        metas = self._by_dir.get(key)
        if not metas:
            return True
        return any(self._metas.get(k, ("", {}))[1].get("status") not in FINAL for k in metas)

    def _note(self, entry: Entry) -> None:
        self._objects[entry.path] = entry
        self._by_dir.setdefault(entry.path.rsplit("/", 1)[0], set()).add(entry.path)

    def _remote_path(self, key: str) -> RemotePath:
        return type(self.path)(key)

    # ------------------------------------------------------------------ files
    def tail(self, path: RemotePath, line_cap: int) -> Any:
        """A tail of the metrics file ``path`` (chunked or a plain object)."""
        from monitor_cb.ingest.remote_tail import RemoteTail

        return RemoteTail(self, path, line_cap)

    def saw(self, entries: list[Entry]) -> None:
        """Listed objects a tail came across (its metadata object among them)."""
        with self._lock:
            for entry in entries:
                if entry.path.endswith(META_SUFFIX):
                    self._note(entry)

    def forget(self, key: str) -> None:
        """An object a listing no longer shows."""
        with self._lock:
            self._objects.pop(key, None)
            self._by_dir.get(key.rsplit("/", 1)[0], set()).discard(key)

    def spend_final_check(self) -> bool:
        """Whether a finished file may be listed again now (a few per rescan, so 1,000 finished runs
        cost a handful of requests per refresh rather than a thousand a minute)."""
        with self._lock:
            if self._final_budget <= 0:
                return False
            self._final_budget -= 1
            return True

    def meta_final(self, path: RemotePath) -> bool:
        """Whether the metadata object ``path`` (as last read) says the stream ended."""
        return self.read_meta(path).get("status") in FINAL  # read once per ETag: the store reads it anyway

    def read_meta(self, path: RemotePath) -> dict[str, Any]:
        """The metadata object as a dict ({} when absent or unreadable); the same object while unchanged."""
        key = path.key
        with self._lock:
            entry = self._objects.get(key)
            cached = self._metas.get(key)
        if entry is None:
            return {}
        if cached is not None and cached[0] == entry.etag:
            return cached[1]
        meta: dict[str, Any] = {}
        if entry.size <= _META_CAP:
            try:
                data = json.loads(self.store.read(key))
                meta = data if isinstance(data, dict) else {}
            except FileNotFoundError:
                self.forget(key)
                meta = {}
            except StorageError as exc:
                self.last_error = str(exc)
                return cached[1] if cached is not None else {}
            except (ValueError, RecursionError):
                meta = {}
        with self._lock:
            self._metas[key] = (entry.etag, meta)
        return meta


def remote_metas(run_dir: RemotePath) -> list[dict[str, Any]]:
    """Every ``*.meta.json`` object directly in a remote run directory (one listing, one read each)."""
    root = RemoteRoot(str(run_dir))
    metas = []
    for entry in root.store.list_dir(run_dir.key) or []:
        if entry.is_dir or not entry.name.endswith(META_SUFFIX) or entry.size > _META_CAP:
            continue
        try:
            data = json.loads(root.store.read(entry.path))
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(data, dict):
            metas.append(data)
    return metas
