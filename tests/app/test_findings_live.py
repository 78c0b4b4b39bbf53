"""The alert pieces on a real run, the way the live page will call them (one line each)."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.app.conftest import write_run


def _live_alerts(root: str) -> None:
    import streamlit as st

    from monitor_cb.charts.figures import dual_axis_figure
    from monitor_cb.charts.findings import add_findings, step_mapper
    from pages import _findings, _shared

    store = _shared.get_store(root)
    run = _shared.list_runs(store)[0]
    data = store.read(run.id)
    frame = data.frame
    findings = _findings.run_findings(run, data, root)
    _findings.sidebar_badge(findings)
    _findings.alert_panel(findings)
    _findings.toast_new(run.id, findings)
    fig = add_findings(dual_axis_figure(frame, "time"), findings, step_mapper(frame, "time"))
    st.plotly_chart(fig, key="chart")
    st.session_state["n_findings"] = len(findings)
    st.session_state["n_shapes"] = sum(1 for s in fig.layout.shapes if (s.name or "").startswith("finding:"))


def test_a_nan_run_shows_badge_panel_toast_and_marker(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    write_run(root, "exp-nan", steps=200, nan_from=150, close="failed")
    at = AppTest.from_function(_live_alerts, args=(str(root),), default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["n_findings"] >= 1
    assert at.session_state["n_shapes"] == at.session_state["n_findings"]
    assert any("nan" in e.value and "step 150" in e.value for e in at.error)
    assert any("error" in c.value for c in at.sidebar.caption)
    assert any(t.value.startswith("nan at step 150") for t in at.toast)

    at.run()  # a refresh without new records: the cached findings, no second toast
    assert not at.exception and not at.toast
    assert any("step 150" in e.value for e in at.error)


def test_a_healthy_run_draws_nothing(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    write_run(root, "exp-ok", steps=200)
    at = AppTest.from_function(_live_alerts, args=(str(root),), default_timeout=60).run()
    assert not at.exception
    assert at.session_state["n_findings"] == 0
    assert not at.error and not at.warning and not at.toast and not at.sidebar.caption


def test_watcher_and_dashboard_use_the_same_diagnose(tmp_path):
    """The watcher's default detector entry point is the engine the live page calls."""
    import inspect

    from monitor_cb.diagnosis import diagnose
    from monitor_cb.diagnosis.engine import diagnose as engine_diagnose
    from monitor_cb.notify.config import NotifyConfig
    from monitor_cb.notify.watcher import Watcher
    from pages import _findings

    watcher = Watcher(tmp_path, NotifyConfig(), state_path=tmp_path / "state.json")  # nothing is sent here
    assert watcher._diagnose is diagnose is engine_diagnose
    assert "from monitor_cb.diagnosis import diagnose" in inspect.getsource(_findings.run_findings)
