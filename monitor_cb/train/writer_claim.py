"""Which file and which segment a new :class:`~monitor_cb.train.writer.MetricsWriter` takes.

One live writer per metrics file. A hidden lock file beside it (``.metrics.jsonl.lock``) holds the
writer's host, pid, start time and segment, and an advisory ``fcntl.flock`` while the writer lives;
the kernel releases the flock when the process dies, so a stale lock is taken over by locking it.
Where the file system has no flock (an NFS mount without a lock daemon answers ENOLCK), the lock's
content decides: a holder on this host is alive while its pid is, a holder on another host while it
keeps the lock file's mtime fresh (the writer touches it every :data:`HEARTBEAT_S`; stale after
:data:`STALE_S`).

The lock file exists while its writer lives (after a crash it stays, stale). A second live writer
of the same rank in the same directory (the script started twice, a restart while the old process
still shuts down) does not share the file, and is not refused either: it writes
``metrics.writer2.jsonl`` (``metrics.writer2.rank3.jsonl``, ...) with its own metadata file and the
next free segment of the rank, and says so in one warning. Readers merge that file with the rank's
other files, so no record of either writer is hidden.

Segments: a new writer takes one more than the largest segment any file of its rank names (each
file's metadata and the last ``seg`` in its tail) or any live writer of the rank holds, so a lost
metadata file or two writers started together never reuse one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monitor_cb.processes import pid_alive
from monitor_cb.record import METRICS_SUFFIX, SEG_LIMIT, meta_path_for
from monitor_cb.rootfile import read_capped, read_tail

MAX_WRITERS = 64  # metrics.jsonl, metrics.writer2.jsonl, ... metrics.writer64.jsonl
HEARTBEAT_S = 30.0  # the live writer touches its lock file this often
STALE_S = 120.0  # a lock of another host untouched this long is stale (no flock on the file system)
CONTENT_WAIT_S = 2.0  # a lock just taken is given this long to name its holder's segment
_META_CAP = 1 << 20  # a previous metadata file larger than this is not ours: ignored
_LOCK_CAP = 64 << 10
_TAIL_BYTES = 64 << 10  # the end of a previous metrics file read for its last segment
_PID_LIMIT = 1 << 31


@dataclass
class Claim:
    """The metrics file a writer took, its segment, and the lock it holds (released by :meth:`release`)."""

    path: Path
    segment: int
    lock_path: Path | None = None
    fd: int | None = None  # the open lock file; None when no lock could be taken (read-only directory, ...)
    flock: bool = False  # whether the kernel holds the lock (else only the lock's content says so)
    busy: list[dict[str, Any]] = field(default_factory=list)  # holders of the files this writer could not take
    touched: float = 0.0

    @property
    def meta_path(self) -> Path:
        return meta_path_for(self.path)

    def heartbeat(self, now: float | None = None) -> None:
        """Refresh the lock file's mtime (other hosts judge a lock without flock by it); at most every HEARTBEAT_S."""
        now = time.monotonic() if now is None else now
        if self.fd is None or now - self.touched < HEARTBEAT_S:
            return
        self.touched = now
        with contextlib.suppress(OSError):
            os.utime(self.fd)

    def release(self) -> None:
        """Remove the lock file and unlock it; idempotent.

        Removed while still locked, and a newcomer checks after locking that the name still leads to
        the file it locked (:func:`_try_lock`), so the old inode never has a second holder.
        """
        fd, self.fd = self.fd, None
        if fd is None:
            return
        if self.lock_path is not None and _same_file(self.lock_path, fd):
            with contextlib.suppress(OSError):
                os.unlink(self.lock_path)
        with contextlib.suppress(OSError):
            os.close(fd)  # closing drops the flock


def writer_file(primary: Path, index: int) -> Path:
    """The ``index``-th writer's file of a rank: 1 is the file itself, 2 ``metrics.writer2.jsonl``.

    The tag goes before ``.rank<R>`` so the reader still finds the rank in the name.
    """
    if index <= 1:
        return primary
    name = primary.name
    stem = name[: -len(METRICS_SUFFIX)] if name.endswith(METRICS_SUFFIX) else name
    base, dot, rank = stem.rpartition(".")
    if dot and rank.startswith("rank") and rank[4:].isdigit():
        return primary.with_name(f"{base}.writer{index}.{rank}{METRICS_SUFFIX}")
    return primary.with_name(f"{stem}.writer{index}{METRICS_SUFFIX}")


def lock_path_for(path: Path) -> Path:
    """The hidden lock file of a metrics file (hidden: run discovery and uploads skip it)."""
    return path.with_name(f".{path.name}.lock")


def claim_file(primary: Path) -> Claim:
    """Lock the first free writer file of ``primary``'s rank and pick its segment; never raises.

    Without any lock (the directory cannot be created or locked) the writer takes ``primary`` as
    before; its own open reports what is wrong with the directory.
    """
    busy: list[dict[str, Any]] = []
    claim = None
    with contextlib.suppress(OSError):
        primary.parent.mkdir(parents=True, exist_ok=True)
    for index in range(1, MAX_WRITERS + 1):
        path = writer_file(primary, index)
        taken, holder = _try_lock(lock_path_for(path))
        if taken is not None:
            claim = Claim(path, 0, lock_path_for(path), taken[0], taken[1], busy)
            break
        if holder is None:  # no lock possible here (read-only, a directory in its place): write unlocked
            claim = Claim(path, 0, busy=busy)
            break
        busy.append(holder)
    if claim is None:  # every writer file busy: share the first one, as writers did before locks
        claim = Claim(primary, 0, busy=busy)
    held = [h.get("segment") for h in busy]
    claim.segment = next_segment(primary, [s for s in held if _valid_segment(s)])
    _write_lock(claim)
    return claim


def next_segment(primary: Path, held: Sequence[int] = ()) -> int:
    """One more than the largest segment any file of the rank (or a live writer in ``held``) names."""
    found = max(held, default=0)
    for path in rank_files(primary):
        found = max(found, _segment_in(read_json(meta_path_for(path))), last_segment(path))
    return min(found + 1, SEG_LIMIT - 1)


def rank_files(primary: Path) -> list[Path]:
    """``primary`` and the other writers' files of its rank that exist."""
    files = [primary]
    with contextlib.suppress(OSError):
        names = set(os.listdir(primary.parent))
        files += [p for i in range(2, MAX_WRITERS + 1) if (p := writer_file(primary, i)).name in names]
    return files


def holder_text(holder: dict[str, Any]) -> str:
    """``pid 4242 on node-3`` for a warning (lock content is untrusted: shown as text, shortened)."""
    return f"pid {str(holder.get('pid'))[:20]} on {str(holder.get('host'))[:100]}"


def _try_lock(lock: Path) -> tuple[tuple[int, bool] | None, dict[str, Any] | None]:
    """((fd, flock held), None) when taken; (None, holder) when a live writer holds it; (None, None) when
    no lock can be taken here at all."""
    for _ in range(8):  # a holder that removed the file as we locked it: lock the new one
        taken, holder = _try_lock_once(lock)
        if taken is None or _same_file(lock, taken[0]):
            return taken, holder
        os.close(taken[0])
    return None, None


def _same_file(path: Path, fd: int) -> bool:
    try:
        st, fst = os.stat(path, follow_symlinks=False), os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (fst.st_dev, fst.st_ino)


def _try_lock_once(lock: Path) -> tuple[tuple[int, bool] | None, dict[str, Any] | None]:
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError:
        return None, None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None, None
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return (fd, True), None
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            holder = _wait_for_content(fd)
            os.close(fd)
            return None, holder
        # No flock here (ENOLCK, EOPNOTSUPP, ...): the lock's content and age decide.
        holder = _read_lock(fd)
        if holder and _holder_alive(holder, fd):
            os.close(fd)
            return None, holder
        return (fd, False), None


def _wait_for_content(fd: int) -> dict[str, Any]:
    """The holder's content; a writer that has just locked the file is given a moment to write it."""
    deadline = time.monotonic() + CONTENT_WAIT_S
    while True:
        holder = _read_lock(fd)
        if holder or time.monotonic() > deadline:
            return holder or {"pid": "?", "host": "?"}
        time.sleep(0.01)


def _read_lock(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, _LOCK_CAP, 0)
        parsed = json.loads(data) if data else {}
    except (OSError, ValueError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _holder_alive(holder: dict[str, Any], fd: int) -> bool:
    """Without flock: the same host's holder lives while its pid does; another host's while it heartbeats."""
    pid = holder.get("pid")
    if holder.get("host") == socket.gethostname():
        return type(pid) is int and 0 < pid < _PID_LIMIT and pid_alive(pid)
    try:
        age = time.time() - os.fstat(fd).st_mtime
    except OSError:
        return False
    return age < STALE_S


def _write_lock(claim: Claim) -> None:
    if claim.fd is None:
        return
    content = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "start_time": time.time(),
        "segment": claim.segment,
        "metrics_file": claim.path.name,
        "flock": claim.flock,
    }
    data = json.dumps(content).encode()
    try:
        os.ftruncate(claim.fd, 0)
        os.pwrite(claim.fd, data, 0)
        claim.touched = time.monotonic()
    except OSError:
        pass


def _valid_segment(value: Any) -> bool:
    return type(value) is int and 0 < value < SEG_LIMIT


def _segment_in(meta: dict[str, Any]) -> int:
    """The segment a previous metadata file names; 0 when it names none we can trust."""
    value = meta.get("segment")
    return value if _valid_segment(value) else 0


def read_regular(path: Path, cap: int, tail: bool = False) -> bytes | None:
    """A regular file's bytes (its last ``cap`` with ``tail``); None for anything else (missing, a FIFO,
    a device, a folder, over ``cap`` bytes without ``tail``): :mod:`monitor_cb.rootfile`, never raising."""
    try:
        return read_tail(path, cap) if tail else read_capped(path, cap)
    except OSError:  # UnsafeFileError included
        return None


def read_json(path: Path) -> dict[str, Any]:
    """A previous metadata file as a dict; {} when it is missing, not a regular file, too big or not JSON."""
    data = read_regular(path, _META_CAP)
    if not data:
        return {}
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def last_segment(path: Path) -> int:
    """The largest valid ``seg`` among the last lines of a previous metrics file (0 when none).

    The metadata file can be lost or corrupt while the metrics survive; a new writer must
    still start a later segment, or the reader would file its records under an older one.
    """
    data = read_regular(path, _TAIL_BYTES, tail=True)
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
        if _valid_segment(seg):
            found = max(found, seg)
    return found
