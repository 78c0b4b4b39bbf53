"""``python -m monitor_cb watch [LOGROOT]``: the headless watcher.

Tails every run under the log root (new runs included), runs the detectors on new records and
sends each new finding, and each run lifecycle event (finished, failed, stopped by the guard,
stalled, crashed), once to the configured channels. ``--once`` does one pass and exits (cron,
tests); otherwise it polls every ``--interval`` seconds until interrupted. Settings:
docs/NOTIFICATIONS.md.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from pathlib import Path

from monitor_cb.commands.common import (
    UsageError,
    add_endpoint_argument,
    add_logdir_argument,
    apply_endpoint,
    stop_on_signals,
)
from monitor_cb.logroot import ENV_LOGDIR, log_root
from monitor_cb.storage.urls import is_url, redact

# Keep this module's top-level imports light: the CLI imports it to build its parser.

ENV_CONFIG = "MONITOR_NOTIFY_CONFIG"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "logroot", nargs="?", default=None, metavar="LOGROOT", help="the log root, as --logdir gives it"
    )
    add_logdir_argument(parser)
    parser.add_argument(
        "--config",
        default=None,
        help=f"notification settings, TOML or JSON (default: ${ENV_CONFIG}, else ~/.config/monitor_cb/notify.toml; "
        "never a file in the log root). The file and its folder must be yours and not writable by others",
    )
    parser.add_argument("--once", action="store_true", help="one pass, deliver, exit (for cron and tests)")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between passes (default 10)")
    parser.add_argument(
        "--exec",
        dest="exec_command",
        default=None,
        metavar="CMD",
        help="also run this command per message, e.g. 'notify-send Training' (no shell; the alert is in "
        "MONITOR_* environment variables and JSON on stdin)",
    )
    parser.add_argument("--webhook", default=None, metavar="URL", help="also POST the generic JSON body to this URL")
    parser.add_argument(
        "--min-severity", choices=("info", "warning", "error"), default=None, help="override every channel's minimum"
    )
    parser.add_argument(
        "--skip-older",
        type=float,
        default=3600.0,
        metavar="S",
        help="runs first seen idle for over S seconds are recorded without alerts (default 3600; 0 = report all)",
    )
    parser.add_argument(
        "--state", default=None, metavar="FILE", help="state file (default LOGROOT/.monitor/watch-state.json)"
    )
    parser.add_argument(
        "--test", action="store_true", help="send one test notification to every channel, print the results, exit"
    )
    parser.add_argument("--quiet", action="store_true", help="log warnings only")
    add_endpoint_argument(parser)


def run(args: argparse.Namespace) -> int:
    from monitor_cb.notify.config import (
        ConfigError,
        add_flag_channels,
        find_config,
        ignored_root_settings,
        load_config,
    )
    from monitor_cb.notify.delivery import Notifier

    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    apply_endpoint(args)
    if args.logroot and args.logdir and log_root(args.logroot) != log_root(args.logdir):
        raise UsageError(f"two log roots given: LOGROOT {redact(args.logroot)} and --logdir {redact(args.logdir)}")
    root = log_root(args.logroot or args.logdir)
    note = None if args.config else ignored_root_settings(root)
    if note:
        logging.getLogger("monitor_cb.notify").warning("%s", note)
    try:
        config = load_config(args.config or find_config(root))
        add_flag_channels(
            config, exec_command=args.exec_command, webhook_url=args.webhook, min_severity=args.min_severity
        )
    except (ConfigError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    if args.interval <= 0:
        raise UsageError(f"--interval must be > 0, got {args.interval}")
    notifier = Notifier(config)
    if args.test:
        return _send_test(notifier)
    if not config.routes:
        logging.getLogger("monitor_cb.notify").warning(
            "no channels configured (--config FILE, $%s, --exec or --webhook): alerts are only logged", ENV_CONFIG
        )
    if not is_url(root) and not Path(root).is_dir():
        raise UsageError(f"log root {root} is not a directory; give --logdir or set ${ENV_LOGDIR}")
    from monitor_cb.notify.watcher import Watcher

    watcher = Watcher(root, notifier, state_path=args.state, skip_older=args.skip_older, link=config.link)
    if args.once:
        watcher.poll()
        finished = notifier.close(timeout=_close_timeout(config))
        return 0 if finished and all(result.ok for result in notifier.results) else 1
    stop = threading.Event()
    stop_on_signals(stop)
    try:
        watcher.run(args.interval, stop)
    except KeyboardInterrupt:
        pass
    finally:
        notifier.close(timeout=_close_timeout(config))
    return 0


def _close_timeout(config: object) -> float:
    """Long enough for every attempt with its back-off, bounded."""
    timeout = getattr(config, "timeout", 10.0)
    retries = getattr(config, "retries", 3)
    backoff = getattr(config, "backoff", 1.0)
    return min(300.0, (retries + 1) * timeout + backoff * (2 ** max(retries, 0)) + 5.0)


def _send_test(notifier: object) -> int:
    results = notifier.send_test()  # type: ignore[attr-defined]
    if not results:
        print("no channels configured", file=sys.stderr)
        return 2
    for result in results:
        print(f"{result.channel}: {'ok' if result.ok else 'FAILED ' + (result.error or '')}")
    return 0 if all(r.ok for r in results) else 1
