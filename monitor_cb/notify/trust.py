"""Where notification settings may come from, and the ssh-style check a settings file must pass.

Why: a channel can run a command (``exec``) or send run data elsewhere (webhooks, email, chat), so
whoever writes the settings acts with the watcher's and the dashboard's rights. A log root is shared
and written by many people's jobs; a ``notify.toml`` planted in it must never act. Settings therefore
come only from the user's own configuration: ``--config FILE``, ``$MONITOR_NOTIFY_CONFIG``, or
``~/.config/monitor_cb/notify.toml`` (``$XDG_CONFIG_HOME`` honoured). Such a file is read only when it
and its folder are owned by the current user (or root) and not writable by group or others, as ssh
checks ``~/.ssh/config``; otherwise the refusal names the file, its owner and mode, and the command
that fixes it. Settings found in ``LOGROOT/.monitor/`` are ignored, with a note saying where to put them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from monitor_cb.rootfile import SETTINGS_CAP

ENV_CONFIG = "MONITOR_NOTIFY_CONFIG"
FILE_NAMES = ("notify.toml", "notify.json")


class UntrustedSettingsError(PermissionError):
    """A settings file others could have written; the message names it and the fix."""


def user_config_dir(env: Mapping[str, str]) -> Path | None:
    """``$XDG_CONFIG_HOME/monitor_cb``, else ``$HOME/.config/monitor_cb``; None when neither is set."""
    base = env.get("XDG_CONFIG_HOME") or (os.path.join(env["HOME"], ".config") if env.get("HOME") else None)
    return Path(base) / "monitor_cb" if base else None


def user_config_file(env: Mapping[str, str]) -> Path | None:
    """The user's own settings file if one exists (``notify.toml`` before ``notify.json``), else None."""
    folder = user_config_dir(env)
    if folder is None:
        return None
    for name in FILE_NAMES:
        if (folder / name).is_file():
            return folder / name
    return None


def suggested_user_file(env: Mapping[str, str]) -> Path:
    """Where to create the settings: the user's config folder (``~/.config/monitor_cb/notify.toml``)."""
    folder = user_config_dir(env) or Path("~/.config/monitor_cb").expanduser()
    return folder / FILE_NAMES[0]


def ignored_root_file(root: str | os.PathLike[str] | None) -> Path | None:
    """A ``notify.toml``/``.json`` in ``LOGROOT/.monitor/`` (never read: a shared root is data), or None.

    Only looked at with ``lexists`` (no open, nothing followed), and only for a local root.
    """
    if root is None or "://" in os.fspath(root):
        return None
    for name in FILE_NAMES:
        candidate = Path(root) / ".monitor" / name
        if os.path.lexists(candidate):
            return candidate
    return None


def ignored_note(path: Path, env: Mapping[str, str]) -> str:
    """What the watcher and the Settings page say about a settings file found in the log root."""
    return (
        f"{path} is in the shared log root and is not used: notification channels run commands and send "
        f"data elsewhere, so they come only from your own configuration. Move it to "
        f"{suggested_user_file(env)} (or pass --config FILE, or set ${ENV_CONFIG})."
    )


def read_private(
    path: str | os.PathLike[str],
    cap: int = SETTINGS_CAP,
    *,
    purpose: str = "notification settings",
    risk: str = "make the watcher run commands or send data",
) -> bytes:
    """The bytes of a settings file that only its owner (the current user, or root) can have written.

    Checked as ssh checks its files: the file (links followed, then ``fstat`` of what was opened) and
    the folder holding it are owned by the current user or root and not writable by group or others.
    Opened non-blocking and refused unless a regular file of at most ``cap`` bytes.

    Raises:
        UntrustedSettingsError: the owner or mode is wrong; the message gives the chmod/chown to run.
        OSError: the file cannot be read (missing, a FIFO, too large).
    """
    path = Path(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file")
        if info.st_size > cap:
            raise OSError(f"{path} is {info.st_size} bytes, over the {cap}-byte limit for a settings file")
        _check_private(path, info, "file", purpose, risk)
        real_parent = Path(os.path.realpath(path)).parent
        _check_private(real_parent, os.stat(real_parent), "folder", purpose, risk)
        chunks: list[bytes] = []
        size = 0
        while size <= cap:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > cap:
            raise OSError(f"{path} grew over the {cap}-byte limit for a settings file")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _check_private(path: Path, info: os.stat_result, what: str, purpose: str, risk: str) -> None:
    if not hasattr(os, "getuid"):  # Windows: no owner/mode bits in this sense
        return
    me = os.getuid()
    reason = ""
    fix = ""
    if info.st_uid not in (me, 0):
        reason = f"is owned by {_user(info.st_uid)}, not by you ({_user(me)}) or root"
        fix = f"chown {_user(me)} {path}"
    elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        reason = "is writable by " + (
            "group and others"
            if info.st_mode & stat.S_IWGRP and info.st_mode & stat.S_IWOTH
            else "group"
            if info.st_mode & stat.S_IWGRP
            else "others"
        )
        fix = f"chmod go-w {path}"
    if reason:
        raise UntrustedSettingsError(
            f"{purpose} not used: the {what} {path} {reason} (owner {_user(info.st_uid)}, "
            f"mode {stat.filemode(info.st_mode)} {info.st_mode & 0o7777:04o}); someone else could {risk}. Run: {fix}"
        )


def _user(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"
