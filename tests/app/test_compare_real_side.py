"""Side by side with real runs whose step ranges and losses differ wildly (issue 26, item 1): no empty panel."""

from __future__ import annotations

from pathlib import Path

from tests.app.helpers import assert_ok, charts, run_entry, texts
from tests.app.real_root import real_runs_root

ENTRY = str(Path(__file__).with_name("compare_app.py"))
ISSUE_RUNS = ["mask2former_mgm", "nyu_ssod_d2", "ddpg_pilot", "qwen25_medical", "echarts_tb"]


def test_real_runs_side_by_side_each_panel_its_own_x_and_the_user_can_link_them(log_root: Path) -> None:
    real_runs_root(log_root, ISSUE_RUNS)
    at = run_entry(ENTRY, {"runs": ISSUE_RUNS, "metric": ["loss"], "mode": "side"})
    assert_ok(at)
    figs = charts(at)
    assert len(figs) == 5
    assert all(not f["layout"]["xaxis"].get("range") for f in figs), "each panel autoranges on its own run"
    # No shared y (ddpg_pilot's 1e4 loss would flatten the rest): a panel sets a y range only to fit its own
    # run's bulk, its outliers marked at the edge (nyu_ssod_d2's first loss of 156), never ddpg's scale.
    for f in figs:
        y_range = f["layout"]["yaxis"].get("range")
        if y_range:
            assert any(str(t.get("name", "")).endswith("beyond the axis") for t in f["data"]), "fits its own outliers"
            assert y_range[1] < 1e3, "not ddpg_pilot's scale"
    assert any(not f["layout"]["yaxis"].get("range") for f in figs)
    shown = texts(at)
    assert "Each panel has its own x range" in shown and "Shared y left off for `loss`" in shown
    assert at.toggle(key="cmp_shared_x").value is False
    assert not any(s.key and s.key.startswith("cmp_range_slider") for s in at.slider), "no shared range to slide"
    at.toggle(key="cmp_shared_x").set_value(True).run()
    assert_ok(at)
    ranges = {tuple(f["layout"]["xaxis"]["range"]) for f in charts(at)}
    assert ranges == {(0, 4_668_000)}, "linked on request: the union of the runs' steps"
    assert at.query_params["sharex"] in ("1", ["1"])
    assert "Each panel has its own x range" not in texts(at)


def test_runs_that_cannot_be_aligned_are_not_said_to_lack_the_metric(log_root: Path) -> None:
    real_runs_root(log_root, ISSUE_RUNS)
    at = run_entry(ENTRY, {"runs": ISSUE_RUNS, "metric": ["loss"], "align": "samples"})
    assert_ok(at)
    warnings = [w.value for w in at.warning]
    assert any("Not drawn when aligned by samples seen" in w and "no batch size" in w for w in warnings)
    infos = [i.value for i in at.info]
    assert "The runs that logged `loss` cannot be aligned by samples seen (see above)." in infos
    assert not any("None of the picked runs logged" in i for i in infos), "they all logged loss"
    at.multiselect(key="cmp_metrics").set_value(["loss", "eval_loss"]).run()
    assert_ok(at)
    infos = [i.value for i in at.info]
    assert "The runs that logged `eval_loss` cannot be aligned by samples seen (see above)." in infos


def test_the_summary_of_real_runs_says_not_logged_not_nan(log_root: Path) -> None:
    real_runs_root(log_root, ISSUE_RUNS)
    at = run_entry(ENTRY, {"runs": ISSUE_RUNS, "metric": ["loss"]})
    assert_ok(at)
    summary = at.dataframe[0].value.set_index("run")
    assert not (summary == "NaN").any().any(), "none of these runs logged a NaN"
    assert set(summary["mean throughput"]) == {"–"} and set(summary["max grad norm"]) == {"–"}
    assert summary.loc["qwen25_medical", "best eval value"] != "–"


def test_wall_time_leaves_out_a_run_whose_t_counts_from_zero_and_says_so(log_root: Path) -> None:
    real_runs_root(log_root, ["mask2former_mgm", "qwen25_medical"])  # qwen25_medical: t is elapsed seconds
    at = run_entry(ENTRY, {"runs": ["mask2former_mgm", "qwen25_medical"], "metric": ["loss"], "align": "wall"})
    assert_ok(at)
    warning = " ".join(w.value for w in at.warning)
    assert "`qwen25_medical`: its t counts seconds from the run's start, not dates" in warning
    fig = charts(at)[0]
    drawn = {t.get("legendgroup") for t in fig["data"]}
    assert drawn == {"mask2former_mgm"}, "the relative-t run is left out of the wall-time chart"
    years = {str(x)[:4] for t in fig["data"] for x in t["x"]}
    assert years == {"2025"}, "no point in 1970"
    at.radio(key="cmp_align").set_value("relative").run()
    assert_ok(at)
    assert {t.get("legendgroup") for t in charts(at)[0]["data"]} == {"mask2former_mgm", "qwen25_medical"}


def sixty(log_root: Path) -> list[str]:
    from tests.app.real_root import REAL_RUNS

    names = sorted(p.parent.name for p in REAL_RUNS.glob("*/metrics.jsonl"))[:60]
    real_runs_root(log_root, names)
    return names


def test_sixty_runs_draw_twenty_with_the_legend_beside_and_a_control_to_draw_more(log_root: Path) -> None:
    names = sixty(log_root)
    at = run_entry(ENTRY, {"runs": names, "metric": ["loss"]}, timeout=120)
    assert_ok(at)
    fig = charts(at)[0]
    legend = [t for t in fig["data"] if t.get("showlegend", True) and t.get("legendgroup") in names]
    assert len(legend) == 60, "every run is in the legend"
    drawn = [t["legendgroup"] for t in legend if t.get("visible", True) is True]
    assert drawn == names[:20], "the first 20 picked runs are drawn"
    assert fig["layout"]["legend"]["orientation"] == "v" and fig["layout"]["legend"]["x"] > 1, "beside the plot"
    assert fig["layout"]["hovermode"] == "closest" and fig["layout"]["meta"] == {"highlight": True}
    assert any("Drawing 20 of 60 runs" in str(c.value) for c in at.caption)
    at.number_input(key="cmp_cap").set_value(60).run()
    assert_ok(at)
    legend = [t for t in charts(at)[0]["data"] if t.get("showlegend", True) and t.get("legendgroup") in names]
    assert all(t.get("visible", True) is True for t in legend), "raised: all 60 drawn"
