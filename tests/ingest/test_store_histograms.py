"""``RunStore.histograms``: a MindSpore summary directory's histograms (SummaryCollector, real MindSpore 2.9 files)
and a TensorBoard run's ``add_histogram`` ones, through one call; a plain run has none."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from monitor_cb.analysis.distributions import percentile_bands
from monitor_cb.ingest.store import RunStore
from tests.importers.ms_summary_files import write_real_summaries


def test_summary_directory_histograms_become_bands(tmp_path: Path):
    root = tmp_path / "logs"
    root.mkdir()
    write_real_summaries(root / "ms")
    store = RunStore(root)
    with_hist = {}
    for run in store.list_runs():
        found = store.histograms(run.id)
        if found:
            with_hist[run.id] = found
    assert with_hist, [r.id for r in store.list_runs()]
    series = next(iter(next(iter(with_hist.values())).values()))
    bands = percentile_bands(series.steps, series.edges, series.counts)
    assert len(bands.steps) == len(series.steps) >= 1
    ok = np.isfinite(bands.values).all(axis=1)
    assert ok.any() and (np.diff(bands.values[ok], axis=1) >= 0).all()  # percentiles in order
    median = bands.values[ok, bands.percentiles.index(50.0)]
    span = series.max[ok] - series.min[ok]
    assert (median >= series.min[ok] - 1e-6 * span).all() and (median <= series.max[ok] + 1e-6 * span).all()


def test_tensorboard_run_histograms_and_a_plain_run_has_none(tmp_path: Path):
    tensorboardX = pytest.importorskip("tensorboardX")
    root = tmp_path / "logs"
    writer = tensorboardX.SummaryWriter(str(root / "tb" / "rank_0"), flush_secs=3600)
    for step in (1, 2):
        writer.add_histogram("w", np.arange(100.0) * step, global_step=step, walltime=1.7e9 + step)
        writer.add_scalar("loss", 1.0, global_step=step, walltime=1.7e9 + step)
    writer.close()
    from monitor_cb.train.writer import MetricsWriter

    with MetricsWriter(root / "plain", fsync_interval=0) as plain:
        plain.log_at(1.7e9, step=1, loss=1.0)
    store = RunStore(root)
    ids = {r.name: r.id for r in store.list_runs()}
    assert list(store.histograms(ids["tb"])["w"].steps) == [1, 2]
    assert store.histograms(ids["plain"]) == {}
