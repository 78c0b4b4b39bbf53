"""The object layout of a run: a metrics file becomes closed, immutable chunk objects.

Object stores cannot append, so ``metrics.rank3.jsonl`` is shipped as
``metrics.rank3.jsonl.chunks/<start>-<end>.jsonl``: the bytes ``[start, end)`` of the local file,
complete lines only, offsets as 16 zero-padded digits so key order is byte order. A name says
exactly which bytes an object holds, so shipping the same range twice writes the same object
(a retry or a restarted shipper never duplicates a record) and the reader concatenates chunks by
offset, skipping bytes it already has. Metadata (``<stem>.meta.json``) is one small object,
replaced whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

CHUNKS_SUFFIX = ".chunks"
CHUNK_EXT = ".jsonl"
DIGITS = 16
_NAME = re.compile(rf"^(\d{{{DIGITS}}})-(\d{{{DIGITS}}}){re.escape(CHUNK_EXT)}$")


def chunk_dir_name(metrics_name: str) -> str:
    """``metrics.rank3.jsonl`` -> ``metrics.rank3.jsonl.chunks``."""
    return metrics_name + CHUNKS_SUFFIX


def metrics_name_of(chunk_dir: str) -> str | None:
    """``metrics.rank3.jsonl.chunks`` -> ``metrics.rank3.jsonl``; None for any other name."""
    if chunk_dir.endswith(".jsonl" + CHUNKS_SUFFIX):
        return chunk_dir[: -len(CHUNKS_SUFFIX)]
    return None


def chunk_name(start: int, end: int) -> str:
    """The object name of bytes ``[start, end)``."""
    if not 0 <= start < end:
        raise ValueError(f"bad chunk range [{start}, {end})")
    return f"{start:0{DIGITS}d}-{end:0{DIGITS}d}{CHUNK_EXT}"


def parse_chunk_name(name: str) -> tuple[int, int] | None:
    """``(start, end)`` of a chunk object's name; None for anything else (foreign objects are ignored)."""
    match = _NAME.match(name)
    if not match:
        return None
    start, end = int(match.group(1)), int(match.group(2))
    return (start, end) if start < end else None


def contiguous_end(ranges: Iterable[tuple[int, int]]) -> int:
    """How far from byte 0 the ranges cover without a gap (overlaps allowed)."""
    covered = 0
    for start, end in sorted(ranges):
        if start > covered:
            break
        covered = max(covered, end)
    return covered
