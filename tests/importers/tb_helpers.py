"""Write real TensorBoard event files the way MindFormers 1.9 does (tensorboardX, same tags, same order)."""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any

from tensorboardX import SummaryWriter

GBS = 8  # global batch size


class SyncedWriter:
    """tensorboardX's ``SummaryWriter``, plus :meth:`sync`: wait until every event is on disk.

    ``SummaryWriter.flush()`` does not wait for its background queue, so a test that flushes and
    reads at once sees a random prefix. (A live reader sees exactly that too: a step can arrive
    in two polls, which the format merges.)
    """

    def __init__(self, logdir: Path, **kwargs: Any) -> None:
        self.writer = SummaryWriter(str(logdir), flush_secs=3600, **kwargs)
        self.events = 1  # the file_version event
        self.path = Path(self.writer.file_writer.event_writer._ev_writer._file_name)

    def add_scalar(self, tag: str, value: float, global_step: int) -> None:
        self.writer.add_scalar(tag, value, global_step=global_step)
        self.events += 1

    def add_text(self, tag: str, text: str, global_step: int) -> None:
        self.writer.add_text(tag, text, global_step=global_step)
        self.events += 1

    def sync(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.writer.flush()
            if len(record_ends(self.path.read_bytes())) >= self.events:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"tensorboardX did not write {self.events} events to {self.path}")
            time.sleep(0.002)

    def close(self) -> None:
        self.writer.close()


def mindformers_step(writer: SyncedWriter | SummaryWriter, step: int, loss: float, *, lr: float | None = None) -> None:
    """The scalars ``MFLossMonitor.print_output_info`` writes for one step (timers and loss scale on)."""
    lr = 1e-4 * step if lr is None else lr
    samples = step * GBS
    writer.add_scalar("model-flops-throughput-per-npu", 55.5, global_step=step)
    writer.add_scalar("learning-rate", lr, global_step=step)
    writer.add_scalar("learning-rate vs samples", lr, global_step=samples)
    writer.add_scalar("batch-size", GBS, global_step=step)
    writer.add_scalar("batch-size vs samples", GBS, global_step=samples)
    writer.add_scalar("loss", loss, global_step=step)
    writer.add_scalar("loss vs samples", loss, global_step=samples)
    writer.add_scalar("loss-scale", 1024.0, global_step=step)
    writer.add_scalar("loss-scale vs samples", 1024.0, global_step=samples)
    writer.add_scalar("grad-norm", 0.5 + step, global_step=step)
    writer.add_scalar("grad-norm vs samples", 0.5 + step, global_step=samples)
    writer.add_scalar("iteration-time", 250, global_step=step)  # MindFormers writes int(milliseconds)
    writer.add_scalar("iteration-time vs samples", 250, global_step=samples)
    writer.add_scalar("throughput", 32.0, global_step=step)
    writer.add_scalar("B-samples-per-day", 0.0055, global_step=step)
    writer.add_scalar("throughput vs samples", 32.0, global_step=samples)


def loss_at(step: int, rank: int) -> float:
    return float("nan") if step == 3 else round(2.5 - 0.1 * step + rank, 4)


def write_run(root: Path, ranks: tuple[int, ...], steps: range) -> dict[int, SyncedWriter]:
    """MindFormers' layout: ``root/rank_<id>/events.out.tfevents.*``; writers are left open, all on disk."""
    writers = {}
    for rank in ranks:
        writer = SyncedWriter(root / f"rank_{rank}")
        writer.add_text("runner_config", "{'batch_size': 4, 'epochs': 1}", global_step=1)
        for step in steps:
            mindformers_step(writer, step, loss_at(step, rank))
        writer.sync()
        writers[rank] = writer
    return writers


def record_ends(data: bytes) -> list[int]:
    """Byte offsets where each TFRecord of an event file ends (length, crc, payload, crc)."""
    ends, offset = [], 0
    while offset + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[offset : offset + 8])
        offset += 12 + length + 4
        ends.append(offset)
    return ends
