"""A long MindSpore summary file listed from its two ends, without decoding it.

A fresh server lists every run of the root; decoding a 1M-record summary file only to say "steps
1 .. 1,000,000, last written at ..." costs seconds. As for TensorBoard event files
(:mod:`monitor_cb.importers.event_peek`), the run list needs the first and last steps, the times and
a row count: the first :data:`PEEK_BYTES` are framed from the start; the last :data:`PEEK_BYTES` from
the earliest record whose chain of verified lengths ends exactly at the file's end. When both ends
record one step every ``stride`` steps (a step recorded twice in a row, as SummaryCollector does at
the end, counts once), the rows are ``(last - first) / stride + 1``: the stride's count until the
file is decoded, which happens as soon as its rows are asked for. Anything else (no constant stride,
a damaged end, a torn last record): None, and the file is read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from monitor_cb.importers.ms_proto import ProtoError, decode_event
from monitor_cb.importers.tfrecord import RECORD_CAP, candidates, frame
from monitor_cb.record import STEP_LIMIT
from monitor_cb.rootfile import FileIdentity, identity, open_regular

PEEK_BYTES = 64 << 10
MIN_STEPS = 8  # steps each end must show to trust a stride


@dataclass(frozen=True)
class SummaryPeek:
    """What the ends of one summary file say."""

    ident: FileIdentity
    rows: int
    first_step: int
    last_step: int
    first_wall: float
    last_wall: float
    times: tuple[float, ...]  # wall times of the last end's steps (the usual interval)


def peek_summary(path: str, root: str | os.PathLike[str], min_bytes: int) -> SummaryPeek | None:
    """The file's ends when it is at least ``min_bytes`` long and they show one stride; else None."""
    try:
        with open_regular(path, root=root) as (fd, st):
            size = st.st_size
            if size < max(min_bytes, 2 * PEEK_BYTES):
                return None
            head = os.pread(fd, PEEK_BYTES, 0)
            tail = os.pread(fd, PEEK_BYTES, size - PEEK_BYTES)
            ident = identity(st)
    except OSError:
        return None
    first = _steps(head, 0)
    start = _chain_start(tail)
    last = _steps(tail, start) if start is not None else None
    if not first or not last or len(first) < MIN_STEPS or len(last) < MIN_STEPS:
        return None
    stride = _stride([s for s, _ in first])
    if stride is None or _stride([s for s, _ in last]) != stride:
        return None
    first_step, last_step = first[0][0], last[-1][0]
    if last_step < first_step or (last_step - first_step) % stride:
        return None
    return SummaryPeek(
        ident=ident,
        rows=(last_step - first_step) // stride + 1,
        first_step=first_step,
        last_step=last_step,
        first_wall=first[0][1],
        last_wall=last[-1][1],
        times=tuple(w for _, w in last),
    )


def _steps(data: bytes, start: int) -> list[tuple[int, float]] | None:
    """(step, wall time) of every event with values in ``data[start:]``, one per step (the first kept);
    None when a record is damaged or fails its checksum."""
    found = frame(np.frombuffer(data, np.uint8), start, RECORD_CAP)
    if found.damaged is not None or not found.crc_ok.all():
        return None
    out: list[tuple[int, float]] = []
    for at, length in zip(found.starts.tolist(), found.lengths.tolist(), strict=True):
        try:
            event = decode_event(data[at : at + length])
        except ProtoError:
            return None
        if not (event.scalars or event.histograms):
            continue
        if not 0 <= event.step < STEP_LIMIT:
            return None
        if not out or out[-1][0] != event.step:
            out.append((event.step, event.wall_time))
    return out


def _chain_start(tail: bytes) -> int | None:
    """The earliest record start in ``tail`` whose chain of verified lengths ends exactly at its end."""
    buf = np.frombuffer(tail, np.uint8)
    starts, nexts = candidates(buf, 0, len(buf), RECORD_CAP)
    reaches: dict[int, bool] = {}
    for at, nxt in zip(starts.tolist()[::-1], nexts.tolist()[::-1], strict=True):
        reaches[at] = nxt == len(buf) or reaches.get(nxt, False)
    found = [at for at, ok in reaches.items() if ok]
    return min(found) if found else None


def _stride(steps: list[int]) -> int | None:
    gaps = {b - a for a, b in pairwise(steps)}
    return gaps.pop() if len(gaps) == 1 and min(gaps) > 0 else None
