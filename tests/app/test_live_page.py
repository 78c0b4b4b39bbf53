"""AppTests of the live page: run selection, every control, empty and error states, figure contents."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from monitor_cb.charts.findings import FINDING_SHAPE_PREFIX
from tests.app.conftest import DASHBOARD, write_run
from tests.app.helpers import assert_ok, charts, run_entry, texts, values

TIMEOUT = 60


def run_app(query: dict[str, Any] | None = None) -> AppTest:
    return run_entry(DASHBOARD, query, TIMEOUT)


def chart_titles(at: AppTest) -> list[str]:
    return [_text(fig["layout"].get("title")) for fig in charts(at)]


def _text(title: Any) -> str:
    if isinstance(title, dict):
        return str(title.get("text", ""))
    return str(title or "")


def trace_names(fig: dict[str, Any]) -> list[str]:
    return [t.get("name", "") for t in fig["data"]]


def metric_values(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


# ----------------------------------------------------------------------------- empty states
def test_empty_root_offers_demo_and_samples(log_root: Path) -> None:
    at = run_app()
    assert_ok(at)
    assert "No runs under" in texts(at)
    labels = [b.label for b in at.button]
    assert "Start the demo training" in labels and "Generate sample runs" in labels


def test_sample_button_writes_finished_runs_and_shows_them(log_root: Path) -> None:
    at = run_app()
    at.button(key="write_samples").click().run()
    assert_ok(at)
    assert len([p for p in log_root.iterdir() if not p.name.startswith(".")]) >= 2
    assert at.sidebar.selectbox[0].options, "the run picker lists the sample runs"
    assert len(charts(at)) >= 2


def test_missing_root_is_an_empty_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_LOGDIR", str(tmp_path / "does-not-exist"))
    at = run_app()
    assert_ok(at)
    assert "No runs under" in texts(at)


def test_run_without_records(log_root: Path) -> None:
    writer = write_run(log_root, "fresh", steps=0, close=None)
    try:
        at = run_app()
        assert_ok(at)
        assert "no records yet" in texts(at)
        assert not charts(at)
        # the first records arrive: the default charts appear (the choice made while empty holds)
        for step in range(1, 21):
            writer.log(step=step, loss=1.0 / step, lr=1e-3, throughput=10.0, grad_norm=1.0)
        assert writer.flush()
        at.run()
        assert_ok(at)
        assert [fig["layout"]["title"]["text"] for fig in charts(at)][:2] == [
            "Loss and learning rate",
            "Throughput and gradient norm",
        ]
    finally:
        writer.close()


def test_corrupt_lines_are_counted(log_root: Path) -> None:
    write_run(log_root, "damaged", steps=100)
    with open(log_root / "damaged" / "metrics.jsonl", "ab") as f:
        f.write(b'{"step": 101, "loss": \n')  # a torn line, then garbage
        f.write(b"not json at all\n")
        f.write(b'{"step":102,"t":1.0,"rank":0,"seg":1,"loss":0.5}\n')
    at = run_app()
    assert_ok(at)
    assert "2 corrupt lines skipped." in texts(at) and "partly read" not in texts(at)
    assert charts(at)


def test_disappeared_run(log_root: Path) -> None:
    write_run(log_root, "a", steps=50)
    write_run(log_root, "b", steps=50)
    at = run_app({"run": "a"})
    assert_ok(at)
    shutil.rmtree(log_root / "a")
    # the store lists directories again at most every couple of seconds: poll with a deadline
    poll_app(at, lambda: "`a` is no longer under the log root" in texts(at))
    assert at.sidebar.selectbox[0].value == "b"
    shutil.rmtree(log_root / "b")
    poll_app(at, lambda: "No runs under" in texts(at))


def poll_app(at: AppTest, done: Any, timeout: float = 10.0) -> None:
    """Rerun the app until ``done()`` holds (no exception on any run)."""
    deadline = time.monotonic() + timeout
    while True:
        at.run()
        assert_ok(at)
        if done():
            return
        assert time.monotonic() < deadline, texts(at)
        time.sleep(0.2)


# ----------------------------------------------------------------------------- selection
def test_run_selection_follows_and_sets_the_url(log_root: Path) -> None:
    write_run(log_root, "old", steps=120)
    write_run(log_root, "new", steps=80)
    an_hour_ago = time.time() - 3600
    os.utime(log_root / "old" / "metrics.jsonl", (an_hour_ago, an_hour_ago))  # "new" is the newer write
    at = run_app()
    assert_ok(at)
    assert at.query_params["run"] in ("new", ["new"])  # newest first
    assert metric_values(at)["Step"] == "80"
    at.sidebar.selectbox[0].select("old").run()
    assert_ok(at)
    assert at.query_params["run"] in ("old", ["old"])
    assert metric_values(at)["Step"] == "120"
    # the choice holds while labels change (ages) and while a new run appears
    write_run(log_root, "newest", steps=10)
    poll_app(at, lambda: any("newest" in o for o in at.sidebar.selectbox[0].options))
    assert at.sidebar.selectbox[0].value == "old" and metric_values(at)["Step"] == "120"


def test_url_opens_the_same_view(log_root: Path) -> None:
    write_run(log_root, "old", steps=120)
    write_run(log_root, "new", steps=80)
    at = run_app({"run": "old"})
    assert_ok(at)
    assert at.sidebar.selectbox[0].value == "old"
    assert metric_values(at)["Step"] == "120"


def test_filter_box(log_root: Path) -> None:
    write_run(log_root, "bert-base", steps=30)
    write_run(log_root, "gpt-small", steps=30)
    at = run_app()
    at.text_input(key="run_filter").input("bert").run()
    assert_ok(at)
    assert at.sidebar.selectbox[0].options == ["bert-base"] or "bert-base" in at.sidebar.selectbox[0].options[0]
    at.text_input(key="run_filter").input("zzz").run()
    assert_ok(at)
    assert "No run matches" in texts(at)


# ----------------------------------------------------------------------------- KPIs and banners
def test_kpis_and_nan_banner(log_root: Path) -> None:
    write_run(log_root, "diverged", steps=150, nan_from=120, close="failed", total_steps=1000)
    at = run_app()
    assert_ok(at)
    values = metric_values(at)
    assert values["Step of 1,000"] == "150"
    assert values["Loss"] == "NaN"
    assert values["Epoch"] == "2"
    shown = texts(at)
    assert "loss became NaN at step 120" in shown, "said by the nan finding"
    assert "loss became NaN/Inf at step 120" not in shown, "and only by it (the banner is for runs not yet diagnosed)"
    loss_fig = charts(at)[0]
    assert any(name.endswith("non-finite") for name in trace_names(loss_fig))


# ----------------------------------------------------------------------------- controls
@pytest.fixture
def one_run(log_root: Path) -> Path:
    write_run(log_root, "exp", steps=300)
    return log_root


def test_default_charts_hold_the_expected_traces_and_axes(one_run: Path) -> None:
    at = run_app()
    assert_ok(at)
    figs = charts(at)
    assert len(figs) == 3
    loss_lr, speed, evals = figs
    assert {"loss", "loss (raw)", "lr"} <= set(trace_names(loss_lr))
    assert loss_lr["layout"]["yaxis2"]["overlaying"] == "y"
    assert loss_lr["layout"]["yaxis2"]["side"] == "right"
    assert {"throughput", "grad_norm"} <= set(trace_names(speed))
    assert {"eval_loss", "eval_accuracy"} <= set(trace_names(evals))


def test_smoothing_slider(one_run: Path) -> None:
    at = run_app()
    at.slider(key="smoothing").set_value(0.0).run()
    assert_ok(at)
    assert "loss (raw)" not in trace_names(charts(at)[0])


def test_log_y_toggle(one_run: Path) -> None:
    at = run_app()
    at.toggle(key="log_y").set_value(True).run()
    assert_ok(at)
    assert charts(at)[0]["layout"]["yaxis"]["type"] == "log"


@pytest.mark.parametrize(("choice", "title"), [("time", "wall time"), ("elapsed_min", "min"), ("samples", "samples")])
def test_x_axis_choice(one_run: Path, choice: str, title: str) -> None:
    at = run_app()
    at.selectbox(key="x_axis").select(choice).run()
    assert_ok(at)
    assert title in _text(charts(at)[0]["layout"]["xaxis"]["title"])


def test_chart_choice_and_custom_axes(one_run: Path) -> None:
    at = run_app()
    at.button_group(key="panels").set_value(["custom"]).run()
    at.multiselect(key="left").set_value(["grad_norm"]).run()
    at.multiselect(key="right").set_value(["throughput"]).run()
    assert_ok(at)
    (fig,) = charts(at)
    names = trace_names(fig)
    assert "grad_norm" in names and "throughput" in names
    right = next(t for t in fig["data"] if t["name"] == "throughput")
    assert right.get("yaxis") == "y2"


def test_points_per_trace(one_run: Path) -> None:
    at = run_app()
    at.selectbox(key="n_out").select(500).run()
    assert_ok(at)
    assert len(charts(at)) == 3


def test_threshold_turns_points_red(one_run: Path) -> None:
    at = run_app()
    at.text_input(key="thresholds").input("grad_norm > 2.0, what").run()
    assert_ok(at)
    assert any("threshold" in name for name in trace_names(charts(at)[1]))
    assert "Not understood" in texts(at)


def test_step_range_zooms_and_reset(one_run: Path) -> None:
    at = run_app()
    at.number_input(key="zoom_lo").set_value(100).run()
    at.number_input(key="zoom_hi").set_value(150).run()
    assert_ok(at)
    assert charts(at)[0]["layout"]["xaxis"]["range"] == pytest.approx([100, 150])
    at.button(key="reset_zoom").click().run()
    assert_ok(at)
    assert "range" not in charts(at)[0]["layout"]["xaxis"]


@pytest.mark.parametrize("choice", ["off", "1 s", "2 s", "5 s", "10 s"])
def test_refresh_choices(one_run: Path, choice: str) -> None:
    at = run_app()
    at.radio(key="refresh").set_value(choice).run()
    assert_ok(at)
    assert len(charts(at)) == 3


def test_pause(one_run: Path) -> None:
    at = run_app()
    at.toggle(key="paused").set_value(True).run()
    assert_ok(at)
    assert len(charts(at)) == 3


def _runs_app() -> None:
    from pages.runs_page import runs_page

    runs_page()


def test_runs_page(one_run: Path) -> None:
    at = AppTest.from_function(_runs_app, default_timeout=TIMEOUT).run()
    assert_ok(at)
    table = at.dataframe[0].value
    assert list(table["id"]) == ["exp"] and table["steps"].iloc[0] == "300"
    assert table["open"].iloc[0] == "./?run=exp"  # the default page lives at the root
    columns = json.loads(at.dataframe[0].proto.columns)
    assert columns["open"]["type_config"]["display_text"] == "live view"


# ----------------------------------------------------------------------------- diagnosis on the live page
def test_diagnosis_findings_show_as_alerts_chart_marks_and_sidebar_badge(log_root: Path) -> None:
    write_run(log_root, "diverged", steps=150, nan_from=120, close="failed")
    at = run_app()
    assert_ok(at)
    errors = [str(e.value) for e in at.error]
    assert any("nan" in e and "step 120" in e for e in errors), errors
    assert any("1 error" in str(c.value) for c in at.sidebar.caption), [c.value for c in at.sidebar.caption]
    loss_fig = charts(at)[0]
    shapes = loss_fig["layout"].get("shapes", [])
    marks = [s for s in shapes if str(s.get("name", "")).startswith(FINDING_SHAPE_PREFIX)]
    assert any(s["name"].endswith("nan") and s["x0"] == 120 for s in marks), marks


def test_healthy_run_shows_no_alert_panel(log_root: Path) -> None:
    write_run(log_root, "healthy", steps=150)
    at = run_app()
    assert_ok(at)
    assert not at.error and not at.warning


# ----------------------------------------------------------------------------- gradient norm missing
def _speed_chart(at: AppTest) -> dict[str, Any]:
    return next(f for f in charts(at) if _text(f["layout"].get("title")) == "Throughput and gradient norm")


def test_throughput_chart_says_why_the_gradient_norm_is_missing(log_root: Path) -> None:
    from monitor_cb.train.writer import MetricsWriter

    with MetricsWriter(
        log_root / "plain", fsync_interval=0, extra_meta={"train_cell": "TrainOneStepCell", "output_layout": "plain"}
    ) as writer:
        for step in range(1, 51):
            writer.log(step=step, loss=1.0 / step, lr=1e-3, throughput=100.0 + step)
    write_run(log_root, "with-norm", steps=50)
    at = run_app({"run": "plain"})
    assert_ok(at)
    notes = [a["text"] for a in _speed_chart(at)["layout"].get("annotations", [])]
    assert len(notes) == 1
    assert "train cell (TrainOneStepCell) returns the loss only" in notes[0]
    assert "monitor_cb.grad_norm_model(net, loss_fn, optimizer)" in notes[0]
    at = run_app({"run": "with-norm"})
    assert_ok(at)
    assert not _speed_chart(at)["layout"].get("annotations")


def test_a_long_run_listed_from_its_ends_opens_with_every_row(log_root: Path) -> None:
    """A 5 MB run on a fresh root is listed from its ends (ingest/peek.py), then read for its charts: the
    sidebar's numbers and the tiles are the whole run's, the loss chart reaches its last step."""
    import numpy as np
    import polars as pl

    steps = np.arange(1, 70_001, dtype=np.int64)
    run = log_root / "long"
    run.mkdir()
    pl.DataFrame(
        {
            "step": steps,
            "t": 1_700_000_000.0 + steps * 0.5,
            "loss": 2.0 / np.sqrt(steps),
            "lr": np.full(len(steps), 1e-4),
        }
    ).write_ndjson(run / "metrics.jsonl")
    (run / "metrics.meta.json").write_text('{"status": "finished", "name": "long", "total_steps": 70000}')
    from monitor_cb.ingest.peek import peek_file

    assert peek_file(run / "metrics.jsonl", 0, log_root) is not None, "a file the first listing peeks at"
    at = run_app()
    assert_ok(at)
    assert metric_values(at)["Step of 70,000"] == "70,000"
    assert any("steps 1–70,000 · 70,000 records" in str(c.value) for c in at.sidebar.caption), at.sidebar.caption
    loss = next(fig for fig in charts(at) if "loss" in trace_names(fig))
    assert max(max(values(t["x"])) for t in loss["data"] if t.get("x")) == 70_000


def test_a_run_opened_by_its_folder_name_is_shown_without_a_gone_warning(log_root: Path) -> None:
    """``?run=llama`` for a MindFormers job whose run is ``llama/output/log`` (listed by its job's name)."""
    from tests.ingest.test_mindformers_source import write

    write_run(log_root, "other", steps=20)
    log = log_root / "llama" / "output" / "log" / "rank_0" / "info.log"
    log.parent.mkdir(parents=True)
    write(log, range(1, 21))
    at = run_app({"run": "llama"})
    assert_ok(at)
    assert "no longer under the log root" not in texts(at)
    assert at.sidebar.selectbox[0].value == "llama/output/log"
    at.run()
    assert_ok(at)
    assert "no longer under the log root" not in texts(at)
    assert at.query_params["run"] in ("llama/output/log", ["llama/output/log"])
