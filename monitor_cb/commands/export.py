"""``python -m monitor_cb export RUN --format csv|parquet [-o FILE]``: every merged row, NaN kept."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from monitor_cb.commands.common import UsageError, add_run_arguments, open_run, print_skipped


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    parser.add_argument("--format", choices=("csv", "parquet"), default="csv", help="output format (default csv)")
    parser.add_argument("-o", "--output", default=None, help="output file (default: stdout for csv)")
    parser.add_argument("--all-segments", action="store_true", help="also rows of earlier segments a resume repeated")
    parser.add_argument(
        "--histograms",
        action="store_true",
        help="the run's histograms instead of its metrics, one row per bucket (MindSpore summary runs)",
    )


def run(args: argparse.Namespace) -> int:
    from monitor_cb.ingest.run_export import write_csv, write_parquet

    if args.format == "parquet" and not args.output:
        raise UsageError("--format parquet needs -o FILE")
    store, run_id = open_run(args)
    if args.histograms:
        return _export_histograms(store, run_id, args)
    data = store.read(run_id, all_segments=args.all_segments)
    frame, masks = data.frame, dict(data.masks)
    print_skipped(store)
    if args.format == "parquet":
        write_parquet(frame, masks, args.output)
    else:
        write_csv(frame, masks, args.output or sys.stdout)
    if args.output:
        print(f"wrote {len(frame)} rows x {len(frame.columns)} columns to {args.output}", file=sys.stderr)
    return 0


def _export_histograms(store: Any, run_id: str, args: argparse.Namespace) -> int:
    """Every rank's histograms, one row per bucket (:func:`monitor_cb.importers.ms_summary.histogram_columns`)."""
    import numpy as np
    import pandas as pd

    from monitor_cb.importers.ms_summary import histogram_columns

    columns: dict[str, Any] = {}
    for rank in store.ranks_of(run_id):
        for key, values in histogram_columns(store.histograms(run_id, rank)).items():
            columns.setdefault(key, []).append(values)
    if not any(len(v) for parts in columns.values() for v in parts):
        raise UsageError(f"run {run_id!r} has no histograms (MindSpore summary runs record them)")
    frame = pd.DataFrame({key: pd.Series(np.concatenate(parts)) for key, parts in columns.items()})
    print_skipped(store)
    if args.format == "parquet":
        frame.to_parquet(args.output, index=False)
    else:
        frame.to_csv(args.output or sys.stdout, index=False)
    if args.output:
        print(f"wrote {len(frame)} histogram buckets to {args.output}", file=sys.stderr)
    return 0
