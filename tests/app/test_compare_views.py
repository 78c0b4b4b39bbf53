"""AppTests of what the compare page gained for issue 15: sticky colours across reruns, 12 distinct
colours, group-by bands, side by side with the chosen metrics in equal panels and a shared-y toggle."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from monitor_cb.testing.colordiff import ciede2000, hex_to_lab
from tests.app.helpers import assert_ok, charts, run_entry, values
from tests.compare.runs_helpers import write_sweep_run

ENTRY = str(Path(__file__).with_name("compare_app.py"))


@pytest.fixture
def sweep(log_root: Path) -> list[str]:
    names = []
    for i, (lr, seed) in enumerate(itertools.product((1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2), (0, 1))):
        name = f"r{i:02d}-lr{lr:g}-s{seed}"
        write_sweep_run(log_root, name, lr=lr, seed=seed, steps=60, t0=1_700_000_000.0 + i * 100)
        names.append(name)
    return names


def run_app(query: dict[str, Any]) -> AppTest:
    return run_entry(ENTRY, query)


def legend_colours(fig: dict[str, Any]) -> dict[str, str]:
    return {t["legendgroup"]: t["line"]["color"] for t in fig["data"] if t.get("showlegend", True) and "line" in t}


def test_a_run_keeps_its_colour_when_runs_are_added_and_removed(sweep: list[str]) -> None:
    a, b, c, d = sweep[:4]
    at = run_app({"runs": [a, b], "metric": ["loss"]})
    assert_ok(at)
    first = legend_colours(charts(at)[0])
    at.sidebar.multiselect(key="cmp_runs").set_value([b, c]).run()
    second = legend_colours(charts(at)[0])
    assert second[b] == first[b], "b keeps its colour when a leaves"
    at.sidebar.multiselect(key="cmp_runs").set_value([d, a, b, c]).run()
    third = legend_colours(charts(at)[0])
    assert third[a] == first[a] and third[b] == first[b] and third[c] == second[c]
    assert len(set(third.values())) == 4


def test_twelve_runs_get_twelve_colours_no_two_alike(sweep: list[str]) -> None:
    at = run_app({"runs": sweep, "metric": ["loss"]})
    assert_ok(at)
    colours = legend_colours(charts(at)[0])
    assert len(colours) == 12
    labs = [hex_to_lab(c) for c in colours.values()]
    worst = min(ciede2000(x, y) for x, y in itertools.combinations(labs, 2))
    assert worst >= 10, worst


def test_group_by_a_config_key_draws_mean_lines_with_bands(sweep: list[str]) -> None:
    at = run_app({"runs": sweep[:4], "metric": ["loss"], "group": "lr"})
    assert_ok(at)
    assert at.selectbox(key="cmp_group").value == "lr", "the URL sets the group"
    fig = charts(at)[0]
    means = [t["name"] for t in fig["data"] if t.get("showlegend", True)]
    assert means == ["lr=0.0001 (2 runs)", "lr=0.0003 (2 runs)"]
    assert sum(t.get("fill") == "tonexty" for t in fig["data"]) == 2
    at.selectbox(key="cmp_group").set_value("(none)").run()
    assert_ok(at)
    assert "group" not in at.query_params
    assert len(legend_colours(charts(at)[0])) == 4, "one line per run again"


def test_a_bad_group_in_the_url_is_ignored(sweep: list[str]) -> None:
    at = run_app({"runs": sweep[:2], "group": "no-such-key **x**"})
    assert_ok(at)
    assert at.selectbox(key="cmp_group").value == "(none)"


def test_side_by_side_chosen_metrics_equal_panels_shared_y(sweep: list[str]) -> None:
    at = run_app({"runs": sweep[:4], "metric": ["loss", "eval_accuracy"], "mode": "side"})
    assert_ok(at)
    figs = charts(at)
    assert [f["layout"]["title"]["text"] for f in figs] == ["loss", "eval_accuracy"] * 4
    loss_ranges = {tuple(f["layout"]["yaxis"]["range"]) for f in figs[::2]}
    assert len(loss_ranges) == 1, "shared y: one range per metric"
    x_ranges = {tuple(f["layout"]["xaxis"]["range"]) for f in figs}
    assert x_ranges == {(1, 60)}, "linked x"
    # every run's column has the same width: 3 per row, the last row padded with empty columns
    holders = [c for c in at.columns if charts(c)]
    assert len(holders) == 4 and {c.weight for c in holders} == {holders[0].weight}
    rows = [c for c in at.columns if c.weight == holders[0].weight]
    assert len(rows) >= 6, "the fourth run's row has three columns, two of them empty"
    at.toggle(key="cmp_shared_y").set_value(False).run()
    assert_ok(at)
    assert all("range" not in f["layout"]["yaxis"] for f in charts(at)), "each panel scales to its run"


def test_a_link_with_other_runs_replaces_the_sessions_choice(sweep: list[str]) -> None:
    """The runs page's "Open in Compare" changes the URL of a session that compared other runs before."""
    at = run_app({"runs": sweep[:2], "metric": ["loss"]})
    at.sidebar.multiselect(key="cmp_runs").set_value(sweep[:3]).run()
    assert at.query_params["runs"] == sweep[:3], "the page writes its choice into the URL"
    at.run()
    assert at.sidebar.multiselect(key="cmp_runs").value == sweep[:3], "its own URL does not undo the choice"
    at.query_params["runs"] = [sweep[5], sweep[7]]
    at.query_params["group"] = "lr"
    at.run()
    assert_ok(at)
    assert at.sidebar.multiselect(key="cmp_runs").value == [sweep[5], sweep[7]]
    assert at.selectbox(key="cmp_group").value == "lr"


def test_the_group_mean_is_dotted_where_a_member_run_has_ended(log_root: Path) -> None:
    write_sweep_run(log_root, "short-s0", lr=1e-3, seed=0, steps=40, t0=1_700_000_000.0)
    write_sweep_run(log_root, "long-s1", lr=1e-3, seed=1, steps=80, t0=1_700_000_100.0)
    write_sweep_run(log_root, "other", lr=1e-2, seed=0, steps=80, t0=1_700_000_200.0)
    at = run_app({"runs": ["short-s0", "long-s1", "other"], "metric": ["loss"], "group": "lr"})
    assert_ok(at)
    fig = charts(at)[0]
    solid = next(t for t in fig["data"] if t.get("name") == "lr=0.001 (2 runs)")
    dotted = next(t for t in fig["data"] if t.get("name") == "lr=0.001 (2 runs) (fewer runs)")
    assert dotted["line"]["dash"] == "dot"
    solid_x = [x for x, y in zip(values(solid["x"]), values(solid["y"]), strict=True) if y == y]
    dotted_x = [x for x, y in zip(values(dotted["x"]), values(dotted["y"]), strict=True) if y == y]
    assert max(solid_x) == 40, "solid while both seeds are there"
    assert min(dotted_x) == 40 and max(dotted_x) == 80, "dotted from where the short seed ended"
    assert "of 2 runs" in solid["hovertemplate"]
    assert not any(str(t.get("name", "")).startswith("lr=0.01 ") and "fewer" in str(t.get("name")) for t in fig["data"])


def test_compare_offers_the_same_smoothing_choices_as_live(sweep: list[str]) -> None:
    import numpy as np

    from monitor_cb.analysis.smoothing import running_mean, window_for

    at = run_app({"runs": sweep[:2], "metric": ["loss"], "smooth": "0.8", "smoother": "mean"})
    assert_ok(at)
    assert at.selectbox(key="cmp_smoother").value == "mean"
    fig = charts(at)[0]
    raw = next(t for t in fig["data"] if str(t.get("name", "")).endswith("(raw)"))
    line = next(t for t in fig["data"] if t.get("legendgroup") == raw["legendgroup"] and t.get("showlegend", True))
    expected = running_mean(np.array(values(raw["y"])), window_for(0.8))
    np.testing.assert_allclose(values(line["y"]), expected, rtol=1e-6)
    at.selectbox(key="cmp_smoother").set_value("ema").run()
    assert_ok(at)
    assert "smoother" not in at.query_params, "the default stays out of the URL"


def test_log_x_and_log_y_in_the_url_and_on_every_chart(sweep: list[str]) -> None:
    import math

    at = run_app({"runs": sweep[:3], "metric": ["loss", "eval_loss"], "logx": "1", "logy": "1"})
    assert_ok(at)
    assert at.toggle(key="cmp_log_x").value is True and at.toggle(key="cmp_log_y").value is True
    assert all(f["layout"]["xaxis"]["type"] == "log" and f["layout"]["yaxis"]["type"] == "log" for f in charts(at))
    at.radio(key="cmp_mode").set_value("side").run()
    at.toggle(key="cmp_shared_x").set_value(True).run()
    assert_ok(at)
    ranges = {tuple(f["layout"]["xaxis"]["range"]) for f in charts(at)}
    assert ranges == {(0.0, math.log10(60))}, "a shared range on a log axis is in log10 units (steps 1-60)"
    at.radio(key="cmp_align").set_value("wall").run()
    assert_ok(at)
    assert at.toggle(key="cmp_log_x").disabled and all(f["layout"]["xaxis"]["type"] == "date" for f in charts(at))


def test_a_reopened_comparison_is_not_built_again_and_new_data_is(sweep: list[str], log_root: Path) -> None:
    """Issue 35: a second viewer (or the same page opened again) gets the view every viewer shares; a refresh with
    nothing new builds nothing; a run that logged more is built once more."""
    from pages import _shared

    views = _shared.compare_views(str(_shared.log_root()))
    before = views.computed
    query = {"runs": sweep[:3], "metric": ["loss"]}
    first = run_app(query)
    assert_ok(first)
    assert views.computed - before == 1
    second = run_app(query)
    assert_ok(second)
    first.run()
    assert views.computed - before == 1, "a reopen or a refresh with nothing new built the view again"
    assert charts(second)[0] == charts(first)[0]
    write_sweep_run(log_root, sweep[0], lr=1e-4, seed=0, steps=90, t0=1_700_000_000.0)
    first.run()
    assert views.computed - before == 2
    drawn = [max(values(t["x"])) for t in charts(first)[0]["data"] if t.get("legendgroup") == sweep[0] and "x" in t]
    assert drawn and max(drawn) >= 89, drawn


def test_a_run_that_built_a_view_gives_the_freed_memory_back(sweep: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows a build read are dropped when the script run ends; glibc keeps freed pages until trimmed (20
    runs of 1M steps read with no cache: 1.5 GB). A rerun that built nothing does not trim."""
    import pages.compare_page as page

    trims: list[int] = []
    monkeypatch.setattr(page, "release_free_memory", lambda: trims.append(1) or True)
    at = run_app({"runs": sweep[6:9], "metric": ["loss"]})
    assert_ok(at)
    assert len(trims) == 1
    at.run()
    assert len(trims) == 1
