"""The watcher's memory, persisted atomically: what it reported per run, and the outbox of alerts not yet delivered.

Where it lives: the watching user's own state folder, never the log root (anyone who can write a
shared root could otherwise mark alerts as delivered, or silence them)::

    $MONITOR_STATE_DIR/watch/<root name>-<hash of the root's real path or URL>/watch-state.json

(``$MONITOR_STATE_DIR`` defaults to ``~/.cache/monitor_cb``); ``watch --state FILE`` names another.
A state file left in ``<root>/.monitor/`` by an older version is imported once, and only when this
user owns it and nobody else can write it or its folder.

The file (version 2)::

    {"version": 2,
     "runs": {"exp1": {"n_records": 812, "last_write": 1764698400.6, "status": "stopped",
                       "findings": ["nan@412"], "alerted": ["nan", "stopped@414"]}},
     "outbox": {"next_seq": 8,
                "entries": [{"id": "a-…", "seq": 7, "created": 1764698401.2, "alert": {...},
                             "channels": {"team": {"status": "pending", "attempts": 3, "unknown": 1,
                                                   "next_try": 1764698433.0, "last_error": "…"}}}],
                "channels": {"team": {"delivered": 12, "expired": 0, "last_ok": …, "last_error": "…",
                                      "last_error_time": …, "inflight": ["a-…"]}},
                "expired": [{"id": "a-…", "channel": "team", "run": "exp1", "kind": "nan", ...}]}}

``findings`` are finding keys already seen (``kind@step`` plus ``#rank``); ``alerted`` the alert keys
already queued. An alert enters the outbox (and the file is saved) before any delivery; a channel's
delivery is marked ``delivered`` only after that channel accepted it; ``inflight`` is the batch a
channel is trying, so a retry resends exactly that batch (same ids) before anything newer.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from monitor_cb.notify.alert import Alert

log = logging.getLogger("monitor_cb.notify")

STATE_VERSION = 2
READABLE_VERSIONS = (1, 2)
STATE_DIR = ".monitor"
STATE_FILE = "watch-state.json"
WATCH_DIR = "watch"
MAX_FINDING_KEYS = 2000  # per run; the oldest are forgotten (their kinds stay in "alerted")
MAX_BATCH = 100  # alerts per message (a digest); the rest follow in the next message
MAX_EXPIRED_KEPT = 200  # expired deliveries listed in the state (counts are kept per channel)

PENDING, DELIVERED, EXPIRED = "pending", "delivered", "expired"


@dataclass
class RunState:
    """The watcher's memory of one run."""

    n_records: int = -1
    last_write: float | None = None
    status: str | None = None
    findings: list[str] = field(default_factory=list)
    alerted: set[str] = field(default_factory=set)
    started: float | None = None  # when the run first started (its metadata): another time is another run

    def seen_finding(self, key: str) -> bool:
        return key in self.findings

    def add_finding(self, key: str) -> None:
        self.findings.append(key)
        if len(self.findings) > MAX_FINDING_KEYS:
            del self.findings[: len(self.findings) - MAX_FINDING_KEYS]

    def to_json(self) -> dict[str, Any]:
        return {
            "n_records": self.n_records,
            "last_write": self.last_write,
            "status": self.status,
            "findings": list(self.findings),
            "alerted": sorted(self.alerted),
            "started": self.started,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunState:
        return cls(
            n_records=int(data.get("n_records", -1)),
            last_write=data.get("last_write"),
            status=data.get("status"),
            findings=[str(k) for k in data.get("findings", [])],
            alerted={str(k) for k in data.get("alerted", [])},
            started=_number(data.get("started")),
        )

    def forget_reports(self) -> None:
        """The run was deleted and re-run under its name: what was said of the old one says nothing of it."""
        self.findings = []
        self.alerted = set()


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# --- the outbox ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """How long to wait before trying a channel again, and when to give up on an alert.

    Attributes:
        backoff: seconds after the first failure, doubled per further failure...
        max_backoff: ...up to this (and this after a failure that retrying soon would not fix, a 4xx).
        expire_after: seconds after which an undelivered alert is given up (logged, kept as expired).
    """

    backoff: float = 1.0
    max_backoff: float = 60.0
    expire_after: float = 24 * 3600.0

    def delay(self, attempts: int, retryable: bool = True, retry_after: float | None = None) -> float:
        if not retryable:
            return self.max_backoff
        delay = min(self.max_backoff, self.backoff * 2 ** max(attempts - 1, 0))
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_backoff))
        return delay


@dataclass
class ChannelDelivery:
    """One alert's progress on one channel."""

    status: str = PENDING
    attempts: int = 0
    unknown: int = 0  # attempts sent whose answer never came: the receiver may have it
    next_try: float = 0.0
    last_error: str | None = None
    done_at: float | None = None


@dataclass
class OutboxEntry:
    """An alert waiting for (or done with) its channels."""

    id: str
    seq: int
    created: float
    alert: Alert
    channels: dict[str, ChannelDelivery]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "seq": self.seq,
            "created": self.created,
            "alert": alert_to_state(self.alert),
            "channels": {name: asdict(d) for name, d in self.channels.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OutboxEntry:
        channels = {}
        for name, value in dict(data["channels"]).items():
            delivery = ChannelDelivery(**{k: v for k, v in dict(value).items() if k in ChannelDelivery.__annotations__})
            if delivery.status not in (PENDING, DELIVERED, EXPIRED):
                raise ValueError(f"unknown status {delivery.status!r}")
            channels[str(name)] = delivery
        alert = alert_from_state(data["alert"])
        return cls(str(data["id"]), int(data["seq"]), float(data["created"]), alert, channels)


@dataclass
class ChannelLog:
    """A channel's running totals, its last error, and the batch it is trying."""

    delivered: int = 0
    expired: int = 0
    last_ok: float | None = None
    last_error: str | None = None
    last_error_time: float | None = None
    inflight: list[str] = field(default_factory=list)
    inflight_sent: bool = False  # the batch went out at least once: retries resend exactly it


@dataclass
class Outbox:
    """Alerts in the order they were found; per channel, pending until accepted or expired."""

    entries: list[OutboxEntry] = field(default_factory=list)
    channels: dict[str, ChannelLog] = field(default_factory=dict)
    expired: list[dict[str, Any]] = field(default_factory=list)
    next_seq: int = 1

    def add(self, alert: Alert, channels: Iterable[str], now: float) -> bool:
        """Queue ``alert`` for ``channels``; False when none, or when the same id is already queued."""
        names = list(dict.fromkeys(channels))
        if not names or any(e.id == alert.id for e in self.entries):
            return False
        self.entries.append(OutboxEntry(alert.id, self.next_seq, now, alert, {n: ChannelDelivery() for n in names}))
        self.next_seq += 1
        for name in names:
            self.channels.setdefault(name, ChannelLog())
        return True

    def pending(self, channel: str) -> list[OutboxEntry]:
        """The channel's undelivered alerts, oldest first."""
        return [e for e in self.entries if (d := e.channels.get(channel)) is not None and d.status == PENDING]

    def batch(self, channel: str, limit: int = MAX_BATCH) -> list[OutboxEntry]:
        """What the channel sends next: the batch that already went out (same ids), else its oldest pending alerts."""
        pending = self.pending(channel)
        book = self.channels.setdefault(channel, ChannelLog())
        if book.inflight and book.inflight_sent:
            ids = set(book.inflight)
            batch = [e for e in pending if e.id in ids]
            if batch:
                return batch
        book.inflight_sent = False
        batch = pending[:limit]
        book.inflight = [e.id for e in batch]
        return batch

    def mark_sending(self, channel: str, batch: list[OutboxEntry]) -> None:
        """The batch is about to go out: from now on retries (after a crash too) resend exactly it."""
        book = self.channels.setdefault(channel, ChannelLog())
        book.inflight, book.inflight_sent = [e.id for e in batch], True

    def clamp_to_clock(self, channel: str, now: float, longest: float) -> bool:
        """Times the clock has gone back past, pulled in: a next try further ahead than ``longest`` to
        ``now + longest``, a pending alert found after ``now`` to ``now``. True when one moved.

        No back-off is longer than its maximum, and nothing is found in the future, so such a time was
        set while the clock was ahead (a jump, then NTP's correction): waited for, the alert would expire
        undelivered.
        """
        moved = False
        for entry in self.entries:
            delivery = entry.channels.get(channel)
            if delivery is None or delivery.status != PENDING:
                continue
            if delivery.next_try > now + longest:
                delivery.next_try = now + longest
                moved = True
            if entry.created > now:
                entry.created = now
                moved = True
        return moved

    @staticmethod
    def due_at(channel: str, batch: list[OutboxEntry]) -> float:
        """When the batch may be tried: after the longest back-off among its alerts."""
        return max((e.channels[channel].next_try for e in batch), default=0.0)

    def record(
        self,
        channel: str,
        batch: list[OutboxEntry],
        ok: bool,
        now: float,
        policy: RetryPolicy,
        *,
        error: str | None = None,
        retryable: bool = True,
        unknown: bool = False,
        retry_after: float | None = None,
    ) -> None:
        """One attempt's outcome for every alert of ``batch`` on ``channel``."""
        book = self.channels.setdefault(channel, ChannelLog())
        for entry in batch:
            delivery = entry.channels[channel]
            if delivery.status != PENDING:
                continue
            delivery.attempts += 1
            if ok:
                delivery.status, delivery.done_at = DELIVERED, now
                book.delivered += 1
            else:
                delivery.unknown += int(unknown)
                delivery.last_error = error
                delivery.next_try = now + policy.delay(delivery.attempts, retryable, retry_after)
        if ok:
            book.last_ok, book.inflight, book.inflight_sent = now, [], False
        else:
            book.last_error, book.last_error_time = error, now

    def expire(self, now: float, expire_after: float) -> list[dict[str, Any]]:
        """Give up on deliveries pending for longer than ``expire_after``; what was given up (to log and show)."""
        gone: list[dict[str, Any]] = []
        for entry in self.entries:
            if now - entry.created <= expire_after:
                continue
            for name, delivery in entry.channels.items():
                if delivery.status != PENDING:
                    continue
                delivery.status, delivery.done_at = EXPIRED, now
                self.channels.setdefault(name, ChannelLog()).expired += 1
                gone.append(
                    {
                        "id": entry.id,
                        "channel": name,
                        "run": entry.alert.run,
                        "kind": entry.alert.kind,
                        "step": entry.alert.step,
                        "created": entry.created,
                        "expired_at": now,
                        "attempts": delivery.attempts,
                        "last_error": delivery.last_error,
                    }
                )
        self.expired.extend(gone)
        del self.expired[:-MAX_EXPIRED_KEPT]
        return gone

    def prune(self) -> None:
        """Forget alerts every channel is done with (delivered or expired; totals stay per channel)."""
        self.entries = [e for e in self.entries if any(d.status == PENDING for d in e.channels.values())]
        live = {e.id for e in self.entries}
        for book in self.channels.values():
            book.inflight = [i for i in book.inflight if i in live]
            book.inflight_sent = book.inflight_sent and bool(book.inflight)

    def pending_counts(self) -> dict[str, int]:
        """Per channel (every channel the outbox has seen), the alerts not yet delivered."""
        counts = dict.fromkeys(self.channels, 0)
        for entry in self.entries:
            for name, delivery in entry.channels.items():
                if delivery.status == PENDING:
                    counts[name] = counts.get(name, 0) + 1
        return counts

    def to_json(self) -> dict[str, Any]:
        return {
            "next_seq": self.next_seq,
            "entries": [e.to_json() for e in self.entries],
            "channels": {name: asdict(book) for name, book in sorted(self.channels.items())},
            "expired": list(self.expired),
        }

    @classmethod
    def from_json(cls, data: Any) -> Outbox:
        if not isinstance(data, Mapping):
            return cls()
        entries = []
        for raw in data.get("entries") or []:
            try:
                entries.append(OutboxEntry.from_json(raw))
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("watch state: an outbox entry is damaged (%s: %s); skipped", type(exc).__name__, exc)
        channels = {}
        for name, raw in dict(data.get("channels") or {}).items():
            with contextlib.suppress(TypeError, ValueError):
                book = ChannelLog(**{k: v for k, v in dict(raw).items() if k in ChannelLog.__annotations__})
                book.inflight = [str(i) for i in book.inflight]
                channels[str(name)] = book
        expired = [dict(e) for e in data.get("expired") or [] if isinstance(e, Mapping)][-MAX_EXPIRED_KEPT:]
        next_seq = max([int(data.get("next_seq") or 1), *(e.seq + 1 for e in entries)])
        return cls(sorted(entries, key=lambda e: e.seq), channels, expired, next_seq)


def alert_to_state(alert: Alert) -> dict[str, Any]:
    """Every field of an :class:`Alert`, as JSON."""
    data = asdict(alert)
    data["key"] = list(alert.key) if alert.key is not None else None
    return data


def alert_from_state(data: Any) -> Alert:
    """The inverse of :func:`alert_to_state`; ``TypeError``/``ValueError`` on a damaged entry."""
    if not isinstance(data, Mapping):
        raise TypeError("an alert must be an object")
    fields = {k: data[k] for k in Alert.__dataclass_fields__ if k in data}
    if fields.get("key") is not None:
        fields["key"] = tuple(str(k) for k in fields["key"])
    step = fields.get("step")
    if step is not None and not isinstance(step, int):
        raise ValueError(f"step must be an integer, got {step!r}")
    return Alert(**fields)


# --- the whole state ----------------------------------------------------------------------------


@dataclass
class WatchState:
    """All runs' state and the outbox.

    :meth:`load` tolerates a missing or damaged file (starting afresh, with a warning).
    """

    runs: dict[str, RunState] = field(default_factory=dict)
    outbox: Outbox = field(default_factory=Outbox)

    @staticmethod
    def default_path(root: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Path:
        """The watching user's own state file for ``root`` (see the module docstring); never inside the root."""
        return own_state_path(root, env)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> WatchState:
        from monitor_cb.rootfile import STATE_CAP, read_json

        path = Path(path)
        try:
            data = read_json(path, STATE_CAP)
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError) as exc:
            log.warning("watch state %s is unreadable (%s: %s); starting afresh", path, type(exc).__name__, exc)
            return cls()
        return cls.from_json(data, str(path))

    @classmethod
    def from_json(cls, data: Any, where: str = "watch state") -> WatchState:
        if not isinstance(data, dict) or data.get("version") not in READABLE_VERSIONS:
            log.warning("%s has an unknown version; starting afresh", where)
            return cls()
        runs = data.get("runs") or {}
        state = cls()
        for key, value in runs.items() if isinstance(runs, dict) else ():
            with contextlib.suppress(TypeError, ValueError):
                state.runs[str(key)] = RunState.from_json(value)
        state.outbox = Outbox.from_json(data.get("outbox"))
        return state

    def to_json(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "runs": {k: v.to_json() for k, v in sorted(self.runs.items())},
            "outbox": self.outbox.to_json(),
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write atomically: a temp file in the same directory (private to this user), fsync, rename."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = self.to_json()
        fd, tmp = tempfile.mkstemp(prefix=".watch-state.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, separators=(",", ":"))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        with contextlib.suppress(OSError):  # the rename is durable only once the folder is synced
            dir_fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)


def own_state_path(root: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Path:
    """``$MONITOR_STATE_DIR/watch/<name>-<hash>/watch-state.json``, one folder per log root.

    A local root is keyed by its real path (``logs`` and ``./logs/`` and a link to it share one
    state); a URL by its credential-free form.
    """
    from monitor_cb.storage.urls import ENV_STATE, is_url, local_path, parse_url

    env = os.environ if env is None else env
    text = os.fspath(root)
    key = str(parse_url(text)[0]) if is_url(text) else os.path.realpath(local_path(text))
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", key.rstrip("/").rsplit("/", 1)[-1])[:60] or "root"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    base = Path(env.get(ENV_STATE) or Path.home() / ".cache" / "monitor_cb").expanduser()
    return base / WATCH_DIR / f"{name}-{digest}" / STATE_FILE


def legacy_state(root: str | os.PathLike[str]) -> WatchState | None:
    """The state an older version kept in ``<root>/.monitor/watch-state.json``, when it can be trusted.

    Trusted means: a regular file inside the root, owned by this user, and neither it nor ``.monitor``
    writable by group or others. Anything else is ignored with a warning (the worst that costs is a
    repeated alert); a forged file cannot silence alerts.
    """
    from monitor_cb.hidden_dir import OutsideRootError, hidden_path
    from monitor_cb.rootfile import STATE_CAP, read_json
    from monitor_cb.storage.urls import is_url

    if is_url(os.fspath(root)):
        return None
    try:
        path = hidden_path(root, STATE_FILE)
    except (OutsideRootError, ValueError):
        return None
    if not path.exists():
        return None
    problem = _untrusted(path) or _untrusted(path.parent)
    if problem:
        log.warning("watch: not importing the old state %s: %s", path, problem)
        return None
    try:
        data = read_json(path, STATE_CAP, root=root)
    except (OSError, ValueError) as exc:
        log.warning("watch: not importing the old state %s: %s", path, exc)
        return None
    state = WatchState.from_json(data, str(path))
    state.outbox = Outbox()  # version 1 had no outbox; a forged one is never taken
    log.info("watch: imported what was already reported from the old state %s", path)
    return state


def _untrusted(path: Path) -> str | None:
    try:
        st = path.lstat()
    except OSError as exc:
        return f"cannot check it ({exc.strerror or exc})"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"it belongs to uid {st.st_uid}, not this user"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "others can write it"
    return None


class StateBusyError(RuntimeError):
    """Another watcher holds the state file: two would deliver one outbox twice."""


@contextlib.contextmanager
def exclusive(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold ``<state>.lock`` (an advisory ``flock``) while watching; released by the OS when the process dies.

    Raises:
        StateBusyError: another live process holds it (the message names its pid when it wrote one).
    """
    try:
        import fcntl
    except ImportError:  # no flock (Windows): one watcher per state is then the user's to keep
        yield
        return
    lock_path = Path(os.fspath(path) + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise StateBusyError(
                f"another watcher (pid {holder}) is using the state {path}; stop it, or give this one "
                "its own --state FILE"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)
