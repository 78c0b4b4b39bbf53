"""AppTests of the compare page: selection and URL, every alignment, side by side, summary, config diff."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from monitor_cb.demo.samples import write_sample_runs
from tests.app.helpers import assert_ok, charts, run_entry, texts

ENTRY = str(Path(__file__).with_name("compare_app.py"))
TIMEOUT = 60
RUNS = ("run01-lr0.0003-bs32-seed0", "run02-lr0.001-bs64-seed1", "run03-lr0.0001-bs32-seed2")


@pytest.fixture
def samples(log_root: Path) -> Path:
    write_sample_runs(log_root, n_runs=3, steps=300, seed=0)
    return log_root


def run_app(query: dict[str, Any] | None = None) -> AppTest:
    return run_entry(ENTRY, query, TIMEOUT)


def smoothed(fig: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Legend group (run id) -> the run's legend trace."""
    return {t["legendgroup"]: t for t in fig["data"] if t.get("showlegend", True) and "legendgroup" in t}


def test_empty_root_says_so(log_root: Path) -> None:
    at = run_app()
    assert_ok(at)
    assert "No runs under the log root" in texts(at)


def test_default_selection_url_charts_and_summary(samples: Path) -> None:
    at = run_app()
    assert_ok(at)
    picked = at.sidebar.multiselect[0].value
    assert len(picked) == 2
    assert at.query_params["runs"] == picked
    assert at.query_params["align"] == ["step"] or at.query_params["align"] == "step"
    figs = charts(at)
    assert [f["layout"]["title"]["text"] for f in figs] == ["loss", "eval_loss"]
    for fig in figs:
        assert set(smoothed(fig)) == set(picked), "one legend entry per run, grouped by run id"
    # the same run has the same colour on every chart
    colours = [{rid: t["line"]["color"] for rid, t in smoothed(f).items()} for f in figs]
    assert colours[0] == colours[1]
    summary = at.dataframe[0].value
    assert list(summary["run"]) and len(summary) == 2


def test_url_reproduces_the_view(samples: Path) -> None:
    query = {"runs": [RUNS[0], RUNS[2]], "metric": ["lr", "grad_norm"], "align": "samples", "smooth": "0.3"}
    at = run_app(query)
    assert_ok(at)
    assert at.sidebar.multiselect[0].value == [RUNS[0], RUNS[2]]
    assert at.multiselect(key="cmp_metrics").value == ["lr", "grad_norm"]
    assert at.radio(key="cmp_align").value == "samples"
    assert at.slider(key="cmp_smooth").value == pytest.approx(0.3)
    figs = charts(at)
    assert [f["layout"]["title"]["text"] for f in figs] == ["lr", "grad_norm"]
    assert "samples" in figs[0]["layout"]["xaxis"]["title"]["text"]


@pytest.mark.parametrize(
    ("alignment", "axis"),
    [("step", "step"), ("samples", "samples"), ("wall", "wall time"), ("relative", "time since start")],
)
def test_each_alignment(samples: Path, alignment: str, axis: str) -> None:
    at = run_app({"runs": list(RUNS), "metric": ["loss"]})
    at.radio(key="cmp_align").set_value(alignment).run()
    assert_ok(at)
    fig = charts(at)[0]
    assert axis in fig["layout"]["xaxis"]["title"]["text"]
    assert set(smoothed(fig)) == set(RUNS)
    assert fig["layout"]["xaxis"]["type"] == ("date" if alignment == "wall" else "linear")
    assert at.query_params["align"] in (alignment, [alignment])


def test_side_by_side_panels_with_a_linked_range(samples: Path) -> None:
    at = run_app({"runs": list(RUNS[:2]), "mode": "side"})
    assert_ok(at)
    figs = charts(at)
    titles = [f["layout"]["title"]["text"] for f in figs]
    assert titles == ["loss", "eval_loss"] * 2, "per run one panel per chosen metric, in order"
    slider = at.slider(key="cmp_range_slider_step")
    slider.set_value((50, 120)).run()
    assert_ok(at)
    for fig in charts(at):
        assert fig["layout"]["xaxis"]["range"] == [50, 120], "every panel shows the shared range"
    assert "run01" in texts(at) and "run02" in texts(at)


def number(text: str) -> float:
    """A summary cell (text) as a number: "1,234" -> 1234.0, "NaN" -> nan."""
    return float(text.replace(",", ""))


def test_summary_is_nan_aware(samples: Path) -> None:
    at = run_app({"runs": [RUNS[1], RUNS[0]]})
    assert_ok(at)
    table = at.dataframe[0].value.set_index("run")
    diverged = table.loc[RUNS[1]]
    assert diverged["status"] == "stopped"
    assert number(diverged["first non-finite step"]) > 0
    assert diverged["final loss"] == "NaN", "a NaN final loss reads NaN, not None"
    assert diverged["min loss"] not in ("NaN", ""), "a NaN loss must not make the minimum NaN"
    assert number(diverged["min loss step"]) < number(diverged["first non-finite step"])
    assert table.loc[RUNS[0], "best eval"] == "eval_loss"
    assert table.loc[RUNS[0], "first non-finite step"] == "–", "no such step: a dash, not None"


def test_summary_numbers_are_shown_whole_and_names_uncut(samples: Path) -> None:
    """Every number to 4 significant digits (st.dataframe's default shows 0.00325 as "0.0032"), steps
    with every digit and separators; each column is as wide as its longest text (full run names)."""
    at = run_app({"runs": [RUNS[1], RUNS[0]]})
    assert_ok(at)
    table = at.dataframe[0].value
    for column in ("final loss", "min loss", "best eval value", "mean throughput", "max grad norm"):
        for cell in table[column]:
            assert cell == "NaN" or len(cell.lstrip("-").replace(".", "").lstrip("0").split("e")[0]) <= 4, cell
    assert all("," in c or len(c) <= 3 for c in table["steps"]), list(table["steps"])
    columns = json.loads(at.dataframe[0].proto.columns)
    width = columns["run"]["width"]
    assert width >= 8 * max(len(r) for r in RUNS), ("the run column fits the longest name", width)
    assert list(table["run"]) == [RUNS[1], RUNS[0]], "names are whole"


def test_config_diff_and_all_keys_toggle(samples: Path) -> None:
    at = run_app({"runs": list(RUNS[:2])})
    diff = at.dataframe[1].value
    assert {"lr", "batch_size", "seed"} <= set(diff.index)
    assert "schedule" not in diff.index, "equal values are hidden by default"
    at.toggle(key="cmp_all_keys").set_value(True).run()
    assert_ok(at)
    assert "schedule" in at.dataframe[1].value.index


def test_pattern_filter_and_empty_selection(samples: Path) -> None:
    at = run_app()
    at.sidebar.text_input(key="cmp_filter").set_value("run0[13]*").run()
    assert_ok(at)
    options = at.sidebar.multiselect[0].options
    assert any("run01" in o for o in options) and any("run03" in o for o in options)
    at.sidebar.multiselect[0].set_value([]).run()
    assert_ok(at)
    assert "Pick the runs to compare" in texts(at)


def test_legend_hidden_run_is_hidden_in_every_chart(samples: Path) -> None:
    at = run_app({"runs": list(RUNS[:2]), "metric": ["loss", "lr"]})
    at.session_state["cmp_hidden"] = [RUNS[0]]
    at.run()
    assert_ok(at)
    for fig in charts(at):
        states = {t["legendgroup"]: t.get("visible", True) for t in fig["data"]}
        assert states[RUNS[0]] == "legendonly" and states[RUNS[1]] is True


def test_downloads_offered(samples: Path) -> None:
    at = run_app({"runs": list(RUNS[:2])})
    assert_ok(at)
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["CSV (all points)", "Parquet (all points)", "HTML report (opens offline)"]


def test_hostile_run_name_is_inert(log_root: Path) -> None:
    from monitor_cb.demo.samples import RunSpec, write_run

    hostile = "<script>alert(1)</script> **bold** [link](http://x)"
    write_run(log_root, RunSpec(name="evil", steps=120, eval_every=40))
    meta_path = log_root / "evil" / "metrics.meta.json"
    meta = json.loads(meta_path.read_text())
    meta["name"] = hostile
    meta_path.write_text(json.dumps(meta))
    write_run(log_root, RunSpec(name="good", steps=120, eval_every=40, lr=1e-4))
    at = run_app({"runs": ["evil", "good"], "mode": "side"})
    assert_ok(at)
    shown = "\n".join(m.value for m in at.markdown)
    assert "<script>" not in shown and "\\*\\*bold\\*\\*" in shown, "Markdown escaped"
    at.radio(key="cmp_mode").set_value("overlay").run()
    names = [t.get("name", "") for fig in charts(at) for t in fig["data"]]
    assert any("&lt;script&gt;" in n for n in names) and not any("<script>" in n for n in names)
