"""``python -m monitor_cb import-tb SRC DEST``: convert a TensorBoard event directory into our format, once.

SRC is MindFormers' ``tensorboard_dir`` (with ``rank_<id>`` subdirectories) or any directory of event
files. DEST becomes a run directory: ``metrics.jsonl`` for a single rank, else one
``metrics.rank{R}.jsonl`` per rank, each with its ``.meta.json`` (status ``finished``, the source in
``config``). Each event file of a rank (one per MindFormers launch) becomes one writer segment.
Only the standard library is imported at module level: ``cli.py`` imports this to build its parser.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from monitor_cb.commands.common import UsageError

_CHUNK_EVENTS = 200_000  # events read per poll
_FLUSH_TIMEOUT = 600.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("src", type=Path, help="TensorBoard event directory (e.g. MindFormers' output/tensorboard)")
    parser.add_argument("dest", type=Path, help="run directory to create (must not hold metrics files yet)")
    parser.add_argument("--name", default=None, help="run name stored in the metadata (default: DEST's name)")


def run(args: argparse.Namespace) -> int:
    from monitor_cb.importers.tensorboard import TensorBoardRun, TensorBoardUnavailable, is_tensorboard_run
    from monitor_cb.record import STEP_LIMIT

    src: Path = args.src
    dest: Path = args.dest
    if not src.is_dir():
        raise UsageError(f"{src} is not a directory; give the TensorBoard log directory (tensorboard_dir)")
    if not is_tensorboard_run(src):
        raise UsageError(f"{src} holds no TensorBoard event files (events.out.tfevents.*), directly or in rank_*/")
    if dest.exists() and any(dest.glob("*.jsonl")):
        raise UsageError(f"{dest} already holds metrics files (*.jsonl); choose a new directory")
    try:
        reader = TensorBoardRun(src)
    except TensorBoardUnavailable as exc:
        raise UsageError(str(exc)) from exc

    counts = _convert(reader, src, dest, args.name)
    if counts is None:
        return 1
    total = sum(counts.values())
    if not total:
        raise UsageError(f"{src} holds no scalar events; nothing imported")
    ranks = ", ".join(f"rank {rank}: {n}" for rank, n in sorted(counts.items()))
    print(f"imported {total} records from {src} into {dest} ({ranks})")
    skipped = sum(reader.bad_steps.values())
    if skipped:
        print(
            f"import-tb: skipped {skipped} scalar value(s) logged at a step outside 0..{STEP_LIMIT - 1}",
            file=sys.stderr,
        )
    return 0


def _convert(reader: Any, src: Path, dest: Path, name: str | None) -> dict[int, int] | None:
    """Write every record of ``reader``; per-rank record counts, or None after an error message."""
    from monitor_cb.config_masking import mask_config_texts
    from monitor_cb.train.writer import MetricsWriter

    records = list(_coalesce(_chunks(reader)))
    ranks = sorted({record["rank"] for record in records})
    world_size = max(ranks) + 1 if ranks else 1
    source = str(src.resolve())
    imported_at = time.time()
    # MindFormers writes its YAML config as add_text summaries: they become the run's config (masked, as ours).
    config = {"source": source, "source_format": "tensorboard", "tensorboard_text": mask_config_texts(reader.texts)}
    counts: dict[int, int] = {}
    for rank in ranks:
        mine = [record for record in records if record["rank"] == rank]
        for seg in sorted({record["seg"] for record in mine}):
            rows = [record for record in mine if record["seg"] == seg]
            start, end = min(row["t"] for row in rows), max(row["t"] for row in rows)
            writer = MetricsWriter(
                log_file=dest / "metrics.jsonl",
                rank=rank,
                world_size=world_size,
                config=config,
                run_name=name,
                queue_size=len(rows) + 16,
                fsync_interval=0,
                extra_meta=_times(start, first=seg == min(row["seg"] for row in mine), imported_at=imported_at),
            )
            for row in rows:
                metrics = {k: v for k, v in row.items() if k not in ("step", "t", "rank", "seg")}
                writer.log_at(row["t"], row["step"], **metrics)
            flushed = writer.flush(timeout=_FLUSH_TIMEOUT)
            writer.close("finished", timeout=_FLUSH_TIMEOUT)
            if not flushed or writer.dropped:
                return _fail_none(f"could not write {writer.path}: {writer.dropped} records dropped")
            _set_end_time(writer.meta_path, end)
            counts[rank] = counts.get(rank, 0) + len(rows)
    return counts


def _times(start: float, *, first: bool, imported_at: float) -> dict[str, float]:
    """Metadata times from the events rather than from the import (the writer's defaults)."""
    times = {"start_time": start, "imported_at": imported_at}
    if first:
        times["first_start_time"] = start
    return times


def _chunks(reader: Any) -> Iterator[dict[str, Any]]:
    while True:
        batch = reader.poll(max_events=_CHUNK_EVENTS)
        if not batch:
            return
        yield from batch


def _coalesce(records: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Merge records of one ``(rank, seg, step)`` split across polls into one line."""
    held: dict[tuple[int, int, int], dict[str, Any]] = {}
    for record in records:
        key = (record["rank"], record["seg"], record["step"])
        if key in held:
            for k, v in record.items():
                held[key].setdefault(k, v)
        else:
            held[key] = record
    yield from sorted(held.values(), key=lambda r: (r["rank"], r["seg"], r["step"]))


def _set_end_time(meta_path: Path, end: float) -> None:
    """The writer stamps the import's own time as ``end_time``; the run's last event is the truth."""
    from monitor_cb.rootfile import META_CAP, read_json, write_atomic

    try:
        meta = read_json(meta_path, META_CAP, root=meta_path.parent)  # just written; still never a FIFO's open
        meta["end_time"] = end
        write_atomic(meta_path, json.dumps(meta, indent=1, allow_nan=False).encode())
    except (OSError, ValueError, TypeError) as exc:  # (write_atomic removes its temporary file)
        print(f"import-tb: could not set end_time in {meta_path}: {exc}", file=sys.stderr)


def _fail_none(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    return None
