"""What the Compare page says about real runs (issue 36): the config diff when no config was recorded,
durations in the Runs page's form, a default metric the runs logged and a sensible axis for one eval point."""

from __future__ import annotations

import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

from monitor_cb.demo.samples import write_sample_runs
from monitor_cb.train.writer import MetricsWriter
from tests.app.helpers import assert_ok, charts, run_entry
from tests.app.real_root import real_runs_root

ENTRY = str(Path(__file__).with_name("compare_app.py"))
RUNS_ENTRY = str(Path(__file__).with_name("runs_app.py"))
NO_META = ["gptlora", "edwin_glm"]  # real runs: a metrics.jsonl each, no metadata, so no config


def infos(at: AppTest) -> list[str]:
    return [str(i.value) for i in at.info]


def test_no_config_recorded_is_not_called_configs_that_do_not_differ(log_root: Path) -> None:
    real_runs_root(log_root, NO_META)
    at = run_entry(ENTRY, {"runs": NO_META, "metric": ["loss"]})
    assert_ok(at)
    assert any("No config was recorded for these runs" in i for i in infos(at)), infos(at)
    assert not any("do not differ" in i for i in infos(at))
    at.toggle(key="cmp_all_keys").set_value(True).run()
    assert any("No config was recorded for these runs" in i for i in infos(at)), infos(at)


def test_runs_with_equal_configs_do_not_differ(log_root: Path) -> None:
    write_sample_runs(log_root, n_runs=2, steps=100, seed=0)
    runs = sorted(p.name for p in log_root.iterdir())
    at = run_entry(ENTRY, {"runs": runs, "metric": ["loss"]})
    assert_ok(at)
    assert not any("No config was recorded" in i for i in infos(at)), "the samples record a config"


def test_durations_read_as_the_runs_page_writes_them(log_root: Path) -> None:
    runs = ["mask2former_mgm", "nyu_ssod_d2"]  # real detectron2 runs with log-line timestamps
    real_runs_root(log_root, runs)
    at = run_entry(ENTRY, {"runs": runs, "metric": ["loss"]})
    assert_ok(at)
    summary = next(d.value for d in at.dataframe if "final loss" in d.value.columns)
    assert "duration (s)" not in summary.columns
    durations = list(summary["duration"])
    assert all(re.fullmatch(r"\d+:\d\d:\d\d", d) for d in durations), durations
    runs_page = run_entry(RUNS_ENTRY)
    table = runs_page.dataframe[0].value.set_index("id")
    assert [table.loc[r, "duration_s"] for r in summary["run"]] == durations, "the same text on both pages"


def test_the_default_charts_are_metrics_the_runs_logged(log_root: Path) -> None:
    for name in ("lit-a", "lit-b"):  # Lightning's names: val_loss, no eval_loss
        writer = MetricsWriter(log_root / name, rank=0, world_size=1, fsync_interval=0)
        for step in range(1, 101):
            writer.log_at(1.7e9 + step, step=step, loss=2.0 / step**0.3)
            if step % 25 == 0:
                writer.log_at(1.7e9 + step + 0.5, step=step, val_loss=2.2 / step**0.3)
        writer.close("finished")
    at = run_entry(ENTRY, {"runs": ["lit-a", "lit-b"]})
    assert_ok(at)
    assert at.multiselect(key="cmp_metrics").value == ["loss", "val_loss"]
    assert [f["layout"]["title"]["text"] for f in charts(at)] == ["loss", "val_loss"]


def test_a_single_eval_point_gets_an_axis_at_its_step(log_root: Path) -> None:
    real_runs_root(log_root, ["vendor_slm"])  # one evaluation, at step 1,000
    at = run_entry(ENTRY, {"runs": ["vendor_slm"], "metric": ["loss", "eval_loss"]})
    assert_ok(at)
    xaxis = next(f for f in charts(at) if f["layout"]["title"]["text"] == "eval_loss")["layout"]["xaxis"]
    assert xaxis["tickvals"] == [1000] and xaxis["ticktext"] == ["1,000"], "one tick, written as a step"
    lo, hi = xaxis["range"]
    assert lo < 1000 < hi and hi - lo >= 2
