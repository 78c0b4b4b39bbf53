"""The live page's ranks-and-hardware section on a real 8-rank run written by MetricsWriter."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from monitor_cb.train.writer import MetricsWriter
from tests.app.helpers import charts

ENTRY = str(Path(__file__).with_name("ranks_app.py"))


def write_job(root: Path, slow_rank: int = 5) -> None:
    start = time.time() - 100
    for rank in range(8):
        with MetricsWriter(root / "job", rank=rank, world_size=8, fsync_interval=0) as writer:
            for step in range(1, 121):
                slow = 2.0 if rank == slow_rank and step > 40 else 1.0
                writer.log_at(
                    start + step * 0.5,
                    step=step,
                    loss=2.0 - step * 0.01 + rank * 0.001,
                    step_time=0.1 * slow,
                    data_time=0.01 * slow,
                    sys_cpu_percent=40.0 + rank,
                    mem_host_rss=float(2**30),
                )


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "logs"
    write_job(root)
    monkeypatch.setenv("MONITOR_LOGDIR", str(root))
    return root


def figures(at: AppTest) -> list[dict]:
    return charts(at)


def test_section_is_off_until_asked_then_shows_band_step_time_and_hardware(job: Path) -> None:
    at = AppTest.from_file(ENTRY, default_timeout=60).run()
    assert not at.exception
    assert figures(at) == []  # built only while shown
    at.toggle(key="show_ranks").set_value(True).run()
    assert not at.exception
    figs = figures(at)
    assert len(figs) == 3
    band, step_time, hardware = figs
    assert len(band["data"]) >= 2  # the band and the mean line
    assert any("rank 5" in str(t.get("name")) for t in step_time["data"]), "each rank's step time is shown"
    assert any("sys_cpu_percent" in str(t.get("name")) for t in hardware["data"])
    at.toggle(key="rank_lines").set_value(True).run()
    per_rank = figures(at)[0]
    assert sorted(t["name"] for t in per_rank["data"] if str(t.get("name", "")).startswith("rank "))[:2] == [
        "rank 0",
        "rank 1",
    ]
