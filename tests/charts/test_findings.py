"""Findings on a figure: one shape per finding, coloured by severity, labels capped, x mapped."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from monitor_cb.charts.figures import ChartOptions, dual_axis_figure
from monitor_cb.charts.findings import SEVERITY_COLORS, add_findings, hover_text, step_mapper
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
