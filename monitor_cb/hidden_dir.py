"""The log root's hidden folder ``<root>/.monitor``: diagnosis settings, notification settings, the
watcher's state, the dashboard's demo pid file and log.

Everything read or written there stays inside the log root. A ``.monitor`` (or a file in it) that
is a symbolic link leading out of the root is refused with :class:`OutsideRootError`, so a root
someone else can write to cannot make the dashboard or the watcher write (or read settings)
elsewhere. The root itself may be a link (``logs -> /data/logs``): "inside" means inside where the
root really is.
"""

from __future__ import annotations

import os
from pathlib import Path

HIDDEN_DIR = ".monitor"


class OutsideRootError(OSError):
    """A path in the log root's hidden folder leads outside the root (through a symbolic link)."""


def hidden_dir(root: str | os.PathLike[str]) -> Path:
    """``<root>/.monitor`` as a path, unchecked: for an object-store root, the local folder
    ``monitor_cb.storage.urls.state_dir`` keeps for it (a bucket may not be writable)."""
    from monitor_cb.storage.urls import state_dir

    return state_dir(root) / HIDDEN_DIR


def hidden_path(root: str | os.PathLike[str], name: str) -> Path:
    """``<root>/.monitor/<name>``, checked to resolve inside the root (it need not exist yet).

    Raises:
        OutsideRootError: ``.monitor`` or the file is a link out of the root (the message says which
            path and what to do), or the links cannot be resolved (a loop).
    """
    from monitor_cb.storage.urls import state_dir

    if not name or Path(name).name != name or name in (".", ".."):
        raise ValueError(f"expected a plain file name, got {name!r}")
    base = state_dir(root)
    path = base / HIDDEN_DIR / name
    try:
        real_base, real = base.resolve(), path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise OutsideRootError(f"{path} cannot be resolved ({exc}); remove the symbolic link") from None
    if real_base not in real.parents:
        raise OutsideRootError(
            f"{path} leads outside the log root {base} (to {real}) through a symbolic link; not used. "
            f"Replace {base / HIDDEN_DIR} with a real folder inside the log root."
        )
    return path


def read_hidden(root: str | os.PathLike[str], name: str, cap: int) -> bytes:
    """The bytes of ``<root>/.monitor/<name>``, read as untrusted data (:func:`monitor_cb.rootfile.read_capped`).

    Raises:
        FileNotFoundError: there is no such file.
        OutsideRootError: ``.monitor`` is a link out of the root.
        monitor_cb.rootfile.UnsafeFileError: the file is a FIFO, a device, a link out of the root, or
            larger than ``cap`` (the message names it and why).
        OSError: it cannot be read.
    """
    from monitor_cb.rootfile import read_capped
    from monitor_cb.storage.urls import state_dir

    return read_capped(hidden_path(root, name), cap, root=state_dir(root))
