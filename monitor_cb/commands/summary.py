"""``python -m monitor_cb summary RUN [--json]``: status, steps, last values, bad lines."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from monitor_cb.commands.common import add_run_arguments, open_run, print_skipped
from monitor_cb.ingest.badnote import bad_lines_note
from monitor_cb.ingest.dropnote import WriterDrops, drop_note


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object (a stable contract for tools)")


def run(args: argparse.Namespace) -> int:
    store, run_id = open_run(args)
    summary = build_summary(store, run_id)
    print_skipped(store)
    if args.json:
        print(json.dumps(summary, indent=1, allow_nan=False))
    else:
        _print_text(summary)
    return 0


def build_summary(store: Any, run_id: str) -> dict[str, Any]:
    """The summary as plain JSON-safe data (non-finite floats as "NaN" / "Infinity" strings)."""
    from monitor_cb.record import encode_value

    data = store.read(run_id)
    info = store.run_info(run_id)  # after the read: a file listed from its ends has its exact counts now
    frame = data.frame
    last: dict[str, Any] = {}
    for column, logged in data.masks.items():
        if column == "t":
            continue
        if logged.any():
            row = int(logged.nonzero()[0][-1])
            value = frame[column].iloc[row]
            last[column] = {"step": int(frame["step"].iloc[row]), "value": encode_value(_plain(value))}
    return {
        "id": info.id,
        "name": info.name,
        "path": str(info.path),
        "status": info.status,
        "reason": info.reason,
        "ranks": list(info.ranks),
        "records": info.n_records,
        "first_step": info.first_step,
        "last_step": info.last_step,
        "last_write": info.last_write,
        "bad_lines": info.bad_lines,
        "partial_lines": info.partial_lines,
        "dropped_records": info.drops.total,
        "drop_causes": dict(info.drops.causes),
        "last_values": last,
        "not_read": dict(info.meta.get("not_read") or {}),  # a summary run's images, tensors, graphs: left out
    }


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def _print_text(summary: dict[str, Any]) -> None:
    out = sys.stdout
    reason = f" ({summary['reason']})" if summary["reason"] else ""
    out.write(f"run        {summary['id']}  [{summary['name']}]\n")
    out.write(f"status     {summary['status']}{reason}\n")
    out.write(f"ranks      {', '.join(map(str, summary['ranks'])) or '-'}\n")
    out.write(f"records    {summary['records']}  steps {summary['first_step']} .. {summary['last_step']}\n")
    note = bad_lines_note(summary["bad_lines"], summary["partial_lines"])
    out.write(f"bad lines  {summary['bad_lines']}{f' ({note})' if note else ''}\n")
    dropped = drop_note(WriterDrops(summary["dropped_records"], tuple(summary["drop_causes"].items())))
    if dropped:
        out.write(f"dropped    {dropped}\n")
    if summary["not_read"]:
        kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(summary["not_read"].items()))
        out.write(f"not read   {kinds} (only scalars and histograms are read from summary files)\n")
    for name, entry in summary["last_values"].items():
        value = entry["value"]
        shown = f"{value:.6g}" if isinstance(value, float) and math.isfinite(value) else str(value)
        out.write(f"  {name:<24} {shown}  (step {entry['step']})\n")
