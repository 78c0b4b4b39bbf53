"""A TensorBoard run of many small event files (issue 34: 5,000 of them made every rescan cost seconds).

One small event file is written with tensorboardX (explicit wall times), and its bytes are copied under
``count`` names with increasing stamps: the same bytes each time, so a test or benchmark measures the
reader's work per file, not tensorboardX's speed. Two layouts MindFormers' users produce:

* ``"segments"``: every file in ``rank_0/`` (a launch each, read as segments 1..count);
* ``"series"``: one file in ``rank_0/`` and ``count - 1`` ``add_scalars`` series, one directory each.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

T0 = 1_700_000_000  # the first file's stamp and wall time
STEPS = 3  # steps of each small file


def small_event_file() -> bytes:
    """The bytes of a closed event file of :data:`STEPS` ``loss`` values, written by tensorboardX."""
    from tensorboardX import SummaryWriter

    with tempfile.TemporaryDirectory() as tmp:
        writer = SummaryWriter(tmp, flush_secs=3600)
        for step in range(1, STEPS + 1):
            writer.add_scalar("loss", 1.0 / step, global_step=step, walltime=T0 + step)
        writer.close()
        (path,) = Path(tmp).iterdir()
        return path.read_bytes()


def write_many(run: Path, count: int, layout: str = "segments", data: bytes | None = None) -> list[Path]:
    """``count`` event files under ``run`` in ``layout``; returns their paths, oldest first."""
    if layout not in ("segments", "series"):
        raise ValueError(f"layout must be 'segments' or 'series', not {layout!r}")
    data = small_event_file() if data is None else data
    rank_dir = run / "rank_0"
    paths = []
    for i in range(count):
        name = f"events.out.tfevents.{T0 + i}.bench"
        folder = rank_dir if layout == "segments" or i == 0 else rank_dir / f"loss_series{i:05d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
        paths.append(folder / name)
    return paths
