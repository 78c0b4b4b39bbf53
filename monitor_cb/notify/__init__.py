"""Notifications: tell the user where they are when a run breaks.

* :class:`Alert`: one event; :class:`Notifier`: queues and delivers to channels off the caller's
  thread (timeouts, retries, dedupe, digests); :func:`load_config`: the settings file.
* :class:`TrainingNotifier`: the NaN guard's decision from inside training.
* :class:`Watcher`: the headless ``python -m monitor_cb watch``; its :class:`WatchState` holds the
  durable outbox that :class:`OutboxSender` delivers (at least once, in order, across restarts).

Stdlib only (``urllib.request``, ``smtplib``); no MindSpore, no Streamlit. Names load lazily so that
importing ``monitor_cb.commands.watch`` for the CLI parser stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Alert": "monitor_cb.notify.alert",
    "Notifier": "monitor_cb.notify.delivery",
    "DeliveryResult": "monitor_cb.notify.delivery",
    "send_test_notification": "monitor_cb.notify.delivery",
    "NotifyConfig": "monitor_cb.notify.config",
    "ConfigError": "monitor_cb.notify.config",
    "load_config": "monitor_cb.notify.config",
    "find_config": "monitor_cb.notify.config",
    "TrainingNotifier": "monitor_cb.notify.training",
    "Watcher": "monitor_cb.notify.watcher",
    "WatchState": "monitor_cb.notify.state",
    "OutboxSender": "monitor_cb.notify.outbox",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'monitor_cb.notify' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
