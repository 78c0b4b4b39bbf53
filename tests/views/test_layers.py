"""The Layers page's logic: which family and row open, movers in words, the shared matrix cache."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from monitor_cb.analysis.families import Family
from monitor_cb.analysis.family_matrix import MatrixOptions, Mover
from monitor_cb.charts.prepared import PreparedFigure
from monitor_cb.diagnosis import diagnose
from monitor_cb.diagnosis.findings import Finding
from monitor_cb.ingest.runframe import RunFrame, Snapshot
from monitor_cb.testing.synthetic_families import family_run
from monitor_cb.views.layers import (
    MatrixCache,
    change_text,
    layers_link,
    layers_view,
    pick_family,
    pick_member,
    run_families,
)


def _read(frame, run_id="r"):
    masks = {c: frame[c].notna().to_numpy() for c in frame.columns if c not in ("step", "rank", "seg")}
    return RunFrame.of(run_id, Snapshot(frame, [(masks, len(frame))], None, (len(frame),)))


def test_the_finding_decides_family_and_row():
    run = family_run(1, blowup=True, n_points=600, params=12)
    frame = run.frame.copy()
    for i in range(20):
        frame[f"adam_m_norm/p.{i}"] = 1.0  # a larger family the finding is not about
    findings = diagnose(frame, status="failed")
    families = run_families(list(frame.columns))
    assert families[0].name == "adam_m_norm"
    family = pick_family(families, None, findings)
    assert family.name == "grad_norm"
    assert pick_family(families, "adam_m_norm", findings).name == "adam_m_norm"
    assert pick_family(families, "nope", []).name == "adam_m_norm"
    view = layers_view(_read(frame), family, None, findings, MatrixCache())
    assert view.member == run.culprit
    assert [f.kind for f in view.findings] == ["layer_origin"]
    assert view.mover_rows()[0].parameter == run.culprit
    assert layers_link(view.findings[0], "r") == {"run": "r", "family": "grad_norm", "param": run.culprit}


def test_pick_member_order():
    family = Family("g", ("a.1", "a.2"), ("g/a.1", "g/a.2"))
    movers = [Mover("a.2", 1.0, 5, 3.0)]
    assert pick_member(family, "a.1", [], movers) == "a.1"
    assert pick_member(family, "zzz", [], movers) == "a.2"
    assert pick_member(family, None, [], []) == "a.1"
    f = Finding("layer_origin", "error", 3, "m", details={"family": "g", "member": "a.1"})
    assert pick_member(family, None, [f], movers) == "a.1"


def test_change_text():
    assert change_text(Mover("a", np.log10(30.0), 1, 30.0)) == "30x its baseline"
    assert change_text(Mover("a", np.log10(2310.0), 1, 1.0)) == "2,310x its baseline"
    assert change_text(Mover("a", -1.0, 1, 0.1)) == "fell to 0.1x"
    assert change_text(Mover("a", float("inf"), 1, float("nan"))) == "NaN/Inf"


def test_cache_folds_new_rows_once_and_is_bounded():
    run = family_run(2, n_points=800, params=4)
    family = run_families(list(run.frame.columns))[0]
    cache = MatrixCache(entries=2)
    options = MatrixOptions(buckets=32)
    first = layers_view(_read(run.frame.iloc[:300]), family, None, [], cache, options)
    matrix, _ = cache.matrix(("r", None), family, options)
    assert matrix.rows_seen == 300
    layers_view(_read(run.frame), family, None, [], cache, options)
    assert matrix.rows_seen == len(run.frame)
    assert first.data.end[-1] < matrix.data().end[-1]
    for i in range(3):
        cache.matrix((f"other{i}", None), family, options)
    assert len(cache) == 2


@pytest.mark.parametrize("member", ["a.1", None])
def test_curve_panels(member):
    run = family_run(3, n_points=300, params=2)
    family = run_families(list(run.frame.columns))[0]
    view = layers_view(_read(run.frame), family, member, [], MatrixCache())
    titles = [a.text for a in view.curve.layout.annotations]
    assert titles == ["loss", "grad_norm", f"grad_norm: {view.member}"]


def test_figures_are_dicts_plotly_accepts_and_no_plotly_objects_are_built():
    """Both figures are built as their dicts (plotly's validation and templates cost 0.5-1 s a draw at 1,000
    parameters): sending them builds no plotly objects, and plotly's own validation accepts them."""
    run = family_run(1, blowup=True, n_points=600, params=12)
    findings = diagnose(run.frame, status="failed")
    family = run_families(list(run.frame.columns))[0]
    view = layers_view(_read(run.frame), family, None, findings, MatrixCache())
    for fig in (view.heatmap, view.curve):
        pio.to_json(fig)  # as Streamlit sends it
        assert isinstance(fig, PreparedFigure) and fig._objects is None
        go.Figure(pio.from_json(pio.to_json(fig), skip_invalid=False).to_dict())  # raises if plotly disagrees
    curve = view.curve.to_dict()["layout"]
    assert [s["xref"] for s in curve["shapes"][:3]] == ["x", "x2", "x3"]  # the finding's line on every panel
    assert curve["xaxis3"]["title"]["text"] == "step" and curve["template"]["layout"]["plot_bgcolor"] == "white"


def test_families_are_found_once_per_set_of_columns():
    """A refresh with the same columns does not order the run's parameter names again (0.1 s at 1,000)."""
    from monitor_cb.views.layers import _families_of

    columns = ["step", "loss", *(f"grad_norm/model.layers.{i}.w" for i in range(30)), 7]
    first = run_families(columns)
    misses = _families_of.cache_info().misses
    again = run_families(list(columns))
    assert again == first and again is not first  # the caller's own list
    assert _families_of.cache_info().misses == misses
    assert run_families([*columns, "grad_norm/model.layers.30.w"])[0].members[-1] == "model.layers.30.w"
    assert _families_of.cache_info().misses == misses + 1
