"""TFRecord framing and CRC-32C, checked against other implementations and files another writer made."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from monitor_cb.importers.crc32c import crc32c, crc32c_many, crc32c_rows, masked
from monitor_cb.importers.tfrecord import frame


def test_crc32c_is_tensorboards_and_tensorboardxs() -> None:
    pywrap = pytest.importorskip("tensorboard.compat.tensorflow_stub.pywrap_tensorflow")
    writer = pytest.importorskip("tensorboardX.record_writer")
    assert crc32c(b"123456789") == 0xE3069283  # the check value of CRC-32C
    rng = np.random.default_rng(1)
    for size in (0, 1, 7, 8, 100, 1000):
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        assert masked(crc32c(data)) == pywrap.masked_crc32c(data) == writer.masked_crc32c(data)


def test_vectorised_crcs_equal_the_one_by_one_loop() -> None:
    rng = np.random.default_rng(2)
    buf = rng.integers(0, 256, 5000, dtype=np.uint8)
    starts = rng.integers(0, 4000, 300)
    lengths = rng.choice([8, 21, 57, 900], 300)
    one_by_one = [crc32c(buf[s : s + n].tobytes()) for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)]
    assert crc32c_many(buf, starts, lengths).tolist() == one_by_one
    assert crc32c_rows(buf, starts, 8).tolist() == [crc32c(buf[s : s + 8].tobytes()) for s in starts.tolist()]


def test_a_file_tensorboardx_wrote_is_framed_with_every_checksum_matching(tmp_path: Path) -> None:
    tbx = pytest.importorskip("tensorboardX")
    loader = pytest.importorskip("tensorboard.backend.event_processing.event_file_loader")
    with tbx.SummaryWriter(str(tmp_path)) as writer:
        for step in range(300):
            writer.add_scalar("loss", 1.0 / (step + 1), step, walltime=1.7e9 + step)
            if step % 50 == 0:
                writer.add_text("note", "x" * step, step, walltime=1.7e9 + step)
                writer.add_histogram("w", np.arange(step + 1), step, walltime=1.7e9 + step)
    (path,) = tmp_path.glob("*tfevents*")
    data = np.frombuffer(path.read_bytes(), np.uint8)
    found = frame(data)
    theirs = list(loader.LegacyEventFileLoader(str(path)).Load())
    assert found.n == len(theirs) and found.crc_ok.all() and found.end == len(data) and found.damaged is None
    payloads = [data[s : s + n].tobytes() for s, n in zip(found.starts.tolist(), found.lengths.tolist(), strict=True)]
    assert payloads == [event.SerializeToString() for event in theirs]
    cut = int(found.starts[150])  # inside record 150 (after its header): records 0..149, and that one waits
    half = frame(data[:cut])
    assert half.n == 150 and half.end == found.starts[150] - 12 and half.damaged is None
