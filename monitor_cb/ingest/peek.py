"""A fresh root's first listing without reading whole files: a long metrics file is listed from its size
and its first and last records, and parsed only when its rows are asked for.

Why: a server's first listing of a root no index describes yet parsed every metrics file in full before
anything was drawn (1M steps: seconds per file; a shared root holds dozens, often on NFS). TensorBoard
lists runs by their directories and reads the one being looked at first; so does this. A file is listed
from its ends only when they show steps logged at one fixed stride (every step, or every k-th) and the
file's size agrees with that many rows of the lines seen; otherwise it is parsed, as before. Its first
and last step, pending bytes, last write and usual interval are a full read's; its row count is the
stride's (a step logged off the stride between the ends is not seen: a real run with 9 extra steps at its
epoch ends lists 111,327 of 111,336 rows), and bad lines are not counted. The rows replace the peek, and
so the counts become exact, as soon as the file is read (its first chart, any change of the file).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import numpy as np

from monitor_cb.ingest.lines import DEFAULT_LINE_CAP, decode_line
from monitor_cb.ingest.status import usual_interval
from monitor_cb.ingest.summary_index import Ident, SourceSummary
from monitor_cb.record import STEP_LIMIT
from monitor_cb.rootfile import MIB, identity, open_regular

PEEK_MIN_BYTES = 4 * MIB  # smaller files are parsed at once (milliseconds)
EDGE_BYTES = 64 * 1024  # read at each end of the file for its first and last records
MAX_EDGE_BYTES = 4 * MIB  # ...growing to this while an end holds fewer than EDGE_LINES lines (a wide run)
EDGE_LINES = 4  # complete lines wanted at each end: two rows give a stride, a torn line costs one
RECENT = 64  # the last records whose times give the usual interval (as a read file's)


@dataclass(frozen=True)
class Peek:
    """What a first listing knows of a file it did not parse: its identity when peeked and its summary."""

    ident: Ident
    summary: SourceSummary


def peek_file(
    path: Path, rank: int, root: Path | None = None, line_cap: int = DEFAULT_LINE_CAP, min_bytes: int = PEEK_MIN_BYTES
) -> Peek | None:
    """The summary of a metrics file of at least ``min_bytes`` from its two ends; None when it must be parsed
    instead: smaller, unsafe or unreadable, edge lines a read could place differently (no integer ``step``,
    a bad line), steps not at one stride, or a size that does not fit the rows those steps imply.

    Never raises: any problem means "parse it" (the read reports it as usual).
    """
    try:
        with open_regular(path, root=root) as (fd, st):
            size = st.st_size
            if size < max(min_bytes, 2 * EDGE_BYTES):
                return None
            head, tail = _edges(fd, size)
            ident = identity(st)
    except Exception:  # noqa: BLE001 - a FIFO, a link out, a vanished file: the read says why
        return None
    pending = len(tail) - (tail.rfind(b"\n") + 1)
    head_lines = head[: head.rfind(b"\n") + 1]
    tail_lines = tail[tail.find(b"\n") + 1 : len(tail) - pending]
    first, last = _edge(head_lines, line_cap), _edge(tail_lines, line_cap)
    if first is None or last is None or first.stride != last.stride:
        return None
    first_step, last_step = first.steps[0], last.steps[-1]
    span = last_step - first_step
    if span < 0 or span % first.stride:
        return None
    rows = span // first.stride + 1
    expected = rows * (first.bytes_per_row + last.bytes_per_row) / 2
    if not 0.8 <= (size - pending) / expected <= 1.25:  # gaps, a resumed run, many bad lines: parse it
        return None
    summary = SourceSummary(
        rank=rank,
        n=rows,
        first_step=first_step,
        last_step=last_step,
        last_write=st.st_mtime,
        pending=pending,
        bad_count=0,
        interval=usual_interval(np.array(last.times[-RECENT:], dtype=float)),
    )
    return Peek(ident, summary)


def _edges(fd: int, size: int) -> tuple[bytes, bytes]:
    """The file's first and last bytes, enough for :data:`EDGE_LINES` lines at each end where that fits in
    :data:`MAX_EDGE_BYTES` and half the file: a run with 5,000 metrics writes 160 kB lines, and with no
    complete line at an end it would be parsed in full just to be listed."""
    edge = EDGE_BYTES
    while True:
        head = os.pread(fd, edge, 0)
        tail = os.pread(fd, edge, size - edge)
        enough = head.count(b"\n") >= EDGE_LINES and tail.count(b"\n") >= EDGE_LINES + 1
        if enough or edge * 4 > min(MAX_EDGE_BYTES, size // 2):
            return head, tail
        edge *= 4


@dataclass(frozen=True)
class _Edge:
    """The complete lines at one end of a file, as rows."""

    steps: list[int]  # distinct steps, in order
    times: list[float]  # each row's time (its first record's ``t``; NaN without one)
    stride: int  # the one difference between consecutive steps
    bytes_per_row: float


def _edge(data: bytes, line_cap: int) -> _Edge | None:
    """The rows of complete lines ``data`` (several records of one step are one row, as the table merges them);
    None unless every line is a record with a plain integer step, steps only grow, at one stride."""
    steps: list[int] = []
    times: list[float] = []
    for line in data.split(b"\n")[:-1]:
        if not line:
            return None  # a blank line: the read knows what to make of it
        record = decode_line(line, line_cap)
        if isinstance(record, str):
            return None
        step = record.get("step")
        if type(step) is not int or not 0 <= step < STEP_LIMIT:
            return None
        if steps and step == steps[-1]:
            continue  # another record of the same step (an eval): the same row
        steps.append(step)
        times.append(_time(record))
    if len(steps) < 2:
        return None
    strides = {b - a for a, b in pairwise(steps)}
    if len(strides) != 1 or min(strides) <= 0:
        return None
    return _Edge(steps, times, strides.pop(), len(data) / len(steps))


def _time(record: dict[str, object]) -> float:
    value = record.get("t")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else float("nan")
