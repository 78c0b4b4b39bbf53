"""``python -m monitor_cb watch [LOGROOT]``: the headless watcher.

Tails every run under the log root (new runs included), runs the detectors on new records and
sends each new finding, and each run lifecycle event (finished, failed, stopped by the guard,
stalled, crashed), to the configured channels through a durable outbox: saved before it is sent,
retried across passes and restarts until delivered or ``--expire`` old. ``--once`` does one pass,
prints what is pending per channel and exits non-zero while something is undelivered (cron,
tests); otherwise it polls every ``--interval`` seconds until interrupted. Settings:
docs/NOTIFICATIONS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from monitor_cb.commands.common import (
    UsageError,
    add_endpoint_argument,
    add_logdir_argument,
    apply_endpoint,
    stop_on_signals,
)
from monitor_cb.logroot import ENV_LOGDIR, log_root
from monitor_cb.storage.urls import is_url, redact_credentials

# Keep this module's top-level imports light: the CLI imports it to build its parser.
if TYPE_CHECKING:
    from monitor_cb.notify.config import NotifyConfig
    from monitor_cb.notify.watcher import Watcher

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
        "--state",
        default=None,
        metavar="FILE",
        help="the watcher's state and outbox (default: this user's $MONITOR_STATE_DIR/watch/<root>-<hash>/"
        "watch-state.json; never inside the shared log root)",
    )
    parser.add_argument(
        "--expire",
        default=None,
        metavar="DURATION",
        help="give up on an alert still undelivered after DURATION: 24h, 30m, 90s, or a number of hours "
        "(default: expire_after in the settings, else 24h); given-up alerts are logged and shown",
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
        parse_duration,
    )
    from monitor_cb.notify.delivery import Notifier

    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    apply_endpoint(args)
    if args.logroot and args.logdir and log_root(args.logroot) != log_root(args.logdir):
        raise UsageError(
            f"two log roots given: LOGROOT {redact_credentials(args.logroot)} "
            f"and --logdir {redact_credentials(args.logdir)}"
        )
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
    if args.expire is not None:
        try:
            config.expire_after = parse_duration(args.expire, "--expire")
        except ConfigError as exc:
            raise UsageError(str(exc)) from exc
    if args.test:
        return _send_test(Notifier(config))
    if not config.routes:
        logging.getLogger("monitor_cb.notify").warning(
            "no channels configured (--config FILE, $%s, --exec or --webhook): alerts are only logged", ENV_CONFIG
        )
    if not is_url(root) and not Path(root).is_dir():
        raise UsageError(f"log root {root} is not a directory; give --logdir or set ${ENV_LOGDIR}")
    from monitor_cb.notify.state import StateBusyError, WatchState, exclusive

    state_path = Path(args.state) if args.state else WatchState.default_path(root)
    try:
        with exclusive(state_path):
            return _watch(args, root, config, Path(args.state) if args.state else None)
    except StateBusyError as exc:
        raise UsageError(str(exc)) from exc


def _watch(args: argparse.Namespace, root: str, config: NotifyConfig, state_path: Path | None) -> int:
    """Watch with the state at ``state_path`` (None: the default, which may import an old root state)."""
    from monitor_cb.notify.watcher import Watcher

    watcher = Watcher(root, config, state_path=state_path, skip_older=args.skip_older, link=config.link)
    logging.getLogger("monitor_cb.notify").info("watch: state and outbox in %s", watcher.state_path)
    if args.once:
        watcher.poll()
        watcher.deliver(_close_timeout(config))
        return _report_once(watcher, watcher.state_path, config)
    stop = threading.Event()
    stop_on_signals(stop)
    with contextlib.suppress(KeyboardInterrupt):
        watcher.run(args.interval, stop, close_timeout=_close_timeout(config))
    for line in watcher.report():
        print(f"outbox {line}", flush=True)
    return 0


def _report_once(watcher: Watcher, state_path: Path, config: NotifyConfig) -> int:
    """Print the outbox per channel; 1 (with a message saying what happens next) while anything is undelivered."""
    for line in watcher.report():
        print(f"outbox {line}", flush=True)
    by_channel = watcher.pending()
    pending = sum(by_channel.values())
    expired = watcher.outbox.counts.expired
    for name in sorted(n for n, count in by_channel.items() if count and n not in watcher.outbox.routes):
        print(
            f"channel {name!r} has {by_channel[name]} undelivered alert(s) but is not configured any more; "
            "configure it again, or they are given up at the expiry",
            file=sys.stderr,
        )
    hours = watcher.outbox.policy.expire_after / 3600
    if expired:
        print(
            f"{len(expired)} alert delivery(ies) given up after {hours:g} h undelivered (listed in {state_path})",
            file=sys.stderr,
        )
    if pending:
        print(
            f"{pending} alert delivery(ies) still undelivered; kept in {state_path} and retried by the next "
            f"watch until delivered or {hours:g} h old",
            file=sys.stderr,
        )
    return 1 if pending or expired else 0


def _close_timeout(config: object) -> float:
    """Long enough for every attempt (connect and answer) with its back-off, bounded."""
    timeout = getattr(config, "timeout", 10.0) + getattr(config, "response_timeout", 30.0)
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
