"""``python -m monitor_cb export RUN --format csv|parquet [-o FILE]``: every merged row, NaN kept."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from monitor_cb.ingest.commands_common import add_run_arguments, open_run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    parser.add_argument("--format", choices=("csv", "parquet"), default="csv", help="output format (default csv)")
    parser.add_argument("-o", "--output", default=None, help="output file (default: stdout for csv)")
    parser.add_argument("--all-segments", action="store_true", help="also rows of earlier segments a resume repeated")


def run(args: argparse.Namespace) -> int:
    store, run_id = open_run(args)
    data = store.read(run_id, all_segments=args.all_segments)
    frame, masks = data.frame, dict(data.masks)
    if args.format == "parquet":
        if not args.output:
            raise SystemExit("error: --format parquet needs -o FILE")
        write_parquet(frame, masks, args.output)
    else:
        write_csv(frame, masks, args.output or sys.stdout)
    if args.output:
        print(f"wrote {len(frame)} rows x {len(frame.columns)} columns to {args.output}", file=sys.stderr)
    return 0


def write_csv(frame: Any, masks: dict[str, Any], target: Any) -> None:
    """CSV where a logged NaN reads ``NaN`` (``inf``/``-inf`` likewise) and a value not logged is empty."""
    import numpy as np

    out = frame.copy()
    for column, logged in masks.items():
        values = out[column]
        if values.dtype.kind != "f":
            continue
        nan = np.isnan(values.to_numpy())
        if nan.any():  # a plain float column (the usual case) is written as it is
            text = values.astype(object)
            text[nan & logged] = "NaN"
            text[~logged] = None
            out[column] = text
    out.to_csv(target, index=False, na_rep="")


def write_parquet(frame: Any, masks: dict[str, Any], path: str) -> None:
    """Parquet where a logged NaN stays NaN and a value not logged is null."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = {}
    for column in frame.columns:
        values = frame[column].to_numpy()
        logged = masks.get(column)
        if values.dtype.kind == "f" and logged is not None:
            arrays[column] = pa.array(values, mask=~logged, from_pandas=False)
        else:
            arrays[column] = pa.array(frame[column], from_pandas=True)
    pq.write_table(pa.table(arrays), path)
