"""The live page puts its charts first (issue 26, item 7): one line about the findings above the charts, the
findings one line each below them, a NaN said once, toasts only for findings that appear while watching."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

from tests.app.conftest import DASHBOARD, write_run
from tests.app.helpers import assert_ok, charts, run_entry, texts

TIMEOUT = 60


def run_app(query: dict[str, Any] | None = None) -> AppTest:
    return run_entry(DASHBOARD, query, TIMEOUT)


def test_a_nan_is_said_once_in_one_line_and_opens_to_its_advice(log_root: Path) -> None:
    write_run(log_root, "diverged", steps=150, nan_from=120, close="failed")
    at = run_app()
    assert_ok(at)
    assert charts(at), "the charts are drawn"
    shown = texts(at)
    assert "loss became NaN/Inf" not in shown, "no second box for the NaN its finding already reports"
    nan_mentions = [str(e.value) for e in at.error if "NaN" in str(e.value)]
    assert len(nan_mentions) == 1 and "Training diverged" in nan_mentions[0], nan_mentions
    headline = [str(c.value) for c in at.caption if "details below the charts" in str(c.value)]
    assert len(headline) == 1 and "1 error" in headline[0] and "nan · step 120" in headline[0]
    labels = [e.label for e in at.expander]
    assert any(label.startswith("nan · step 120 — loss became NaN at step 120") for label in labels), labels
    assert not at.toast, "a finding there already when the page opens is on the page, not toasted"


def test_a_finding_that_appears_while_watching_is_toasted_once(log_root: Path) -> None:
    writer = write_run(log_root, "live", steps=150, close=None)
    at = run_app()
    assert_ok(at)
    assert not at.toast
    start = time.time()
    for step in range(151, 171):
        writer.log_at(start + step * 0.01, step=step, loss=math.nan, lr=1e-3, throughput=800.0, grad_norm=1.0)
    assert writer.flush(5.0)
    deadline = time.monotonic() + 30
    while not at.toast and time.monotonic() < deadline:  # the findings are computed in the background
        at.run()
    assert_ok(at)
    toasts = [str(t.value) for t in at.toast]
    assert len(toasts) == 1 and toasts[0].startswith("nan at step 151"), toasts
    at.run()
    assert not at.toast, "toasted once"
    writer.close("failed")


def test_the_chart_picker_shows_every_chart_on_or_off(log_root: Path) -> None:
    write_run(log_root, "exp", steps=100)
    at = run_app()
    assert_ok(at)
    pills = at.button_group(key="panels")
    assert pills.value == ["loss_lr", "speed_grad", "eval"]
    assert len(pills.options) == 7, "every chart is offered as a pill"
    pills.set_value(["loss_lr"]).run()
    assert_ok(at)
    assert len(charts(at)) == 1


def test_the_sidebar_step_count_matches_the_tiles_after_new_records(log_root: Path) -> None:
    writer = write_run(log_root, "live", steps=200, close=None)
    at = run_app()
    assert_ok(at)
    start = time.time()
    for step in range(201, 251):
        writer.log_at(start + step * 0.01, step=step, loss=1.0, lr=1e-3, throughput=800.0, grad_norm=1.0)
    assert writer.flush(5.0)
    at.run()  # within the listing's 1 s reuse: the listing may still say 200
    assert_ok(at)
    tiles = {m.label: m.value for m in at.metric}
    step_tile = next(v for k, v in tiles.items() if k.startswith("Step"))
    summary = next(str(c.value) for c in at.sidebar.caption if "records" in str(c.value))
    assert f"steps 1–{step_tile}" in summary, (summary, step_tile)
    writer.close("finished")


def test_wall_time_says_utc(log_root: Path) -> None:
    write_run(log_root, "exp", steps=50)
    at = run_app()
    assert "wall time (UTC)" in at.selectbox(key="x_axis").options, "the picker says the axis is UTC"
    at.selectbox(key="x_axis").set_value("time").run()
    assert_ok(at)
    assert "(UTC)" in charts(at)[0]["layout"]["xaxis"]["title"]["text"]


def test_the_url_keeps_the_view_and_a_link_reopens_it(log_root: Path) -> None:
    write_run(log_root, "exp", steps=300)
    at = run_app({"run": "exp"})
    assert_ok(at)
    assert set(at.query_params) == {"run"}, "defaults stay out of the URL"
    at.toggle(key="log_y").set_value(True).run()
    at.slider(key="smoothing").set_value(0.85).run()
    at.selectbox(key="x_axis").set_value("time").run()
    at.button_group(key="panels").set_value(["loss_lr", "custom"]).run()
    at.number_input(key="zoom_lo").set_value(50).run()
    at.number_input(key="zoom_hi").set_value(120).run()
    assert_ok(at)
    link = {k: at.query_params[k] for k in at.query_params}
    assert link["logy"] in ("1", ["1"]) and link["smooth"] in ("0.85", ["0.85"]) and link["x"] in ("time", ["time"])
    assert link["charts"] == ["loss_lr", "custom"] and link["from"] in ("50", ["50"]) and link["to"] in ("120", ["120"])
    fresh = run_app(link)  # a new tab (a new session) opened on the copied link
    assert_ok(fresh)
    assert fresh.toggle(key="log_y").value is True
    assert fresh.slider(key="smoothing").value == 0.85
    assert fresh.selectbox(key="x_axis").value == "time"
    assert fresh.button_group(key="panels").value == ["loss_lr", "custom"]
    assert (fresh.number_input(key="zoom_lo").value, fresh.number_input(key="zoom_hi").value) == (50, 120)
    loss = charts(fresh)[0]
    assert loss["layout"]["yaxis"]["type"] == "log" and "(UTC)" in loss["layout"]["xaxis"]["title"]["text"]
    hostile = run_app({"run": "exp", "x": "<b>", "smooth": "nan", "charts": ["x'y"], "from": "1e999"})
    assert_ok(hostile)
    assert hostile.selectbox(key="x_axis").value == "step" and hostile.slider(key="smoothing").value == 0.6


def test_smoothing_choices_keep_the_raw_line_faint_and_log_x(log_root: Path) -> None:
    import numpy as np

    from monitor_cb.analysis.smoothing import gaussian, running_mean, window_for
    from tests.app.helpers import values

    write_run(log_root, "exp", steps=300)
    at = run_app({"run": "exp"})
    assert_ok(at)

    def loss_traces() -> tuple[dict[str, Any], dict[str, Any]]:
        fig = charts(at)[0]
        by_name = {t.get("name"): t for t in fig["data"]}
        return by_name["loss"], by_name["loss (raw)"]

    at.selectbox(key="smoother").set_value("mean").run()
    at.slider(key="smoothing").set_value(0.9).run()
    assert_ok(at)
    smoothed, raw = loss_traces()
    assert raw["opacity"] < 0.5 and raw["line"]["width"] < smoothed["line"]["width"], "the raw line is kept, faint"
    raw_y = np.array(values(raw["y"]))
    np.testing.assert_allclose(values(smoothed["y"]), running_mean(raw_y, window_for(0.9)), rtol=1e-5)
    at.selectbox(key="smoother").set_value("gaussian").run()
    smoothed, raw = loss_traces()
    np.testing.assert_allclose(values(smoothed["y"]), gaussian(np.array(values(raw["y"])), 19), rtol=1e-5)
    at.toggle(key="log_x").set_value(True).run()
    assert_ok(at)
    assert all(f["layout"]["xaxis"]["type"] == "log" for f in charts(at))
    assert max(values(charts(at)[0]["data"][0]["x"])) == 300, "the data stay in steps; plotly logs the axis"
    assert at.query_params["smoother"] in ("gaussian", ["gaussian"]) and at.query_params["logx"] in ("1", ["1"])


def test_log_x_puts_the_finding_labels_in_log_units(log_root: Path) -> None:
    """On a log axis plotly.js reads an annotation's x in log10 units (a shape's by value): the label of
    the line at step 120 must be at 2.08, the line itself at 120 (see the Chromium test)."""
    import math

    write_run(log_root, "diverged", steps=150, nan_from=120, close="failed")
    at = run_app({"run": "diverged", "logx": "1"})
    assert_ok(at)
    fig = charts(at)[0]
    labels = [a["x"] for a in fig["layout"].get("annotations", []) if a.get("xref", "x") == "x"]
    assert labels and all(abs(x - math.log10(120)) < 1e-9 for x in labels), labels
    lines = [s["x0"] for s in fig["layout"].get("shapes", []) if s.get("xref", "x") == "x"]
    assert lines and all(x == 120 for x in lines), lines


def test_log_x_marks_stay_put_over_refreshes(log_root: Path) -> None:
    import math

    write_run(log_root, "diverged", steps=150, nan_from=120, close="failed")
    at = run_app({"run": "diverged", "logx": "1"})
    first = sorted(a["x"] for a in charts(at)[0]["layout"].get("annotations", []) if a.get("xref", "x") == "x")
    for _ in range(3):
        at.run()
    again = sorted(a["x"] for a in charts(at)[0]["layout"].get("annotations", []) if a.get("xref", "x") == "x")
    assert again == first and any(abs(x - math.log10(120)) < 1e-9 for x in again), "converted once, not per refresh"
