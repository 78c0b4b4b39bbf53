"""What ``summary`` and ``export`` share: the ``--root`` option and finding the run asked for."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from monitor_cb.ingest.store import RunStore


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN plus ``--root`` (default ``$MONITOR_LOGDIR`` or ``./logs``)."""
    parser.add_argument("run", metavar="RUN", help="run id under the root (e.g. bert/exp001) or a run directory")
    parser.add_argument(
        "--root",
        default=None,
        help="log root holding the runs (default: $MONITOR_LOGDIR, else ./logs)",
    )


def open_run(args: argparse.Namespace) -> tuple[RunStore, str]:
    """A store and the id of the run named by ``args.run``; raises SystemExit with a message if none."""
    from monitor_cb.ingest.store import RunStore, default_root

    root = Path(args.root) if args.root else default_root()
    store = RunStore(root)
    store.refresh(force=True)
    run_id = args.run.strip("/") or "."
    if run_id in {info.id for info in store.list_runs()}:
        return store, run_id
    if os.path.isdir(args.run):  # a run directory given by path: read it as its own root
        store = RunStore(Path(args.run))
        if "." in {info.id for info in store.list_runs()}:
            return store, "."
    raise SystemExit(
        f"error: no run {args.run!r}: not a run id under {root} and not a directory holding *.jsonl metrics files"
    )
