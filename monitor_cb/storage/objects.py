"""The few object-store operations the monitor needs, over any fsspec file system.

List one "directory" (delimiter listing), list keys after a given key (S3's ``StartAfter``: a
reader lists only what is new), read a byte range, write a whole object, delete. Each call is one
request (pages of a listing counted), errors become :class:`StorageError` whose text names the
object with credentials removed, and the SDK's own retry loops are cut short: the shipper retries
on its schedule and a reader simply tries again on its next poll, so neither hangs on a lost
network.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from monitor_cb.storage.urls import (
    RemoteURL,
    StorageError,
    parse_url,
    redact_credentials,
    secret_values,
    storage_options,
)

# Short timeouts and a single SDK attempt: our callers retry, and a poll must never hang a page.
_S3_CONFIG = {"connect_timeout": 3, "read_timeout": 10, "retries": {"total_max_attempts": 1}}
LIST_PAGE = 1000
_FILESYSTEMS: dict[str, Any] = {}  # one file system per protocol and options, shared by this process's stores
_FS_LOCK = threading.Lock()


@dataclass(frozen=True)
class Entry:
    """One listed object (or common prefix, ``is_dir``): full fsspec path, size, ETag, mtime (Unix s)."""

    path: str
    size: int
    etag: str
    mtime: float
    is_dir: bool = False

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]


class ObjectStore:
    """One fsspec file system with request counting and credential-free errors; thread-safe.

    Args:
        fs: an fsspec file system (``s3fs.S3FileSystem``, ``MemoryFileSystem``, ...).
        protocol: its protocol, for messages (``s3``).
        secrets: credential values to keep out of every message.
    """

    def __init__(self, fs: Any, protocol: str, secrets: list[str] | None = None) -> None:
        self.fs = fs
        self.protocol = protocol
        self.requests = 0
        self._secrets = list(secrets or [])
        self._lock = threading.Lock()
        self._s3 = protocol in ("s3", "s3a") and hasattr(fs, "call_s3")

    @classmethod
    def open(
        cls,
        url: str | RemoteURL,
        endpoint_url: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> tuple[ObjectStore, RemoteURL]:
        """The store for ``url`` and the location without credentials.

        Raises:
            ValueError: a malformed URL, or no fsspec implementation for its protocol.
        """
        remote, credentials = parse_url(url)
        opts = storage_options(remote, credentials, endpoint_url, options)
        secrets = secret_values(opts)
        try:
            import fsspec
        except ImportError:
            raise ValueError("reading or writing object storage needs fsspec (pip install 'monitor-cb[s3]')") from None
        if remote.protocol in ("s3", "s3a"):
            opts = _s3_defaults(opts)
        try:
            fs = _filesystem(fsspec, remote.protocol, opts)
        except ImportError as exc:
            raise ValueError(
                f"{remote.protocol}:// needs its fsspec package ({redact_credentials(exc, secrets)}); "
                "for S3, OBS and MinIO: pip install 'monitor-cb[s3]'"
            ) from None
        except ValueError as exc:
            raise ValueError(f"{remote}: {redact_credentials(exc, secrets)}") from None
        return cls(fs, remote.protocol, secrets), remote

    # ------------------------------------------------------------------ reading
    def list_dir(self, path: str) -> list[Entry] | None:
        """Objects and sub-"directories" directly under ``path``; None when there is nothing there."""
        if self._s3:
            bucket, _, key = path.partition("/")
            prefix = key.rstrip("/") + "/" if key else ""
            return self._s3_list(bucket, prefix, delimiter="/", start_after=None) or None
        try:
            self._count()
            items = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001 - every SDK error becomes one StorageError
            raise self._error("list", path, exc) from None
        entries = [_entry(item) for item in items]
        return [e for e in entries if e.path.rstrip("/") != path.rstrip("/")] or None

    def list_prefix(self, prefix: str, start_after: str | None = None) -> list[Entry]:
        """Every object whose path starts with ``prefix`` (no delimiter), in key order, after ``start_after``."""
        if self._s3:
            bucket, _, key = prefix.partition("/")
            after = start_after.partition("/")[2] if start_after else None
            return self._s3_list(bucket, key, delimiter=None, start_after=after)
        parent = prefix.rsplit("/", 1)[0]
        try:
            self._count()
            found = self.fs.find(parent, detail=True, withdirs=False)
        except FileNotFoundError:
            return []
        except Exception as exc:  # noqa: BLE001
            raise self._error("list", prefix, exc) from None
        entries = [_entry(item) for item in found.values()]
        return sorted(
            (e for e in entries if e.path.startswith(prefix) and (start_after is None or e.path > start_after)),
            key=lambda e: e.path,
        )

    def read(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        """Bytes ``[start, end)`` of an object (all of it by default)."""
        try:
            self._count()
            return bytes(self.fs.cat_file(path, start=start, end=end))
        except FileNotFoundError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self._error("read", path, exc) from None

    # ------------------------------------------------------------------ writing
    def put(self, path: str, data: bytes) -> None:
        """Write a whole object (a new one, or a replacement)."""
        try:
            self._count()
            self.fs.pipe_file(path, data)
        except Exception as exc:  # noqa: BLE001
            raise self._error("write", path, exc) from None

    def delete(self, paths: list[str]) -> None:
        """Delete objects (missing ones ignored)."""
        if not paths:
            return
        try:
            self._count()
            self.fs.rm(paths)
        except FileNotFoundError:
            return
        except Exception as exc:  # noqa: BLE001
            raise self._error("delete", paths[0], exc) from None

    # ------------------------------------------------------------------ helpers
    def url(self, path: str) -> str:
        """``protocol://path``, for messages."""
        return f"{self.protocol}://{path}"

    def _count(self, n: int = 1) -> None:
        with self._lock:
            self.requests += n

    def _error(self, what: str, path: str, exc: BaseException) -> StorageError:
        detail = redact_credentials(f"{type(exc).__name__}: {exc}", self._secrets)
        return StorageError(f"cannot {what} {redact_credentials(self.url(path), self._secrets)}: {detail}")

    def _s3_list(self, bucket: str, prefix: str, delimiter: str | None, start_after: str | None) -> list[Entry]:
        entries: list[Entry] = []
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": LIST_PAGE}
        if delimiter:
            kwargs["Delimiter"] = delimiter
        if start_after:
            kwargs["StartAfter"] = start_after
        while True:
            try:
                self._count()
                page = self.fs.call_s3("list_objects_v2", **kwargs)
            except FileNotFoundError:
                # Listing never 404s for a missing prefix (that is an empty page): this is NoSuchBucket.
                # Said plainly, so a mistyped bucket does not read as "no runs yet".
                raise StorageError(
                    f"cannot list {redact_credentials(self.url(f'{bucket}/{prefix}'), self._secrets)}: "
                    f"the bucket {bucket!r} "
                    "does not exist (check its name, and the endpoint for OBS, MinIO or Ceph)"
                ) from None
            except Exception as exc:  # noqa: BLE001
                raise self._error("list", f"{bucket}/{prefix}", exc) from None
            for common in page.get("CommonPrefixes", []):
                entries.append(Entry(f"{bucket}/{common['Prefix']}".rstrip("/"), 0, "", 0.0, True))
            for item in page.get("Contents", []):
                stamp = item.get("LastModified")
                entries.append(
                    Entry(
                        f"{bucket}/{item['Key']}",
                        int(item.get("Size", 0)),
                        str(item.get("ETag", "")).strip('"'),
                        stamp.timestamp() if isinstance(stamp, datetime) else 0.0,
                    )
                )
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                break
            kwargs["ContinuationToken"] = token
            kwargs.pop("StartAfter", None)
        entries.sort(key=lambda e: e.path)
        return entries


def _filesystem(fsspec: Any, protocol: str, options: dict[str, Any]) -> Any:
    """fsspec's file system for these options, created once (fsspec's own instance cache is bypassed:
    the instances here carry our retry setting, and nobody else's)."""
    key = protocol + json.dumps(options, sort_keys=True, default=repr)
    with _FS_LOCK:
        fs = _FILESYSTEMS.get(key)
        if fs is None:
            fs = fsspec.filesystem(protocol, skip_instance_cache=True, **options)
            if protocol in ("s3", "s3a"):
                fs.retries = 1  # s3fs's own retry loop (minutes when the network is down): off, callers retry
            _quiet_connection_errors(getattr(fs, "loop", None))
            _FILESYSTEMS[key] = fs
        return fs


def _quiet_connection_errors(loop: Any) -> None:
    """Keep asyncio's "Task exception was never retrieved" tracebacks of dropped connections out of the
    training log: the failed call itself already raised, was counted and warned about once."""
    if loop is None or getattr(loop, "_monitor_cb_quiet", False):
        return
    default = loop.get_exception_handler()

    def handler(event_loop: Any, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), (ConnectionError, TimeoutError, OSError)) or _client_error(
            context.get("exception")
        ):
            return
        if default is not None:
            default(event_loop, context)
        else:
            event_loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
    loop._monitor_cb_quiet = True


def _client_error(exc: object) -> bool:
    try:
        from aiohttp import ClientError
    except ImportError:  # pragma: no cover - aiohttp comes with s3fs
        return False
    return isinstance(exc, ClientError)


def _s3_defaults(options: Mapping[str, Any]) -> dict[str, Any]:
    """Short timeouts and one SDK attempt, under whatever ``config_kwargs`` the user gave."""
    out = dict(options)
    config = dict(_S3_CONFIG)
    config.update(out.get("config_kwargs") or {})
    out["config_kwargs"] = config
    out.setdefault("use_listings_cache", False)
    return out


def _entry(item: Mapping[str, Any]) -> Entry:
    """An fsspec ``ls``/``find`` detail dict as an :class:`Entry` (every backend spells mtime its own way)."""
    mtime = 0.0
    for key in ("LastModified", "last_modified", "mtime", "updated", "created", "time"):
        value = item.get(key)
        if isinstance(value, datetime):
            mtime = value.timestamp()
            break
        if isinstance(value, (int, float)) and value:
            mtime = float(value)
            break
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                mtime = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
                break
    etag = item.get("ETag") or item.get("etag") or item.get("md5") or item.get("md5Hash") or ""
    size = int(item.get("size") or item.get("Size") or 0)
    if not etag:  # no content hash from this backend: size and time tell a replaced object
        etag = f"{size}-{mtime}"
    # Generic backends may answer with their root marker ("/bucket/key" for memory://): keys never start with /.
    name = str(item.get("name", "")).rstrip("/").lstrip("/")
    return Entry(name, size, str(etag).strip('"'), mtime, item.get("type") == "directory")
