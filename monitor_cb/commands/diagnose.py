"""``python -m monitor_cb diagnose RUN [--json]``: a run's findings, and an exit status a job script can test.

Exit status: 0 when no finding is an error, 1 when at least one is, 2 for a usage error (no such run).
Imports nothing heavy at module level: the CLI imports every command module to build its parser.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from monitor_cb.commands.common import EXIT_FAILURE, EXIT_OK, add_run_arguments, open_run, print_skipped

EXIT_ERROR_FINDING = EXIT_FAILURE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object (a stable contract for tools)")
    parser.add_argument(
        "--min-severity",
        choices=("info", "warning", "error"),
        default="info",
        help="print only findings at least this severe (the exit status still counts errors)",
    )


def run(args: argparse.Namespace) -> int:
    from monitor_cb.diagnosis.engine import diagnose
    from monitor_cb.diagnosis.findings import severity_rank
    from monitor_cb.diagnosis.settings import load_settings_checked
    from monitor_cb.diagnosis.stragglers import read_rank_places

    store, run_id = open_run(args)
    info = store.run_info(run_id)
    settings, problems = load_settings_checked(store.root)  # a run directory given by path: its own root
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    data = store.read(run_id)
    print_skipped(store)
    places = read_rank_places(info.path) if len(info.ranks) > 1 else None  # "rank 5 (host h, device 3)"
    findings = diagnose(
        data.frame, settings, status=info.status, last_write=info.last_write, logged=data.masks, places=places
    )
    shown = [f for f in findings if severity_rank(f.severity) >= severity_rank(args.min_severity)]
    if args.json:
        print(json.dumps(_report(info, findings, shown), indent=1, allow_nan=False))
    else:
        _print_text(info, findings, shown)
    return EXIT_ERROR_FINDING if any(f.severity == "error" for f in findings) else EXIT_OK


def _report(info: Any, findings: list, shown: list) -> dict[str, Any]:
    counts = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "info")}
    return {
        "id": info.id,
        "status": info.status,
        "last_step": info.last_step,
        "counts": counts,
        "findings": [f.to_dict() for f in shown],
    }


def _print_text(info: Any, findings: list, shown: list) -> None:
    counts = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "info")}
    summary = ", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items())
    print(f"{info.id}: {info.status}, last step {info.last_step} - {summary}")
    for f in shown:
        where = f"step {f.step:,}" + (f"-{f.end_step:,}" if f.end_step is not None and f.end_step != f.step else "")
        rank = f" rank {f.rank}" if f.rank is not None else ""
        print(f"  {f.severity.upper():<7} {f.kind:<15} {where}{rank}")
        print(f"          {f.message}")
