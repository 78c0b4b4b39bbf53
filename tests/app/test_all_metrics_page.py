"""AppTests of the All metrics page: groups, the name and run filters, pins in the URL, paging, outliers."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from monitor_cb.train.writer import MetricsWriter
from monitor_cb.views.all_metrics import PAGE_SIZE, MetricGroup
from tests.app.helpers import assert_ok, charts, run_entry, texts, values

ENTRY = str(Path(__file__).with_name("all_metrics_app.py"))
T0 = 1_700_000_000.0


def write_wide_run(root: Path, name: str, n_metrics: int, steps: int = 60, first_loss: float | None = None) -> None:
    """A run with ``loss``, ``lr`` and ``n_metrics`` more named ``train/m<i>`` / ``eval.m<i>`` / ``layer_<i>``,
    written with explicit times (0.5 s a step)."""
    writer = MetricsWriter(root / name, rank=0, world_size=1, fsync_interval=0)
    for step in range(steps):
        record: dict[str, Any] = {"loss": 3.0 * math.exp(-step / 20) + 0.5, "lr": 1e-3}
        if first_loss is not None and step == 0:
            record["loss"] = first_loss
        for i in range(n_metrics):
            prefix = ("train/m", "eval.m", "layer_")[i % 3]
            record[f"{prefix}{i}"] = float(i + step % 5)
        writer.log_at(T0 + 0.5 * step, step=step, **record)  # any name through **: "train/m0" too
    writer.close("finished")


def run_app(query: dict[str, Any] | None = None) -> AppTest:
    return run_entry(ENTRY, query)


def labels(at: AppTest) -> list[str]:
    """The groups' titles as shown (the page escapes them for Markdown)."""
    return [e.label.replace("\\", "") for e in at.expander]


def chart_titles(at: AppTest) -> list[str]:
    return [str(t.value) for t in at.get("text")]


def test_groups_by_prefix_first_group_open_and_others_collapsed(log_root: Path) -> None:
    write_wide_run(log_root, "wide", 30)
    at = run_app()
    assert_ok(at)
    shown = labels(at)
    assert shown[0] == "(no prefix) (2)"
    assert shown[1:] == ["eval (10)", "layer (10)", "train (10)"]
    # only the open group (loss, lr) is drawn
    assert sorted(chart_titles(at)) == ["loss", "lr"]
    assert len(charts(at)) == 2
    assert "32 metrics in 4 groups" in texts(at)


def test_opening_a_group_draws_a_page_of_it(log_root: Path) -> None:
    write_wide_run(log_root, "wide", 3 * (PAGE_SIZE + 3))
    at = run_app()
    key = "am_g_" + MetricGroup("train", ()).key
    at.session_state[key] = True
    at.run()
    assert_ok(at)
    titles = chart_titles(at)
    train = [t for t in titles if t.startswith("train/")]
    assert len(train) == PAGE_SIZE, "one page of the group"
    at.number_input(key="am_p_" + MetricGroup("train", ()).key).set_value(2).run()
    assert_ok(at)
    train = [t for t in chart_titles(at) if t.startswith("train/")]
    assert len(train) == 3


def test_name_filter_and_a_bad_pattern(log_root: Path) -> None:
    write_wide_run(log_root, "wide", 30)
    at = run_app({"filter": "^eval"})
    assert_ok(at)
    assert labels(at) == ["eval (10)"]
    assert at.query_params["filter"] == ["^eval"] or at.query_params["filter"] == "^eval"
    at.text_input(key="am_filter").set_value("(a+)+$").run()
    assert_ok(at)
    assert "refused" in texts(at) and "repeat inside a repeat" in texts(at)
    assert len(at.expander) == 4, "a bad pattern loses nothing: every group stays"
    at.text_input(key="am_filter").set_value("[").run()
    assert "Not a regular expression" in texts(at)


def test_pins_from_the_url_are_drawn_on_top(log_root: Path) -> None:
    write_wide_run(log_root, "wide", 30)
    at = run_app({"pin": ["layer_2", "not-a-metric"]})
    assert_ok(at)
    assert "Pinned" in [str(s.value) for s in at.subheader]
    assert chart_titles(at)[0] == "layer_2"
    # unpin with the chart's button: the URL follows
    pin_buttons = [b for b in at.button if b.key and b.key.startswith("am_pin_pin_")]
    pin_buttons[0].click().run()
    assert_ok(at)
    assert "layer_2" not in at.query_params.get("pin", "")  # (a pin of a metric not logged yet is kept)
    assert "Pinned" not in [str(s.value) for s in at.subheader]


def test_runs_pattern_overlays_the_matching_runs(log_root: Path) -> None:
    write_wide_run(log_root, "a-seed1", 3)
    write_wide_run(log_root, "a-seed2", 3)
    write_wide_run(log_root, "b", 3)
    at = run_app({"run": "b", "runsre": "seed"})
    assert_ok(at)
    assert "3 runs" in texts(at)
    loss = charts(at)[chart_titles(at).index("loss")]
    names = {t.get("name") for t in loss["data"]}
    assert {"a-seed1", "a-seed2", "b"} <= names
    at.sidebar.text_input(key="am_runs_re").set_value("(x|xy)*").run()
    assert "alternatives inside a repeat" in texts(at) or any("alternatives" in str(e.value) for e in at.sidebar.error)


def test_a_huge_first_loss_fits_the_bulk_and_the_switch_turns_it_off(log_root: Path) -> None:
    write_wide_run(log_root, "big", 0, steps=200, first_loss=1e12)
    at = run_app()
    assert_ok(at)
    loss = charts(at)[chart_titles(at).index("loss")]
    hi = loss["layout"]["yaxis"]["range"][1]
    assert 3.0 < hi < 100.0
    marks = [t for t in loss["data"] if t.get("name") == "loss beyond the axis"]
    assert marks and values(marks[0]["customdata"]) == pytest.approx([1e12])
    at.toggle(key="am_outliers").set_value(True).run()
    assert_ok(at)
    assert at.query_params["outliers"] in ("1", ["1"])
    loss = charts(at)[chart_titles(at).index("loss")]
    assert "range" not in loss["layout"]["yaxis"]


def test_names_hostile_and_many(log_root: Path) -> None:
    writer = MetricsWriter(log_root / "hostile", rank=0, world_size=1, fsync_interval=0)
    long_name = "x" * 10_000
    record = {"loss": 1.0, "Loss": 2.0, "line\nbreak": 3.0, long_name: 4.0, "[link](http://e.com)": 5.0}
    for step in range(5):
        writer.log_at(T0 + step, step=step, **record)
    writer.close("finished")
    at = run_app()
    assert_ok(at)
    titles = chart_titles(at)
    assert "loss" in titles and "Loss" in titles, "names differing only in case both stay"
    assert any(t.startswith("xxxx") and "…[#" in t and len(t) <= 120 for t in titles), "a 10 kB name cut around a hash"
    assert "line\\nbreak" in titles, "a newline shown as an escape"
    assert not any("](http" in str(m.value) and "\\]" not in str(m.value) for m in at.markdown)
