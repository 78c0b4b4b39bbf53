"""The compare page: several runs overlaid (one chart per metric) or side by side, a summary, a config diff.

Flow: ``sidebar()`` picks the runs (a name filter, ``*``/``?`` patterns allowed) and the refresh
interval -> ``controls()`` reads metric, alignment, smoothing and mode -> a fragment
(``st.fragment(run_every=...)``, only while a picked run is still training) re-reads the runs and
draws charts and summary -> the config diff and the downloads (CSV, Parquet, HTML report).

The URL keeps the view: ``?runs=a&runs=b&metric=loss&align=step&smooth=0.6&mode=overlay&group=lr&sharex=1``. A
legend click hides a run in every chart; a drag in a chart (or the x-range slider) sets one x range
that every chart shows. A run keeps its colour while runs are added and removed (``cmp_colors`` in
the session), in the HTML report too. Group by a config key: per value the mean line and the min-max
band of its runs (seeds). Side by side: per run one panel per chosen metric, equal sizes, shared y.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import streamlit as st

from monitor_cb.analysis.smoothing import DEFAULT_SMOOTHER, SMOOTHERS
from monitor_cb.charts.overlay import MANY_RUNS, hidden_runs
from monitor_cb.charts.side import shared_x_blanks
from monitor_cb.compare.align import ALIGNMENTS, DEFAULT_ALIGNMENT, align_runs
from monitor_cb.compare.grouping import group_keys
from monitor_cb.compare.rundata import RunData, default_metrics, metric_options
from monitor_cb.compare.summary_table import default_eval_metric, summary_table
from monitor_cb.ingest.heap import release_free_memory
from monitor_cb.views import runfilter
from monitor_cb.views.compare_session import (
    DEFAULT_POINTS,
    CompareSettings,
    CompareView,
    build_view,
    diff_note,
    diff_table,
    load_run,
    report_html,
    run_key,
)
from monitor_cb.views.escape import escape_code
from monitor_cb.views.runlist import ACTIVE_STATUSES, run_label
from monitor_cb.views.runs_view import text_width
from monitor_cb.views.summary_cells import summary_display
from monitor_cb.views.zoom import parse_x_value
from pages import _shared
from pages._chart import plotly_chart
from pages._zoom import CHART_KEY_PREFIX, chart_events, event_waiting

Q_RUNS, Q_METRIC, Q_ALIGN, Q_SMOOTH, Q_MODE, Q_GROUP = "runs", "metric", "align", "smooth", "mode", "group"
K_FILTER, K_RUNS, K_METRICS, K_ALIGN, K_SMOOTH, K_MODE = (
    "cmp_filter",
    "cmp_runs",
    "cmp_metrics",
    "cmp_align",
    "cmp_smooth",
    "cmp_mode",
)
K_LOG, K_POINTS, K_RANGE, K_HIDDEN, K_ALL_KEYS, K_EVAL = (
    "cmp_log_y",
    "cmp_points",
    "cmp_x_range",
    "cmp_hidden",
    "cmp_all_keys",
    "cmp_eval",
)
K_COLORS, K_GROUP, K_SHARED_Y = "cmp_colors", "cmp_group", "cmp_shared_y"
K_RUNS_URL, K_GROUP_URL = "cmp_runs_url", "cmp_group_url"  # what this page last wrote into the URL
# Shared x (side by side): the toggle, the user's explicit choice (absent = automatic), the x the panels last got.
K_SHARED_X, K_SHARED_X_CHOICE, K_SIDE_X = "cmp_shared_x", "cmp_shared_x_choice", "cmp_side_shared_x"
Q_SHARED_X = "sharex"
Q_SMOOTHER, K_SMOOTHER = "smoother", "cmp_smoother"
Q_LOGY, Q_LOGX, K_LOG_X = "logy", "logx", "cmp_log_x"
SMOOTHER_SHORT = {"ema": "EMA", "mean": "Running avg", "gaussian": "Gaussian"}  # fit a narrow select
# Many runs: overlays draw the first K_CAP picked runs, the rest start hidden in the legend.
K_CAP, K_CAP_APPLIED, K_CAP_HID = "cmp_cap", "cmp_cap_applied", "cmp_cap_hid"
DEFAULT_CAP, MAX_CAP = 20, 500
NO_GROUP = "(none)"
EVENTS_KEY = "cmp_chart_events"
MODES = {"overlay": "Overlay", "side": "Side by side"}
POINTS = (500, 1000, 2000, 4000)
SIDE_COLUMNS = 3  # panels per row in side-by-side mode
CHART_PREFIX = CHART_KEY_PREFIX + "cmp_"  # the zoom/legend listener reports charts whose key starts "chart_"
SIDE_PREFIX = CHART_PREFIX + "side_"


def compare_page() -> None:
    """The page function given to ``st.Page``."""
    with _giving_memory_back():
        _compare_page()


_TRIMMING = threading.local()  # set while a script run's outermost _giving_memory_back is open


@contextlib.contextmanager
def _giving_memory_back() -> Iterator[None]:
    """After a script run that built a view, once the runs' rows it read are dropped: the C heap's free pages
    go back to the system (20 runs of 1M steps read with no cache left 1.5 GB of freed heap otherwise). Only
    the outermost one acts (a page run holds its rows until the page function returns)."""
    if getattr(_TRIMMING, "open", False):
        yield
        return
    views = _shared.compare_views(str(_shared.log_root()))
    built = views.computed
    _TRIMMING.open = True
    try:
        yield
    finally:
        _TRIMMING.open = False
        if views.computed != built:
            release_free_memory()


def _compare_page() -> None:
    root = _shared.log_root()
    store = _shared.get_store(str(root))
    runs = _shared.list_runs(store)
    st.sidebar.caption(f"Log root: `{escape_code(str(root))}`")
    st.title("Compare runs")
    if not runs:
        st.info("No runs under the log root yet. Start a training with LiveMonitor, or open the Live page for samples.")
        st.stop()
    chosen = run_multipicker(runs)
    refresh = _shared.refresh_control()
    if not chosen:
        st.info("Pick the runs to compare in the sidebar (two or more).")
        st.stop()
    data = [d for d in (load_run(store, info) for info in chosen) if d is not None]
    if not data:
        st.error("The picked runs disappeared from the log root (deleted or moved).")
        st.stop()
    _apply_events(data)  # outside the fragment: a legend click or a drag reruns the whole page
    settings, side_by_side, eval_metric = controls(data)
    if side_by_side and settings.group_by:
        st.caption("Group by applies to the overlay; side by side shows each run.")
    live = any(info.status in ACTIVE_STATUSES for info in chosen)
    ids = tuple(info.id for info in chosen)
    st.fragment(run_every=refresh if live else None)(_live_charts)(store, ids, settings, side_by_side, eval_metric)
    show_config_diff(data)
    show_downloads(store, ids, settings)


# ----------------------------------------------------------------------------- sidebar
def run_multipicker(runs: list[Any]) -> list[Any]:
    """Sidebar: a filter (words, or a ``*``/``?`` pattern) and a multi-select of runs kept in ``?runs=``."""
    now = time.time()
    text = st.sidebar.text_input(
        "Filter runs", key=K_FILTER, placeholder="lr1e-3, run0*…", help="Words to match, or a pattern with * and ?"
    )
    by_id = {r.id: r for r in runs}
    shown = runfilter.filter_runs(runs, text)
    linked = st.query_params.get_all(Q_RUNS)
    # A link (the runs page's "Open in Compare", a shared URL) that differs from what this page last
    # wrote into the URL is a new choice, even when the session already picked runs here before.
    if K_RUNS not in st.session_state or (linked and linked != st.session_state.get(K_RUNS_URL)):
        wanted = [rid for rid in linked if rid in by_id]
        missing = [rid for rid in linked if rid not in by_id]
        if missing:
            st.warning("Not under the log root any more: " + ", ".join(f"`{escape_code(m)}`" for m in missing[:10]))
        st.session_state[K_RUNS] = wanted or [r.id for r in runs[:2]]
    picked = [rid for rid in st.session_state[K_RUNS] if rid in by_id]
    # The options are the matching runs plus the ones already picked, so filtering never drops a choice.
    options = list(dict.fromkeys([*picked, *(r.id for r in shown)]))
    st.session_state[K_RUNS] = picked
    st.sidebar.multiselect(
        f"Runs ({len(shown)} of {len(runs)} match)",
        options,
        key=K_RUNS,
        format_func=lambda rid: run_label(by_id[rid], now),
    )
    chosen = [by_id[rid] for rid in st.session_state[K_RUNS] if rid in by_id]
    _set_query(Q_RUNS, [r.id for r in chosen])
    st.session_state[K_RUNS_URL] = [r.id for r in chosen]
    return chosen


def _set_query(name: str, value: str | list[str]) -> None:
    current = st.query_params.get_all(name)
    wanted = value if isinstance(value, list) else [value]
    if current != wanted:
        st.query_params[name] = value


# ----------------------------------------------------------------------------- controls
def controls(data: Sequence[RunData]) -> tuple[CompareSettings, bool, str | None]:
    """The two rows of controls above the charts; their values come from (and go back to) the URL."""
    metrics = metric_options(data)
    keys = group_keys(data)
    _init_from_query(metrics, keys)
    c1, c2, c3 = st.columns([5, 3, 3], vertical_alignment="bottom")
    chosen = c1.multiselect("Metrics (one chart each)", metrics, key=K_METRICS)
    alignment = c2.radio("Align by", list(ALIGNMENTS), key=K_ALIGN, format_func=ALIGNMENTS.get, horizontal=True)
    mode = c3.radio("Mode", list(MODES), key=K_MODE, format_func=MODES.get, horizontal=True)
    # Toggles get columns wide enough for their whole label ("Log y" once read "Lo…").
    s1, s2, c5, c6, c6x, c7 = st.columns([2, 1.7, 1.4, 2.4, 2, 2.3], vertical_alignment="bottom")
    smoother = s1.selectbox(
        "Smoothing",
        list(SMOOTHERS),
        format_func=SMOOTHER_SHORT.get,
        key=K_SMOOTHER,
        help="; ".join(f"{SMOOTHER_SHORT[k]}: {v}" for k, v in SMOOTHERS.items()) + ". The raw line stays, faint.",
    )
    smoothing = s2.slider("Weight", 0.0, 0.99, step=0.01, key=K_SMOOTH)
    log_y = c5.toggle("Log y", key=K_LOG)
    log_x = c5.toggle("Log x", key=K_LOG_X, disabled=alignment not in ("step", "samples"))  # steps or samples
    shared_y = c6.toggle(
        "Shared y",
        key=K_SHARED_Y,
        help="Side by side: one y range per metric for every run, for the metrics where no run's curve is flattened.",
    )
    fit_bulk = _shared.outliers_toggle(c6, "cmp_outliers")  # under Shared y: a third toggle under Log x was cut
    shared_x = _shared_x_toggle(c6x, data, alignment or DEFAULT_ALIGNMENT, side=mode == "side")
    group = c7.selectbox(
        "Group by",
        [NO_GROUP, *keys],
        key=K_GROUP,
        help="A config key that differs between the runs: per value, the mean line and the min-max band.",
    )
    group_by = None if group in (None, NO_GROUP) else str(group)
    st.session_state[K_GROUP_URL] = group_by
    _set_query(Q_METRIC, list(chosen))
    _set_query(Q_ALIGN, alignment or DEFAULT_ALIGNMENT)
    _set_query(Q_SMOOTH, f"{float(smoothing):g}")
    for name, key in ((Q_LOGY, K_LOG), (Q_LOGX, K_LOG_X)):
        if st.session_state.get(key):
            _set_query(name, "1")
        elif name in st.query_params:
            del st.query_params[name]
    if smoother and smoother != DEFAULT_SMOOTHER:
        _set_query(Q_SMOOTHER, str(smoother))
    elif Q_SMOOTHER in st.query_params:
        del st.query_params[Q_SMOOTHER]
    _set_query(Q_MODE, mode or "overlay")
    if group_by:
        _set_query(Q_GROUP, group_by)
    elif Q_GROUP in st.query_params:
        del st.query_params[Q_GROUP]
    with st.expander("Points per chart, runs drawn and eval metric"):
        e1, e3, e2 = st.columns(3)
        cap = e3.number_input(
            "Runs drawn",
            min_value=1,
            max_value=MAX_CAP,
            value=DEFAULT_CAP,
            step=1,
            key=K_CAP,
            help="Overlays draw the first this many picked runs; the others are in the legend, hidden "
            "(click one to draw it).",
        )
        points = e1.selectbox(
            "Points per chart",
            POINTS,
            index=POINTS.index(DEFAULT_POINTS),
            key=K_POINTS,
            help="Grid bins shared by every run; each keeps its lowest and highest value, so spikes survive.",
        )
        evals = [m for m in metrics if m.startswith("eval_")]
        default_eval = default_eval_metric(evals)
        eval_metric = (
            e2.selectbox(
                "Best eval metric (summary)",
                evals,
                index=evals.index(default_eval) if default_eval else 0,
                key=K_EVAL,
                help="Lower is better for *loss* (and error, perplexity); higher for accuracy-like metrics.",
            )
            if evals
            else None
        )
    drawable = align_runs(data, alignment or DEFAULT_ALIGNMENT).x if len(data) > DEFAULT_CAP else {}
    apply_cap([d.id for d in data if not drawable or d.id in drawable], int(cap or DEFAULT_CAP))
    if st.session_state.get("cmp_range_alignment") != alignment:
        st.session_state["cmp_range_alignment"] = alignment
        st.session_state[K_RANGE] = None  # an x range in steps means nothing on a time axis
    settings = CompareSettings(
        metrics=tuple(chosen),
        alignment=alignment or DEFAULT_ALIGNMENT,
        smoothing=float(smoothing),
        log_y=bool(log_y),
        n_points=int(points or DEFAULT_POINTS),
        x_range=st.session_state.get(K_RANGE),
        hidden=frozenset(st.session_state.get(K_HIDDEN, ())),
        group_by=group_by,
        shared_y=bool(shared_y),
        shared_x=shared_x,
        smoother=str(smoother or DEFAULT_SMOOTHER),
        log_x=bool(log_x),
        fit_bulk=fit_bulk,
    )
    return settings, mode == "side", eval_metric


def apply_cap(ids: Sequence[str], cap: int) -> None:
    """When the picked runs or the cap change: the runs past the cap start hidden (legend only), as if
    clicked away in the legend, so a click on one draws it and the choice then stays the user's."""
    key = (tuple(ids), cap)
    if st.session_state.get(K_CAP_APPLIED) == key:
        return
    st.session_state[K_CAP_APPLIED] = key
    if len(ids) > cap or st.session_state.get(K_CAP_HID):
        st.session_state[K_HIDDEN] = list(ids[cap:])
        st.session_state[K_CAP_HID] = len(ids) > cap


def _shared_x_toggle(column: Any, data: Sequence[RunData], alignment: str, *, side: bool) -> bool | None:
    """Side by side: one x range for every panel. Until the user flips it, it follows the data: off when
    the runs' x ranges differ so much that one range would leave a run's curve in a sliver of its panel.
    Returns the user's choice, or None for automatic."""
    state = st.session_state
    if K_SHARED_X_CHOICE not in state and st.query_params.get(Q_SHARED_X) in ("0", "1"):
        state[K_SHARED_X_CHOICE] = st.query_params.get(Q_SHARED_X) == "1"
    choice = state.get(K_SHARED_X_CHOICE)
    if choice is None:
        state[K_SHARED_X] = not (side and shared_x_blanks(align_runs(data, alignment)))
    else:
        state[K_SHARED_X] = bool(choice)
    column.toggle(
        "Shared x",
        key=K_SHARED_X,
        disabled=not side,
        on_change=_shared_x_flipped,
        help="Side by side: every panel on one x range. Off by default when the runs' x ranges differ so much "
        "that some panels would look empty.",
    )
    if choice is None:
        if Q_SHARED_X in st.query_params:
            del st.query_params[Q_SHARED_X]
    else:
        _set_query(Q_SHARED_X, "1" if choice else "0")
    return choice


def _shared_x_flipped() -> None:
    st.session_state[K_SHARED_X_CHOICE] = bool(st.session_state[K_SHARED_X])


def _init_from_query(metrics: list[str], keys: list[str]) -> None:
    """First visit: widget values from the URL (checked), else defaults."""
    state = st.session_state
    wanted = st.query_params.get(Q_GROUP)
    if wanted in keys and wanted != state.get(K_GROUP_URL):  # a link that sets the group
        state[K_GROUP] = wanted
    elif K_GROUP not in state or state[K_GROUP] not in (NO_GROUP, *keys):
        state[K_GROUP] = NO_GROUP
    if K_SHARED_Y not in state:
        state[K_SHARED_Y] = True
    if K_METRICS not in state:
        wanted = [m for m in st.query_params.get_all(Q_METRIC) if m in metrics]
        default = default_metrics(metrics)
        state[K_METRICS] = wanted or default or metrics[:1]
    else:  # a metric no picked run has any more is dropped, not an error
        state[K_METRICS] = [m for m in state[K_METRICS] if m in metrics]
    if K_ALIGN not in state:
        align = st.query_params.get(Q_ALIGN)
        state[K_ALIGN] = align if align in ALIGNMENTS else DEFAULT_ALIGNMENT
    if K_SMOOTH not in state:
        state[K_SMOOTH] = _smoothing(st.query_params.get(Q_SMOOTH))
    for name, key in ((Q_LOGY, K_LOG), (Q_LOGX, K_LOG_X)):
        if key not in state:
            state[key] = st.query_params.get(name) == "1"
    if K_SMOOTHER not in state:
        wanted = st.query_params.get(Q_SMOOTHER)
        state[K_SMOOTHER] = wanted if wanted in SMOOTHERS else DEFAULT_SMOOTHER
    if K_MODE not in state:
        mode = st.query_params.get(Q_MODE)
        state[K_MODE] = mode if mode in MODES else "overlay"


def _smoothing(text: str | None) -> float:
    try:
        value = float(text) if text is not None else 0.6
    except ValueError:
        return 0.6
    return round(min(max(value, 0.0), 0.99), 2) if math.isfinite(value) else 0.6


# ----------------------------------------------------------------------------- the live part
def _live_charts(
    store: Any, ids: tuple[str, ...], settings: CompareSettings, side_by_side: bool, eval_metric: str | None
) -> None:
    with _giving_memory_back():  # a refresh of the fragment alone reads the runs again
        _charts_body(store, ids, settings, side_by_side, eval_metric)


def _charts_body(
    store: Any, ids: tuple[str, ...], settings: CompareSettings, side_by_side: bool, eval_metric: str | None
) -> None:
    infos = {r.id: r for r in store.list_runs()}
    gone = [rid for rid in ids if rid not in infos]
    if gone:
        st.warning("Gone from the log root: " + ", ".join(f"`{escape_code(g)}`" for g in gone))
    data = [d for d in (load_run(store, infos[rid]) for rid in ids if rid in infos) if d is not None]
    if not data:
        st.error("None of the picked runs can be read.")
        return
    if st.session_state.get(K_RANGE) != settings.x_range:
        st.rerun(scope="app")  # the slider moved (a fragment rerun): every chart must show the new range
    if event_waiting(EVENTS_KEY):
        st.rerun(scope="app")  # a drag or legend click came during this refresh: the page applies it
    result = _cached_view(data, settings, side_by_side, eval_metric)
    st.session_state[K_SIDE_X] = result.side_shared_x if side_by_side else None
    if not side_by_side or result.side_shared_x:
        range_control(result)
    show_charts(result, data, settings, side_by_side)
    st.subheader("Summary")
    show_summary(result)


def show_summary(result: CompareView) -> None:
    """The summary as text: NaN reads NaN (st.dataframe draws a float NaN as "None"), numbers to 4
    significant digits, every column as wide as its longest value so run names are not cut."""
    table = summary_display(result.summary)
    config = {
        str(c): st.column_config.TextColumn(str(c), width=text_width([str(v) for v in table[c]], str(c)))
        for c in table.columns
    }
    st.dataframe(table, hide_index=True, width="stretch", column_config=config, key="cmp_summary")


def _cached_view(
    data: Sequence[RunData], settings: CompareSettings, side_by_side: bool, eval_metric: str | None
) -> CompareView:
    """The view, built once for every viewer of these runs' data versions with these settings and colours
    (a reopened page, a second viewer, a refresh with nothing new: no rebuild), its summary made now
    (a running run's duration grows while its data stays as it was)."""
    colors = st.session_state.setdefault(K_COLORS, {})
    key = (tuple(run_key(d) for d in data), repr(settings), side_by_side, eval_metric, tuple(sorted(colors.items())))
    views = _shared.compare_views(str(_shared.log_root()))
    result = views.get(key, lambda: build_view(data, settings, side_by_side, eval_metric, colors=colors))
    if any(c not in colors for c in result.colors):  # sticky: a run keeps its colour when others come or go
        colors.update(result.colors)
        views.put((*key[:-1], tuple(sorted(colors.items()))), result)  # this session's next refresh finds it
    if any(d.status in ACTIVE_STATUSES for d in data):
        result = replace(result, summary=summary_table(data, eval_metric))
    return result


def _apply_events(data: Sequence[RunData]) -> bool:
    """Legend clicks (hide a run everywhere) and drags (one x range for all charts); True when changed.

    Mounted outside the refresh fragment (as ``pages/_zoom.py`` asks), so an event reruns the page.
    """
    zoom, legend = chart_events(key=EVENTS_KEY)
    changed = False
    chart = str(legend.get("chart", "")) if isinstance(legend, Mapping) else ""
    overlay = chart.startswith(CHART_PREFIX) and not chart.startswith(SIDE_PREFIX)  # side panels' legends are metrics
    if overlay and isinstance(legend, Mapping) and isinstance(legend.get("hidden"), list):
        names = [h for h in legend["hidden"] if isinstance(h, str) and len(h) <= 300][:200]
        hidden = sorted(hidden_runs(data, names))
        if hidden != sorted(st.session_state.get(K_HIDDEN, [])):
            st.session_state[K_HIDDEN] = hidden
            changed = True
    # A drag in a side panel whose x is its own zooms that panel only (plotly does it in the browser).
    own_x = str(zoom.get("chart", "")).startswith(SIDE_PREFIX) if isinstance(zoom, Mapping) else False
    own_x = own_x and st.session_state.get(K_SIDE_X) is False
    if isinstance(zoom, Mapping) and str(zoom.get("chart", "")).startswith(CHART_PREFIX) and not own_x:
        new = _event_range(zoom)
        if new != st.session_state.get(K_RANGE):
            st.session_state[K_RANGE] = new
            changed = True
    return changed


def _event_range(event: Mapping[str, Any]) -> tuple[Any, Any] | None:
    if event.get("reset"):
        return None
    is_datetime = st.session_state.get(K_ALIGN) == "wall"
    a = parse_x_value(event.get("x0"), is_datetime)
    b = parse_x_value(event.get("x1"), is_datetime)
    if a is None or b is None:
        return st.session_state.get(K_RANGE)
    if st.session_state.get(K_LOG_X) and st.session_state.get(K_ALIGN) in ("step", "samples"):
        if max(abs(a), abs(b)) > 300:  # not log10 units: leave the range as it was
            return st.session_state.get(K_RANGE)
        a, b = 10.0**a, 10.0**b  # a log axis reports its range in log10 units
    lo, hi = min(a, b), max(a, b)
    if is_datetime:
        return (_datetime(lo), _datetime(hi))
    return (lo, hi)


def _datetime(ns: float) -> dt.datetime:
    return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=ns / 1000)


def range_control(result: CompareView) -> None:
    """The linked x range: one slider for every chart (a drag in a chart moves it too)."""
    bounds = result.x_bounds
    if bounds is None or bounds[0] == bounds[1]:
        return
    lo, hi = bounds
    current = st.session_state.get(K_RANGE) or (lo, hi)
    value = (_clamp(current[0], lo, hi), _clamp(current[1], lo, hi))
    step = _slider_step(lo, hi)
    if isinstance(lo, int):
        value = (int(value[0]), int(value[1]))
    elif isinstance(lo, float):  # a dragged range has 16 digits; show it at the slider's resolution
        digits = max(0, -math.floor(math.log10(step["step"])))
        value = (_clamp(round(value[0], digits), lo, hi), _clamp(round(value[1], digits), lo, hi))
    slider_key = f"cmp_range_slider_{result.aligned.kind}"
    st.session_state[slider_key] = value  # the shared range is the truth; a drag may have moved it
    r1, r2 = st.columns([8, 1], vertical_alignment="bottom")
    r1.slider(
        f"X range ({result.aligned.title}), shared by every chart",
        min_value=lo,
        max_value=hi,
        key=slider_key,
        **step,
        on_change=_range_moved,
        args=(slider_key, lo, hi),
    )
    r2.button("Reset", key="cmp_range_reset", on_click=_reset_range)


def _slider_step(lo: Any, hi: Any) -> dict[str, Any]:
    """About a thousand slider positions over the range (Streamlit's defaults: a day for dates, 0.01 for floats)."""
    if isinstance(lo, dt.datetime):
        seconds = max((hi - lo).total_seconds() / 1000, 1.0)
        return {"step": dt.timedelta(seconds=round(seconds)), "format": "MM-DD HH:mm:ss"}
    if isinstance(lo, int):
        return {"step": 1}
    span = float(hi - lo)
    step = 10 ** math.floor(math.log10(span / 1000)) if span > 0 else 0.01
    return {"step": float(step), "format": "%g"}


def _range_moved(slider_key: str, lo: Any, hi: Any) -> None:
    picked = tuple(st.session_state[slider_key])
    st.session_state[K_RANGE] = None if picked == (lo, hi) else picked


def _reset_range() -> None:
    st.session_state[K_RANGE] = None


def _clamp(value: Any, lo: Any, hi: Any) -> Any:
    try:
        return min(max(value, lo), hi)
    except TypeError:
        return lo


def show_charts(result: CompareView, data: Sequence[RunData], settings: CompareSettings, side_by_side: bool) -> None:
    """Overlay: one chart per metric. Side by side: each run's panels in its own column."""
    by_id = {d.id: d for d in data}
    if result.aligned.skipped:
        by_reason: dict[str, list[str]] = {}
        for run_id in result.aligned.skipped:
            if run_id in by_id:
                reason = result.aligned.why.get(run_id, "it lacks what this alignment needs")
                by_reason.setdefault(reason, []).append(f"`{escape_code(by_id[run_id].label)}`")
        lines = [f"{', '.join(names)}: {reason}" for reason, names in by_reason.items()]
        st.warning(f"Not drawn when aligned by {ALIGNMENTS[settings.alignment]}:  \n" + "  \n".join(lines))
    if not settings.metrics:
        st.info("Choose at least one metric above.")
        return
    if side_by_side:
        side_notes(result, settings)
        show_side_by_side(result, data)
        return
    aligned = [d for d in data if d.id in result.aligned.drawn]
    hidden = [d for d in aligned if d.id in settings.hidden]
    if hidden and not settings.group_by:
        capped = ", or raise Runs drawn (above)" if st.session_state.get(K_CAP_HID) else ""
        many = " Pointing at a curve brings that run forward." if len(aligned) > MANY_RUNS else ""
        st.caption(
            f"Drawing {len(aligned) - len(hidden)} of {len(aligned)} runs; the others are in the legend, hidden: "
            f"click one to draw it{capped}.{many}"
        )
    for i, (metric, fig) in enumerate(result.figures.items()):
        if not fig.data:
            st.info(empty_chart_note(metric, data, result, settings))
            continue
        plotly_chart(fig, f"{CHART_PREFIX}{i}", _shared.PLOTLY_CONFIG)


def empty_chart_note(metric: str, data: Sequence[RunData], result: CompareView, settings: CompareSettings) -> str:
    """Why a metric's chart is empty: nobody logged it, or the runs that did cannot be aligned (or are hidden)."""
    name = f"`{escape_code(metric)}`"
    logged = [d for d in data if metric in d.frame.columns]
    if not logged:
        return f"None of the picked runs logged {name}."
    if all(d.id in result.aligned.skipped for d in logged):
        return f"The runs that logged {name} cannot be aligned by {ALIGNMENTS[settings.alignment]} (see above)."
    return f"No drawable {name} in the runs shown (hidden with a legend click, or only empty values)."


def side_notes(result: CompareView, settings: CompareSettings) -> None:
    """Say which axes the panels do not share, and why, so a panel's own scale is never a surprise."""
    notes = []
    if not result.side_shared_x and settings.shared_x is None:
        notes.append(
            f"Each panel has its own x range: the runs' {result.aligned.title} ranges differ too much to share one "
            "(turn on Shared x to link them)."
        )
    if result.side_unshared_y:
        names = ", ".join(f"`{escape_code(m)}`" for m in result.side_unshared_y)
        notes.append(f"Shared y left off for {names}: one run's values would flatten the others' curves.")
    for note in notes:
        st.caption(note)


def show_side_by_side(result: CompareView, data: Sequence[RunData]) -> None:
    """Per run a column with its label and one panel per chosen metric; every row has the same number of
    columns (the last padded), so every panel has the same size."""
    by_id = {d.id: d for d in data}
    ids = [d.id for d in data if d.id in result.side]
    per_row = min(SIDE_COLUMNS, len(ids)) or 1
    for start in range(0, len(ids), per_row):
        row = ids[start : start + per_row]
        for offset, (column, run_id) in enumerate(zip(st.columns(per_row), row, strict=False)):
            run = by_id[run_id]
            color = result.colors.get(run_id, "")
            column.markdown(f":material/show_chart: **{_shared.md(run.label)}** · {_shared.md(run.status)}")
            if color:
                column.html(f'<div style="height:4px;background:{color};border-radius:2px"></div>')
            for i, fig in enumerate(result.side[run_id]):
                with column:
                    plotly_chart(fig, f"{SIDE_PREFIX}{start + offset}_{i}", _shared.PLOTLY_CONFIG)


# ----------------------------------------------------------------------------- diff and downloads
def show_config_diff(data: Sequence[RunData]) -> None:
    """The hyperparameters that differ (or all of them, with the toggle)."""
    st.subheader("Config diff")
    all_keys = st.toggle("Show all keys", key=K_ALL_KEYS)
    table = diff_table(data, all_keys=all_keys)
    if len(table) == 0:
        st.info(diff_note(data))
        return
    st.dataframe(table, width="stretch", key="cmp_config_diff")


def show_downloads(store: Any, ids: tuple[str, ...], settings: CompareSettings) -> None:
    """CSV / Parquet of every row of the picked runs and the HTML report; built only when clicked."""
    from monitor_cb.compare import downloads

    all_keys = bool(st.session_state.get(K_ALL_KEYS))
    colors = dict(st.session_state.get(K_COLORS, {}))

    def runs() -> list[RunData]:
        infos = {r.id: r for r in store.list_runs()}
        return [d for d in (load_run(store, infos[i]) for i in ids if i in infos) if d is not None]

    st.subheader("Export")
    d1, d2, d3 = st.columns(3)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    d1.download_button(
        "CSV (all points)",
        data=lambda: downloads.csv_bytes(runs()),
        file_name=f"compare-{stamp}.csv",
        mime="text/csv",
        on_click="ignore",
        key="cmp_dl_csv",
    )
    d2.download_button(
        "Parquet (all points)",
        data=lambda: downloads.parquet_bytes(runs()),
        file_name=f"compare-{stamp}.parquet",
        mime="application/vnd.apache.parquet",
        on_click="ignore",
        key="cmp_dl_parquet",
    )
    d3.download_button(
        "HTML report (opens offline)",
        data=lambda: report_html(runs(), settings, all_keys, colors).encode("utf-8"),
        file_name=f"compare-{stamp}.html",
        mime="text/html",
        on_click="ignore",
        key="cmp_dl_html",
    )
