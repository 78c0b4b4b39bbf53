"""Alerts from inside a training process: the NaN guard's decision, sent off the training thread.

``LiveMonitor`` builds one :class:`TrainingNotifier` when given a channel configuration and calls
:meth:`TrainingNotifier.guard_stopped` when the guard stops training. The call only queues (a few
microseconds, never raises); the notifier's worker threads deliver with the same timeouts,
retries, grouping and dedupe as the watcher. :meth:`close` at the end of training waits a bounded
time for delivery.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from monitor_cb.logroot import env_logdir
from monitor_cb.notify.alert import GUARD_STOP_KIND, Alert
from monitor_cb.notify.config import NotifyConfig, load_config
from monitor_cb.notify.delivery import DeliveryResult, Notifier

log = logging.getLogger("monitor_cb.notify")


def guard_message(step: int, reason: str | None) -> str:
    """``"stopped at step 41,200: non-finite loss for 3 steps"`` from the guard's reason."""
    text = (reason or "").strip().removeprefix("stopped:").strip()
    if " at step " in text:  # the guard's own reason already says where
        return f"stopped: {text}"
    return f"stopped at step {int(step):,}" + (f": {text}" if text else "")


class TrainingNotifier:
    """A notifier bound to one run, for use from a training callback.

    Args:
        config: a :class:`NotifyConfig`, a path to a TOML/JSON settings file, or None for
            ``$MONITOR_NOTIFY_CONFIG`` (no channels when unset).
        run: the run id as the watcher and dashboard name it (the run directory relative to the log
            root, e.g. ``"exp001"``).
        run_name: the display name, when different.
        on_sent: called (on a notifier thread) with an alert kind once it was delivered to at least
            one channel. After :meth:`close`, :attr:`delivered` holds the same kinds: write
            ``notified: ["guard_stop"]`` into the run metadata then, so the watcher does not report
            the same stop again.

    Raises:
        monitor_cb.notify.config.ConfigError: the settings are wrong (check at construction, before
            training starts).
    """

    def __init__(
        self,
        config: NotifyConfig | str | os.PathLike[str] | None,
        run: str,
        *,
        run_name: str | None = None,
        on_sent: Callable[[str], None] | None = None,
    ) -> None:
        if config is None:
            path = os.environ.get("MONITOR_NOTIFY_CONFIG")
            config = load_config(path) if path else NotifyConfig()
        elif not isinstance(config, NotifyConfig):
            config = load_config(config)
        self.config = config
        self.run = run
        self.run_name = run_name
        self._on_sent = on_sent
        self.delivered: set[str] = set()  # kinds delivered to at least one channel
        self.notifier = Notifier(config, on_result=self._result)

    @property
    def enabled(self) -> bool:
        return bool(self.config.routes)

    def guard_stopped(self, step: int, reason: str | None = None) -> bool:
        """Queue "stopped at step N: reason" (severity error); True if a channel will send it."""
        return self.send(GUARD_STOP_KIND, "error", guard_message(step, reason), step=step)

    def send(self, kind: str, severity: str, message: str, *, step: int | None = None) -> bool:
        """Queue any alert about this run; never raises, never blocks."""
        try:
            alert = Alert(
                run=self.run,
                run_name=self.run_name,
                kind=kind,
                severity=severity,
                message=message,
                step=step,
                link=self.config.link(self.run),
            )
        except Exception:  # noqa: BLE001 - training must go on
            return False
        return self.notifier.notify(alert)

    def close(self, timeout: float = 15.0) -> bool:
        """Deliver what is pending, waiting at most ``timeout`` seconds; False if something was left."""
        return self.notifier.close(timeout)

    def _result(self, result: DeliveryResult) -> None:
        if not result.ok:
            return
        for kind in result.kinds:
            if kind not in self.delivered:
                self.delivered.add(kind)
                if self._on_sent is not None:
                    self._on_sent(kind)


def run_id_for(run_dir: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> str:
    """The id the watcher and dashboard give a run directory: its path relative to the log root.

    ``root`` defaults to the environment's (``$MONITOR_LOGDIR``); a run directory outside the root (or no root) is
    named by its last component, as a watcher started on its parent directory would name it.
    """
    path = Path(run_dir).resolve()
    base = root if root is not None else env_logdir()
    if base:
        try:
            relative = path.relative_to(Path(base).resolve())
        except ValueError:
            pass
        else:
            return relative.as_posix() or "."
    return path.name
