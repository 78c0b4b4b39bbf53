"""The live page on a real MindSpore summary directory (SummaryCollector in ``Model.train``): ``loss/auto`` is drawn
as the loss, its tile filled, and the roles caption says whose name it is."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.app.conftest import DASHBOARD
from tests.app.helpers import assert_ok, charts, run_entry, texts
from tests.importers.ms_summary_files import write_real_summaries


def test_a_summary_collector_run_opens_with_its_loss_drawn(log_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "written"
    out.mkdir()
    write_real_summaries(out)
    shutil.copytree(out / "collector", log_root / "ms_collector", ignore=shutil.ignore_patterns("ckpt_dir"))
    at = run_entry(DASHBOARD, {"run": "ms_collector"}, 120)
    assert_ok(at)
    assert "No chart selected" not in texts(at)
    loss_charts = [f for f in charts(at) if "Loss" in str(f["layout"].get("title", {}).get("text", ""))]
    assert loss_charts, [f["layout"].get("title") for f in charts(at)]
    drawn = {t.get("name", "") for t in loss_charts[0]["data"]}
    assert "loss/auto" in drawn, drawn
    tiles = {m.label: m.value for m in at.metric}
    assert tiles["Loss"] not in ("–", None), tiles
    caption = " ".join(c.value for c in at.caption if "Roles" in c.value)
    assert "SummaryCollector" in caption.replace("\\", ""), caption
