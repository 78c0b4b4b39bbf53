"""TensorBoard histogram summaries of a run, per tag, read incrementally (the scalar reader skips them).

``add_histogram`` (tensorboardX, ``torch.utils.tensorboard``, TF 1's ``tf.summary.histogram``) writes a
``HistogramProto``: ``min``, ``max``, ``num``, ``sum``, and buckets given by their right edges
(``bucket_limit``) and counts (``bucket``); the first bucket's left edge is not written
(tensorboardX puts an empty bucket there). Edges are read as ``[min, *bucket_limit]`` clipped to
``[min, max]``, so TF's default buckets (out to ``DBL_MAX``) end at the data.

Files are read from where the last poll stopped, at most :data:`READ_CAP` bytes a poll, through
:mod:`monitor_cb.rootfile` (a FIFO, a device or a link out of the root is refused); records are
framed with both checksums checked (:mod:`monitor_cb.importers.tfrecord`) and a record that does not
parse is skipped. Each tag keeps at most :data:`MAX_HISTOGRAMS` histograms (every other one dropped,
then every fourth..., as the run grows), so memory is bounded whatever the run's length.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from monitor_cb.importers.ms_summary import HistogramSeries
from monitor_cb.importers.tensorboard import is_event_file, load_event_proto
from monitor_cb.importers.tfrecord import frame
from monitor_cb.rootfile import UnsafeFileError, open_regular

READ_CAP = 64 << 20  # bytes read from one file in one poll
MAX_HISTOGRAMS = 512  # per tag and rank
MAX_DEPTH = 4  # folders below the run searched for event files (rank_N/, add_scalars' subfolders)
_RANK = re.compile(r"^rank_(\d+)$")


@dataclass
class _Buffer:
    stride: int = 1
    seen: int = 0
    points: list[tuple[int, float, np.ndarray, np.ndarray, tuple[float, float, float, float]]] = field(
        default_factory=list
    )

    def add(self, step: int, wall: float, edges: np.ndarray, counts: np.ndarray, totals: tuple) -> None:
        if self.points and self.points[-1][0] == step:
            self.points[-1] = (step, wall, edges, counts, totals)
            return
        if self.seen % self.stride == 0:
            self.points.append((step, wall, edges, counts, totals))
            if len(self.points) > MAX_HISTOGRAMS:
                self.points = self.points[::2]
                self.stride *= 2
        self.seen += 1

    def series(self, tag: str, rank: int) -> HistogramSeries:
        pts = sorted(self.points, key=lambda p: p[0])
        totals = np.array([p[4] for p in pts], np.float64).reshape(-1, 4)
        zeros = np.zeros(len(pts), np.int64)
        return HistogramSeries(
            tag=tag,
            rank=rank,
            steps=np.array([p[0] for p in pts], np.int64),
            walls=np.array([p[1] for p in pts], np.float64),
            edges=[p[2] for p in pts],
            counts=[p[3] for p in pts],
            min=totals[:, 0],
            max=totals[:, 1],
            count=totals[:, 2].astype(np.int64),
            sum=totals[:, 3],
            nan_count=zeros,
            pos_inf_count=zeros.copy(),
            neg_inf_count=zeros.copy(),
        )


class TensorBoardHistograms:
    """The histograms of one TensorBoard run directory, polled for new records (see the module)."""

    def __init__(self, run_dir: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.root = Path(root) if root is not None else self.run_dir
        self.offsets: dict[Path, int] = {}
        self.buffers: dict[tuple[int, str], _Buffer] = {}
        self.skipped: dict[Path, str] = {}  # files refused, and why
        self.bad_records = 0

    def poll(self) -> None:
        """Read what the event files gained since the last poll."""
        event = load_event_proto()
        for path in self._event_files():
            self._read(path, event)

    def histograms(self, rank: int | None = None) -> dict[str, HistogramSeries]:
        """Tag -> its histograms for ``rank`` (default: the lowest rank that has any), after a poll."""
        self.poll()
        ranks = sorted({r for r, _ in self.buffers})
        if not ranks:
            return {}
        rank = ranks[0] if rank is None else rank
        return {tag: buf.series(tag, r) for (r, tag), buf in sorted(self.buffers.items()) if r == rank}

    def _event_files(self) -> list[Path]:
        found = []
        base = len(self.run_dir.parts)
        for folder, dirs, files in os.walk(self.run_dir):
            dirs[:] = (
                sorted(d for d in dirs if not d.startswith(".")) if len(Path(folder).parts) - base < MAX_DEPTH else []
            )
            found += [Path(folder) / f for f in sorted(files) if is_event_file(f)]
        return found

    def _rank(self, path: Path) -> int:
        for part in path.relative_to(self.run_dir).parts[:-1]:
            match = _RANK.match(part)
            if match:
                return int(match.group(1))
        return 0

    def _read(self, path: Path, event_cls: type) -> None:
        offset = self.offsets.get(path, 0)
        try:
            with open_regular(path, root=self.root) as (fd, st):
                if st.st_size < offset:  # truncated or replaced: read again
                    offset = 0
                    self._forget(path)
                size = min(st.st_size - offset, READ_CAP)
                data = os.pread(fd, size, offset) if size > 0 else b""
        except FileNotFoundError:
            return
        except (UnsafeFileError, OSError) as exc:
            self.skipped[path] = str(exc)
            return
        if not data:
            return
        buf = np.frombuffer(data, np.uint8)
        framing = frame(buf)
        rank = self._rank(path)
        for start, length, good in zip(framing.starts, framing.lengths, framing.crc_ok, strict=True):
            if not good:
                self.bad_records += 1
                continue
            self._record(bytes(data[start : start + length]), event_cls, rank)
        self.offsets[path] = offset + int(framing.end)

    def _forget(self, path: Path) -> None:
        self.offsets.pop(path, None)

    def _record(self, payload: bytes, event_cls: type, rank: int) -> None:
        if b"\x2a" not in payload:  # no Summary.Value.histo field marker anywhere: a scalar event, skip the parse
            return
        event = event_cls()
        try:
            event.ParseFromString(payload)
        except Exception:  # noqa: BLE001 - a record that does not parse is skipped, never fatal
            self.bad_records += 1
            return
        for value in event.summary.value:
            if value.HasField("histo"):
                edges, counts = histogram_edges(value.histo)
                totals = (value.histo.min, value.histo.max, value.histo.num, value.histo.sum)
                self.buffers.setdefault((rank, value.tag), _Buffer()).add(
                    int(event.step), float(event.wall_time), edges, counts, totals
                )


def histogram_edges(histo: object) -> tuple[np.ndarray, np.ndarray]:
    """A ``HistogramProto``'s buckets as ``len(counts) + 1`` edges (see the module) and counts."""
    limits = np.asarray(histo.bucket_limit, np.float64)  # type: ignore[attr-defined]
    counts = np.asarray(histo.bucket, np.float64)  # type: ignore[attr-defined]
    lo, hi = float(histo.min), float(histo.max)  # type: ignore[attr-defined]
    if limits.size == 0 or limits.size != counts.size:
        return np.empty(0), np.empty(0)
    edges = np.clip(np.concatenate([[min(lo, limits[0])], limits]), lo, hi)
    return np.maximum.accumulate(edges), counts
