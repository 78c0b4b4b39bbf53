"""TensorBoard histogram summaries written by tensorboardX ``add_histogram``: read per tag, incrementally, as
TensorBoard's own reader reads them (its compressed histograms are the distributions view's bands)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from monitor_cb.analysis.distributions import PERCENTILES, percentile_bands
from monitor_cb.importers.tb_histograms import MAX_HISTOGRAMS, TensorBoardHistograms

tensorboardX = pytest.importorskip("tensorboardX")
pytest.importorskip("tensorboard")
T0 = 1_700_000_000.0


def _write(logdir: Path, steps: range, bins: str | int = "tensorflow", scalar: bool = True) -> dict[int, np.ndarray]:
    writer = tensorboardX.SummaryWriter(str(logdir), flush_secs=3600, max_queue=100_000)
    rng = np.random.default_rng(0)
    raw = {}
    for step in steps:
        values = rng.normal(0.0, 0.1 * (1 + step / 10), 4_000)
        raw[step] = values
        writer.add_histogram("model.layers.0.w", values, global_step=step, bins=bins, walltime=T0 + step)
        if scalar:
            writer.add_scalar("loss", 1.0 / step, global_step=step, walltime=T0 + step)
    writer.close()
    return raw


def test_bands_match_tensorboards_own_compressed_histograms(tmp_path: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    raw = _write(tmp_path / "rank_0", range(1, 21))
    series = TensorBoardHistograms(tmp_path).histograms()
    (tag,) = series
    hist = series[tag]
    assert list(hist.steps) == list(range(1, 21)) and hist.count[0] == 4_000
    bands = percentile_bands(hist.steps, hist.edges, hist.counts)
    acc = EventAccumulator(str(tmp_path / "rank_0"), size_guidance={"compressedHistograms": 0})
    acc.Reload()
    theirs = acc.CompressedHistograms(tag)
    assert [e.step for e in theirs] == list(bands.steps)
    for ours, event in zip(bands.values, theirs, strict=True):
        reference = np.array([value for _, value in event.compressed_histogram_values])  # (basis point, value)
        spread = reference[-2] - reference[1]
        np.testing.assert_allclose(ours[1:-1], reference[1:-1], atol=0.05 * spread)  # same buckets, same bands
    values = raw[20]
    median = bands.values[-1][PERCENTILES.index(50.0)]
    assert abs(median - np.median(values)) < 0.1 * np.std(values)
    assert bands.values[-1][0] == pytest.approx(values.min()) and bands.values[-1][-1] == pytest.approx(values.max())


def test_polls_read_only_new_records_and_keep_a_bounded_number(tmp_path: Path):
    _write(tmp_path, range(1, 6), bins=32)
    reader = TensorBoardHistograms(tmp_path)
    assert list(reader.histograms()["model.layers.0.w"].steps) == [1, 2, 3, 4, 5]
    offsets = dict(reader.offsets)
    reader.poll()
    assert reader.offsets == offsets  # nothing new, nothing read
    _write(tmp_path / "rank_1", range(1, 3), bins=32)
    assert list(reader.histograms(rank=1)["model.layers.0.w"].steps) == [1, 2]
    many = tmp_path / "many"
    _write(many, range(1, MAX_HISTOGRAMS + 200), bins=8, scalar=False)
    kept = TensorBoardHistograms(many).histograms()["model.layers.0.w"]
    assert len(kept.steps) <= MAX_HISTOGRAMS and kept.steps[0] == 1


def test_hostile_files_are_skipped_not_fatal(tmp_path: Path):
    _write(tmp_path / "rank_0", range(1, 4), bins=16)
    os.mkfifo(tmp_path / "rank_0" / "events.out.tfevents.1.fifo")  # would hang a plain open()
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    _write(outside, range(1, 3), bins=16)
    (target,) = outside.glob("events*")
    (tmp_path / "rank_0" / "events.out.tfevents.2.link").symlink_to(target)
    (tmp_path / "rank_0" / "events.out.tfevents.3.junk").write_bytes(b"\x09" + os.urandom(5_000))
    reader = TensorBoardHistograms(tmp_path)
    hist = reader.histograms()["model.layers.0.w"]
    assert list(hist.steps) == [1, 2, 3]  # the link's steps 1-2 would have replaced nothing, but were not read
    assert {p.name for p in reader.skipped} == {"events.out.tfevents.1.fifo", "events.out.tfevents.2.link"}


def test_a_half_written_record_is_not_yet_and_a_truncated_file_is_read_again(tmp_path: Path):
    _write(tmp_path, range(1, 4), bins=16, scalar=False)
    (path,) = tmp_path.glob("events*")
    whole = path.read_bytes()
    path.write_bytes(whole[:-7])
    reader = TensorBoardHistograms(tmp_path)
    assert list(reader.histograms()["model.layers.0.w"].steps) == [1, 2]
    path.write_bytes(whole)
    assert list(reader.histograms()["model.layers.0.w"].steps) == [1, 2, 3]
    path.write_bytes(whole[:40])
    reader.poll()
    assert reader.offsets[path] <= 40
