"""monitor_cb.views.replay: the replay cursor, the notable steps, the growing figures."""

from __future__ import annotations

import numpy as np

from monitor_cb.views import replay
from tests.compare.frames import frame


def test_cursor_rows_window_and_play_ticks() -> None:
    f = frame(np.arange(1, 501), np.ones(500))
    assert replay.rows_until(f, 100) == slice(0, 100)
    w = replay.window_rows(f, 250)
    assert (w.start, w.stop) == (199, 300), "±50 logged steps"
    assert replay.window_rows(f, 3) == slice(0, 53)
    steps = replay.unique_steps(f)
    assert replay.next_cursor(steps, 1) == 6 and replay.next_cursor(steps, 500) == 500


def test_notable_steps_nan_spikes_and_unconfirmed_findings() -> None:
    loss = np.ones(300)
    loss[100] = 8.0
    loss[200:] = np.nan
    f = frame(np.arange(1, 301), loss)

    from monitor_cb.diagnosis import Finding

    # grad_norm was never logged: a "nan" finding about it is a misread gap and is dropped
    gap = Finding("nan", "error", 260, "from a gap", details={"column": "grad_norm"})
    items = replay.notable_steps(f, None, [gap])
    kinds = [(n.step, n.kind) for n in items]
    assert (201, "nan") in kinds and (101, "loss_spike") in kinds
    assert all(n.step != 260 for n in items)
    assert "step 101" in replay.notable_label(items[0])


def test_replay_figures_grow_and_window_marks_the_step() -> None:
    f = frame(np.arange(1, 201), np.linspace(2, 1, 200), lr=np.full(200, 1e-3))
    figs = replay.replay_figures(f, None, replay.rows_until(f, 50), x_range=(1, 200))
    assert max(np.asarray(t.x).max() for t in figs[0].data) == 50
    assert list(figs[0].layout.xaxis.range) == [1, 200]
    item = replay.Notable(120, "loss_spike", "x")
    figs = replay.replay_figures(f, None, replay.window_rows(f, 120), marker=item)
    assert any(s.x0 == 120 for s in figs[0].layout.shapes)


def test_one_entry_per_event_worded_as_its_finding() -> None:
    """A NaN and a spike the diagnosis reports are not listed again in the replay's own words; a finding
    given twice is listed once; spikes the diagnosis did not report read like its ``loss_spike`` entries."""
    from monitor_cb.diagnosis import Finding, diagnose

    rng = np.random.default_rng(0)
    loss = 2.0 * np.exp(-np.arange(600) / 300) + rng.normal(0, 0.01, 600)
    loss[150] = 40.0  # a single-point jump the diagnosis reports
    loss[500:] = np.nan
    f = frame(np.arange(1, 601), loss, grad_norm=np.ones(600))
    found = diagnose(f)
    kinds = sorted({x.kind for x in found})
    assert "nan" in kinds and "loss_spike" in kinds, kinds
    items = replay.notable_steps(f, None, [*found, *found])
    labels = [replay.notable_label(n) for n in items]
    assert len(labels) == len(set(labels)), "a finding given twice is listed once"
    assert [n.step for n in items if n.kind == "nan"] == [501], "the NaN once, from the finding"
    assert sum(n.step == 151 for n in items) == 1, "the spike once"
    assert all(n.label.startswith(f"{n.kind}") for n in items), "one wording per kind: 'kind: message'"
    assert not any("over the recent median" in n.label for n in items)
    alone = replay.notable_steps(f, None, [Finding("overfitting", "warning", 10, "x")])
    spike = next(n for n in alone if n.kind == "loss_spike")
    assert spike.step == 151 and spike.label.startswith("loss_spike: loss at")
    nan = next(n for n in alone if n.kind == "nan")
    assert nan.label == "nan: loss became NaN at step 501 (first non-finite)"
