"""Run colours: distinct by CIEDE2000, stable for a run, and the same in the report as on the page."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from monitor_cb.charts.style import NONFINITE_COLOR
from monitor_cb.compare.colors import RUN_PALETTE, run_colors
from monitor_cb.compare.rundata import RunData
from monitor_cb.testing.colordiff import DISTINCT, delta_e, hex_to_lab, min_pairwise
from monitor_cb.views.compare_session import CompareSettings, build_view, report_html


def test_palette_is_large_distinct_readable_and_clear_of_the_nan_red() -> None:
    assert len(RUN_PALETTE) >= 20 and len(set(RUN_PALETTE)) == len(RUN_PALETTE)
    assert min_pairwise(RUN_PALETTE[:12]) >= DISTINCT
    assert min_pairwise(RUN_PALETTE) >= DISTINCT  # in fact all 24 are
    for color in RUN_PALETTE:
        assert delta_e(color, NONFINITE_COLOR) >= 15, color  # a run line never looks like the NaN marks
        assert 30 <= hex_to_lab(color)[0] <= 75, color  # readable on white, not black


def test_the_old_hashed_palette_fails_the_same_check() -> None:
    """The check has teeth: the palette the issue complained about had near-duplicate blues and browns."""
    old = ("#1f77b4", "#3182bd", "#8c564b", "#8c6d31", "#843c39", "#7b4173", "#9467bd", "#756bb1")
    assert min_pairwise(old) < DISTINCT


def test_twelve_runs_get_twelve_distinct_colours() -> None:
    ids = [f"sweep/run{i:02d}-lr{lr}" for i, lr in enumerate(np.geomspace(1e-5, 1e-2, 12))]
    colors = run_colors(ids)
    assert set(colors) == set(ids) and len(set(colors.values())) == 12
    assert min_pairwise(list(colors.values())) >= DISTINCT


def test_without_history_the_same_set_gets_the_same_colours_in_any_order() -> None:
    ids = ["b", "a", "c"]
    assert run_colors(ids) == run_colors(["c", "b", "a", "a"]) == dict(zip("abc", RUN_PALETTE[:3], strict=True))
    assert list(run_colors(ids)) == ids  # keys in the order given


def test_sticky_colours_survive_adding_and_removing_runs() -> None:
    first = run_colors(["m", "z"])
    added = run_colors(["a", "m", "z"], previous=first)  # "a" sorts first: no reshuffle
    assert added["m"] == first["m"] and added["z"] == first["z"]
    assert added["a"] not in (first["m"], first["z"])
    removed = run_colors(["a", "z"], previous=added)
    assert removed == {"a": added["a"], "z": added["z"]}
    back = run_colors(["a", "m", "z"], previous={**added, **removed})
    assert back == added  # "m" gets its colour back: nobody took it


def test_previous_colours_that_clash_or_are_foreign_are_replaced() -> None:
    got = run_colors(["a", "b", "c"], previous={"a": "#1F77B4", "b": "#1f77b4", "c": "#123456"})
    assert got["a"] == "#1f77b4"  # case does not matter; the first in sorted order keeps a contested colour
    assert len(set(got.values())) == 3 and set(got.values()) <= set(RUN_PALETTE)


def test_past_the_palette_colours_repeat_least_used_first() -> None:
    ids = [f"r{i:03d}" for i in range(len(RUN_PALETTE) + 5)]
    colors = run_colors(ids)
    counts = pd.Series(list(colors.values())).value_counts()
    assert counts.max() == 2 and counts.min() == 1 and len(counts) == len(RUN_PALETTE)


# ----------------------------------------------------------------------------- page and report agree
def _run(run_id: str, n: int = 60) -> RunData:
    steps = np.arange(1, n + 1)
    frame = pd.DataFrame({"step": steps, "t": steps * 0.5, "loss": 2.0 / np.sqrt(steps), "lr": np.full(n, 1e-3)})
    return RunData(run_id, run_id, frame)


def _report_colors(html: str) -> dict[str, set[str]]:
    """legend group -> line colours of every trace of the report's charts."""
    decoder = json.JSONDecoder()
    out: dict[str, set[str]] = {}
    for match in re.finditer(r'Plotly\.newPlot\(\s*"[^"]+",\s*', html):
        traces, _ = decoder.raw_decode(html, match.end())
        for trace in traces:
            out.setdefault(trace["legendgroup"], set()).add(trace["line"]["color"])
    return out


def test_report_and_compare_charts_give_each_run_the_same_colour() -> None:
    runs = [_run(f"run{i:02d}") for i in (3, 0, 11, 7, 1, 9, 2, 10, 5, 8, 4, 6)]  # picked in any order
    settings = CompareSettings(metrics=("loss", "lr"))
    view = build_view(runs, settings)
    page: dict[str, set[str]] = {}
    for fig in view.figures.values():
        for trace in fig.data:
            if trace.line.color is not None:
                page.setdefault(trace.legendgroup, set()).add(trace.line.color)
    report = _report_colors(report_html(runs, settings))
    expected = {run_id: {color} for run_id, color in run_colors([r.id for r in runs]).items()}
    assert page == expected
    assert report == expected
    assert min_pairwise([next(iter(c)) for c in report.values()]) >= DISTINCT


@pytest.mark.parametrize("n", [2, 6, 12])
def test_small_views_use_the_most_distinct_colours(n: int) -> None:
    colors = run_colors([f"x{i}" for i in range(n)])
    assert sorted(colors.values(), key=RUN_PALETTE.index) == list(RUN_PALETTE[:n])


def test_view_colors_keep_a_colour_free_for_a_run_that_comes_back() -> None:
    from monitor_cb.compare.colors import view_colors

    first = view_colors(["a", "b"])
    history = dict(first)
    second = view_colors(["b", "c"], history)
    assert second["b"] == first["b"] and second["c"] not in (first["a"], first["b"]), "a's colour stays reserved"
    history.update(second)
    third = view_colors(["d", "a", "b", "c"], history)
    assert third["a"] == first["a"] and third["c"] == second["c"] and len(set(third.values())) == 4


def test_view_colors_past_the_palette_keep_the_runs_in_view_distinct() -> None:
    from monitor_cb.compare.colors import RUN_PALETTE, view_colors

    history = view_colors([f"old{i}" for i in range(len(RUN_PALETTE))])
    shown = view_colors([f"new{i}" for i in range(12)], history)
    assert len(set(shown.values())) == 12, "twelve new runs after 24 remembered ones: still 12 colours"
