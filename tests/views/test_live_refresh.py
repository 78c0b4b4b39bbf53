"""live_refresh: one computation of a refresh's series and figures for every viewer of the same data and settings."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pandas as pd
import plotly.io

from monitor_cb.charts.prepared import PreparedFigure
from monitor_cb.ingest import RunStore
from monitor_cb.views.live import ChartSettings
from monitor_cb.views.live_refresh import LiveRequest, LiveShared, process
from monitor_cb.views.zoom import ZoomState
from tests.app.conftest import write_run


def request(**settings: object) -> LiveRequest:
    return LiveRequest(ChartSettings(**settings), ZoomState())  # type: ignore[arg-type]


def test_viewers_of_the_same_data_share_one_computation(tmp_path: Path) -> None:
    write_run(tmp_path, "r", steps=300, close=None)
    store, shared = RunStore(tmp_path), LiveShared()
    run = store.run_info("r")
    now = time.time()  # a clock after the run's start: elapsed time is counted against it
    first = process(run, store.read("r"), request(), now, shared)
    again = process(run, store.read("r"), request(), now + 1, shared)  # another viewer, or a refresh with no new data
    assert shared.figures.computed == 1 and shared.series.computed == 1
    assert again.figures is first.figures
    assert again.kpis.elapsed_s != first.kpis.elapsed_s, "the clock-dependent tiles are each viewer's own"
    process(run, store.read("r"), request(smoothing=0.9), now + 2, shared)  # other settings: other figures
    assert shared.figures.computed == 2 and shared.series.computed == 1


def test_new_records_give_new_figures(tmp_path: Path) -> None:
    writer = write_run(tmp_path, "r", steps=300, close=None)
    store, shared = RunStore(tmp_path), LiveShared()
    run = store.run_info("r")
    before = process(run, store.read("r"), request(), 100.0, shared)
    writer.log_at(1e9, step=301, loss=0.05)
    writer.flush()
    after = process(store.run_info("r"), store.read("r"), request(), 101.0, shared)
    assert shared.figures.computed == 2 and shared.series.computed == 2
    assert after.kpis.step == 301 and before.kpis.step == 300


def test_concurrent_viewers_compute_once(tmp_path: Path) -> None:
    write_run(tmp_path, "r", steps=2000, close=None)
    store, shared = RunStore(tmp_path), LiveShared()
    run = store.run_info("r")
    start = threading.Barrier(8)
    results = []

    def viewer() -> None:
        data = store.read("r")
        start.wait()
        results.append(process(run, data, request(), 100.0, shared))

    threads = [threading.Thread(target=viewer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 8
    assert shared.figures.computed == 1 and shared.series.computed == 1
    assert all(r.figures is results[0].figures for r in results)


def test_figures_are_prepared_once_and_draw_the_same(tmp_path: Path) -> None:
    write_run(tmp_path, "r", steps=300, close=None)
    store = RunStore(tmp_path)
    run = store.run_info("r")
    shared = process(run, store.read("r"), request(), 100.0, LiveShared())
    alone = process(run, store.read("r"), request(), 100.0)
    for key, fig in shared.figures.items():
        assert isinstance(fig, PreparedFigure)
        assert fig.to_dict() is fig.to_dict(), "the dict is built once, not copied per viewer"
        assert plotly.io.to_json(fig, validate=False) == plotly.io.to_json(alone.figures[key], validate=False)


def test_an_empty_run_builds_no_figure(tmp_path: Path) -> None:
    write_run(tmp_path, "r", steps=0, close=None)
    store, shared = RunStore(tmp_path), LiveShared()
    live = process(store.run_info("r"), store.read("r"), request(), 100.0, shared)
    assert live.empty and not live.figures and shared.figures.computed == 0


def test_findings_marks_are_made_once_for_new_records_on_the_step_axis(tmp_path: Path) -> None:
    from monitor_cb.diagnosis import Finding

    writer = write_run(tmp_path, "r", steps=300, close=None)
    store, shared = RunStore(tmp_path), LiveShared()
    findings = (Finding("loss_spike", "warning", 120, "spike"), Finding("plateau", "info", 10, "flat", end_step=90))

    def refresh(x: str = "step", notes: bool = True) -> dict[str, object]:
        req = LiveRequest(ChartSettings(x=x), ZoomState(), findings, notes_on_charts=notes)
        live = process(store.run_info("r"), store.read("r"), req, 100.0, shared)
        return live.figures["loss_lr"].to_dict()

    no_notes = [s["name"] for s in refresh(notes=False)["layout"]["shapes"] if s["name"].startswith("finding:")]
    assert no_notes == ["finding:loss_spike"], "an info note is drawn only when asked"
    first = refresh()
    writer.log_at(1e9, step=301, loss=0.05)
    writer.flush()
    second = refresh()
    marks = [s for s in second["layout"]["shapes"] if s["name"].startswith("finding:")]
    assert [(s["name"], s["x0"]) for s in marks] == [("finding:plateau", 10), ("finding:loss_spike", 120)]
    assert marks[0] is next(s for s in first["layout"]["shapes"] if s["name"] == "finding:plateau"), "shared"
    # on the wall-time axis a mark's x is the time of its step's row
    on_time = refresh("time")
    spike = next(s for s in on_time["layout"]["shapes"] if s["name"] == "finding:loss_spike")
    t = store.read("r").frame.set_index("step")["t"]
    assert pd.Timestamp(spike["x0"]) == pd.Timestamp(t[120], unit="s").round("ms")


def test_each_finding_is_labelled_on_the_chart_of_its_metric_and_drawn_on_every_chart(tmp_path: Path) -> None:
    from monitor_cb.diagnosis import Finding

    write_run(tmp_path, "r", steps=300, close=None)
    store = RunStore(tmp_path)
    findings = (
        Finding("loss_spike", "warning", 120, "spike"),
        Finding("throughput_drop", "warning", 200, "slower", end_step=220),
        Finding("overfitting", "warning", 250, "eval loss rises"),
        Finding("nan", "error", 280, "NaN"),
    )

    def marks(panels: tuple[str, ...]) -> dict[str, tuple[list[str], list[str]]]:
        req = LiveRequest(ChartSettings(panels=panels), ZoomState(), findings)
        live = process(store.run_info("r"), store.read("r"), req, 100.0, LiveShared())
        out = {}
        for key, fig in live.figures.items():
            layout = fig.to_dict()["layout"]
            lines = [s["name"] for s in layout.get("shapes", []) if s["name"].startswith("finding:")]
            labels = [a["text"] for a in layout.get("annotations", []) if a["name"].startswith("finding:")]
            out[key] = (lines, sorted(labels))
        return out

    every = ["finding:loss_spike", "finding:throughput_drop", "finding:overfitting", "finding:nan"]
    shown = marks(("loss_lr", "speed_grad", "eval"))
    assert shown == {
        "loss_lr": (every, ["loss_spike", "nan"]),
        "speed_grad": (every, ["throughput_drop"]),
        "eval": (every, ["overfitting"]),
    }
    alone = marks(("loss_lr",))  # the throughput chart is not shown: its findings are labelled on the first chart
    assert alone == {"loss_lr": (every, ["loss_spike", "nan", "overfitting", "throughput_drop"])}
