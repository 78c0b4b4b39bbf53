"""``python -m monitor_cb sync LOCAL_RUN URL``: ship a run to object storage without touching the training code.

Runs beside the training job (``python -m monitor_cb sync logs/exp001 s3://bucket/runs/exp001 &``)
and ships what the writers append, as ``LiveMonitor(upload=...)`` would: closed chunks every
``--interval`` seconds, metadata when it changes. Restart it at will: it lists what the bucket
holds and carries on, sending nothing twice. ``--once`` ships everything there is and exits (status
1 when something could not be shipped); ``--until-finished`` exits once every rank's metadata says
finished, failed or stopped and everything is shipped. Several runs: give a log root, its runs keep
their relative paths under URL.
"""

from __future__ import annotations

import argparse
import sys
import threading
import warnings
from pathlib import Path

from monitor_cb.commands.common import UsageError, add_endpoint_argument, apply_endpoint, stop_on_signals


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("local", metavar="LOCAL_RUN", help="the local run directory (or a log root of several runs)")
    parser.add_argument(
        "url", metavar="URL", help="where it goes, e.g. s3://bucket/runs/exp001 (obs:// for Huawei OBS)"
    )
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between uploads (default 2)")
    parser.add_argument(
        "--max-records", type=int, default=1000, help="ship early once this many records wait (default 1000)"
    )
    add_endpoint_argument(parser)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="ship everything there is now, then exit")
    mode.add_argument(
        "--until-finished", action="store_true", help="exit when every rank's status is final and all is shipped"
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="--once: give up after this many seconds (default 60)"
    )


def run(args: argparse.Namespace) -> int:
    from monitor_cb.storage.shipper import Shipper, UploadOptions
    from monitor_cb.storage.urls import redact_credentials

    apply_endpoint(args)
    local = Path(args.local)
    if not local.is_dir():
        raise UsageError(f"{local} is not a directory")
    try:
        options = UploadOptions(args.url, interval_s=args.interval, max_records=args.max_records)
        shipper = Shipper(local, options)
    except (ValueError, TypeError) as exc:
        raise UsageError(redact_credentials(exc)) from None
    warnings.simplefilter("always")
    warnings.showwarning = _show_warning  # type: ignore[assignment]
    target = shipper.remote
    if args.once:
        done = shipper.ship_all(args.timeout)
        _report(shipper, target, local)
        return 0 if done else 1
    stop = threading.Event()
    stop_on_signals(stop)
    shipper.start()
    print(f"sync: shipping {local} to {target} every {args.interval:g} s (Ctrl-C to stop)", file=sys.stderr)
    try:
        while not stop.wait(1.0):
            if args.until_finished and _all_final(local) and shipper.flush(30.0):
                break
    except KeyboardInterrupt:
        pass
    done = shipper.close(timeout=30.0)
    _report(shipper, target, local)
    return 0 if done else 1


def _report(shipper: object, target: object, local: Path) -> None:
    stats = shipper.stats  # type: ignore[attr-defined]
    print(
        f"sync: {stats.chunks} chunk(s), {stats.bytes:,} bytes and {stats.metas} metadata file(s) shipped "
        f"from {local} to {target}; {shipper.backlog():,} bytes left",  # type: ignore[attr-defined]
        file=sys.stderr,
    )


def _all_final(local: Path) -> bool:
    from monitor_cb.record import META_SUFFIX
    from monitor_cb.rootfile import META_CAP, read_json
    from monitor_cb.storage.shipper import scan_local

    metas = scan_local(local, META_SUFFIX)
    if not metas:
        return False
    for path in metas:
        try:
            status = read_json(path, META_CAP, root=local).get("status")  # a FIFO there never hangs sync
        except (OSError, ValueError, AttributeError):
            return False
        if status not in ("finished", "failed", "stopped"):
            return False
    return True


def _show_warning(
    message: object, category: type, filename: str, lineno: int, file: object = None, line: object = None
) -> None:
    from monitor_cb.storage.urls import redact_credentials

    print(f"sync: warning: {redact_credentials(message)}", file=sys.stderr)
