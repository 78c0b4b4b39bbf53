"""Append metrics records to a JSONL file without ever hurting the training loop.

``MetricsWriter.log()`` only appends a dict to a bounded in-memory queue (about a
microsecond). A daemon thread encodes, appends complete lines with one
``write()`` per batch, fsyncs periodically and keeps the run metadata file up to
date. A full disk, an unwritable directory, a FIFO in place of the file or a
hung filesystem each produce one warning; training goes on and the number of
dropped records is counted and written to the metadata when possible.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import operator
import os
import socket
import stat
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from monitor_cb.record import (
    DEFAULT_STEM,
    METRICS_SUFFIX,
    RESERVED_KEYS,
    SCHEMA_VERSION,
    SEG_LIMIT,
    STEP_LIMIT,
    Unwritable,
    check_step,
    encode_record,
    encode_value,
    meta_path_for,
    metrics_filename,
)

try:  # orjson is ~15x faster than json.dumps; values are pre-encoded so NaN never becomes null
    import orjson

    def _dumps_line(record: dict[str, Any]) -> bytes:
        return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)

except ImportError:  # pragma: no cover - orjson is a pinned dependency

    def _dumps_line(record: dict[str, Any]) -> bytes:
        return (json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n").encode()


FINAL_STATUSES = ("finished", "failed", "stopped")
_STOP = object()
_META_CAP = 1 << 20  # a previous metadata file larger than this is not ours: ignored
_TAIL_BYTES = 64 << 10  # the end of a previous metrics file read for its last segment


class MonitorWarning(UserWarning):
    """A soft problem in the monitor (I/O failure, dropped records); training continues."""


def detect_rank() -> tuple[int, int]:
    """Rank and world size from the launcher's environment, (0, 1) when not distributed."""
    env = os.environ
    rank = env.get("RANK_ID") or env.get("RANK") or env.get("OMPI_COMM_WORLD_RANK") or "0"
    size = env.get("RANK_SIZE") or env.get("WORLD_SIZE") or env.get("OMPI_COMM_WORLD_SIZE") or "1"
    try:
        return max(int(rank), 0), max(int(size), 1)
    except ValueError:
        return 0, 1


def resolve_metrics_path(
    log_dir: str | os.PathLike[str] | None,
    log_file: str | os.PathLike[str] | None,
    rank: int,
    world_size: int,
) -> Path:
    """Where this rank writes.

    ``log_dir`` names a run directory (``logs/exp001``); ``log_file`` names a file
    (the origin article's ``logs/exp001/metrics.jsonl``). With several ranks each
    rank gets its own file beside the named one, never a shared file.
    """
    if log_file is not None:
        path = Path(log_file)
        if world_size <= 1 and rank == 0:
            return path
        stem = path.name[: -len(METRICS_SUFFIX)] if path.name.endswith(METRICS_SUFFIX) else path.stem
        return path.with_name(metrics_filename(rank, world_size, stem or DEFAULT_STEM))
    if log_dir is None:
        raise ValueError("give a run directory (log_dir='logs/exp001') or a file (log_file=...)")
    return Path(log_dir) / metrics_filename(rank, world_size)


class MetricsWriter:
    """Append-only writer for one rank's metrics stream plus its metadata file.

    Args:
        log_dir: run directory, created if missing (``logs/exp001``).
        log_file: alternative to ``log_dir``: the metrics file itself.
        rank: this process's rank; default from the launcher's environment.
        world_size: number of ranks; default from the launcher's environment.
        config: hyperparameters to store in the run metadata.
        run_name: display name; default is the run directory's name.
        queue_size: records held while the disk is slow; beyond it records are dropped.
        fsync_interval: seconds between ``fsync`` calls (0 disables).
        extra_meta: further metadata fields (versions, command line overrides, ...).
        upload: also ship this rank's files to object storage, ``"s3://bucket/prefix/exp001"``
            or :class:`monitor_cb.storage.shipper.UploadOptions`: closed chunks from a background
            thread, the local files stay complete (docs/DEPLOYMENT.md). Checked here; a slow or
            lost network later only delays the upload.

    Raises:
        ValueError: an argument is wrong (no path, a negative rank, ``config`` not a mapping, ...).
            Whatever a previous run left on disk (a corrupt metadata file, a directory or a
            FIFO in its place) never raises: the writer starts a new segment after the last
            one it can find, or segment 1.

    Values: every numeric scalar (numpy of any width, 0-d arrays, MindSpore Tensor scalars,
    ``Decimal``, ints of any size) is written as a number (``monitor_cb.record.encode_value``);
    a value that cannot be (``10**400``, a complex number) leaves its key out of the record,
    with one warning per key; the rest of the record is written. ``step`` must be an integer
    from 0 to ``STEP_LIMIT - 1`` or None; anything else, and a reserved key among the
    metrics, raises ValueError at the call.

    Example:
        >>> writer = MetricsWriter("logs/exp002", config={"lr": 1e-3})
        >>> writer.log(step=1, loss=2.3, lr=1e-3)
        >>> writer.close()
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str] | None = None,
        *,
        log_file: str | os.PathLike[str] | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        config: Mapping[str, Any] | None = None,
        run_name: str | None = None,
        queue_size: int = 10_000,
        fsync_interval: float = 2.0,
        extra_meta: Mapping[str, Any] | None = None,
        upload: Any = None,
    ) -> None:
        _check_int("queue_size", queue_size, 1)
        if isinstance(fsync_interval, bool) or not isinstance(fsync_interval, (int, float)) or not fsync_interval >= 0:
            raise ValueError(f"fsync_interval must be a number of seconds >= 0 (0 disables), got {fsync_interval!r}")
        if config is not None and not isinstance(config, Mapping):
            raise ValueError(f"config must be a mapping (dict) of hyperparameters, got {type(config).__name__}")
        if extra_meta is not None and not isinstance(extra_meta, Mapping):
            raise ValueError(f"extra_meta must be a mapping (dict), got {type(extra_meta).__name__}")
        env_rank, env_size = detect_rank()
        self.rank = env_rank if rank is None else _check_int("rank", rank, 0)
        self.world_size = env_size if world_size is None else _check_int("world_size", world_size, 1)
        self.path = resolve_metrics_path(log_dir, log_file, self.rank, self.world_size)
        self.meta_path = meta_path_for(self.path)
        self.dropped = 0
        self.written = 0
        self._fsync_interval = fsync_interval
        # A deque plus a wake-up event: appending is lock-free under the GIL (~30 ns),
        # where queue.Queue.put costs ~0.6 us and contends with the writer thread.
        self._pending: deque[Any] = deque()
        self._max_pending = queue_size
        self._wake = threading.Event()
        self._sleeping = False
        self._warned: set[str] = set()
        self._closed = False
        self._fd: int | None = None
        self._torn = False
        self._meta = self._initial_meta(config, run_name, extra_meta)
        self.segment = self._meta["segment"]
        self.shipper = _start_shipper(self.path, upload)
        self._thread = threading.Thread(target=self._run, name=f"monitor-writer-{self.rank}", daemon=True)
        self._thread.start()

    # ----------------------------------------------------------------- public API
    def log(self, step: int | None = None, **metrics: Any) -> None:
        """Queue one record; never blocks and never raises into the caller for I/O or values.

        Raises:
            ValueError: ``step`` is not an integer in ``[0, STEP_LIMIT)`` or None, or a metric
                uses a reserved key (``step``, ``t``, ``rank``, ``seg``).
        """
        if step is not None and (type(step) is not int or not 0 <= step < STEP_LIMIT):
            step = check_step(step)
        if self._closed or not RESERVED_KEYS.isdisjoint(metrics):
            self._reject(metrics)
            return
        # The record dict is built on the writer thread: the caller pays only for this tuple.
        self._put(("rec", (step, time.time(), metrics)))

    def log_at(self, t: float, step: int | None = None, **metrics: Any) -> None:
        """Like :meth:`log`, with the record's wall-clock time given (imports, replays, samples).

        Raises:
            ValueError: as :meth:`log`, or ``t`` is not a finite number of Unix seconds.
        """
        if step is not None and (type(step) is not int or not 0 <= step < STEP_LIMIT):
            step = check_step(step)
        stamp = _check_time(t)
        if self._closed or not RESERVED_KEYS.isdisjoint(metrics):
            self._reject(metrics)
            return
        self._put(("rec", (step, stamp, metrics)))

    def log_dict(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """Queue one record from a mapping (keys may contain characters kwargs cannot).

        Raises:
            ValueError: as :meth:`log`; a ``"step"`` key is reserved too (pass ``step=``).
        """
        if not isinstance(metrics, Mapping):
            raise ValueError(f"log_dict takes a mapping of metric names to values, got {type(metrics).__name__}")
        record = {str(k) if type(k) is not str else k: v for k, v in metrics.items()}
        if not RESERVED_KEYS.isdisjoint(record):
            self._reject(record)
            return
        self.log(step, **record)

    def _reject(self, metrics: Mapping[str, Any]) -> None:
        bad = RESERVED_KEYS.intersection(metrics)
        if bad:
            raise ValueError(f"metric names {sorted(bad)} are reserved by the record format")
        self.dropped += 1
        self._warn_once("closed", f"MetricsWriter for {self.path} is closed; record dropped")

    def update_meta(self, **fields: Any) -> None:
        """Merge fields into the run metadata (written off the calling thread; values as for ``config``)."""
        self._put(("meta", fields))

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything queued so far is on disk; False on timeout."""
        done = threading.Event()
        if not self._put(("flush", done)):
            return False
        return done.wait(timeout)

    def close(
        self,
        status: str = "finished",
        reason: str | None = None,
        timeout: float = 5.0,
        end_time: float | None = None,
    ) -> None:
        """Write the final status and stop the writer thread.

        Waits at most ``timeout`` seconds so a hung filesystem cannot hang the end
        of training; anything still queued then is counted as dropped. ``end_time``
        defaults to now (imports and samples pass the original one).
        """
        if self._closed:
            return
        if status not in FINAL_STATUSES:
            raise ValueError(f"status must be one of {FINAL_STATUSES}, got {status!r}")
        self._closed = True
        final = {"status": status, "end_time": time.time() if end_time is None else end_time, "reason": reason}
        self._pending.append(("meta", final))  # past the bound on purpose: the final status matters
        self._pending.append(_STOP)
        self._wake.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.dropped += sum(1 for item in list(self._pending) if item is not _STOP and item[0] == "rec")
            self._warn_once("hung", f"metrics writer for {self.path} did not finish in {timeout}s")
        if self.shipper is not None:
            self.shipper.close()  # bounded by its close_timeout_s; warns how to finish if the network is down

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close("finished")
        elif issubclass(exc_type, KeyboardInterrupt):
            self.close("stopped", reason="KeyboardInterrupt")
        else:
            self.close("failed", reason=f"{exc_type.__name__}: {exc}")

    # ------------------------------------------------------------ caller thread
    def _put(self, item: Any) -> bool:
        if len(self._pending) >= self._max_pending:
            self.dropped += 1
            self._warn_once(
                "full",
                f"metrics writer queue full ({self._max_pending}): the disk under {self.path} "
                "is too slow or hung; dropping records, training continues",
            )
            return False
        self._pending.append(item)
        if self._sleeping:
            self._sleeping = False
            self._wake.set()
        return True

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, MonitorWarning, stacklevel=3)

    def _initial_meta(
        self,
        config: Mapping[str, Any] | None,
        run_name: str | None,
        extra: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        previous = _read_json(self.meta_path)
        segment = min(max(_segment_in(previous), _last_segment(self.path)) + 1, SEG_LIMIT - 1)
        now = time.time()
        first_start = previous.get("first_start_time")
        if isinstance(first_start, bool) or not isinstance(first_start, (int, float)) or not math.isfinite(first_start):
            first_start = now
        meta: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "name": run_name or self.path.parent.name,
            "status": "running",
            "reason": None,
            "start_time": now,
            "first_start_time": first_start,
            "end_time": None,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "argv": _safe_argv(sys.argv),
            "python": sys.version.split()[0],
            "rank": self.rank,
            "world_size": self.world_size,
            "segment": segment,
            "metrics_file": self.path.name,
            "config": _encode_meta(dict(config or {})),
            "dropped_records": 0,
        }
        meta.update(_encode_meta(dict(extra or {})))
        return meta

    # ------------------------------------------------------------ writer thread
    def _run(self) -> None:
        self._open()
        self._write_meta()
        last_sync = time.monotonic()
        while True:
            batch = self._next_batch()
            try:
                stop = self._handle_batch(batch)
            except Exception as exc:  # noqa: BLE001 - the thread must live on, or the queue fills and close() waits
                self._warn_once("thread", f"metrics writer for {self.path}: unexpected error {exc!r}; continuing")
                stop = any(item is _STOP for item in batch)
            if self._fd is not None and self._fsync_interval and time.monotonic() - last_sync > self._fsync_interval:
                with contextlib.suppress(OSError):
                    os.fsync(self._fd)
                last_sync = time.monotonic()
            if stop:
                break
        self._finish()

    def _next_batch(self, limit: int = 4096) -> list[Any]:
        pending = self._pending
        while not pending:
            self._sleeping = True
            if not pending:  # re-check after announcing sleep: no lost wake-up
                self._wake.wait(0.5)
            self._sleeping = False
            self._wake.clear()
        batch = []
        while pending and len(batch) < limit:
            batch.append(pending.popleft())
        return batch

    def _handle_batch(self, batch: list[Any]) -> bool:
        lines: list[bytes] = []
        stop = False
        meta_changed = False
        events: list[threading.Event] = []
        for item in batch:
            if item is _STOP:
                stop = True
                continue
            kind, payload = item
            if kind == "rec":
                line = self._encode(*payload)
                if line is not None:
                    lines.append(line)
            elif kind == "meta":
                self._meta.update(_encode_meta(payload))
                meta_changed = True
            elif kind == "flush":
                events.append(payload)
        if lines:
            self._append(b"".join(lines), len(lines))
        if meta_changed:
            self._write_meta()
        for event in events:
            event.set()
        return stop

    def _encode(self, step: int | None, stamp: float, metrics: Mapping[str, Any]) -> bytes | None:
        """One record as a line; a value that cannot be written leaves only its key out (warned once per key)."""
        record: dict[str, Any] = {"step": step, "t": stamp, "rank": self.rank, "seg": self.segment}
        if step is None:
            del record["step"]
        record.update(metrics)
        dropped: list[tuple[str, str]] = []
        try:
            encoded = encode_record(record, dropped)
            try:
                line = _dumps_line(encoded)
            except Exception:  # noqa: BLE001 - rare: an int beyond 64 bits (orjson's limit), or worse
                for key in list(encoded):
                    fixed, why = _fixed_value(encoded[key])
                    if why:
                        dropped.append((key, why))
                        del encoded[key]
                    else:
                        encoded[key] = fixed
                line = _dumps_line(encoded)
        except Exception as exc:  # noqa: BLE001 - never raise into training
            self.dropped += 1
            self._warn_once("encode", f"could not encode a metrics record: {exc!r}; record dropped")
            return None
        for key, why in dropped:
            self._warn_once(f"value:{key}", f"metric {key!r} left out of the record: {why} (warned once for this key)")
        return line

    def _open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # O_NONBLOCK: opening a FIFO with no reader fails at once instead of hanging.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            self._warn_once("open", f"cannot open {self.path} for writing ({exc}); metrics are not recorded")
            return
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            self._warn_once("open", f"{self.path} is not a regular file; metrics are not recorded")
            return
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        self._fd = fd
        # A previous writer killed mid-line leaves a torn tail: start on a fresh line.
        self._torn = _ends_without_newline(self.path)

    def _append(self, data: bytes, count: int) -> None:
        if self._fd is None:
            self.dropped += count
            return
        prefix = b"\n" if self._torn else b""
        data = prefix + data
        written = 0
        try:
            while written < len(data):  # short writes happen on full disks and signals
                more = os.write(self._fd, data[written:])
                if more == 0:
                    raise OSError(errno.ENOSPC, "short write")
                written += more
            self._torn = False
            self.written += count
            if self.shipper is not None:
                self.shipper.notify(count)
        except OSError as exc:
            # Whatever reached the disk, the next write starts on a new line.
            landed = data[len(prefix) : written].count(b"\n") if written > len(prefix) else 0
            self._torn = data[written - 1 : written] != b"\n" if written > 0 else bool(prefix)
            self.written += landed
            self.dropped += count - landed
            self._warn_once("write", f"cannot write metrics to {self.path} ({exc}); records dropped")

    def _write_meta(self) -> None:
        if self._fd is None and not self.written:
            return  # nothing could be opened: there is no stream to describe
        self._meta["dropped_records"] = self.dropped
        self._meta["written_records"] = self.written
        tmp = self.meta_path.with_name(f".{self.meta_path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_bytes(json.dumps(self._meta, indent=1, allow_nan=False).encode())
            os.replace(tmp, self.meta_path)
            if self.shipper is not None:
                self.shipper.poke()
        except Exception as exc:  # noqa: BLE001 - OSError mostly; whatever it is, training goes on
            with contextlib.suppress(OSError):
                tmp.unlink()
            self._warn_once("meta", f"cannot write run metadata {self.meta_path} ({exc})")

    def _finish(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.fsync(self._fd)
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        self._write_meta()


def _start_shipper(path: Path, upload: Any) -> Any:
    """The background uploader of this rank's files, or None (fsspec is imported only when asked)."""
    if upload is None or upload is False:
        return None
    from monitor_cb.storage.shipper import Shipper, UploadOptions

    return Shipper(path.parent, UploadOptions.coerce(upload), files=lambda: [path]).start()


def _safe_argv(argv: list[str]) -> list[str]:
    """The command line for the metadata, with URL credentials and the SDK's secret values masked."""
    from monitor_cb.storage.urls import redact

    return [redact(arg) for arg in argv]


def _fixed_value(value: Any) -> tuple[Any, str]:
    """(a value orjson can write, "") -- itself, or an int beyond 64 bits as its nearest double -- else (None, why)."""
    try:
        _dumps_line({"": value})
        return value, ""
    except Exception:  # noqa: BLE001
        pass
    try:
        fixed = encode_value(value)  # ints outside 64 bits become doubles; too large for one: Unwritable
        _dumps_line({"": fixed})
    except Exception as exc:  # noqa: BLE001
        return None, str(exc) if isinstance(exc, Unwritable) else f"not encodable ({exc})"
    return fixed, ""


def _check_int(name: str, value: Any, minimum: int) -> int:
    """A user's integer argument, or a ValueError naming it."""
    try:
        number = operator.index(value)
    except TypeError:
        number = None
    if number is None or isinstance(value, bool) or number < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return number


def _check_time(t: Any) -> float:
    try:
        stamp = float(t)
    except (TypeError, ValueError, OverflowError):
        stamp = math.nan
    if isinstance(t, (bool, str)) or not math.isfinite(stamp):
        raise ValueError(f"t must be a finite number of Unix seconds, got {t!r}")
    return stamp


def _encode_meta(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata values as JSON: what cannot be a number is kept as its text (it is only shown)."""
    try:
        return encode_value(dict(fields), fallback=str)  # the full path: ints beyond 64 bits checked too
    except Exception as exc:  # noqa: BLE001 - a hostile object's __str__ or a broken mapping
        return {"unreadable_fields": f"{type(exc).__name__}: {exc}"[:200]}


def _read_regular(path: Path, cap: int, tail: bool = False) -> bytes | None:
    """A regular file's bytes (its last ``cap`` with ``tail``); None for anything else.

    Opened without blocking (a FIFO in place of the file) and checked to be a regular file
    (a directory, a device); a file over ``cap`` bytes is refused unless ``tail``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_size > cap and not tail):
            return None
        start = max(st.st_size - cap, 0)
        return os.pread(fd, st.st_size - start, start)
    except OSError:
        return None
    finally:
        os.close(fd)


def _read_json(path: Path) -> dict[str, Any]:
    """A previous metadata file as a dict; {} when it is missing, not a regular file, too big or not JSON."""
    data = _read_regular(path, _META_CAP)
    if not data:
        return {}
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _segment_in(meta: Mapping[str, Any]) -> int:
    """The segment a previous metadata file names; 0 when it names none we can trust."""
    value = meta.get("segment")
    return value if type(value) is int and 0 < value < SEG_LIMIT else 0


def _last_segment(path: Path) -> int:
    """The largest valid ``seg`` among the last lines of a previous metrics file (0 when none).

    The metadata file can be lost or corrupt while the metrics survive; a new writer must
    still start a later segment, or the reader would file its records under an older one.
    """
    data = _read_regular(path, _TAIL_BYTES, tail=True)
    if not data:
        return 0
    found = 0
    for line in data.split(b"\n")[1:] if len(data) >= _TAIL_BYTES else data.split(b"\n"):
        if b'"seg"' not in line:
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        seg = record.get("seg") if isinstance(record, dict) else None
        if type(seg) is int and 0 < seg < SEG_LIMIT:
            found = max(found, seg)
    return found


def _ends_without_newline(path: Path) -> bool:
    """Whether a previous metrics file ends in a torn line (read without blocking: a FIFO there says no)."""
    last = _read_regular(path, 1, tail=True)
    return bool(last) and last != b"\n"
