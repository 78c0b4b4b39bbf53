"""Event files with tags exactly as given and explicit wall times (tests and calibration, not in the wheel).

tensorboardX's ``add_scalar`` replaces characters outside ``[-/\\w.]`` in a tag by ``_``, but PyTorch's
own ``SummaryWriter`` (HF Trainer, Lightning, ML-Agents) and TensorFlow write a tag as given:
``Losses/Policy Loss`` keeps its space. :func:`write_scalars` writes each summary through tensorboardX's
file writer, so the tag is stored byte for byte, with the wall time each point is given (never the
machine's clock).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple


class Scalar(NamedTuple):
    """One scalar event: its tag as written, step, Unix wall time and value."""

    tag: str
    step: int
    wall: float
    value: float


def write_scalars(logdir: Path, scalars: Iterable[Scalar], suffix: str = "") -> Path:
    """Write ``scalars`` (in order) into a new event file under ``logdir``; returns the file's path.

    ``suffix`` tells two files of one directory apart (a resumed run's second file); the file name's
    time stamp is the first wall time, as a writer started then would name it.
    """
    from tensorboardX.proto.summary_pb2 import Summary
    from tensorboardX.writer import FileWriter

    items = list(scalars)
    logdir.mkdir(parents=True, exist_ok=True)
    writer = FileWriter(str(logdir), max_queue=len(items) + 10, flush_secs=3600, filename_suffix=suffix)
    written = Path(writer.event_writer._ev_writer._file_name)
    for item in items:
        summary = Summary(value=[Summary.Value(tag=item.tag, simple_value=float(item.value))])
        writer.add_summary(summary, global_step=int(item.step), walltime=float(item.wall))
    writer.close()
    # The name's time stamp is the first wall time (a writer started then), not this machine's clock.
    start = int(items[0].wall) if items else 0
    path = logdir / f"events.out.tfevents.{start:010d}.writer{suffix}"
    written.rename(path)
    return path
