"""``python -m monitor_cb export RUN --format csv|parquet [-o FILE]``: every merged row, NaN kept."""

from __future__ import annotations

import argparse
import sys

from monitor_cb.commands.common import UsageError, add_run_arguments, open_run, print_skipped


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    parser.add_argument("--format", choices=("csv", "parquet"), default="csv", help="output format (default csv)")
    parser.add_argument("-o", "--output", default=None, help="output file (default: stdout for csv)")
    parser.add_argument("--all-segments", action="store_true", help="also rows of earlier segments a resume repeated")


def run(args: argparse.Namespace) -> int:
    from monitor_cb.ingest.run_export import write_csv, write_parquet

    if args.format == "parquet" and not args.output:
        raise UsageError("--format parquet needs -o FILE")
    store, run_id = open_run(args)
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
