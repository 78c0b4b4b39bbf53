"""What ``summary``, ``export`` and ``diagnose`` share: ``--root``, ``--endpoint-url`` and finding the run asked for."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from monitor_cb.ingest.store import RunStore


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN plus ``--root`` (default ``$MONITOR_LOGDIR`` or ``./logs``) and ``--endpoint-url``."""
    parser.add_argument(
        "run",
        metavar="RUN",
        help="run id under the root (e.g. bert/exp001), a run directory, or a run's URL (s3://bucket/prefix/exp001)",
    )
    parser.add_argument(
        "--root",
        default=None,
        help="log root holding the runs, a directory or a URL (default: $MONITOR_LOGDIR, else ./logs)",
    )
    add_endpoint_argument(parser)


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


def open_run(args: argparse.Namespace) -> tuple[RunStore, str]:
    """A store and the id of the run named by ``args.run``; raises SystemExit with a message if none."""
    from monitor_cb.ingest.store import RunStore, default_root
    from monitor_cb.storage.urls import clean_url, is_url, redact

    apply_endpoint(args)
    try:
        if is_url(args.run):  # a run given by its URL: read it as its own root
            store = RunStore(clean_url(args.run))
            if "." in {info.id for info in store.list_runs()}:
                return store, "."
            raise SystemExit(
                f"error: no run at {redact(args.run)}: no metrics files (*.jsonl or *.jsonl.chunks/) there"
            )
        root = (clean_url(args.root) if is_url(args.root) else Path(args.root)) if args.root else default_root()
        store = RunStore(root)
        store.refresh(force=True)
        run_id = args.run.strip("/") or "."
        if run_id in {info.id for info in store.list_runs()}:
            return store, run_id
    except (OSError, ValueError) as exc:
        raise SystemExit(f"error: {redact(exc)}") from None
    if os.path.isdir(args.run):  # a run directory given by path: read it as its own root
        store = RunStore(Path(args.run))
        if "." in {info.id for info in store.list_runs()}:
            return store, "."
    raise SystemExit(
        f"error: no run {redact(args.run)!r}: not a run id under {root} "
        "and not a directory holding *.jsonl metrics files"
    )
