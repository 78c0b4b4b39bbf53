"""What every command shares: exit statuses, the usage error, --logdir and --endpoint-url, finding a run.

Standard library only at module level: the CLI imports every command module to build its parser.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from monitor_cb.logroot import LOGDIR_HELP, log_root

if TYPE_CHECKING:
    from monitor_cb.ingest.store import RunStore

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A command line that cannot be carried out (no such run, a bad flag value); the message says why.

    The CLI prints it as ``error: <message>`` (credentials redacted) on stderr and exits with :data:`EXIT_USAGE`.
    """


def add_logdir_argument(parser: argparse.ArgumentParser) -> None:
    """``--logdir PATH`` (also spelled ``--root``): the log root, a directory or a URL."""
    parser.add_argument(
        "--logdir", "--root", dest="logdir", metavar="PATH", default=None, help=f"{LOGDIR_HELP}; a directory or a URL"
    )


def add_endpoint_argument(parser: argparse.ArgumentParser) -> None:
    """``--endpoint-url`` for S3-compatible stores (MinIO, Ceph, Huawei OBS)."""
    parser.add_argument(
        "--endpoint-url",
        default=None,
        metavar="URL",
        help="S3 API endpoint for s3:// and obs:// URLs (default: $MONITOR_ENDPOINT_URL, $AWS_ENDPOINT_URL_S3, "
        "$AWS_ENDPOINT_URL, else AWS); credentials come from the AWS environment variables or ~/.aws",
    )


def apply_endpoint(args: argparse.Namespace) -> None:
    """Make ``--endpoint-url`` the endpoint of every store this process opens."""
    from monitor_cb.storage.urls import ENV_ENDPOINT

    if getattr(args, "endpoint_url", None):
        os.environ[ENV_ENDPOINT] = args.endpoint_url


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN (an id under the log root, a run directory or a run's URL), ``--logdir`` and ``--endpoint-url``."""
    parser.add_argument(
        "run",
        metavar="RUN",
        help="run id under the log root (e.g. bert/exp001), a run directory or one of its files (metrics.jsonl, "
        "info.log, worker_0.log, an event or MindSpore summary file), or a run's URL (s3://bucket/prefix/exp001)",
    )
    add_logdir_argument(parser)
    add_endpoint_argument(parser)


def open_run(args: argparse.Namespace) -> tuple[RunStore, str]:
    """A store and the id of the run named by ``args.run``.

    A run directory or URL given directly is read as its own root (so its settings are its own).

    Raises:
        UsageError: neither a run id under the log root nor a run directory or URL holding metrics.
    """
    from monitor_cb.ingest.store import RunStore
    from monitor_cb.storage.urls import clean_url, is_url, redact_credentials

    apply_endpoint(args)
    try:
        if is_url(args.run):  # a run given by its URL: read it as its own root
            store = RunStore(clean_url(args.run))
            if "." in {info.id for info in store.list_runs()}:
                return store, "."
            raise UsageError(
                f"no run at {redact_credentials(args.run)}: no metrics files (*.jsonl or *.jsonl.chunks/) there"
            )
        root = log_root(args.logdir)
        store = RunStore(root)
        store.refresh(force=True)
        run_id = args.run.strip("/") or "."
        if run_id in {info.id for info in store.list_runs()}:
            return store, run_id
    except (OSError, ValueError) as exc:
        raise UsageError(redact_credentials(exc)) from None
    given = Path(args.run)
    if given.is_file():  # one of a run's files (metrics.jsonl, info.log, worker_0.log, an event file): its folder
        given = given.parent
    if given.is_dir():  # a run directory given by path: read it as its own root
        store = RunStore(given)
        if "." in {info.id for info in store.list_runs()}:
            return store, "."
    raise UsageError(
        f"no run {redact_credentials(args.run)!r}: not a run id under {root}, and not a run's folder or file "
        "(metrics *.jsonl, TensorBoard event files, MindFormers' info.log or msrun's worker_N.log, "
        "or MindSpore summary files)"
    )


def stop_on_signals(stop: threading.Event) -> None:
    """SIGTERM and Ctrl-C set ``stop``, so a long-running command ends its loop cleanly (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def print_skipped(store: RunStore, limit: int = 10) -> None:
    """The files of the root the store did not read because they are unsafe (a FIFO, a device, a link out
    of the root, past a cap, a cache whose rows do not match), one ``note:`` line each on stderr."""
    notes = store.skipped_files()
    for note in notes[:limit]:
        print(f"note: {note}", file=sys.stderr)
    if len(notes) > limit:
        print(f"note: and {len(notes) - limit} more files skipped", file=sys.stderr)
