"""AppTests of the Layers page: a family opens as one heatmap with its movers and the named parameter's curve."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from monitor_cb.testing.synthetic_families import family_run
from tests.app.conftest import write_run
from tests.app.family_runs import write_family_run
from tests.app.helpers import assert_ok, charts, run_entry, texts

ENTRY = str(Path(__file__).with_name("layers_app.py"))


@pytest.fixture
def blown(log_root: Path):
    run = family_run(1, blowup=True, n_points=600, params=12)
    write_family_run(log_root, "blown", run, close="failed")
    return run


def test_blown_run_opens_on_the_culprit(blown):
    at = run_entry(ENTRY, {"run": "blown"})
    assert_ok(at)
    heat, curve = charts(at)
    assert heat["data"][0]["type"] == "heatmap"
    rows = heat["data"][0]["y"]
    layers = [int(r.split(".")[2]) for r in rows]
    assert len(rows) == 12 and layers == sorted(layers)  # by layer, as the model numbers them
    marks = [t for t in heat["data"] if t["type"] == "scatter"]
    assert marks and marks[0]["y"] == [blown.culprit]  # the finding's mark on its row
    assert at.selectbox(key="ly_param").value == blown.culprit
    assert at.query_params["param"] == [blown.culprit] or at.query_params["param"] == blown.culprit
    titles = [a["text"] for a in curve["layout"]["annotations"]]
    assert titles == ["loss", "grad_norm", f"grad_norm: {blown.culprit}"]
    shown = "\n".join(str(e.value) for e in [*at.error, *at.warning]).replace("\\", "")  # Markdown-escaped
    assert f"starting in {blown.culprit}" in shown
    movers = at.dataframe[0].value
    assert movers["parameter"].iloc[0] == blown.culprit


def test_query_picks_family_and_row(blown):
    other = blown.members[5]
    at = run_entry(ENTRY, {"run": "blown", "family": "grad_norm", "param": other})
    assert_ok(at)
    curve = charts(at)[1]
    assert curve["layout"]["annotations"][-1]["text"] == f"grad_norm: {other}"
    at.selectbox(key="ly_param").set_value(blown.members[2]).run()
    assert_ok(at)
    assert charts(at)[1]["layout"]["annotations"][-1]["text"] == f"grad_norm: {blown.members[2]}"


def test_healthy_twin_has_no_finding_and_a_run_without_family_says_why(log_root: Path):
    write_family_run(log_root, "healthy", family_run(1, n_points=400, params=6))
    write_run(log_root, "plain", steps=50)
    at = run_entry(ENTRY, {"run": "healthy"})
    assert_ok(at)
    assert len(charts(at)) == 2 and not at.error and not at.warning
    heat = charts(at)[0]
    assert not [t for t in heat["data"] if t["type"] == "scatter"]
    at = run_entry(ENTRY, {"run": "plain"})
    assert_ok(at)
    assert "no per-parameter family" in texts(at)
    assert not charts(at)


def test_parameter_names_are_text_not_html(log_root: Path):
    run = family_run(2, n_points=300, params=3)
    frame = run.frame.rename(columns={f"grad_norm/{run.members[0]}": "grad_norm/<b>x</b>.weight"})
    write_family_run(log_root, "html", replace(run, frame=frame))
    at = run_entry(ENTRY, {"run": "html"})
    assert_ok(at)
    rows = charts(at)[0]["data"][0]["y"]
    assert "&lt;b&gt;x&lt;/b&gt;.weight" in rows and "<b>x</b>.weight" not in rows


def test_tensorboard_histograms_show_as_distributions(log_root: Path):
    tensorboardX = pytest.importorskip("tensorboardX")
    import numpy as np

    writer = tensorboardX.SummaryWriter(str(log_root / "hist" / "rank_0"), flush_secs=3600)
    rng = np.random.default_rng(0)
    for step in range(1, 11):
        for layer in (10, 2):
            values = rng.normal(0, 0.1 * step, 2_000)
            writer.add_histogram(f"model.layers.{layer}.w", values, global_step=step, walltime=1.7e9 + step)
        writer.add_scalar("loss", 1.0 / step, global_step=step, walltime=1.7e9 + step)
    writer.close()
    at = run_entry(ENTRY, {"run": "hist"})
    assert_ok(at)
    assert at.selectbox(key="ly_hist").options == ["model.layers.2.w", "model.layers.10.w"]
    bands, hist = charts(at)
    assert bands["layout"]["title"]["text"] == "model.layers.2.w: distribution over steps"
    assert hist["layout"]["title"]["text"] == "model.layers.2.w at step 10"
    at.select_slider(key="ly_hist_step").set_value(3).run()
    assert_ok(at)
    assert charts(at)[1]["layout"]["title"]["text"] == "model.layers.2.w at step 3"
    at.selectbox(key="ly_hist").set_value("model.layers.10.w").run()
    assert_ok(at)
    assert charts(at)[1]["layout"]["title"]["text"] == "model.layers.10.w at step 3"


def test_live_page_finding_links_to_the_layers_row(blown):
    from tests.app.conftest import DASHBOARD

    at = run_entry(DASHBOARD, {"run": "blown"})
    assert_ok(at)
    links = [el.proto for el in at.get("page_link")]
    (link,) = [p for p in links if "Layers page" in p.label]
    assert link.page.endswith("layers") or "layers" in link.page
    assert f"param={blown.culprit}" in link.query_string and "family=grad_norm" in link.query_string


def test_compare_with_a_healthy_run_of_the_same_model(blown, log_root: Path):
    write_family_run(log_root, "twin", family_run(1, n_points=400, params=12))
    at = run_entry(ENTRY, {"run": "blown", "vs": "twin"})
    assert_ok(at)
    assert at.selectbox(key="ly_vs").value == "twin"
    heats = [c for c in charts(at) if c["data"][0]["type"] == "heatmap"]
    assert len(heats) == 2
    assert [t for t in heats[0]["data"] if t["type"] == "scatter"]  # the blown run's mark ...
    assert not [t for t in heats[1]["data"] if t["type"] == "scatter"]  # ... and none on its healthy twin
    assert heats[1]["data"][0]["y"] == heats[0]["data"][0]["y"]  # the same rows, in the same order
    at.selectbox(key="ly_vs").set_value("").run()
    assert_ok(at)
    assert len([c for c in charts(at) if c["data"][0]["type"] == "heatmap"]) == 1
