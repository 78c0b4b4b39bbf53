"""Opening one file of a shared log root as untrusted data.

A log root on NFS or Lustre is written by many people's jobs, so any file in it may be a FIFO (an
``open`` that never returns), a device (``/dev/zero``: a read that never ends), a huge or sparse
file, or a symbolic link leading out of the root. Every file the product reads from a root goes
through :func:`open_regular` or :func:`read_capped`: opened non-blocking, checked with ``fstat`` to
be a regular file, refused past a size cap, and, when a root is given, refused when it resolves
outside that root. A refusal is an :class:`UnsafeFileError` whose message names the file and why,
so a caller skips that one file and the rest of the root stays usable.

Writing into a root has the same hazards under other names: :func:`write_atomic`,
:func:`temp_beside` and :func:`create_new` never open a planted FIFO and never write through a
planted link.

Standard library only: both sides (the writer reading its previous segment, the dashboard, the
watcher) use it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

KIB = 1024
MIB = 1024 * KIB

# Caps for the small files of a root; a file past its cap is refused, not read in part.
META_CAP = 4 * MIB  # a run's metadata file (a config can be large, not megabytes of it)
STATE_CAP = 64 * MIB  # the watcher's state, the summary index, diagnosis state
SETTINGS_CAP = 1 * MIB  # settings files (diagnosis thresholds, notifications)


class UnsafeFileError(OSError):
    """A file of the log root that is not read: not a regular file, too large, or a link out of the root."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(errno.EINVAL, f"{os.fspath(path)}: {reason}; skipped")
        self.path = os.fspath(path)
        self.reason = reason


def _resolved_inside(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> str:
    """``path`` with every link resolved, checked to lie inside ``root`` (resolved too)."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    try:
        inside = os.path.commonpath([real_root, real]) == real_root
    except ValueError:
        inside = False
    if not inside:
        raise UnsafeFileError(path, f"leads outside the log root {real_root} (to {real}) through a symbolic link")
    return real


@contextlib.contextmanager
def open_regular(
    path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None
) -> Iterator[tuple[int, os.stat_result]]:
    """``path`` opened read-only as ``(fd, stat)``: a regular file, inside ``root`` when one is given.

    Opened with ``O_NONBLOCK`` so a FIFO never hangs the caller; the file actually opened is the
    one checked (``fstat`` on the descriptor), and when ``root`` is given the resolved path is
    opened with ``O_NOFOLLOW``, so a link swapped in after the check is refused too.

    Raises:
        FileNotFoundError: there is no such file (not an error for most callers).
        UnsafeFileError: a FIFO, device, socket or folder, or a link out of ``root``.
        OSError: any other reason it cannot be opened (permissions, a vanished NFS handle).
    """
    target = _resolved_inside(path, root) if root is not None else os.fspath(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if root is not None:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFileError(path, "was replaced by a symbolic link while being opened") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFileError(path, f"is not a regular file ({file_kind(st.st_mode)})")
        yield fd, st
    finally:
        os.close(fd)


def read_capped(path: str | os.PathLike[str], cap: int, *, root: str | os.PathLike[str] | None = None) -> bytes:
    """The whole of a small file, refused when it holds more than ``cap`` bytes.

    Raises:
        FileNotFoundError: there is no such file.
        UnsafeFileError: not a regular file, a link out of ``root``, or larger than ``cap``.
        OSError: it cannot be read.
    """
    with open_regular(path, root=root) as (fd, st):
        if st.st_size > cap:
            raise UnsafeFileError(path, f"holds {st.st_size:,} bytes, over the {cap:,}-byte cap for this kind of file")
        chunks: list[bytes] = []
        total = 0
        while True:  # read to the end, not st_size: the file may grow; never past the cap
            data = os.read(fd, min(cap + 1 - total, MIB))
            if not data:
                break
            chunks.append(data)
            total += len(data)
            if total > cap:
                raise UnsafeFileError(path, f"grew past the {cap:,}-byte cap for this kind of file while being read")
        return b"".join(chunks)


def read_tail(path: str | os.PathLike[str], size: int, *, root: str | os.PathLike[str] | None = None) -> bytes:
    """The last ``size`` bytes of a regular file (all of it when shorter), opened as :func:`open_regular` does.

    Raises:
        FileNotFoundError, UnsafeFileError, OSError: as :func:`open_regular`.
    """
    with open_regular(path, root=root) as (fd, st):
        start = max(st.st_size - size, 0)
        return os.pread(fd, st.st_size - start, start)


def read_json(path: str | os.PathLike[str], cap: int, *, root: str | os.PathLike[str] | None = None) -> Any:
    """A small JSON file read through :func:`read_capped`.

    Raises:
        FileNotFoundError, UnsafeFileError, OSError: as :func:`read_capped`.
        ValueError: the bytes are not JSON (``json.JSONDecodeError`` or ``UnicodeDecodeError``).
    """
    return json.loads(read_capped(path, cap, root=root))


def create_new(path: str | os.PathLike[str], mode: int = 0o644) -> int:
    """A descriptor of ``path`` created afresh for writing (the caller closes it).

    Whatever was there (a FIFO that would block the ``open``, a link that would lead the write
    elsewhere) is removed first, and the file is created with ``O_EXCL | O_NOFOLLOW``: one planted in
    between makes this fail (``FileExistsError``) instead of being written through.
    """
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags, mode)


def temp_beside(path: str | os.PathLike[str]) -> tuple[int, Path]:
    """A new temporary file in ``path``'s folder, as ``(fd, its path)``, to be renamed over ``path``.

    Its name is random and it is created with ``O_EXCL | O_NOFOLLOW``, so a FIFO or a link someone
    planted under a guessable temporary name is never opened or written through.
    """
    import secrets

    target = Path(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(16):
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o644), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temporary name beside {target}")


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` through a :func:`temp_beside` file and a rename (which replaces a
    link or a FIFO at ``path`` itself, never what it leads to).

    Raises:
        OSError: the folder cannot be written (the temporary file is removed).
    """
    fd, tmp = temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


FileIdentity = tuple[int, int, int, int, int]  # inode, device, size, mtime ns, ctime ns


def identity(st: os.stat_result) -> FileIdentity:
    """A file's identity from its stat: unchanged while nobody writes, replaces or touches it. What a tail,
    the summary index and the peeks compare to know a file is the one they read."""
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def is_regular(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` (links followed) is a regular file: a listing's cheap check, never blocking."""
    try:
        return stat.S_ISREG(Path(path).stat().st_mode)
    except OSError:
        return False


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words ("a FIFO", "a device", ...), for the notes that name it."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a file"
