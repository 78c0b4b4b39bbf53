"""Where a rank writes and what its metadata file says: the writer's policy, apart from its queue and thread.

The metadata file (docs/FORMAT.md) holds the run's name, status and reason, times, host, pid and command
line (credentials masked), rank, world size and segment, the config, and the counts of records written
and dropped by cause. :mod:`monitor_cb.train.writer` keeps it up to date; this module says what goes in it.
"""

from __future__ import annotations

import math
import os
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monitor_cb.record import DEFAULT_STEM, METRICS_SUFFIX, SCHEMA_VERSION, encode_value, metrics_filename

# Why records were not written (the metadata's ``drop_causes``; docs/FORMAT.md).
DROP_CAUSES = (
    "queue_full_producer",
    "queue_full_disk",
    "disk_error",
    "unwritten_at_close",
    "unencodable",
    "after_close",
    "file_deleted",
)


@dataclass(frozen=True)
class MetaFields:
    """What the writer knows of its stream when it starts."""

    name: str
    rank: int
    world_size: int
    segment: int
    metrics_file: str


def initial_meta(
    previous: Mapping[str, Any],
    fields: MetaFields,
    config: Mapping[str, Any] | None,
    extra: Mapping[str, Any] | None,
    now: float | None = None,
) -> dict[str, Any]:
    """The metadata a writer starts with; ``previous`` is the file it replaces (its first start is kept)."""
    now = time.time() if now is None else now
    first_start = previous.get("first_start_time")
    if isinstance(first_start, bool) or not isinstance(first_start, (int, float)) or not math.isfinite(first_start):
        first_start = now
    meta: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "name": fields.name,
        "status": "running",
        "reason": None,
        "start_time": now,
        "first_start_time": first_start,
        "end_time": None,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "argv": safe_argv(sys.argv),
        "python": sys.version.split()[0],
        "rank": fields.rank,
        "world_size": fields.world_size,
        "segment": fields.segment,
        "metrics_file": fields.metrics_file,
        "config": encode_meta(dict(config or {})),
        "dropped_records": 0,
        "drop_causes": dict.fromkeys(DROP_CAUSES, 0),
        "writer_note": None,
    }
    meta.update(encode_meta(dict(extra or {})))
    return meta


def detect_rank() -> tuple[int, int]:
    """Rank and world size from the launcher's environment, (0, 1) when not distributed."""
    env = os.environ
    rank = env.get("RANK_ID") or env.get("RANK") or env.get("OMPI_COMM_WORLD_RANK") or "0"
    size = env.get("RANK_SIZE") or env.get("WORLD_SIZE") or env.get("OMPI_COMM_WORLD_SIZE") or "1"
    try:
        return max(int(rank), 0), max(int(size), 1)
    except ValueError:
        return 0, 1


def resolve_metrics_path(
    log_dir: str | os.PathLike[str] | None,
    log_file: str | os.PathLike[str] | None,
    rank: int,
    world_size: int,
) -> Path:
    """Where this rank writes.

    ``log_dir`` names a run directory (``logs/exp001``); ``log_file`` names a file
    (the origin article's ``logs/exp001/metrics.jsonl``). With several ranks each
    rank gets its own file beside the named one, never a shared file.
    """
    if log_file is not None:
        path = Path(log_file)
        if world_size <= 1 and rank == 0:
            return path
        stem = path.name[: -len(METRICS_SUFFIX)] if path.name.endswith(METRICS_SUFFIX) else path.stem
        return path.with_name(metrics_filename(rank, world_size, stem or DEFAULT_STEM))
    if log_dir is None:
        raise ValueError("give a run directory (log_dir='logs/exp001') or a file (log_file=...)")
    return Path(log_dir) / metrics_filename(rank, world_size)


def give_up_note(unwritten: int, when: str, which: str = "") -> str:
    """The metadata's ``writer_note`` when close() gave up on the writer thread."""
    return f"close() gave up on the writer thread {when}: {unwritten:,} records {which}were not written"


def safe_argv(argv: list[str]) -> list[str]:
    """The command line for the metadata, with URL credentials and the SDK's secret values masked."""
    from monitor_cb.storage.urls import redact_credentials

    return [redact_credentials(arg) for arg in argv]


def encode_meta(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata values as JSON: what cannot be a number is kept as its text (it is only shown)."""
    try:
        return encode_value(dict(fields), fallback=str)  # the full path: ints beyond 64 bits checked too
    except Exception as exc:  # noqa: BLE001 - a hostile object's __str__ or a broken mapping
        return {"unreadable_fields": f"{type(exc).__name__}: {exc}"[:200]}
