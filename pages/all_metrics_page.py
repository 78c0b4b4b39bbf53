"""All metrics: every metric of a run (and of runs matching a pattern), grouped by prefix, as TensorBoard's time series.

Groups are collapsed expanders whose charts are built only while open, a page of
:data:`~monitor_cb.views.all_metrics.PAGE_SIZE` at a time, so a run of 5,000 metrics opens as fast as one of
five. A regular expression filters the names, another adds runs; pinned charts stay on top (``?pin=``), each
chart has its CSV. The logic is in :mod:`monitor_cb.views.all_metrics`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import streamlit as st

from monitor_cb.names import shown_name
from monitor_cb.views import all_metrics as am
from monitor_cb.views.escape import escape_code
from pages import _shared
from pages._chart import plotly_chart

Q_FILTER, Q_RUNS_RE, Q_PIN, Q_SMOOTH, Q_LOGY = "filter", "runsre", "pin", "smooth", "logy"
K_FILTER, K_RUNS_RE, K_SMOOTH, K_LOGY, K_OUTLIERS = "am_filter", "am_runs_re", "am_smooth", "am_log_y", "am_outliers"
CHART_HEIGHT = 280
N_OUT = 1000  # points per trace, as the live page's default
TITLE_CHARS = 120  # a 10 kB name is shown cut around a hash (monitor_cb.names.shown_name; the CSV keeps it whole)
_FIGURES = am.FigureCache()
_METRICS = am.FigureCache(64)  # a run's metric names per data version


def all_metrics_page() -> None:
    """The page function given to ``st.Page``."""
    root = _shared.log_root()
    store = _shared.get_store(str(root))
    runs = _shared.list_runs(store)
    st.sidebar.caption(f"Log root: `{escape_code(str(root))}`")
    st.title("All metrics")
    if not runs:
        st.info("No runs under the log root yet.")
        st.stop()
    picked = _shared.run_picker(runs)
    chosen = run_pattern(runs, picked)
    data = load(store, chosen)
    if not data:
        st.info("Pick a run in the sidebar.")
        st.stop()
    options, flt = controls()
    metrics = am.union_metrics(_metric_names(d) for d in data)
    names = metrics
    if flt.error is not None:
        st.error(f"Metric filter: {_shared.md(flt.error)} Showing every metric.")
    else:
        names = flt.keep(metrics)
    groups = am.group_metrics(names)
    st.caption(
        f"{len(metrics):,} metric{'s' if len(metrics) != 1 else ''} in {_groups(len(am.group_metrics(metrics)))}"
        + (f"; {len(names):,} match the filter" if flt.pattern is not None else "")
        + f" · {len(data)} run{'s' if len(data) > 1 else ''}"
    )
    pins = am.pins_from(st.query_params.get_all(Q_PIN), metrics)
    if pins:
        st.subheader("Pinned")
        chart_grid(pins, data, options, "pin", pins)
    for i, group in enumerate(groups):
        label = shown_name(group.label, 80)
        box = st.expander(
            f"{_shared.md(label)} ({len(group.metrics):,})", expanded=i == 0, key=f"am_g_{group.key}", on_change="rerun"
        )
        if box.open:  # a collapsed group builds nothing
            with box:
                group_page(group, data, options, pins)
    if not groups:
        st.info("No metric matches the filter." if names != metrics else "These runs have no metrics yet.")


def run_pattern(runs: Sequence[Any], picked: Any) -> list[Any]:
    """Sidebar: a regular expression on run names that adds the runs it finds (``?runsre=``)."""
    if K_RUNS_RE not in st.session_state:
        st.session_state[K_RUNS_RE] = st.query_params.get(Q_RUNS_RE) or ""
    text = st.sidebar.text_input(
        "Also draw runs (regex)",
        key=K_RUNS_RE,
        placeholder="lr1e-3|seed[12]",
        help=f"Runs whose name or id this regular expression finds, drawn with the picked one (at most {am.MAX_RUNS}).",
    )
    _shared.sync_query(Q_RUNS_RE, text or None)
    flt = am.compile_filter(text)
    if flt.error is not None:
        st.sidebar.error(f"Runs filter: {_shared.md(flt.error)}")
    chosen, matched = am.runs_matching(runs, flt, picked)
    if flt.pattern is not None:
        extra = f" (the first {am.MAX_RUNS} drawn)" if matched > am.MAX_RUNS + 1 else ""
        st.sidebar.caption(f"{matched} run{'s' if matched != 1 else ''} match{extra}.")
    return chosen


def load(store: Any, chosen: Sequence[Any]) -> list[Any]:
    from monitor_cb.views.compare_session import load_run

    return [d for d in (load_run(store, info) for info in chosen) if d is not None]


def controls() -> tuple[Any, am.NameFilter]:
    """The filter box and the chart knobs; the chart options and the compiled filter."""
    from monitor_cb.charts.options import ChartOptions

    state, q = st.session_state, st.query_params
    if K_FILTER not in state:  # first render on this page: the URL decides
        state[K_FILTER] = q.get(Q_FILTER) or ""
        state[K_LOGY] = q.get(Q_LOGY) == "1"
        state[K_SMOOTH] = _smoothing(q.get(Q_SMOOTH))
    c1, c2, c3 = st.columns([5, 3, 2.4], vertical_alignment="bottom")  # room for "Show outliers"
    text = c1.text_input(
        "Filter metrics (regex)",
        key=K_FILTER,
        placeholder="loss|lr, ^train/, grad.*norm",
        help="A regular expression searched in each name, case-insensitive.",
    )
    smoothing = c2.slider("Smoothing", 0.0, 0.99, step=0.01, key=K_SMOOTH)
    log_y = c3.toggle("Log y", key=K_LOGY)
    fit_bulk = _shared.outliers_toggle(c3, K_OUTLIERS)
    _shared.sync_query(Q_FILTER, text or None)
    _shared.sync_query(Q_LOGY, "1" if log_y else None)
    _shared.sync_query(Q_SMOOTH, None if float(smoothing) == 0.6 else f"{float(smoothing):g}")
    options = ChartOptions(
        smoothing=float(smoothing),
        log_y=bool(log_y),
        n_out=N_OUT,
        height=CHART_HEIGHT,
        uirevision="all-metrics",
        fit_bulk=fit_bulk,
    )
    return options, am.compile_filter(text)


def _smoothing(text: str | None) -> float:
    try:
        value = float(text) if text is not None and len(text) < 20 else 0.6
    except ValueError:
        return 0.6
    return round(value, 2) if 0.0 <= value <= 0.99 else 0.6


def group_page(group: am.MetricGroup, data: Sequence[Any], options: Any, pins: Sequence[str]) -> None:
    """One open group: a page of its charts (a page picker when it has more)."""
    metrics = group.metrics
    pages = am.page_count(len(metrics))
    page = 1
    if pages > 1:
        page = int(
            st.number_input(
                f"Page (of {pages:,})",
                min_value=1,
                max_value=pages,
                value=1,
                step=1,
                key=f"am_p_{group.key}",
                width=200,
            )
        )
        first = (page - 1) * am.PAGE_SIZE
        st.caption(f"Charts {first + 1:,}–{min(first + am.PAGE_SIZE, len(metrics)):,} of {len(metrics):,}")
    chart_grid(am.page_of(metrics, page), data, options, group.key, pins)


def chart_grid(metrics: Sequence[str], data: Sequence[Any], options: Any, section: str, pins: Sequence[str]) -> None:
    """The charts of ``metrics``, two a row, each with its pin and download buttons."""
    columns = st.columns(2)
    for i, metric in enumerate(metrics):
        with columns[i % 2]:
            chart_cell(metric, data, options, section, metric in pins)


def chart_cell(metric: str, data: Sequence[Any], options: Any, section: str, pinned: bool) -> None:
    tag = hashlib.sha1(metric.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    bar = st.container(horizontal=True, gap="small", vertical_alignment="center")
    bar.button(
        "",
        icon=":material/keep_off:" if pinned else ":material/keep:",
        key=f"am_pin_{section}_{tag}",
        help="Unpin" if pinned else "Pin on top (kept in the link)",
        type="tertiary",
        on_click=_toggle_pin,
        args=(metric,),
    )
    present = [d for d in data if metric in d.frame.columns]
    bar.download_button(
        "",
        data=lambda: am.chart_csv([(d.label, d.frame, d.logged) for d in present], metric),
        file_name=f"{_file_name(metric)}.csv",
        mime="text/csv",
        icon=":material/download:",
        key=f"am_csv_{section}_{tag}",
        help="This chart's rows as CSV",
        type="tertiary",
        on_click="ignore",
    )
    bar.text(shown_name(metric, TITLE_CHARS))
    fig = figure(metric, present, options)
    plotly_chart(fig, f"am_chart_{section}_{tag}", _shared.PLOTLY_CONFIG)


def figure(metric: str, data: Sequence[Any], options: Any) -> Any:
    """One chart: a run's curve as the live page draws it, or the runs overlaid as Compare draws them."""
    key = (tuple(d.version or d.id for d in data), metric, options)
    return _FIGURES.get(key, lambda: _build(metric, data, options))


def _build(metric: str, data: Sequence[Any], options: Any) -> Any:
    from monitor_cb.charts.figures import ChartData, dual_axis_figure, empty_figure
    from monitor_cb.charts.overlay import overlay_figures
    from monitor_cb.compare.align import align_runs

    if not data:
        return empty_figure("not logged by these runs", height=options.height)
    title = shown_name(metric, TITLE_CHARS)
    if len(data) == 1:
        run = data[0]
        chart = ChartData(run.frame, dict(run.logged) if run.logged else None, prepared=True)
        return dual_axis_figure(chart, [metric], [], options, y_title=title)
    return overlay_figures(data, align_runs(data, "step"), [metric], options)[metric]


def _toggle_pin(metric: str) -> None:
    pins = am.toggled(list(dict.fromkeys(st.query_params.get_all(Q_PIN))), metric)
    _shared.sync_query(Q_PIN, list(pins))


def _metric_names(run: Any) -> list[str]:
    """The run's metrics, once per data version."""
    return _METRICS.get(run.version or ("frame", id(run.frame)), lambda: am.numeric_metrics(run.frame))


def _groups(n: int) -> str:
    return f"{n:,} group{'s' if n != 1 else ''}"


def _file_name(metric: str) -> str:
    """A file name from a metric name: letters, digits, ``.``, ``-`` and ``_`` only, at most 80 characters."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", metric).strip("._")[:80] or "metric"
