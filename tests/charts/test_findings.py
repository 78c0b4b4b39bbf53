"""Findings on a figure: one shape per finding, coloured by severity, labels capped, x mapped."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from monitor_cb.charts.figures import ChartOptions, dual_axis_figure
from monitor_cb.charts.findings import (
    SEVERITY_COLORS,
    FindingMarks,
    add_findings,
    finding_marks,
    hover_text,
    step_mapper,
    with_marks,
)
from monitor_cb.diagnosis import Finding

T0 = 1_764_698_400.0


def frame(n: int = 200) -> pd.DataFrame:
    step = np.arange(1, n + 1)
    return pd.DataFrame({"step": step, "t": T0 + step * 0.5, "loss": np.linspace(3, 1, n), "samples": step * 32.0})


def finding_shapes(fig: go.Figure) -> list:
    return [s for s in fig.layout.shapes if (s.name or "").startswith("finding:")]


def test_a_point_is_a_dashed_line_and_an_episode_is_a_band() -> None:
    fig = go.Figure()
    add_findings(
        fig,
        [
            Finding("nan", "error", 120, "loss became NaN"),
            Finding("throughput_drop", "warning", 50, "slower", end_step=80),
        ],
    )
    band, line = finding_shapes(fig)  # in step order
    assert (line.type, line.x0, line.x1, line.yref) == ("line", 120, 120, "paper")
    assert line.line.color == SEVERITY_COLORS["error"]
    assert (band.type, band.x0, band.x1) == ("rect", 50, 80)
    assert band.fillcolor == SEVERITY_COLORS["warning"] and band.layer == "below"
    texts = {a.text for a in fig.layout.annotations}
    assert texts == {"nan", "throughput_drop"}


def test_many_findings_keep_every_line_but_few_labels_most_severe_first() -> None:
    findings = [Finding("loss_spike", "warning", s, "spike") for s in range(10, 500, 10)]
    findings.append(Finding("nan", "error", 5, "NaN"))
    fig = add_findings(go.Figure(), findings, max_labels=4)
    assert len(finding_shapes(fig)) == len(findings)
    labels = [(a.text, a.x) for a in fig.layout.annotations]
    assert len(labels) == 4
    assert labels[0] == ("nan", 5)  # the error first, then the newest warnings
    assert [x for _, x in labels[1:]] == [490, 480, 470]


def test_no_findings_leave_the_figure_alone() -> None:
    fig = dual_axis_figure(frame())
    before = fig.to_plotly_json()
    assert add_findings(fig, []) is fig
    assert fig.to_plotly_json() == before


def test_kinds_filter() -> None:
    findings = [Finding("nan", "error", 5, "x"), Finding("plateau", "info", 9, "y")]
    fig = add_findings(go.Figure(), findings, kinds={"plateau"})
    assert [s.x0 for s in finding_shapes(fig)] == [9]


def test_time_axis_maps_steps_to_timestamps() -> None:
    df = frame()
    fig = dual_axis_figure(df, options=ChartOptions(x="time"))
    add_findings(fig, [Finding("nan", "error", 100, "NaN"), Finding("stalled", "warning", 150, "quiet", end_step=200)],
                 step_mapper(df, "time"))  # fmt: skip
    line, band = finding_shapes(fig)
    assert pd.Timestamp(line.x0) == pd.Timestamp(T0 + 100 * 0.5, unit="s")
    assert pd.Timestamp(band.x1) == pd.Timestamp(T0 + 200 * 0.5, unit="s")
    fig.to_json()  # serialisable for st.plotly_chart


def test_samples_axis_and_unlogged_steps() -> None:
    df = frame().iloc[::10].reset_index(drop=True)  # steps 1, 11, 21, ...
    to_x = step_mapper(df, "samples")
    assert to_x is not None
    assert to_x(11) == 11 * 32.0
    assert to_x(12) == 21 * 32.0  # the next logged row
    assert to_x(10_000) == df["samples"].iloc[-1]
    assert step_mapper(df, "step") is None


def test_a_step_that_maps_to_nothing_is_skipped() -> None:
    fig = add_findings(go.Figure(), [Finding("nan", "error", 5, "x")], lambda step: None)
    assert not finding_shapes(fig) and not fig.layout.annotations


def test_hover_text_is_escaped_and_bounded() -> None:
    f = Finding("loss_spike", "warning", 1200, "<b>boom</b> <a href='x'>click</a> " + "z" * 1000, rank=3)
    text = hover_text(f)
    assert "<b>" not in text and "<a" not in text and "&lt;b&gt;" in text
    assert text.startswith("WARNING loss_spike @ step 1,200 (rank 3)<br>")
    assert len(text) < 400
    fig = add_findings(go.Figure(), [f])
    assert fig.layout.annotations[0].hovertext == text


def test_calling_again_replaces_the_marks_and_keeps_the_figures_own() -> None:
    df = frame()
    df.loc[150:, "loss"] = np.nan
    fig = dual_axis_figure(df)  # draws its own "first non-finite" line and label
    own_shapes, own_labels = len(fig.layout.shapes), len(fig.layout.annotations)
    assert own_shapes == 1 and own_labels == 1
    many = [Finding("loss_spike", "warning", s, "spike") for s in range(10, 150, 10)]
    add_findings(fig, many)
    add_findings(fig, many)
    assert len(finding_shapes(fig)) == len(many)
    add_findings(fig, [Finding("nan", "error", 151, "NaN")])
    assert [s.x0 for s in finding_shapes(fig)] == [151]
    assert len(fig.layout.shapes) == own_shapes + 1 and len(fig.layout.annotations) == own_labels + 1
    add_findings(fig, [])
    assert len(fig.layout.shapes) == own_shapes and len(fig.layout.annotations) == own_labels


def test_shapes_are_capped_most_severe_then_newest_kept() -> None:
    findings = [Finding("loss_spike", "warning", s, "spike") for s in range(1, 101)]
    findings.append(Finding("nan", "error", 0, "NaN"))
    fig = add_findings(go.Figure(), findings, max_shapes=10)
    xs = [s.x0 for s in finding_shapes(fig)]
    assert xs == [0, *range(92, 101)]  # sorted by step; the error first kept, then the newest


def test_bands_of_one_kind_that_touch_are_drawn_as_one() -> None:
    # a slow decay gives plateau episodes end to end: one band on screen, one shape sent
    findings = [
        Finding("plateau", "info", 1, "a", end_step=575),
        Finding("plateau", "info", 576, "b", end_step=3375),
        Finding("plateau", "info", 3000, "c", end_step=4000),  # overlaps the last one
        Finding("plateau", "info", 4100, "d", end_step=5000),  # a gap: its own band
        Finding("stalled", "warning", 5001, "e", end_step=6000),  # touches, but another kind
        Finding("loss_spike", "warning", 6001, "f"),
        Finding("loss_spike", "warning", 6002, "g"),  # lines are never joined
    ]
    fig = add_findings(go.Figure(), findings, max_labels=10)
    drawn = [(s.name, s.x0, s.x1) for s in finding_shapes(fig)]
    assert drawn == [
        ("finding:plateau", 1, 4000),
        ("finding:plateau", 4100, 5000),
        ("finding:stalled", 5001, 6000),
        ("finding:loss_spike", 6001, 6001),
        ("finding:loss_spike", 6002, 6002),
    ]
    assert len(fig.layout.annotations) == len(findings), "every finding keeps its label"


def test_a_band_inside_the_last_one_does_not_shorten_it() -> None:
    findings = [Finding("plateau", "info", 1, "a", end_step=1000), Finding("plateau", "info", 10, "b", end_step=20)]
    fig = add_findings(go.Figure(), findings)
    assert [(s.x0, s.x1) for s in finding_shapes(fig)] == [(1, 1000)]


def test_marks_as_dicts_draw_what_add_findings_draws() -> None:
    df = frame()
    findings = [Finding("nan", "error", 100, "NaN"), Finding("stalled", "warning", 150, "quiet", end_step=200)]
    to_x = step_mapper(df, "time")
    drawn = add_findings(dual_axis_figure(df, options=ChartOptions(x="time")), findings, to_x)
    spec = with_marks(dual_axis_figure(df, options=ChartOptions(x="time")).to_dict(), finding_marks(findings, to_x))
    assert json.loads(go.Figure(spec).to_json()) == json.loads(drawn.to_json())
    again = with_marks(spec, finding_marks(findings[:1], to_x))  # replaces the marks, keeps the chart's own
    assert [s["name"] for s in again["layout"]["shapes"]] == ["finding:nan"]
    assert with_marks(spec, FindingMarks())["layout"].get("shapes") is None
