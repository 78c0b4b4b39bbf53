"""A fresh root's first listing without parsing whole files: a long metrics file is listed from its size,
its line count and its first and last lines, and parsed only when its rows are asked for.

Why: a server's first listing of a root no index describes yet read every metrics file in full before
anything was drawn (1M steps: seconds per file, and a root holds dozens). TensorBoard lists runs by
their directories and reads the one being looked at first; so does this, with the sidebar's numbers
(records, first and last step, status) right from the first listing. The rows replace the peek as soon
as the file is read (its first chart, or a change of the file).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from monitor_cb.ingest.lines import DEFAULT_LINE_CAP, decode_line
from monitor_cb.ingest.status import usual_interval
from monitor_cb.ingest.summary_index import Ident, SourceSummary
from monitor_cb.record import STEP_LIMIT
from monitor_cb.rootfile import MIB, open_regular

PEEK_MIN_BYTES = 4 * MIB  # smaller files are parsed at once (milliseconds)
EDGE_BYTES = 64 * 1024  # read at each end of the file for its first and last records
RECENT = 64  # the last records whose times give the usual interval (as a read file's)
_COUNT_CHUNK = 8 * MIB


@dataclass(frozen=True)
class Peek:
    """What a first listing knows of a file it did not parse: its identity when peeked and its summary."""

    ident: Ident
    summary: SourceSummary


def peek_file(
    path: Path, rank: int, root: Path | None = None, line_cap: int = DEFAULT_LINE_CAP, min_bytes: int = PEEK_MIN_BYTES
) -> Peek | None:
    """The summary of a metrics file of at least ``min_bytes``, from its ends and its line count; None when it
    must be read instead (smaller, unreadable or unsafe, or its edge lines are not plain stepped records:
    lines without an integer ``step`` take their step from the lines around them, which only a read knows).

    Never raises: any problem means "read it" (the read reports it as usual).
    """
    try:
        with open_regular(path, root=root) as (fd, st):
            size = st.st_size
            if size < max(min_bytes, 2 * EDGE_BYTES):
                return None
            head = os.pread(fd, EDGE_BYTES, 0)
            tail = os.pread(fd, EDGE_BYTES, size - EDGE_BYTES)
            lines = _count_lines(fd, size)
            ident: Ident = (st.st_ino, st.st_dev, size, st.st_mtime_ns, st.st_ctime_ns)
    except Exception:  # noqa: BLE001 - a FIFO, a link out, a vanished file: the read says why
        return None
    pending = len(tail) - (tail.rfind(b"\n") + 1)
    first = _records(head.split(b"\n")[:-1], line_cap)
    last = _records(tail[: len(tail) - pending].split(b"\n")[1:-1], line_cap)
    if not first or not last or lines < 1:
        return None
    recent = np.array([_time(r) for r in last[-RECENT:]], dtype=float)
    summary = SourceSummary(
        rank=rank,
        n=lines,
        first_step=int(first[0]["step"]),
        last_step=int(last[-1]["step"]),
        last_write=st.st_mtime,
        pending=pending,
        bad_count=0,
        interval=usual_interval(recent),
    )
    return Peek(ident, summary)


def _count_lines(fd: int, size: int) -> int:
    """Non-empty newline-ended lines (records, and bad lines until the file is read): one pass at memory speed,
    no parsing."""
    lines = 0
    previous_newline = True  # the file's start: a newline first is a blank line
    for start in range(0, size, _COUNT_CHUNK):
        chunk = os.pread(fd, min(_COUNT_CHUNK, size - start), start)
        if not chunk:
            break
        newline = np.frombuffer(chunk, dtype=np.uint8) == 0x0A
        # a line is non-empty when its newline does not follow another newline
        after_newline = np.concatenate(([previous_newline], newline[:-1]))
        lines += int(np.count_nonzero(newline & ~after_newline))
        previous_newline = bool(newline[-1])
    return lines


def _records(lines: list[bytes], line_cap: int) -> list[dict[str, object]] | None:
    """The lines as records with a plain integer step, or None when any is not (then the file is read)."""
    out: list[dict[str, object]] = []
    for line in lines:
        if not line.strip():
            continue
        record = decode_line(line, line_cap)
        if isinstance(record, str):
            return None
        step = record.get("step")
        if type(step) is not int or not 0 <= step < STEP_LIMIT:
            return None
        out.append(record)
    return out


def _time(record: dict[str, object]) -> float:
    value = record.get("t")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else float("nan")
