"""Deliver the watcher's durable outbox: at least once, in order per channel, never silently dropped.

The watcher puts each new alert in the outbox of its :class:`~monitor_cb.notify.state.WatchState`
and saves the state *before* anything is sent. :class:`OutboxSender` then runs one thread per
channel. Each thread sends the channel's oldest pending alerts as one message (a digest when there
are several), marks them delivered only once the channel accepted them, and otherwise records the
error and backs off (``backoff`` doubled per failure up to ``max_backoff``). The back-off, the
batch being tried and its ids are in the saved state, so a restart (or a ``kill -9``) resumes with
the same message; a receiver that got it once already sees the same id again (at least once,
duplicates recognisable). An alert still undelivered ``expire_after`` seconds after it was found
is given up: logged as a warning, counted, and listed in the state.

Grouping: in continuous mode a new message waits ``gather`` seconds after its first alert and at
most one message goes out per ``group_window``; retries follow the back-off only. ``--once``
(:meth:`OutboxSender.drain`) sends at once and tries each message at most ``retries + 1`` times.

Clock jumps: the back-off is saved as wall-clock times (it must survive a restart), so a next try set
while the clock was ahead is brought back to at most ``max_backoff`` from now; the group window is
measured on the monotonic clock and an alert's gathering never waits longer than ``gather``. No
retry waits longer than the back-off's maximum, whatever the clock did.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from monitor_cb.notify.alert import iso_time, one_line
from monitor_cb.notify.config import NotifyConfig, Route
from monitor_cb.notify.delivery import Attempt, attempt
from monitor_cb.notify.state import Outbox, OutboxEntry, RetryPolicy, WatchState

log = logging.getLogger("monitor_cb.notify")

IDLE_WAKE = 30.0  # seconds a waiting channel thread sleeps at most (to notice expiry)


@dataclass
class SendCounts:
    """What this process did, per channel: messages and alerts accepted, attempts that failed."""

    messages: dict[str, int] = field(default_factory=dict)
    alerts: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    expired: list[dict[str, Any]] = field(default_factory=list)

    def add(self, book: dict[str, int], channel: str, n: int = 1) -> None:
        book[channel] = book.get(channel, 0) + n


class OutboxSender:
    """One thread per configured channel, sending the outbox of ``state`` in order.

    Args:
        config: the channels, timeouts and back-off.
        state: the watcher's state; its outbox is read and changed under ``lock`` only.
        save: writes the state atomically (called under ``lock`` after every outcome).
        lock: the lock guarding ``state`` (the watcher holds it while it changes runs or queues alerts).
        clock: wall-clock time (back-off and expiry are persisted as wall-clock times).
        expire_after: seconds before an undelivered alert is given up (default: the config's).
    """

    def __init__(
        self,
        config: NotifyConfig,
        state: WatchState,
        save: Callable[[], None],
        *,
        lock: threading.RLock,
        clock: Callable[[], float] = time.time,
        expire_after: float | None = None,
    ) -> None:
        self.config = config
        self.state = state
        self._save = save
        self._cond = threading.Condition(lock)
        self._clock = clock
        self.policy = RetryPolicy(config.backoff, config.max_backoff, expire_after or config.expire_after)
        self.routes: dict[str, Route] = {r.channel.name: r for r in config.routes}
        self.counts = SendCounts()
        self._threads: list[threading.Thread] = []
        self._stop = False
        self._last_send: dict[str, float] = {}  # channel -> time.monotonic() of its last attempt

    @property
    def outbox(self) -> Outbox:
        return self.state.outbox

    # -- queueing (called by the watcher under the lock) -----------------------------------------

    def channels_for(self, alert: Any, now: float) -> list[str]:
        """The channels that want ``alert`` now (severity, quiet hours)."""
        return [name for name, route in self.routes.items() if route.wants(alert, now)]

    def expire(self, now: float | None = None) -> list[dict[str, Any]]:
        """Give up on alerts older than the expiry; each is logged as a warning. Call under the lock."""
        gone = self.outbox.expire(self._clock() if now is None else now, self.policy.expire_after)
        for item in gone:
            log.warning(
                "notify %s: gave up on alert %s (%s [%s] step %s) after %.1f h undelivered, %d attempt(s); "
                "last error: %s",
                item["channel"],
                item["id"],
                one_line(item["run"], 200),
                item["kind"],
                item["step"],
                self.policy.expire_after / 3600,
                item["attempts"],
                item["last_error"] or "none",
            )
        self.counts.expired.extend(gone)
        if gone:
            self.outbox.prune()
        return gone

    def wake(self) -> None:
        """New alerts were queued: let the channel threads look."""
        with self._cond:
            self._cond.notify_all()

    # -- continuous mode -------------------------------------------------------------------------

    def start(self) -> None:
        """Start one thread per channel (continuous mode)."""
        for name in self.routes:
            thread = threading.Thread(target=self._loop, args=(name,), name=f"outbox-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def close(self, timeout: float) -> bool:
        """Stop the threads; one in the middle of an attempt finishes it (and records it) if it can
        within ``timeout``. What is not delivered stays in the saved outbox for the next start."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def _loop(self, name: str) -> None:
        while True:
            try:
                with self._cond:
                    if self._stop:
                        return
                    batch, wait = self._next(name)
                    if not batch:
                        self._cond.wait(wait)
                        continue
                self._send(name, batch)
            except Exception as exc:  # noqa: BLE001 - a bug must not end a channel's deliveries for good
                log.warning("notify %s: delivery error %s: %s; trying again", name, type(exc).__name__, exc)
                with self._cond:
                    self._cond.wait(self.policy.max_backoff)

    def _next(self, name: str) -> tuple[list[OutboxEntry], float]:
        """The batch to send now, or ``([], seconds to wait)``. Under the lock."""
        now = self._clock()
        self.expire(now)
        batch = self.outbox.batch(name)
        if not batch:
            return [], IDLE_WAKE
        self._clamp(name, now)
        due = self.outbox.due_at(name, batch)
        if not self.outbox.channels[name].inflight_sent:  # a new message: grouping
            first = min(e.created for e in batch)
            since = time.monotonic() - self._last_send.get(name, float("-inf"))
            due = max(due, first + self.config.gather, now + self.config.group_window - since)
        if due > now:
            return [], min(due - now, IDLE_WAKE)
        return batch, 0.0

    def _send(self, name: str, batch: list[OutboxEntry]) -> Attempt:
        """One attempt of ``batch`` on channel ``name`` (outside the lock), then its outcome recorded and saved."""
        route = self.routes[name]
        alerts = [e.alert for e in batch]
        with self._cond:
            if not self.outbox.channels[name].inflight_sent:
                self.outbox.mark_sending(name, batch)
                self._save()  # a crash from here on resends this very message (same ids)
        outcome = attempt(
            route.channel, alerts, timeout=self.config.timeout, response_timeout=self.config.response_timeout
        )
        with self._cond:
            now = self._clock()
            self._last_send[name] = time.monotonic()
            self.outbox.record(
                name,
                batch,
                outcome.ok,
                now,
                self.policy,
                error=outcome.error,
                retryable=outcome.retryable,
                unknown=outcome.unknown,
                retry_after=outcome.retry_after,
            )
            if outcome.ok:
                self.counts.add(self.counts.messages, name)
                self.counts.add(self.counts.alerts, name, len(batch))
                log.info("notify %s: delivered %d alert(s) (%s)", name, len(batch), _ids(batch))
                self.outbox.prune()
            else:
                self.counts.add(self.counts.failures, name)
                wait = self.outbox.due_at(name, batch) - now
                log.warning(
                    "notify %s: %s (%d alert(s) kept in the outbox; next try in %.0f s)",
                    name,
                    outcome.error,
                    len(batch),
                    wait,
                )
            self._save()
            self._cond.notify_all()
        return outcome

    # -- once mode -------------------------------------------------------------------------------

    def drain(self, timeout: float) -> bool:
        """Send everything pending now, every channel in parallel; True when nothing is left pending.

        Each message is tried at most ``retries + 1`` times in this call, with the back-off between
        tries; a failure that retrying soon would not fix (a 4xx) stops that channel for this call.
        Whatever is left stays in the outbox for the next pass or the next ``watch``.
        """
        deadline = time.monotonic() + timeout
        threads = [
            threading.Thread(target=self._drain_channel, args=(name, deadline), name=f"outbox-{name}", daemon=True)
            for name in self.routes
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._cond:
            return not any(self.outbox.pending_counts().get(name) for name in self.routes)

    def _drain_channel(self, name: str, deadline: float) -> None:
        try:
            self._drain_until(name, deadline)
        except Exception as exc:  # noqa: BLE001 - what is left stays pending and is reported
            log.warning("notify %s: delivery error %s: %s", name, type(exc).__name__, exc)

    def _drain_until(self, name: str, deadline: float) -> None:
        tries: dict[tuple[str, ...], int] = {}
        while time.monotonic() < deadline:
            with self._cond:
                self.expire()
                batch = self.outbox.batch(name)
                if not batch:
                    return
                key = tuple(e.id for e in batch)
                if tries.get(key, 0) > self.config.retries:
                    return
                if tries.get(key):  # retried in this call: wait out the back-off, within the deadline
                    self._clamp(name, self._clock())
                    wait = self.outbox.due_at(name, batch) - self._clock()
                    if wait > 0:
                        if time.monotonic() + wait > deadline:
                            return
                        self._cond.wait(wait)
                        continue
            tries[key] = tries.get(key, 0) + 1
            outcome = self._send(name, batch)
            if not outcome.ok and not outcome.retryable:
                return

    def _clamp(self, name: str, now: float) -> None:
        """No next try further than the back-off's maximum from now, no alert found later than now (saved when
        one moved). Under the lock."""
        if self.outbox.clamp_to_clock(name, now, self.policy.max_backoff):
            log.warning(
                "notify %s: a next try or an alert lay ahead of the clock (it went back): moved to within %.0f s",
                name,
                self.policy.max_backoff,
            )
            self._save()


def _ids(batch: list[OutboxEntry]) -> str:
    ids = [e.id for e in batch]
    return ", ".join(ids[:3]) + (f", ... {len(ids) - 3} more" if len(ids) > 3 else "")


# -- what is pending, for people ---------------------------------------------------------------------


def outbox_rows(outbox: Outbox, now: float) -> list[dict[str, str]]:
    """One row per channel, every cell plain text: pending, oldest, next try, totals, last error."""
    rows = []
    counts = outbox.pending_counts()
    for name in sorted(counts):
        pending = outbox.pending(name)
        book = outbox.channels.get(name)
        oldest = min((e.created for e in pending), default=None)
        next_try = outbox.due_at(name, outbox_batch_view(outbox, name)) if pending else None
        rows.append(
            {
                "channel": one_line(name, 120),
                "pending": str(len(pending)),
                "oldest pending": _age(now - oldest) if oldest is not None else "",
                "next try": ("now" if next_try <= now else f"in {_age(next_try - now)}") if next_try else "",
                "delivered": str(book.delivered if book else 0),
                "expired": str(book.expired if book else 0),
                "last error": one_line(book.last_error or "", 300) if book else "",
                "last error at": iso_time(book.last_error_time) if book and book.last_error_time else "",
                "last delivered at": iso_time(book.last_ok) if book and book.last_ok else "",
            }
        )
    return rows


def outbox_batch_view(outbox: Outbox, name: str) -> list[OutboxEntry]:
    """The batch a channel would send next, without changing the outbox."""
    pending = outbox.pending(name)
    book = outbox.channels.get(name)
    inflight = set(book.inflight) if book and book.inflight_sent else set()
    return [e for e in pending if e.id in inflight] or pending[:1]


def pending_lines(outbox: Outbox, now: float) -> list[str]:
    """``watch``'s report: one line per channel."""
    lines = []
    for row in outbox_rows(outbox, now):
        line = f"{row['channel']}: {row['pending']} pending"
        if row["pending"] != "0":
            line += f" (oldest {row['oldest pending']}, next try {row['next try']})"
        line += f", {row['delivered']} delivered, {row['expired']} expired"
        if row["pending"] != "0" and row["last error"]:
            line += f"; last error {row['last error at']}: {row['last error']}"
        lines.append(line)
    return lines


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@dataclass(frozen=True)
class DeliveryStatus:
    """What a settings page shows about delivery, read from the watcher's state file (never raises).

    Attributes:
        path: the state file looked at (this user's state folder for the root).
        found: whether it exists.
        channels: :func:`outbox_rows`, one plain-text row per channel.
        expired: the alerts given up, newest first, as plain-text rows.
        error: why the file could not be read, or None.
    """

    path: str
    found: bool
    channels: list[dict[str, str]]
    expired: list[dict[str, str]]
    error: str | None = None


def delivery_status(root: Any, env: Any = None, now: float | None = None) -> DeliveryStatus:
    """The watcher's delivery state for ``root``: read capped, regular files only, as plain-text rows."""
    from monitor_cb.rootfile import STATE_CAP, read_json

    path = WatchState.default_path(root, env)
    try:
        data = read_json(path, STATE_CAP)
    except FileNotFoundError:
        return DeliveryStatus(str(path), False, [], [])
    except (OSError, ValueError) as exc:
        return DeliveryStatus(str(path), True, [], [], f"{type(exc).__name__}: {exc}")
    state = WatchState.from_json(data, str(path))
    now = time.time() if now is None else now
    expired = [
        {
            "channel": one_line(str(item.get("channel", "")), 120),
            "run": one_line(str(item.get("run", "")), 200),
            "kind": one_line(str(item.get("kind", "")), 60),
            "step": "" if item.get("step") is None else one_line(str(item.get("step")), 30),
            "found at": _iso(item.get("created")),
            "given up at": _iso(item.get("expired_at")),
            "last error": one_line(str(item.get("last_error") or ""), 300),
            "id": one_line(str(item.get("id", "")), 40),
        }
        for item in reversed(state.outbox.expired)
    ]
    return DeliveryStatus(str(path), True, outbox_rows(state.outbox, now), expired)


def _iso(value: Any) -> str:
    return iso_time(float(value)) if isinstance(value, (int, float)) else ""
