"""Append metrics records to a JSONL file without ever hurting the training loop.

``MetricsWriter.log()`` only appends a dict to a bounded in-memory queue (about a
microsecond). A daemon thread encodes, appends complete lines with one
``write()`` per batch, fsyncs periodically and keeps the run metadata file up to
date. A full disk, an unwritable directory, a FIFO in place of the file or a
hung filesystem each produce one warning; training goes on and the number of
dropped records is counted and written to the metadata when possible. A metrics
file deleted while training (its run directory removed) is noticed within
:data:`GONE_CHECK_S` and at every flush and close: one warning, the records it held
counted as dropped (``file_deleted``), and writing goes on into a new file (and a
new segment) at its path, so the metadata never claims records that are not on disk.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import operator
import os
import stat
import threading
import time
import warnings
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from monitor_cb.record import (
    RESERVED_KEYS,
    STEP_LIMIT,
    Unwritable,
    check_step,
    encode_record,
    encode_value,
)
from monitor_cb.train.run_meta import (
    MetaFields,
    detect_rank,
    encode_meta,
    give_up_note,
    initial_meta,
    resolve_metrics_path,
)
from monitor_cb.train.writer_claim import claim_file, holder_text, read_json, read_regular
from monitor_cb.train.writer_queue import (
    FIRST_GUESS,
    WriteMeter,
    capacity,
    queue_budget,
    record_bytes,
    thread_sched_s,
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
WRITE_CHUNK = 256 << 10  # bytes per write() call
META_DROPS_S = 2.0  # new drops are written to the metadata at most this often while the run goes on
META_GIVE_UP_S = 2.0  # close() waits this long for the final metadata when the writer thread is stuck
GONE_CHECK_S = 0.25  # the writer thread checks this often (and at each flush and close) that its file is still there


class MonitorWarning(UserWarning):
    """A soft problem in the monitor (I/O failure, dropped records); training continues."""


class MetricsWriter:
    """Append-only writer for one rank's metrics stream plus its metadata file.

    Args:
        log_dir: run directory, created if missing (``logs/exp001``).
        log_file: alternative to ``log_dir``: the metrics file itself.
        rank: this process's rank; default from the launcher's environment.
        world_size: number of ranks; default from the launcher's environment.
        config: hyperparameters to store in the run metadata.
        run_name: display name; default is the run directory's name.
        queue_size: records held while the writer thread catches up; beyond it records are dropped.
            Default (None): as many as ``queue_bytes`` of memory hold (measured per record).
        queue_bytes: memory the queue may hold; default a quarter of the memory available at start
            (split between up to 8 ranks of a node), at most 768 MiB (about 1.3 million records of
            ~8 metrics). Ignored with ``queue_size``.
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

    One writer per file: while another live writer (this process or another) writes this rank's
    file, this one writes ``metrics.writer2.jsonl`` (``metrics.writer2.rank3.jsonl``, ...) with its
    own metadata and the next segment, and warns once (:mod:`monitor_cb.train.writer_claim`).

    Closing finishes what was accepted: :meth:`close` waits while the writer thread makes progress
    and gives up only after ``timeout`` seconds without any (a hung disk); the metadata then counts
    the records not written (``drop_causes``, ``writer_note``).

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
        queue_size: int | None = None,
        queue_bytes: int | None = None,
        fsync_interval: float = 2.0,
        extra_meta: Mapping[str, Any] | None = None,
        upload: Any = None,
    ) -> None:
        if queue_size is not None:
            _check_int("queue_size", queue_size, 1)
        if queue_bytes is not None:
            _check_int("queue_bytes", queue_bytes, 1)
        if isinstance(fsync_interval, bool) or not isinstance(fsync_interval, (int, float)) or not fsync_interval >= 0:
            raise ValueError(f"fsync_interval must be a number of seconds >= 0 (0 disables), got {fsync_interval!r}")
        if config is not None and not isinstance(config, Mapping):
            raise ValueError(f"config must be a mapping (dict) of hyperparameters, got {type(config).__name__}")
        if extra_meta is not None and not isinstance(extra_meta, Mapping):
            raise ValueError(f"extra_meta must be a mapping (dict), got {type(extra_meta).__name__}")
        env_rank, env_size = detect_rank()
        self.rank = env_rank if rank is None else _check_int("rank", rank, 0)
        self.world_size = env_size if world_size is None else _check_int("world_size", world_size, 1)
        primary = resolve_metrics_path(log_dir, log_file, self.rank, self.world_size)
        self._primary = primary
        upload_options = _upload_options(upload)  # a wrong URL raises before anything is created
        self._claim = claim_file(primary)
        self.path = self._claim.path
        self.meta_path = self._claim.meta_path
        self.written = 0
        # Records not written, by cause (DROP_CAUSES); each counter has one thread that adds to it.
        self._dropped_full = {"producer": 0, "disk": 0}  # caller thread
        self._dropped_closed = 0  # caller thread
        self._dropped_io = 0  # writer thread
        self._dropped_encode = 0  # writer thread
        self._dropped_deleted = 0  # writer thread: records written to a file deleted since
        self._file_written = 0  # writer thread: records written to the file open now
        self._checked_at = time.monotonic()  # when the writer thread last checked its file is still there
        self._unwritten = 0  # left in the queue when close() gave up (set once, by whoever finishes last)
        self._fsync_interval = fsync_interval
        # A deque plus a wake-up event: appending is lock-free under the GIL (~30 ns),
        # where queue.Queue.put costs ~0.6 us and contends with the writer thread.
        self._pending: deque[Any] = deque()
        self._budget = None if queue_size is not None else (queue_bytes or queue_budget(world_size=self.world_size))
        self._record_bytes = float(FIRST_GUESS)
        self._max_pending = queue_size if queue_size is not None else capacity(self._budget or 0, FIRST_GUESS)
        self._meter = WriteMeter()
        self._full_at = -math.inf  # time.monotonic() when the last drop for a full queue was judged
        self._full_cause = "producer"
        self._progress = 0  # bumped by the writer thread at every write and batch: close() waits while it moves
        self._inflight = 0  # records in the write under way
        self._meta_lock = threading.Lock()
        self._meta_seq = 0  # snapshots of the metadata taken, and the newest one on disk
        self._meta_written = 0
        self._meta_at = 0.0  # time.monotonic() of the last metadata write
        self._abandoned = False  # close() gave up on the thread
        self._gave_up = ""  # when it did, for the metadata's note
        self._finished = False  # the thread wrote its final metadata
        self._wake = threading.Event()
        self._sleeping = False
        self._warned: set[str] = set()
        self._closed = False
        self._fd: int | None = None
        self._torn = False
        self._meta = self._initial_meta(config, run_name, extra_meta)
        self.segment = self._meta["segment"]
        if self._claim.busy:
            self._warn_once(
                "busy",
                f"{primary} is being written by another live writer ({holder_text(self._claim.busy[0])}); "
                f"this writer writes {self.path.name} (segment {self.segment}) instead",
            )
        try:
            self.shipper = _start_shipper(self.path, upload_options)
        except BaseException:
            self._claim.release()
            raise
        # Set when the thread ends. Waited on instead of Thread.join: a Ctrl-C that interrupts join() on
        # CPython 3.11 marks the thread stopped while it still runs, and every later join() returns at once.
        self._thread_done = threading.Event()
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
        self._put((step, time.time(), metrics))

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
        self._put((step, stamp, metrics))

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
        self._dropped_closed += 1
        self._warn_once("closed", f"MetricsWriter for {self.path} is closed; record dropped")

    @property
    def dropped(self) -> int:
        """Records accepted by ``log()`` and not written, whatever the cause (the metadata's ``dropped_records``)."""
        return sum(self.drop_causes().values())

    def drop_causes(self) -> dict[str, int]:
        """Records not written, by cause (every key of :data:`DROP_CAUSES`)."""
        return {
            "queue_full_producer": self._dropped_full["producer"],
            "queue_full_disk": self._dropped_full["disk"],
            "disk_error": self._dropped_io,
            "unwritten_at_close": self._unwritten,
            "unencodable": self._dropped_encode,
            "after_close": self._dropped_closed,
            "file_deleted": self._dropped_deleted,
        }

    def update_meta(self, **fields: Any) -> None:
        """Merge fields into the run metadata (written off the calling thread; values as for ``config``)."""
        self._put_control(("meta", fields))

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything queued so far is on disk; False on timeout."""
        done = threading.Event()
        if self._closed:
            return False
        self._put_control(("flush", done))
        return done.wait(timeout)

    def close(
        self,
        status: str = "finished",
        reason: str | None = None,
        timeout: float = 5.0,
        end_time: float | None = None,
    ) -> None:
        """Write what was accepted, then the final status, and stop the writer thread.

        Waits as long as the writer thread makes progress (a burst of a million records takes
        seconds to drain), and gives up only after ``timeout`` seconds without any: a hung
        filesystem cannot hang the end of training. The metadata then still ends with the final
        status, and says how many records were not written (``drop_causes.unwritten_at_close``,
        ``writer_note``). ``end_time`` defaults to now (imports and samples pass the original one).
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
        try:
            if not self._wait_for_thread(timeout):
                self._give_up(
                    final, f"after {timeout:g} s without progress", f"the disk made no progress for {timeout}s"
                )
        except KeyboardInterrupt:  # Ctrl-C during a long drain: say what was left, then stop as asked
            self._give_up(final, "when interrupted", "close() was interrupted")
            with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C stops the wait
                # it ends its batch and writes the true counts (it is not stuck): wait for that, or the process
                # may exit with the metadata counting fewer lines than the file holds (a loaded machine took > 1 s)
                self._thread_done.wait(max(timeout, 1.0))
            self._claim.release()
            raise
        self._claim.release()
        if self.shipper is not None:
            self.shipper.close()  # bounded by its close_timeout_s; warns how to finish if the network is down

    def _wait_for_thread(self, timeout: float) -> bool:
        """Join the writer thread while it makes progress; False after ``timeout`` s without any."""
        seen = self._progress
        idle_since = time.monotonic()
        while True:
            if self._thread_done.wait(max(0.0, min(0.25, timeout))):
                return True
            now = time.monotonic()
            if self._progress != seen:
                seen, idle_since = self._progress, now
            elif now - idle_since >= timeout:
                return False

    def _give_up(self, final: dict[str, Any], when: str, why: str) -> None:
        """The thread is stuck (a hung disk): write the final metadata from here, counting what is left.

        If the thread ever returns, it writes nothing more but the metadata, with the counts then true.
        """
        with self._meta_lock:
            if self._finished:
                return
            self._abandoned = True
            self._gave_up = f"{when} (it then finished its write)"
            queued = sum(1 for item in list(self._pending) if type(item) is tuple and len(item) == 3)
            self._unwritten = self._inflight + queued
            meta = dict(self._meta)
            meta.update(encode_meta(final))
            note = give_up_note(self._unwritten, when)
            self._meta["writer_note"] = note
            meta["writer_note"] = note
            self._count_into(meta)
            self._meta_seq += 1
            seq = self._meta_seq
        self._warn_once(
            "hung",
            f"metrics writer for {self.path}: {why}; {self._unwritten:,} records were not written "
            f"({self.written:,} were); the metadata says so",
        )
        # The metadata may sit on the same hung disk: written from a helper thread, waited for a moment.
        helper = threading.Thread(target=self._replace_meta, args=(meta, seq), name="monitor-writer-meta", daemon=True)
        helper.start()
        helper.join(META_GIVE_UP_S)

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
    def _put(self, record: tuple[int | None, float, Any]) -> None:
        pending = self._pending
        if len(pending) >= self._max_pending:
            self._queue_full()
            return
        pending.append(record)
        if self._sleeping:
            self._sleeping = False
            self._wake.set()

    def _put_control(self, item: tuple[str, Any]) -> None:
        """A metadata update or flush: past the bound (they are few, and losing one would lose a status)."""
        self._pending.append(item)
        if self._sleeping:
            self._sleeping = False
            self._wake.set()

    def _queue_full(self) -> None:
        """Count a record dropped for a full queue, blamed on the disk or the producer (judged once a second)."""
        now = time.monotonic()
        if now - self._full_at > 1.0:  # judged anew every second of drops
            self._full_at = now
            verdict = self._meter.diagnose(now)
            self._full_cause = verdict.cause
            size = f"{self._max_pending:,} records" + (
                f", {self._budget / 2**20:,.0f} MiB" if self._budget is not None else ""
            )
            if verdict.cause == "disk":
                message = (
                    f"metrics writer queue full ({size}): the disk under {self.path.parent} is slow or hung "
                    f"({verdict.detail}); dropping records, training continues"
                )
            else:
                message = (
                    f"metrics writer queue full ({size}): records are logged faster than the writer thread "
                    f"can write them ({verdict.detail}); dropping records, training continues"
                )
            self._warn_once(f"full:{verdict.cause}", message)
        self._dropped_full[self._full_cause] += 1

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
        return initial_meta(
            read_json(self.meta_path),
            MetaFields(
                name=run_name or self.path.parent.name,
                rank=self.rank,
                world_size=self.world_size,
                segment=self._claim.segment,
                metrics_file=self.path.name,
            ),
            config,
            extra,
        )

    # ------------------------------------------------------------ writer thread
    def _run(self) -> None:
        try:
            self._run_batches()
        finally:
            self._thread_done.set()

    def _run_batches(self) -> None:
        self._meter.tid = threading.get_native_id()
        self._open()
        self._write_meta()
        last_sync = time.monotonic()
        while True:
            batch = self._next_batch()
            if self._abandoned:  # close() gave up while this thread was stuck: nothing more is written
                self._discard(batch)
                break
            try:
                stop = self._handle_batch(batch)
            except Exception as exc:  # noqa: BLE001 - the thread must live on, or the queue fills and close() waits
                self._warn_once("thread", f"metrics writer for {self.path}: unexpected error {exc!r}; continuing")
                stop = any(item is _STOP for item in batch)
            self._progress += 1
            now = time.monotonic()
            if self._fd is not None and self._fsync_interval and now - last_sync > self._fsync_interval:
                with contextlib.suppress(OSError):
                    os.fsync(self._fd)
                last_sync = time.monotonic()
            self._claim.heartbeat(now)
            if not stop and now - self._meta_at > META_DROPS_S and self.dropped != self._meta["dropped_records"]:
                self._write_meta()  # readers learn of drops while the run goes on, not only at its end
            if stop:
                break
        self._finish()

    def _next_batch(self, limit: int = 4096) -> list[Any]:
        pending = self._pending
        while not pending:
            self._sleeping = True
            if not pending:  # re-check after announcing sleep: no lost wake-up
                self._wake.wait(0.5)
                self._claim.heartbeat()  # the lock stays fresh through a long pause in logging
            self._sleeping = False
            self._wake.clear()
        batch = []
        while pending and len(batch) < limit:
            batch.append(pending.popleft())
        return batch

    def _handle_batch(self, batch: list[Any]) -> bool:
        started = time.perf_counter()
        lines: list[bytes] = []
        stop = False
        meta_changed = False
        events: list[threading.Event] = []
        sampled = False
        for item in batch:
            if item is _STOP:
                stop = True
                continue
            if len(item) == 3:
                if not sampled:  # one record a batch tells what the queue's records weigh
                    sampled = True
                    self._measure(item)
                line = self._encode(*item)
                if line is not None:
                    lines.append(line)
                continue
            kind, payload = item
            if kind == "meta":
                self._meta.update(encode_meta(payload))
                meta_changed = True
            elif kind == "flush":
                events.append(payload)
        encoded = time.perf_counter()
        sched_before = thread_sched_s(self._meter.tid)
        self._check_file(force=bool(events) or stop)  # before the write: these records go where they last
        if lines:
            self._append(b"".join(lines), len(lines))
        write_s = time.perf_counter() - encoded
        sched_after = thread_sched_s(self._meter.tid)
        blocked_s = (
            None if sched_before is None or sched_after is None else max(0.0, write_s - (sched_after - sched_before))
        )
        self._meter.add(len(lines), encoded - started, write_s, blocked_s)
        if meta_changed:
            self._write_meta()
        for event in events:
            event.set()
        return stop

    def _measure(self, record: tuple[Any, float, Any]) -> None:
        """Resize a memory-sized queue from one record's measured size (smoothed; a larger one counts at once)."""
        if self._budget is None:
            return
        size = record_bytes(record)
        measured = self._progress > 0 or self.written > 0  # else the first guess: replaced
        self._record_bytes = max(size, 0.9 * self._record_bytes + 0.1 * size) if measured else size
        self._max_pending = capacity(self._budget, self._record_bytes)

    def _discard(self, batch: list[Any]) -> None:
        """After close() gave up: count the records left (not written), keep the final status."""
        rest = batch + list(self._pending)
        self._pending.clear()
        self._unwritten = sum(1 for item in rest if type(item) is tuple and len(item) == 3)
        for item in rest:
            if type(item) is tuple and len(item) == 2 and item[0] == "meta":
                self._meta.update(encode_meta(item[1]))

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
            self._dropped_encode += 1
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
            self._dropped_io += count
            return
        prefix = b"\n" if self._torn else b""
        data = prefix + data
        written = 0
        view = memoryview(data)
        self._inflight = count
        try:
            while written < len(data):  # short writes happen on full disks and signals
                # At most WRITE_CHUNK a call, so close() sees a slow disk progress between calls.
                self._meter.begin_write()
                more = os.write(self._fd, view[written : written + WRITE_CHUNK])
                if more == 0:
                    raise OSError(errno.ENOSPC, "short write")
                written += more
                self._progress += 1
            self._torn = False
            self.written += count
            self._file_written += count
            if self.shipper is not None:
                self.shipper.notify(count)
        except OSError as exc:
            # Whatever reached the disk, the next write starts on a new line.
            landed = data[len(prefix) : written].count(b"\n") if written > len(prefix) else 0
            self._torn = data[written - 1 : written] != b"\n" if written > 0 else bool(prefix)
            self.written += landed
            self._file_written += landed
            self._dropped_io += count - landed
            self._warn_once("write", f"cannot write metrics to {self.path} ({exc}); records dropped")
        finally:
            self._inflight = 0
            self._meter.end_write()

    # ------------------------------------------------------------ the file deleted under the writer
    def _check_file(self, force: bool = False) -> None:
        """Every :data:`GONE_CHECK_S` (or now, when forced): if the open file is not the one at its path any
        more, count what it held as dropped and go on in a new file (two ``stat`` calls when nothing happened)."""
        now = time.monotonic()
        if not force and now - self._checked_at < GONE_CHECK_S:
            return
        self._checked_at = now
        if self._fd is None or not _gone(self._fd, self.path):
            return
        lost, old = self._file_written, self.path
        self.written -= lost
        self._dropped_deleted += lost
        self._file_written = 0
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = None
        self._claim.release()
        self._claim = claim_file(self._primary)  # the directory is made again; a new writer there keeps its file
        self.path = self._claim.path
        self.meta_path = self._claim.meta_path
        self.segment = self._claim.segment
        self._meta.update(segment=self.segment, metrics_file=self.path.name)
        self._warn_once(
            "gone",
            f"metrics file {old} was deleted while training (its directory removed?): the {lost:,} records "
            f"written to it are lost and counted as dropped; writing on into {self.path} (segment {self.segment})",
        )
        self._open()
        self._write_meta()

    def _write_meta(self) -> None:
        if self._fd is None and not self.written:
            return  # nothing could be opened: there is no stream to describe
        with self._meta_lock:
            self._count_into(self._meta)
            meta = dict(self._meta)
            self._meta_seq += 1
            seq = self._meta_seq
        self._meta_at = time.monotonic()
        self._replace_meta(meta, seq)

    def _count_into(self, meta: dict[str, Any]) -> None:
        """The counts as of now into ``meta`` (``written_records`` stays its last key)."""
        causes = self.drop_causes()
        meta["dropped_records"] = sum(causes.values())
        meta["drop_causes"] = causes
        meta.pop("written_records", None)
        meta["written_records"] = self.written

    def _replace_meta(self, meta: dict[str, Any], seq: int) -> None:
        """Write ``meta`` atomically (temp file + rename; the temp name is this thread's own), unless a
        newer snapshot (a larger ``seq``) was written first: close() and a late writer thread may race."""
        tmp = self.meta_path.with_name(f".{self.meta_path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            tmp.write_bytes(json.dumps(meta, indent=1, allow_nan=False).encode())
            with self._meta_lock:
                if seq < self._meta_written:
                    tmp.unlink()
                    return
                os.replace(tmp, self.meta_path)
                self._meta_written = seq
            if self.shipper is not None:
                self.shipper.poke()
        except Exception as exc:  # noqa: BLE001 - OSError mostly; whatever it is, training goes on
            with contextlib.suppress(OSError):
                tmp.unlink()
            self._warn_once("meta", f"cannot write run metadata {self.meta_path} ({exc})")

    def _finish(self) -> None:
        if self._abandoned:  # returned after close() gave up: the true counts first, the process may be exiting
            self._meta["writer_note"] = give_up_note(self._unwritten, self._gave_up, "left in the queue ")
            self._write_meta()
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.fsync(self._fd)
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        self._write_meta()
        with self._meta_lock:
            self._finished = True


def _upload_options(upload: Any) -> Any:
    """The checked :class:`~monitor_cb.storage.shipper.UploadOptions`, or None (fsspec is imported only when asked)."""
    if upload is None or upload is False:
        return None
    from monitor_cb.storage.shipper import UploadOptions

    return UploadOptions.coerce(upload)


def _start_shipper(path: Path, options: Any) -> Any:
    """The background uploader of this rank's files, or None."""
    if options is None:
        return None
    from monitor_cb.storage.shipper import Shipper

    return Shipper(path.parent, options, files=lambda: [path]).start()


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


def _gone(fd: int, path: Path) -> bool:
    """Whether the file open as ``fd`` is no longer the one at ``path`` (deleted, or replaced by another)."""
    try:
        open_now = os.fstat(fd)
    except OSError:
        return False
    if not stat.S_ISREG(open_now.st_mode):
        return False  # not a file on a disk (a pipe standing in for one): nothing to compare
    if open_now.st_nlink == 0:
        return True
    try:
        at_path = os.stat(path)
    except FileNotFoundError:
        return True
    except OSError:  # cannot tell (permissions, a hung disk): keep writing where we are
        return False
    return (at_path.st_ino, at_path.st_dev) != (open_now.st_ino, open_now.st_dev)


def _ends_without_newline(path: Path) -> bool:
    """Whether a previous metrics file ends in a torn line (read without blocking: a FIFO there says no)."""
    last = read_regular(path, 1, tail=True)
    return bool(last) and last != b"\n"
