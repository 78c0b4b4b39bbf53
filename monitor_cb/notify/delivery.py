"""Deliver alerts without ever blocking or failing the caller.

:class:`Notifier` owns one worker thread per channel, so a channel that hangs or fails delays
only itself. ``notify()`` filters and queues (microseconds) and never raises. Each worker:

* sends the same grouping key (``(run, kind)`` by default) once: a run with 500 NaN steps
  alerts once;
* waits ``gather`` seconds after a first alert so that alerts arriving together go out as one
  message, and sends at most one message per ``group_window``: a flood across runs within the
  window becomes one digest;
* tries each message with a timeout, retrying timeouts, connection/DNS failures, 5xx, 429 and
  vendor rate-limit answers with exponential backoff; other 4xx are not retried; every failure
  is logged with secrets redacted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from monitor_cb.masking import redact
from monitor_cb.notify.alert import Alert
from monitor_cb.notify.channels import Channel
from monitor_cb.notify.config import NotifyConfig, Route
from monitor_cb.notify.transport import DeliveryError

log = logging.getLogger("monitor_cb.notify")

MAX_QUEUE = 10_000  # per channel; beyond it alerts are dropped (counted) rather than held forever


@dataclass(frozen=True)
class DeliveryResult:
    """How one message went: channel name, success, attempts made, the (redacted) last error."""

    channel: str
    ok: bool
    attempts: int
    alerts: int
    error: str | None = None
    time: float = field(default_factory=time.time)
    kinds: tuple[str, ...] = ()


@dataclass(frozen=True)
class Attempt:
    """One try of one message: accepted, or the (redacted) error and what it means for a retry."""

    ok: bool
    error: str | None = None
    retryable: bool = True
    unknown: bool = False  # the message went out and no answer came: the receiver may have it
    retry_after: float | None = None


def attempt(
    channel: Channel, alerts: Sequence[Alert], *, timeout: float, response_timeout: float | None = None
) -> Attempt:
    """Send one message once; never raises (a bug in one channel must not stop the others)."""
    secrets = channel.secrets()
    try:
        channel.send(alerts, timeout=timeout, response_timeout=response_timeout)
    except DeliveryError as exc:
        return Attempt(False, redact(exc, secrets), exc.retryable, exc.unknown, exc.retry_after)
    except Exception as exc:  # noqa: BLE001
        return Attempt(False, redact(f"unexpected error {type(exc).__name__}: {exc}", secrets), retryable=False)
    return Attempt(True)


def deliver(
    channel: Channel,
    alerts: Sequence[Alert],
    *,
    timeout: float,
    retries: int,
    backoff: float,
    max_backoff: float = 60.0,
    wait: Callable[[float], object] = time.sleep,
    response_timeout: float | None = None,
) -> DeliveryResult:
    """Send one message with retries; never raises.

    Args:
        wait: how to pause between attempts (an ``Event.wait`` lets a closing notifier cut it short).
        response_timeout: how long an HTTP receiver may take to answer once the message is out.
    """
    kinds = tuple(dict.fromkeys(a.kind for a in alerts))
    tries = 0
    while True:
        tries += 1
        outcome = attempt(channel, alerts, timeout=timeout, response_timeout=response_timeout)
        if outcome.ok:
            log.info("notify %s: sent %d alert(s)", channel.name, len(alerts))
            return DeliveryResult(channel.name, True, tries, len(alerts), kinds=kinds)
        if not outcome.retryable or tries > retries:
            final = "giving up" if outcome.retryable else "not retrying"
            log.warning("notify %s: %s (attempt %d, %s)", channel.name, outcome.error, tries, final)
            return DeliveryResult(channel.name, False, tries, len(alerts), outcome.error, kinds=kinds)
        delay = min(max_backoff, backoff * 2 ** (tries - 1))
        if outcome.retry_after is not None:
            delay = max(delay, min(outcome.retry_after, max_backoff))
        log.info("notify %s: %s (attempt %d); retrying in %.1f s", channel.name, outcome.error, tries, delay)
        wait(delay)


class _Worker:
    """One channel's queue and thread."""

    def __init__(self, route: Route, config: NotifyConfig, on_result: Callable[[DeliveryResult], None]) -> None:
        self.route = route
        self.config = config
        self._on_result = on_result
        self._pending: deque[Alert] = deque()
        self._cond = threading.Condition()
        self._busy = False
        self._urgent = False
        self._closing = False
        self._last_send = float("-inf")
        self._stop = threading.Event()
        self.dropped = 0
        self._thread = threading.Thread(target=self._loop, name=f"notify-{route.channel.name}", daemon=True)
        self._thread.start()

    @property
    def name(self) -> str:
        return self.route.channel.name

    def put(self, alert: Alert) -> bool:
        with self._cond:
            if self._closing:
                return False
            if len(self._pending) >= MAX_QUEUE:
                self.dropped += 1
                return False
            self._pending.append(alert)
            self._cond.notify_all()
            return True

    def hurry(self) -> None:
        """Send what is pending now, without waiting for the grouping window."""
        with self._cond:
            self._urgent = True
            self._cond.notify_all()

    def idle(self) -> bool:
        with self._cond:
            return not self._pending and not self._busy

    def wait_idle(self, deadline: float) -> bool:
        """Hurry and wait until nothing is pending or in flight; False at the deadline."""
        with self._cond:
            while self._pending or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                # Alerts queued while a batch was in flight must not wait for the window either.
                self._urgent = True
                self._cond.notify_all()
                self._cond.wait(min(left, 0.05))
            return True

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._urgent = True
            self._cond.notify_all()

    def abandon(self) -> None:
        """Stop retry back-offs now (the thread is a daemon; a send in flight ends within its timeout)."""
        self._stop.set()

    def _loop(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            result = deliver(
                self.route.channel,
                batch,
                timeout=self.config.timeout,
                retries=self.config.retries,
                backoff=self.config.backoff,
                max_backoff=self.config.max_backoff,
                wait=self._stop.wait,
                response_timeout=self.config.response_timeout,
            )
            with self._cond:
                self._last_send = time.monotonic()
                self._busy = False
                self._cond.notify_all()
            self._on_result(result)

    def _next_batch(self) -> list[Alert] | None:
        with self._cond:
            while not self._pending:
                if self._closing:
                    return None
                self._urgent = False
                self._cond.wait()
            now = time.monotonic()
            deadline = max(now + self.config.gather, self._last_send + self.config.group_window)
            while not self._urgent and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)
            batch = list(self._pending)
            self._pending.clear()
            if not self._closing:
                self._urgent = False
            self._busy = True
            return batch


class Notifier:
    """Fan alerts out to the configured channels, off the caller's thread.

    Args:
        config: channels and delivery settings (:func:`~monitor_cb.notify.config.load_config`).
        dedupe: send each alert key once per notifier (the watcher keeps its own persistent record).
        clock: wall-clock time, for quiet hours.
        on_result: called on a worker thread with each :class:`DeliveryResult`.

    Example:
        >>> notifier = Notifier(load_config("notify.toml"))
        >>> notifier.notify(Alert(run="exp1", kind="nan", severity="error", message="loss is NaN", step=412))
        >>> notifier.close(timeout=10)
    """

    def __init__(
        self,
        config: NotifyConfig,
        *,
        dedupe: bool = True,
        clock: Callable[[], float] = time.time,
        on_result: Callable[[DeliveryResult], None] | None = None,
    ) -> None:
        self.config = config
        self._on_result = on_result
        self._dedupe = dedupe
        self._clock = clock
        self._seen: set[tuple[str, ...]] = set()
        self._lock = threading.Lock()
        self.results: deque[DeliveryResult] = deque(maxlen=1000)
        self._workers = [_Worker(route, config, self._record) for route in config.routes]

    @property
    def channels(self) -> list[str]:
        return [w.name for w in self._workers]

    def notify(self, alert: Alert) -> bool:
        """Queue ``alert`` for every channel that wants it; True if at least one does. Never raises."""
        try:
            key = alert.key or (alert.run, alert.kind)
            with self._lock:
                if self._dedupe and key in self._seen:
                    log.debug("notify: %s already sent, skipped", key)
                    return False
                self._seen.add(key)
            now = self._clock()
            queued = False
            for worker in self._workers:
                if worker.route.wants(alert, now):
                    queued = worker.put(alert) or queued
            return queued
        except Exception as exc:  # noqa: BLE001 - notifying must never break training or the watcher
            log.warning("notify: could not queue an alert: %s", type(exc).__name__)
            return False

    def notify_many(self, alerts: Iterable[Alert]) -> int:
        """Queue several alerts; the number queued for at least one channel."""
        return sum(self.notify(alert) for alert in alerts)

    def flush(self, timeout: float = 30.0) -> bool:
        """Send everything pending now (ignoring the grouping window) and wait; False on timeout."""
        deadline = time.monotonic() + timeout
        for worker in self._workers:
            worker.hurry()
        return all(worker.wait_idle(deadline) for worker in self._workers)

    def close(self, timeout: float = 30.0) -> bool:
        """Flush, then stop the workers; a channel still busy at the deadline is abandoned."""
        done = self.flush(timeout)
        for worker in self._workers:
            worker.close()
            if not done:
                worker.abandon()
        return done

    def send_test(
        self, message: str = "test notification from monitor_cb", timeout: float | None = None
    ) -> list[DeliveryResult]:
        """Send one test message to every channel now, in parallel, without retries; wait for the results.

        For a dashboard's "send test notification" button: bypasses severity, quiet hours,
        grouping and dedupe. Each channel takes at most ``timeout`` (default: the configured one).
        """
        return send_test_notification(self.config, message, timeout)

    def status(self) -> list[dict[str, object]]:
        """Per channel: pending alerts, dropped alerts, last result (redacted)."""
        last: dict[str, DeliveryResult] = {}
        for result in list(self.results):
            last[result.channel] = result
        return [
            {
                "channel": w.name,
                "pending": len(w._pending),
                "dropped": w.dropped,
                "last_ok": last[w.name].ok if w.name in last else None,
                "last_error": last[w.name].error if w.name in last else None,
            }
            for w in self._workers
        ]

    def _record(self, result: DeliveryResult) -> None:
        self.results.append(result)
        if self._on_result is not None:
            try:
                self._on_result(result)
            except Exception as exc:  # noqa: BLE001 - a caller's callback must not kill the worker
                log.warning("notify: on_result callback failed: %s", type(exc).__name__)

    def __enter__(self) -> Notifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def send_test_notification(
    config: NotifyConfig, message: str = "test notification from monitor_cb", timeout: float | None = None
) -> list[DeliveryResult]:
    """Send one test message to every configured channel now, in parallel, without retries.

    For a settings page's "send test notification" button: no :class:`Notifier` (no lasting
    threads), no severity/quiet-hours/grouping filters; returns one result per channel, in the
    configured order, within ``timeout`` (default the configured one) plus two seconds.
    """
    import uuid

    # each test its own id: a receiver deduplicating on Idempotency-Key must still show a second test
    alert = Alert(
        run="test", kind="test", severity="info", message=message, link=config.dashboard_url, id=f"t-{uuid.uuid4().hex}"
    )
    return send_test(config.routes, alert, timeout or config.timeout)


def send_test(routes: Sequence[Route], alert: Alert, timeout: float) -> list[DeliveryResult]:
    """Send ``alert`` once to every route's channel in parallel threads; results in route order."""
    results: list[DeliveryResult | None] = [None] * len(routes)

    def one(i: int, channel: Channel) -> None:
        results[i] = deliver(channel, [alert], timeout=timeout, retries=0, backoff=0)

    threads = [threading.Thread(target=one, args=(i, r.channel), daemon=True) for i, r in enumerate(routes)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout + 2.0
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [
        result or DeliveryResult(route.channel.name, False, 1, 1, f"no answer within {timeout:g} s")
        for route, result in zip(routes, results, strict=False)
    ]
