"""The columnar cache: the rows of a metrics file's settled prefix, kept as an Arrow IPC file.

The JSONL file stays the source of truth. What was parsed from its first ``offset`` bytes (a
:class:`~monitor_cb.ingest.table.TableState`: one row per step, the rows resumed segments replaced, what the
next append depends on) is written once to ``<cache dir>/<file path under the root>.arrow`` (``tfevents`` in a
name spelled ``tf-events``: TensorBoard reads any file so named) with the bytes it came from described in the
file's schema metadata: the offset, the first and the last 4 KiB before it, a hash of 16 blocks spread over
the prefix, and (informational) inode, size and mtime. Reopening the run maps that file (uncompressed Arrow
IPC: columns are read straight from the page cache, no parsing) and reads only the bytes after ``offset`` from
the JSONL; before the rows are used, the bytes are compared again
(:meth:`monitor_cb.ingest.tail.FileTail.resume`), so a file truncated, replaced or rewritten in the middle is
read from scratch, and a cache file that is missing, unreadable, of another version or for another rank only
costs the time of a full parse.

Files are replaced atomically (a temporary file in the same folder, then ``os.replace``), so
two servers writing the same cache never leave a half-written file, and a reader that mapped the old
file keeps reading the old inode. Nothing is written outside the cache directory: paths are made
from the file's path relative to the log root and checked after resolving symlinks.

Why Arrow IPC rather than Parquet: the cache lives beside the logs, where disk is plentiful, and
uncompressed IPC is mapped, not decoded: 1M rows x 10 columns open in milliseconds, and columns
nobody reads are never paged in (Parquet would decode every column read, about 0.3 s per 1M rows).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import mmap
import os
import threading
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath
from typing import Any

import numpy as np

from monitor_cb.ingest.safepath import is_within
from monitor_cb.ingest.table import Columns, TableState
from monitor_cb.rootfile import STATE_CAP, UnsafeFileError, open_regular, temp_beside

FORMAT = 2  # 2: the rows' count and checksum in the header (monitor_cb.ingest.cacheproof)
CACHE_DIR = ".monitor/cache"
SUFFIX = ".arrow"
_META_KEY = b"monitor_cb"
SAMPLE_BLOCKS = 16
NONFINITE_KEPT = 10_000  # NaN/inf cells per metric listed in a cache file's header
SAMPLE_BYTES = 4096


# ----------------------------------------------------------------------------- fingerprints
@dataclass(frozen=True)
class Fingerprint:
    """What the bytes ``[0, offset)`` of a file were, to tell the same prefix from anything else.

    ``head`` and ``window`` are the bytes themselves (at most 4 KiB each: the tail needs them to keep
    checking the file), ``samples`` a hash of :data:`SAMPLE_BLOCKS` blocks spread over the prefix
    (None where reading them costs requests: object storage), ``ident`` (inode, device, size,
    mtime in ns) only says whether the file looks untouched.
    """

    offset: int
    head: bytes
    window: bytes
    samples: str | None = None
    ident: tuple[int, int, int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "head": base64.b64encode(self.head).decode(),
            "window": base64.b64encode(self.window).decode(),
            "samples": self.samples,
            "ident": list(self.ident) if self.ident is not None else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fingerprint:
        ident = data.get("ident")
        return cls(
            int(data["offset"]),
            base64.b64decode(data["head"]),
            base64.b64decode(data["window"]),
            data.get("samples"),
            tuple(int(x) for x in ident) if ident else None,  # type: ignore[arg-type]
        )


def nonfinite_cells(state: TableState) -> dict[str, tuple[list[int], list[float], list[float]]]:
    """Per metric, the logged NaN/±inf cells of ``state``'s main rows (metrics with too many left out)."""
    cells = {}
    for name, (values, logged) in state.floats.items():
        rows = np.flatnonzero(logged & ~np.isfinite(values))
        if rows.size <= NONFINITE_KEPT:
            cells[name] = (state.step[rows].tolist(), values[rows].tolist(), state.t[0][rows].tolist())
    return cells


def sample_offsets(offset: int) -> list[tuple[int, int]]:
    """(start, length) of the sampled blocks of a prefix of ``offset`` bytes (fixed by the offset alone)."""
    if offset <= 2 * SAMPLE_BYTES:
        return []
    spots = {min(offset * i // (SAMPLE_BLOCKS + 1), offset - SAMPLE_BYTES) for i in range(1, SAMPLE_BLOCKS + 1)}
    return [(start, SAMPLE_BYTES) for start in sorted(spots)]


def sample_hash(fd: int, offset: int) -> str:
    """Hash of the sampled blocks of the file open as ``fd``."""
    digest = hashlib.blake2b(digest_size=16)
    for start, length in sample_offsets(offset):
        digest.update(os.pread(fd, length, start))
    return digest.hexdigest()


# ----------------------------------------------------------------------------- what a cache file holds
@dataclass(frozen=True)
class Summary:
    """What the run list needs of a file without its rows (kept in the cache and in the root's index)."""

    n: int
    first_step: int | None
    last_step: int | None
    recent_t: tuple[float, ...] = ()  # t of the last rows (for the usual interval)

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "first": self.first_step, "last": self.last_step, "t": list(self.recent_t)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Summary:
        return cls(int(data["n"]), data.get("first"), data.get("last"), tuple(float(x) for x in data.get("t", ())))

    @classmethod
    def of(cls, state: TableState, recent: int = 64) -> Summary:
        n = state.n
        t = state.t[0][max(n - recent, 0) :]
        return cls(
            n,
            int(state.step[0]) if n else None,
            int(state.step[-1]) if n else None,
            tuple(float(x) for x in t),
        )


@dataclass(frozen=True)
class CacheHeader:
    """A cache file's description of its rows and of the bytes they came from."""

    fingerprint: Fingerprint
    rank: int
    n_main: int
    kinds: dict[str, str]
    bad_count: int
    bad_lines: tuple[tuple[int, str, bool], ...]  # offset, reason, only a value on the line was skipped
    summary: Summary
    last_step: int = 0
    last_seg: int = 0
    has_seg: bool = False
    # metric -> (steps, values, t) of its logged NaN/±inf main rows; a metric with more than
    # NONFINITE_KEPT of them is left out (readers then scan its column)
    nonfinite: dict[str, tuple[list[int], list[float], list[float]]] = field(default_factory=dict)
    texts_out: tuple[str, ...] = ()  # keys whose text values are in the rows (the parser's state)
    partial_count: int = 0  # of bad_count: lines kept with a bad value dropped
    rows: int | None = None  # rows in the file (main and replaced), set by the writer
    rows_crc: str | None = None  # CRC-32 of every column (monitor_cb.ingest.cacheproof.rows_checksum)

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "rows_crc": self.rows_crc,
            "texts_out": list(self.texts_out),
            "nonfinite": {k: [list(a) for a in v] for k, v in self.nonfinite.items()},
            "format": FORMAT,
            "fingerprint": self.fingerprint.to_json(),
            "rank": self.rank,
            "n_main": self.n_main,
            "kinds": self.kinds,
            "bad_count": self.bad_count,
            "partial_count": self.partial_count,
            "bad_lines": [list(b) for b in self.bad_lines],
            "summary": self.summary.to_json(),
            "state": [self.last_step, self.last_seg, self.has_seg],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CacheHeader:
        if data.get("format") != FORMAT:
            raise ValueError(f"cache format {data.get('format')!r}, expected {FORMAT}")
        last_step, last_seg, has_seg = data["state"]
        nonfinite = {
            str(k): ([int(x) for x in v[0]], [float(x) for x in v[1]], [float(x) for x in v[2]])
            for k, v in data.get("nonfinite", {}).items()
        }
        return cls(
            Fingerprint.from_json(data["fingerprint"]),
            int(data["rank"]),
            int(data["n_main"]),
            {str(k): str(v) for k, v in data["kinds"].items()},
            int(data["bad_count"]),
            tuple((int(b[0]), str(b[1]), bool(b[2]) if len(b) > 2 else False) for b in data["bad_lines"]),
            Summary.from_json(data["summary"]),
            int(last_step),
            int(last_seg),
            bool(has_seg),
            nonfinite,
            tuple(str(k) for k in data.get("texts_out", ())),
            int(data.get("partial_count", sum(1 for b in data["bad_lines"] if len(b) > 2 and b[2]))),
            None if data.get("rows") is None else int(data["rows"]),
            None if data.get("rows_crc") is None else str(data["rows_crc"]),
        )


@dataclass
class CachedRows:
    """A cache file opened for reading: its header, and its rows mapped on demand.

    The file stays open (``fd``), so the rows always come from the inode that was checked, even
    after another server replaced the file. :meth:`state` maps it; the mapping goes when the
    arrays made from it do, so rows read once (to aggregate ranks, say) do not stay resident.
    """

    header: CacheHeader
    path: Path
    fd: int
    mapped: bool = False  # the rows stay views of the mapping (no copy); see :func:`may_map`
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        weakref.finalize(self, _close, self.fd)

    def state(self, columns: list[str] | None = None) -> TableState:
        """The rows as read-only arrays over a mapping of the file (only ``columns`` when given: others
        are left out, so they are never paged in)."""
        import pyarrow as pa

        with self._lock:
            mapped = mmap.mmap(self.fd, 0, access=mmap.ACCESS_READ)
        table = pa.ipc.open_file(pa.py_buffer(mapped)).read_all()
        return _state_of(table, self.header, columns, copy=not self.mapped)


OPEN_FILES = 65536  # descriptors a process of the reading side asks for (at most the hard limit)


def raise_open_files_limit(wanted: int = OPEN_FILES) -> None:
    """Raise this process's soft limit on open files toward ``wanted`` (never above the hard limit).

    Rows read from a cache file keep it open (they come from the inode that was checked): a root of a
    hundred long runs of 8 ranks each holds 800 descriptors, and the usual soft limit of 1,024 would then
    refuse the next file or connection.
    """
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ImportError, ValueError, OSError):  # no such limit here (Windows), or not allowed: keep it
        return


def cache_name(name: str) -> str:
    """A cache file's name for a metrics file named ``name``. An event file's name holds ``tfevents``, which is
    how TensorBoard (and its Rust data server) finds event files: kept as it is, ``tensorboard --logdir`` on the
    same root took every cache file for a run and logged a CRC error for each, on every reload."""
    return name.replace("tfevents", "tf-events") + SUFFIX


def may_map(fd: int) -> bool:
    """Whether a cache file's rows may stay views of its mapping for as long as they are used, rather than be
    copied into memory when read (1M rows x 10 columns: about 50 MB a rank kept in the page cache, shared
    and given back under pressure, instead of in the heap).

    A mapped file that is truncated in place kills the process that touches a page past its new end
    (SIGBUS). This server's own writes never do that (they replace files), so only a file that no other
    user can write is mapped: owned by this process's user, writable by nobody else.
    """
    st = os.fstat(fd)
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


# ----------------------------------------------------------------------------- the cache of one root
ENV_CACHE = "MONITOR_CACHE"  # "off" (or 0/false/no): no cache; a path: the cache folder


@dataclass(frozen=True)
class Place:
    """A folder for cache files and the folder it must stay inside (after resolving symlinks)."""

    directory: Path
    boundary: Path


def places_for(root: object, env: dict[str, str] | None = None) -> list[Place]:
    """Where a root's cache goes, in order of preference; empty when caching is off.

    A local root: ``<root>/.monitor/cache``, then (a read-only root) a folder of its own under the
    local state folder (``$MONITOR_STATE_DIR``, default ``~/.cache/monitor_cb``). A URL root: only
    the local state folder (a bucket is never written by the dashboard).
    """
    import hashlib as _hashlib
    import re

    from monitor_cb.storage.urls import ENV_STATE, is_url, state_dir

    env = dict(os.environ) if env is None else env
    setting = env.get(ENV_CACHE, "").strip()
    if setting.lower() in ("off", "0", "false", "no"):
        return []
    if setting:
        folder = Path(setting).expanduser()
        return [Place(folder, folder)]
    state_base = Path(env.get(ENV_STATE) or Path.home() / ".cache" / "monitor_cb").expanduser()
    if is_url(str(root)):
        folder = state_dir(str(root), env)
        return [Place(folder / CACHE_DIR, state_base)]
    local = Path(str(root))
    resolved = str(local.resolve())
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", resolved)[-60:]
    digest = _hashlib.sha256(resolved.encode()).hexdigest()[:10]
    fallback = state_base / "local" / f"{slug}-{digest}" / CACHE_DIR
    return [Place(local / CACHE_DIR, local), Place(fallback, state_base)]


class ColumnarCache:
    """Cache files for the metrics files under ``source_root``.

    Args:
        places: where cache files go, in order (:func:`places_for`); a place that cannot be written
            (a read-only root) is given up for the next.
        source_root: the log root; a file's cache path is its path relative to it.
        min_bytes: files smaller than this parse in a few tens of ms: no cache file for them.
        growth: a cache file is written again once the bytes after it reach ``1/growth`` of those in it
            (so a growing file is written O(log size) times, and a reopen parses at most that share).
    """

    def __init__(
        self, places: list[Place] | Path, source_root: PurePath, min_bytes: int = 4 << 20, growth: int = 4
    ) -> None:
        if isinstance(places, (str, os.PathLike)):
            places = [Place(Path(places), Path(places))]
        self.places = list(places)
        self.source_root = source_root
        self.last_error: str | None = None
        self.writes = 0
        self.min_bytes = min_bytes
        self.growth = growth
        self.background: Any = None  # a monitor_cb.ingest.viewer_work.Background: writes leave the poll
        self.refused: dict[str, str] = {}  # cache files not used, and why (shown as "skipped" notes)
        self._refused_lock = threading.Lock()
        self._current = 0
        raise_open_files_limit()

    def wait(self, timeout: float = 60.0) -> bool:
        """Block until background writes are done (tests, benchmarks)."""
        return True if self.background is None else bool(self.background.wait_idle(timeout))

    def due(self, offset: int, cached: int) -> bool:
        """Whether a file read up to ``offset`` whose cache holds ``cached`` bytes should be written again."""
        return offset >= self.min_bytes and offset - cached >= max(self.min_bytes, cached // self.growth)

    @property
    def directory(self) -> Path:
        return self.places[min(self._current, len(self.places) - 1)].directory

    def path_for(self, source: PurePath, place: Place | None = None) -> Path | None:
        """The cache file of ``source`` (None when it is not under the root)."""
        try:
            rel = PurePath(str(source)).relative_to(str(self.source_root)) if not _is_remote(source) else None
        except ValueError:
            return None
        if rel is None:
            key, root_key = getattr(source, "key", None), getattr(self.source_root, "key", None)
            if key is None or root_key is None or not key.startswith(root_key.rstrip("/") + "/"):
                return None
            rel = PurePath(key[len(root_key.rstrip("/")) + 1 :])
        if not rel.parts or any(part in ("", ".", "..") for part in rel.parts):
            return None
        directory = (place or self.places[min(self._current, len(self.places) - 1)]).directory
        return directory.joinpath(*rel.parts[:-1], cache_name(rel.parts[-1]))

    def open(self, source: PurePath, rank: int) -> CachedRows | None:
        """The cache file of ``source``, opened, its header read and its rows checked against it
        (:func:`monitor_cb.ingest.cacheproof.rows_problem`); None when there is none usable.

        A cache file that is no regular file, leads out of its place, is larger than
        :data:`CACHE_CAP_FACTOR` times its source, or whose rows do not match its header is skipped
        with a note in :attr:`refused`.
        """
        for place in self.places:
            path = self.path_for(source, place)
            if path is None:
                return None
            try:
                fd = _open_cache_file(path, place.boundary, _cache_cap(source))
            except UnsafeFileError as exc:
                self._refuse(path, exc.reason)
                continue
            except OSError:
                continue
            return self._opened(fd, path, rank)
        return None

    def _refuse(self, path: Path, reason: str) -> None:
        with self._refused_lock:
            self.refused[str(path)] = reason

    def _opened(self, fd: int, path: Path, rank: int) -> CachedRows | None:
        from monitor_cb.ingest.cacheproof import rows_problem

        try:
            header, table = _read_header(fd)
            problem = None if rank and header.rank != rank else rows_problem(table, header)
        except Exception as exc:  # noqa: BLE001 - any damage means "no cache": the JSONL is read instead
            os.close(fd)
            self.last_error = f"{path}: {str(exc)[:200]}"
            return None
        if rank and header.rank != rank:  # rank 0 is also "not named in the file name"
            os.close(fd)
            return None
        if problem is not None:
            os.close(fd)
            self.last_error = f"{path}: {problem}"
            self._refuse(path, f"{problem}; the run is read from its JSONL instead")
            return None
        with self._refused_lock:
            self.refused.pop(str(path), None)
        return CachedRows(header, path, fd, may_map(fd))

    def write(self, source: PurePath, state: TableState, header: CacheHeader) -> bool:
        """Write ``state`` (the rows of ``header.fingerprint``'s prefix) as ``source``'s cache file, atomically.

        A place that cannot be written (read-only, full, a symlink leading out) is left for the next one.
        """
        while self._current < len(self.places):
            place = self.places[self._current]
            path = self.path_for(source, place)
            if path is None:
                return False
            error = _write_atomic(path, place.boundary, state, header)
            if error is None:
                self.writes += 1
                legacy = path.with_name(PurePath(str(source)).name + SUFFIX)
                if legacy != path:  # the name an earlier version gave it (TensorBoard reads that one)
                    with contextlib.suppress(OSError):
                        legacy.unlink()
                return True
            self.last_error = f"{path}: {error[:200]}"
            if not error.startswith("unwritable"):
                return False  # this file's trouble (a full disk, say), not the place's: try again later
            self._current += 1
        return False


def _write_atomic(path: Path, boundary: Path, state: TableState, header: CacheHeader) -> str | None:
    """Write the cache file through a temporary file and a rename; the error, or None."""
    import errno

    tmp: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not is_within(path.parent, boundary):
            return f"unwritable: {path.parent} resolves outside {boundary}"
        _remove_stale(path)
        fd, tmp = temp_beside(path)  # a random name, created exclusively: never a planted FIFO or link
        _write_file(fd, state, header)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()
        unwritable = exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR)
        return ("unwritable: " if unwritable else "") + str(exc)
    except ValueError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()
        return str(exc)
    return None


STALE_TMP_S = 600.0  # a temporary file this old was left by a process that ended mid-write


def _remove_stale(path: Path) -> None:
    """Temporary files of ``path`` left by a server that stopped while writing (only old ones: another
    server may be writing right now)."""
    import time

    for old in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            if time.time() - old.stat().st_mtime > STALE_TMP_S:
                old.unlink()


def _is_remote(path: PurePath) -> bool:
    return hasattr(path, "key") and hasattr(path, "protocol")


# ----------------------------------------------------------------------------- Arrow layout
# Columns: step, seg, t, t? (was logged, uint8), then f:<name> / f?:<name> per float metric and
# s:<name> / s?:<name> per text column, in the table's order. Rows: the main rows (n_main of them,
# one per step), then the rows resumed segments replaced.


def _write_file(fd: int, state: TableState, header: CacheHeader) -> None:
    """Write the cache file's table to ``fd`` (closed here, whatever happens)."""
    with os.fdopen(fd, "wb") as sink:
        _write_table(sink, state, header)


def _write_table(sink: Any, state: TableState, header: CacheHeader) -> None:
    import pyarrow as pa

    history = state.history
    h = 0 if history is None else len(history[0])

    def both(main: np.ndarray, hist: np.ndarray | None) -> np.ndarray:
        return main if not h else np.concatenate([main, hist])  # type: ignore[list-item]

    def column(name: str, main: tuple[np.ndarray, np.ndarray], text: bool) -> tuple[np.ndarray, np.ndarray]:
        if not h:
            return main
        got = history[2].get(name) if history is not None else None
        if got is None:
            got = (np.full(h, None if text else np.nan, object if text else np.float64), np.zeros(h, bool))
        return both(main[0], got[0]), both(main[1], got[1])

    arrays: dict[str, Any] = {
        "step": both(state.step, history[0] if history else None),
        "seg": both(state.seg, history[1] if history else None),
    }
    t_values, t_logged = column("t", state.t, False)
    arrays["t"], arrays["t?"] = t_values, t_logged.view(np.uint8)
    for name, pair in state.floats.items():
        values, logged = column(name, pair, False)
        arrays[f"f:{name}"], arrays[f"f?:{name}"] = values, logged.view(np.uint8)
    for name, pair in state.texts.items():
        values, logged = column(name, pair, True)
        arrays[f"s:{name}"] = pa.array(values, type=pa.string(), from_pandas=True)
        arrays[f"s?:{name}"] = logged.view(np.uint8)
    table = pa.table(arrays)
    from monitor_cb.ingest.cacheproof import rows_checksum

    header = replace(header, rows=table.num_rows, rows_crc=rows_checksum(table))
    schema = table.schema.with_metadata({_META_KEY: json.dumps(header.to_json()).encode()})
    with pa.ipc.new_file(sink, schema) as writer:
        writer.write_table(table.replace_schema_metadata(schema.metadata))


def _read_header(fd: int) -> tuple[CacheHeader, Any]:
    """The header and the (mapped, not read) Arrow table of the cache file open as ``fd``."""
    import pyarrow as pa

    mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    reader = pa.ipc.open_file(pa.py_buffer(mapped))
    raw = (reader.schema.metadata or {}).get(_META_KEY)
    if raw is None:
        raise ValueError("not a monitor_cb cache file")
    if len(raw) > STATE_CAP:  # an honest header lists at most 1,000 bad lines and 10,000 cells per metric
        raise ValueError(f"a header of {len(raw):,} bytes, over the {STATE_CAP:,}-byte cap")
    return CacheHeader.from_json(json.loads(raw)), reader.read_all()


CACHE_CAP_FACTOR = 16  # a cache file larger than this many times its JSONL (plus CACHE_CAP_SLACK) is refused
CACHE_CAP_SLACK = 64 << 20


def _cache_cap(source: PurePath) -> int:
    """The largest cache file ``source`` can honestly have (its columns, 9 bytes a cell, stay near its JSON)."""
    if _is_remote(source):
        return 1 << 40  # its cache is in the user's own state folder, not in the shared root
    try:
        size = os.stat(source).st_size
    except (OSError, TypeError, ValueError):
        size = 0
    return CACHE_CAP_FACTOR * int(size) + CACHE_CAP_SLACK


def _open_cache_file(path: Path, boundary: Path, cap: int) -> int:
    """A descriptor of the cache file at ``path`` (the caller closes it), opened through
    :func:`monitor_cb.rootfile.open_regular` inside ``boundary`` and refused past ``cap``."""
    with open_regular(path, root=boundary) as (fd, st):
        if st.st_size > cap:
            raise UnsafeFileError(path, f"holds {st.st_size:,} bytes, over the {cap:,}-byte cap for its metrics file")
        return os.dup(fd)


def _state_of(table: Any, header: CacheHeader, columns: list[str] | None, copy: bool = True) -> TableState:
    n = header.n_main
    total = table.num_rows
    wanted = None if columns is None else set(columns)

    def numpy(name: str) -> np.ndarray:
        column = table.column(name)
        if copy or column.num_chunks != 1:
            return column.combine_chunks().to_numpy(zero_copy_only=False)  # combine_chunks copies even one chunk
        return column.chunk(0).to_numpy(zero_copy_only=False)  # a view of the mapping when it holds no nulls

    def mask(name: str) -> np.ndarray:
        return numpy(name).view(bool)

    step, seg = numpy("step"), numpy("seg")
    t = (numpy("t"), mask("t?"))
    floats: Columns = {}
    texts: Columns = {}
    for name in table.column_names:
        kind, _, metric = name.partition(":")
        if kind not in ("f", "s") or (wanted is not None and metric not in wanted):
            continue
        if kind == "f":
            floats[metric] = (numpy(name), mask(f"f?:{metric}"))
        else:
            texts[metric] = (np.asarray(numpy(name), dtype=object), mask(f"s?:{metric}"))
    history = None
    if total > n:
        cols: Columns = {"t": (t[0][n:], t[1][n:])}
        cols.update({k: (v[n:], lg[n:]) for k, (v, lg) in floats.items()})
        cols.update({k: (v[n:], lg[n:]) for k, (v, lg) in texts.items()})
        history = (step[n:], seg[n:], cols)
    return TableState(
        rank=header.rank,
        step=step[:n],
        seg=seg[:n],
        t=(t[0][:n], t[1][:n]),
        floats={k: (v[:n], lg[:n]) for k, (v, lg) in floats.items()},
        texts={k: (v[:n], lg[:n]) for k, (v, lg) in texts.items()},
        history=history,
        last_step=header.last_step,
        last_seg=header.last_seg,
        has_seg=header.has_seg,
    )
