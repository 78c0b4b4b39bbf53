"""monitor_cb.compare: alignment, the common grid, interval-aware smoothing, summary maths (NaN included),
config diff, colours, export and uploads."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pandas as pd
import pytest

from monitor_cb.analysis.smoothing import ema_debiased
from monitor_cb.charts.overlay import hidden_runs, overlay_figures, side_by_side_figures
from monitor_cb.charts.style import escape_html
from monitor_cb.compare import align as al
from monitor_cb.compare.browser_upload import UploadError, max_upload_bytes, parse_upload
from monitor_cb.compare.colors import run_colors
from monitor_cb.compare.configdiff import MISSING, config_diff, flatten, run_config, show_value
from monitor_cb.compare.downloads import combined, csv_bytes, parquet_bytes
from monitor_cb.compare.rundata import RunData
from monitor_cb.compare.summary_table import extreme, lower_is_better, summary_row, summary_table
from monitor_cb.views.compare_session import CompareSettings
from monitor_cb.views.runfilter import filter_runs
from tests.compare.frames import frame


# ----------------------------------------------------------------------------- alignment
def test_step_wall_and_relative_alignment() -> None:
    f = frame([10, 20, 30], [3, 2, 1], t0=1_700_000_000.0, dt=30.0)
    assert al.align(f, "step").values.tolist() == [10, 20, 30]
    wall = al.align(f, "wall")
    assert wall.is_datetime and wall.values.dtype.kind == "M"
    rel = al.align(f, "relative", relative="elapsed_min")
    assert rel.values.tolist() == [0.0, 0.5, 1.0] and "min" in rel.title
    with pytest.raises(ValueError, match="unknown alignment"):
        al.align(f, "epoch")


def test_samples_from_logged_counts_times_world_size_interpolated() -> None:
    f = frame([1, 2, 3, 4], [1, 1, 1, 1], samples=[32, np.nan, 96, 128])
    x = al.align(f, "samples", {"world_size": 2})
    assert x.values.tolist() == [64, 128, 192, 256], "a row without samples is interpolated by step"


def test_samples_from_batch_size_else_not_alignable() -> None:
    f = frame([1, 2], [1, 1])
    assert al.align(f, "samples", {"config": {"batch_size": 16}}).values.tolist() == [16, 32]
    assert al.align(f, "samples", {}) is None
    assert al.align(f.drop(columns="t"), "wall") is None


def test_relative_unit_follows_the_longest_run() -> None:
    assert al.relative_kind([30, 200]) == "elapsed_s"
    assert al.relative_kind([30, 3600]) == "elapsed_min"
    assert al.relative_kind([86400, math.nan]) == "elapsed_h"


def overlay(runs: list[RunData], settings: CompareSettings) -> tuple[dict, al.Alignment]:
    """The overlay figures as the compare view builds them."""
    aligned = al.align_runs(runs, settings.alignment)
    return overlay_figures(runs, aligned, settings.metrics, settings.chart_options(), settings.hidden), aligned


def test_runs_of_different_lengths_and_intervals_overlay_on_one_axis() -> None:
    every = RunData("a", "a", frame(np.arange(1, 1001), np.linspace(3, 1, 1000)))
    tenth = RunData("b", "b", frame(np.arange(10, 501, 10), np.linspace(3, 2, 50)))
    figs, aligned = overlay([every, tenth], CompareSettings(metrics=("loss",), smoothing=0.0, n_points=200))
    traces = {t.legendgroup: t for t in figs["loss"].data}
    assert set(traces) == {"a", "b"} and aligned.skipped == ()
    xb = np.asarray(traces["b"].x)
    assert xb.min() == 10 and xb.max() == 500, "the short run keeps its own steps"
    assert np.asarray(traces["a"].x).max() == 1000


def test_unalignable_runs_are_skipped_not_fatal() -> None:
    ok = RunData("a", "a", frame([1, 2], [1, 1], samples=[8, 16]))
    no = RunData("b", "b", frame([1, 2], [1, 1]))
    figs, aligned = overlay([ok, no], CompareSettings(alignment="samples"))
    assert aligned.skipped == ("b",)
    assert {t.legendgroup for t in figs["loss"].data} == {"a"}


# ----------------------------------------------------------------------------- grid and smoothing
def test_grid_keeps_spikes_nan_and_ends() -> None:
    x = np.arange(100_000, dtype=float)
    y = np.sin(x / 1000)
    y[12_345] = 50.0
    y[54_321] = np.nan
    y[77_777] = -np.inf
    edges = al.grid_edges([x], 500)
    picked = al.grid_indices(x, y, edges)
    assert picked.size <= 2 * 500 + 4
    assert {0, 12_345, 54_321, 77_777, 99_999} <= set(picked.tolist())
    assert np.all(np.diff(picked) > 0)


def test_grid_is_shared_between_runs() -> None:
    a = np.arange(0, 1000, dtype=float)
    b = np.arange(0, 2000, 2, dtype=float)
    edges = al.grid_edges([a, b], 10)
    assert edges[0] == 0 and edges[-1] == 1998
    assert al.grid_edges([np.array([np.nan])], 10) is None


def test_interval_aware_ema_equals_tensorboard_on_a_regular_grid() -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(size=500)
    x = np.arange(500, dtype=float) * 10
    np.testing.assert_allclose(al.smooth_on_grid(x, y, 0.8, 10.0), ema_debiased(y, 0.8), rtol=1e-6, atol=1e-6)


def test_ema_smooths_sparse_runs_over_the_same_span() -> None:
    # a step from 0 to 1 at x=100: after 50 x units both runs are equally far along
    dense_x = np.arange(0, 200, dtype=float)
    sparse_x = np.arange(0, 200, 10, dtype=float)
    dense = al.smooth_on_grid(dense_x, (dense_x >= 100).astype(float), 0.9, 1.0)
    sparse = al.smooth_on_grid(sparse_x, (sparse_x >= 100).astype(float), 0.9, 1.0)
    assert dense[150] == pytest.approx(sparse[15], abs=0.02)
    per_point = ema_debiased((sparse_x >= 100).astype(float), 0.9)
    assert per_point[15] < sparse[15] - 0.2, "a per-point EMA would lag ten times longer"


def test_ema_passes_nan_through() -> None:
    y = np.array([1.0, np.nan, 3.0, np.inf, 5.0])
    out = al.smooth_on_grid(np.arange(5.0), y, 0.5, 1.0)
    assert np.isnan(out[1]) and np.isinf(out[3]) and np.isfinite(out[[0, 2, 4]]).all()
    assert al.reference_interval([np.arange(0, 100, 5.0), np.arange(0, 100, 2.0)]) == 2.0


# ----------------------------------------------------------------------------- summary
def test_min_and_best_ignore_nan_and_not_logged_gaps() -> None:
    f = frame([1, 2, 3, 4, 5], [2.0, 0.5, np.nan, 1.0, np.nan], eval_accuracy=[np.nan, 0.3, np.nan, 0.9, np.nan])
    logged = {
        "loss": np.array([True, True, True, True, False]),  # step 3 NaN was logged, step 5 was not
        "eval_accuracy": np.array([False, True, False, True, False]),
    }
    run = RunData("r", "r", f, logged, {}, "failed")
    row = summary_row(run, "eval_accuracy", now=0.0)
    assert row["min loss"] == 0.5 and row["min loss step"] == 2
    assert row["first non-finite step"] == 3
    assert row["final loss"] == 1.0, "the last logged value (step 5 was not logged)"
    assert row["best eval value"] == 0.9 and row["best eval step"] == 4, "accuracy: higher is better"


def test_final_loss_is_nan_when_nan_was_logged_last() -> None:
    f = frame([1, 2], [1.0, np.nan])
    row = summary_row(RunData("r", "r", f), None, now=0.0)
    assert math.isnan(row["final loss"]) and row["min loss"] == 1.0 and row["first non-finite step"] == 2


def test_all_nan_column_gives_nan_not_a_lie() -> None:
    f = frame([1, 2], [np.nan, np.nan], grad_norm=[np.inf, 3.0], throughput=[np.nan, np.nan])
    row = summary_row(RunData("r", "r", f), None, now=0.0)
    assert math.isnan(row["min loss"]) and row["min loss step"] is None
    assert row["max grad norm"] == 3.0 and math.isnan(row["mean throughput"])


def test_lower_is_better() -> None:
    assert lower_is_better("eval_loss") and lower_is_better("eval_perplexity") and lower_is_better("eval_wer")
    assert not lower_is_better("eval_accuracy") and not lower_is_better("eval_f1")
    f = frame([1, 2, 3], [1, 1, 1], eval_loss=[0.9, 0.4, 0.4])
    assert extreme(f, "eval_loss", None, lowest=True) == (0.4, 2), "the first step on ties"


def test_summary_table_types_and_duration() -> None:
    meta = {"first_start_time": 1000.0, "end_time": 1100.0}
    table = summary_table([RunData("r", "r", frame([1, 2], [1, 2]), {}, meta, "finished")], now=5000.0)
    assert table.loc[0, "duration (s)"] == 100.0
    assert str(table["steps"].dtype) == "Int64" and table.loc[0, "steps"] == 2
    running = summary_table([RunData("r", "r", frame([1, 2], [1, 2]), {}, meta, "running")], now=1500.0)
    assert running.loc[0, "duration (s)"] == 500.0, "a running run lasts until now"


# ----------------------------------------------------------------------------- config diff
def test_flatten_nested_config() -> None:
    assert flatten({"optim": {"lr": 1e-3, "betas": [0.9, 0.99]}, "seed": 1}) == {
        "optim.lr": 1e-3,
        "optim.betas": [0.9, 0.99],
        "seed": 1,
    }


def test_config_diff_only_keys_that_differ() -> None:
    a = run_config({"config": {"lr": 1e-3, "model": {"layers": 12}, "seed": 1}, "world_size": 8})
    b = run_config({"config": {"lr": 3e-4, "model": {"layers": 12}, "extra": True}, "world_size": 8})
    diff = config_diff({"a": a, "b": b}, ["run a", "run b"])
    assert list(diff.index) == ["extra", "lr", "seed"]
    assert diff.loc["seed", "run b"] == MISSING and diff.loc["extra", "run b"] == "true"
    full = config_diff({"a": a, "b": b}, all_keys=True)
    assert {"model.layers", "meta.world_size"} <= set(full.index)
    same_name = config_diff({"a": a, "b": b}, ["x", "x"])
    assert list(same_name.columns) == ["x", "x (2)"]


# ----------------------------------------------------------------------------- colours, legend, filter
def test_run_colours_are_stable_and_distinct() -> None:
    ids = [f"run{i}" for i in range(8)]
    one = run_colors(ids)
    assert one == run_colors(list(reversed(ids))), "independent of the picking order"
    assert len(set(one.values())) == 8


def test_every_trace_of_a_run_shares_its_legend_group_and_colour() -> None:
    runs = [RunData(r, r, frame([1, 2, 3], [1, np.nan, 2], lr=[1, 1, 1])) for r in ("a", "b")]
    figs, _ = overlay(runs, CompareSettings(metrics=("loss", "lr"), hidden=frozenset({"a"})))
    for fig in figs.values():
        for trace in fig.data:
            assert trace.legendgroup in ("a", "b")
            assert (trace.visible == "legendonly") == (trace.legendgroup == "a")
    loss_colours = {t.legendgroup: t.line.color for t in figs["loss"].data if t.showlegend is not False}
    lr_colours = {t.legendgroup: t.line.color for t in figs["lr"].data if t.showlegend is not False}
    assert loss_colours == lr_colours
    assert any(t.name.endswith("non-finite") for t in figs["loss"].data)


def test_hostile_names_are_escaped_for_plotly_and_mapped_back() -> None:
    run = RunData("r", "<b>bold</b>", frame([1], [1]))
    assert escape_html(run.label) == "&lt;b&gt;bold&lt;/b&gt;"
    assert hidden_runs([run], ["&lt;b&gt;bold&lt;/b&gt;"]) == frozenset({"r"})


class _Info:
    def __init__(self, rid: str) -> None:
        self.id, self.name, self.status = rid, rid, "finished"


def test_filter_words_and_patterns() -> None:
    runs = [_Info("exp/lr1e-3"), _Info("exp/lr3e-4"), _Info("base")]
    assert [r.id for r in filter_runs(runs, "exp/lr*")] == ["exp/lr1e-3", "exp/lr3e-4"]
    assert [r.id for r in filter_runs(runs, "*e-4")] == ["exp/lr3e-4"]
    assert [r.id for r in filter_runs(runs, "lr1e")] == ["exp/lr1e-3"]
    assert len(filter_runs(runs, "")) == 3


# ----------------------------------------------------------------------------- export
def test_export_has_every_row_and_keeps_nan_apart_from_not_logged() -> None:
    a = RunData("a", "a", frame([1, 2, 3], [1.0, np.nan, np.nan]), {"loss": np.array([True, True, False])})
    b = RunData("b", "b", frame([1, 2], [0.5, 0.4], acc=[0.1, 0.2]))
    table, masks = combined([a, b])
    assert len(table) == 5 and list(table.columns[:2]) == ["run", "step"]
    assert masks["acc"].tolist() == [False, False, False, True, True]
    text = csv_bytes([a, b]).decode()
    assert "a,2,1001.0,0,1,NaN," in text and "a,3,1002.0,0,1,," in text
    import pyarrow.parquet as pq

    parquet = pq.read_table(io.BytesIO(parquet_bytes([a, b])))
    loss = parquet.column("loss").to_pylist()
    assert math.isnan(loss[1]) and loss[2] is None


# ----------------------------------------------------------------------------- upload
def test_upload_parses_both_nan_spellings_in_memory() -> None:
    data = b'{"step":1,"loss":1.5}\n{"step":2,"loss":"NaN"}\n{"step":3,"loss":NaN,"ts":5}\n{"step":4,"loss":Infinity}'
    parsed = parse_upload("x.jsonl", data, cap=1 << 20)
    assert parsed.frame["step"].tolist() == [1, 2, 3, 4]
    loss = parsed.frame["loss"].to_numpy()
    assert loss[0] == 1.5 and np.isnan(loss[1]) and np.isnan(loss[2]) and np.isinf(loss[3])
    assert parsed.logged["loss"].all()


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "empty"),
        (b"\x00\x00\x00\x00", "binary"),
        (b"PK\x03\x04rest", "zip"),
        (b"\xff\xfe\xfa not utf8 at all" * 10, "UTF-8"),
        (b"a,b\n1,2\n", "No JSON object lines"),
        (b'{"step":1}\nnope\nnope\nnope\n', "do not look|does not look"),
    ],
)
def test_upload_refuses_what_is_not_jsonl(data: bytes, match: str) -> None:
    with pytest.raises(UploadError, match=match):
        parse_upload("f", data, cap=1 << 20)


def test_upload_size_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UploadError, match="limited to"):
        parse_upload("f", b'{"step":1}\n' * 1000, cap=100)
    assert max_upload_bytes({}) == 400 * 2**20  # a 1M-step run is about 250 MB
    assert max_upload_bytes({"MONITOR_UPLOAD_MAX_MB": "1"}) == 2**20
    assert max_upload_bytes({"MONITOR_UPLOAD_MAX_MB": "junk"}) == 400 * 2**20


def test_the_page_and_the_server_allow_the_same_uploads() -> None:
    """The server's maxUploadSize and the page's default cap are one limit, sized for a 1M-step run."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from pathlib import Path

    from monitor_cb.compare.browser_upload import DEFAULT_MAX_MB

    config = tomllib.loads((Path(__file__).resolve().parents[1] / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == DEFAULT_MAX_MB >= 300


def test_an_empty_check_does_not_copy_the_upload() -> None:
    """``sniff`` on a 250 MB upload must not build a stripped copy of it (``data.strip()`` did)."""
    import tracemalloc

    from monitor_cb.compare.browser_upload import sniff

    data = b'{"step": 1, "loss": 0.5}\n' * 400_000  # 10 MB
    tracemalloc.start()
    sniff(data)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < len(data) // 10
    with pytest.raises(UploadError, match="empty"):
        sniff(b" \n\t\n")


def test_multi_rank_run_draws_its_lowest_rank_and_summarizes_all() -> None:
    steps = np.repeat(np.arange(1, 6), 2)
    f = pd.DataFrame(
        {
            "step": steps,
            "t": 1000.0 + steps,
            "rank": np.tile([0, 1], 5),
            "seg": 1,
            "loss": [5, 50, 4, 40, 3, 30, 2, np.nan, 1, 10],
        }
    )
    run = RunData("r", "r", f)
    figs, _ = overlay([run], CompareSettings(metrics=("loss",), smoothing=0.0))
    line = next(t for t in figs["loss"].data if t.name == "r")
    assert np.nanmax(np.asarray(line.y, float)) == 5, "rank 0 drawn, rank 1 left out"
    marks = next(t for t in figs["loss"].data if t.name == "r non-finite")
    assert list(marks.text) == ["r: loss = NaN at step 4 (rank 1)"], "a NaN on another rank is still marked"
    assert list(marks.y) == [2.0] and list(marks.x) == [4]
    row = summary_row(run, None, now=0.0)
    assert row["first non-finite step"] == 4, "a NaN on rank 1 counts"
    assert row["min loss"] == 1 and row["steps"] == 5


def test_side_by_side_zoom_is_drawn_at_full_resolution() -> None:
    run = RunData("r", "r", frame(np.arange(1, 20_001), np.sin(np.arange(20_000) / 50), lr=np.full(20_000, 1e-3)))
    aligned = al.align_runs([run], "step").x["r"]
    zoomed = side_by_side_figures(
        run, aligned, "step", CompareSettings(n_points=500, x_range=(1000, 2000)).chart_options()
    )
    xs = np.concatenate([np.asarray(t.x, float) for t in zoomed[0].data if t.name == "loss"])
    assert xs.min() == 999 and xs.max() == 2001 and xs.size == 1003, "every step of the zoom, one neighbour each side"
    whole = side_by_side_figures(run, aligned, "step", CompareSettings(n_points=500).chart_options())
    assert np.asarray(whole[0].data[1].x).size < 2000, "downsampled without a zoom"


def test_config_values_that_json_cannot_show_are_still_a_cell() -> None:
    deep: list = []
    node = deep
    for _ in range(5000):
        node.append([])
        node = node[0]
    huge = 10**5000  # str() refuses it (Python's 4,300-digit limit), so json.dumps and repr do too
    cells = [show_value(v) for v in (deep, {1: "a", "b": 2}, huge)]  # deep: JSON or not, by the recursion limit
    assert all(isinstance(c, str) for c in cells)
    assert cells[1] == "{1: 'a', 'b': 2}" and cells[2] == "<int that cannot be shown>"
    diff = config_diff({"a": {"x": deep, "y": huge}, "b": {"x": 1, "y": 2}})
    assert list(diff.index) == ["x", "y"]


def test_upload_counts_bad_steps_and_text_values_and_keeps_the_rest() -> None:
    rows = [{"step": s, "loss": 1.0 / s} for s in range(1, 11)]
    rows[4]["loss"] = "oops"
    rows[6]["step"] = -7
    data = "\n".join(json.dumps(r) for r in rows).encode()
    parsed = parse_upload("x.jsonl", data, cap=1 << 20)
    assert parsed.bad_lines == 2 and parsed.records == 9
    assert parsed.frame["loss"].dtype == np.float64 and parsed.frame["step"].tolist() == [1, 2, 3, 4, 5, 6, 8, 9, 10]
    assert parsed.logged["loss"].sum() == 8
    text_everywhere = "\n".join(json.dumps({"step": s, "loss": f"{s}.5"}) for s in range(1, 11)).encode()
    assert parse_upload("decimals.jsonl", text_everywhere, cap=1 << 20).bad_lines == 10, "read, but every loss bad"


def test_the_report_uses_the_colours_the_page_gave() -> None:
    """Sticky colours: the page passes its mapping, the HTML report draws every run in the same colour."""
    from monitor_cb.views.compare_session import build_view, report_html

    runs = [RunData(rid, rid, frame(np.arange(1, 50), np.linspace(3, 1, 49))) for rid in ("b", "a", "c")]
    given = {"a": "#e377c2", "b": "#17becf"}
    view = build_view(runs, CompareSettings(metrics=("loss",)), colors=given)
    assert view.colors["a"] == "#e377c2" and view.colors["b"] == "#17becf"
    assert view.colors["c"] not in ("#e377c2", "#17becf")
    html = report_html(runs, CompareSettings(metrics=("loss",)), colors=view.colors)
    for rid, color in view.colors.items():
        assert f'"legendgroup":"{rid}","line":{{"color":"{color}"' in html.replace(": ", ":").replace(", ", ",")


def test_a_view_keeps_which_runs_were_drawn_not_their_x_values() -> None:
    """A view is kept for every viewer (issue 35): it must not hold a copy of each run's x per row."""
    from dataclasses import fields

    from monitor_cb.views.compare_session import build_view

    on_dates = [frame(np.arange(1, 50), np.linspace(3, 1, 49), t0=1_700_000_000.0) for _ in range(2)]
    runs = [RunData(rid, rid, f) for rid, f in zip(("b", "a"), on_dates, strict=True)]
    runs.append(RunData("no-t", "no-t", frame(np.arange(1, 50), np.linspace(3, 1, 49)).drop(columns=["t"])))
    view = build_view(runs, CompareSettings(metrics=("loss",), alignment="wall"))
    assert view.aligned.drawn == ("b", "a") and view.aligned.skipped == ("no-t",)
    assert view.aligned.title and "no-t" in view.aligned.why
    for f in fields(view.aligned):  # words only: names, titles, reasons
        v = getattr(view.aligned, f.name)
        items = list(v.items()) if isinstance(v, dict) else list(v) if isinstance(v, tuple) else [v]
        flat = [w for item in items for w in (item if isinstance(item, tuple) else (item,))]
        assert all(isinstance(w, str | bool) for w in flat), (f.name, v)
