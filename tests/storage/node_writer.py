"""One "node" of the two-node simulation: a rank writing its run locally and shipping it to the bucket.

    python tests/storage/node_writer.py LOCAL_RUN URL RANK WORLD HOST STEPS ENDPOINT GO_FILE CUT_FILE

Logs STEPS records, one every 5 ms, pausing halfway until CUT_FILE exists (the test creates it once
the network is cut, so half the training happens while the store is unreachable however slow the
machine), then waits for GO_FILE to exist before closing (the test holds the end of training until it
has restored the network), then closes the writer.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from monitor_cb.storage.shipper import UploadOptions
from monitor_cb.train.writer import MetricsWriter


def main() -> int:
    local, url, rank, world, host, steps, endpoint, go, cut = sys.argv[1:10]
    options = UploadOptions(url, interval_s=0.3, max_records=50, endpoint_url=endpoint, retry_max_s=0.5)
    writer = MetricsWriter(
        Path(local),
        rank=int(rank),
        world_size=int(world),
        fsync_interval=0,
        upload=options,
        extra_meta={"host": host, "device_id": int(rank)},
    )
    for step in range(1, int(steps) + 1):
        if step == int(steps) // 2:
            _wait_for(Path(cut))
        writer.log(step=step, loss=2.0 * math.exp(-step / 400) + 0.01 * int(rank), lr=1e-3, step_time=0.05)
        time.sleep(0.005)
    _wait_for(Path(go))
    writer.close()
    print(f"rank {rank}: {writer.written} written, {writer.shipper.stats.chunks} chunks shipped", file=sys.stderr)
    return 0


def _wait_for(path: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
