"""The live page: one run's KPIs and charts, redrawn by a fragment while the rest of the page stays put.

Flow: ``sidebar()`` picks the run and the refresh interval -> ``chart_controls()`` reads the chart
settings -> a fragment (``st.fragment(run_every=...)``) re-reads the run and draws what
``monitor_cb.views.live_refresh.process`` made of it (tiles, banner, figures: computed once for
every viewer of the same data and settings). Only the fragment reruns on each tick (about a tenth of
the bytes of a full-page rerun); any widget change reruns the page. A run whose first read is long
(a big file, no cache yet) shows a progress bar until it is read; the sidebar stays usable.

Zoom: see ``pages/_zoom.py``. The zoom is a step range in session state (the "Steps" inputs above
the charts); a drag in a chart sets it, a double-click resets it, and each redraw re-applies it.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from monitor_cb.analysis.roles import parse_choices
from monitor_cb.analysis.smoothing import DEFAULT_SMOOTHER, SMOOTHERS
from monitor_cb.demo.launcher import demo_running
from monitor_cb.ingest.badnote import bad_lines_note
from monitor_cb.ingest.dropnote import WriterDrops, drop_note
from monitor_cb.ingest.runframe import RunFrame
from monitor_cb.names import shown_name
from monitor_cb.views.escape import escape_code
from monitor_cb.views.kpis import Kpis, format_count, format_value
from monitor_cb.views.live import (
    N_OUT_CHOICES,
    ChartSettings,
    drawn_rank,
    other_rank_cells,
)
from monitor_cb.views.live_refresh import LiveData, LiveRequest, process
from monitor_cb.views.panels import DEFAULT_PANELS, PANEL_KEYS, PANELS, panel_columns
from monitor_cb.views.runlist import format_age, format_duration
from monitor_cb.views.thresholds import parse_thresholds
from monitor_cb.views.zoom import ZoomState, apply_legend_event, apply_zoom_event, monotonic_x, parse_x_value
from pages import _findings, _shared
from pages._chart import plotly_chart
from pages._demo import demo_sidebar, show_empty_root
from pages._ranks import ranks_section
from pages._zoom import CHART_KEY_PREFIX, chart_events, event_waiting

ZOOM_LO, ZOOM_HI = "zoom_lo", "zoom_hi"
ZOOM_EXACT = "zoom_exact"  # (x kind, step lo, step hi, x0, x1) of the last drag
HIDDEN = "legend_hidden"
K_NOTES = "notes_on_charts"  # info findings (plateaus) drawn as bands only when on
X_LABELS = {"step": "step", "time": "wall time (UTC)", "elapsed_min": "relative time (min)", "samples": "samples"}
# The charts' names on their pills (the chart's own title is on the chart)
PANEL_SHORT = {
    "loss_lr": "Loss & LR",
    "speed_grad": "Throughput & grad norm",
    "eval": "Eval",
    "components": "Loss parts",
    "timing": "Step time",
    "memory": "Memory",
    "custom": "Custom",
}


def live_page() -> None:
    """The page function given to ``st.Page``."""
    root = _shared.log_root()
    store = _shared.get_store(str(root))
    runs = _shared.list_runs(store)
    selection = _shared.sidebar(root, runs)
    if not runs:
        show_empty_root(root, store)
        st.stop()
    about_run = st.sidebar.container()  # the selected run's summary and findings: drawn by the fragment
    demo_sidebar(root, store)
    if selection.run is None:
        st.info("No run matches the filter in the sidebar.")
        st.stop()
    if load_progress(store, selection.run.id) is not None and not wait_loaded(store, selection.run.id):
        loading_fragment(store, selection.run.id)  # the sidebar is drawn: another run can be picked meanwhile
        st.stop()
    data = read_run(store, selection.run.id, selection.run.ranks)
    frame = data.frame if data is not None else None
    _reset_zoom_on_run_change(selection.run.id)
    zoom_event, legend_event = chart_events()
    if frame is not None:
        apply_chart_events(frame, st.session_state.get("x_axis") or "step", zoom_event, legend_event)
    settings = chart_controls(frame, selection.run.id)
    columns = frozenset(frame.columns) if frame is not None else frozenset()
    known = sidebar_state(runs, root)
    charts = st.container()
    if frame is not None and len(frame):
        # Below the charts, but registered before the fragment runs: a fragment run that reruns the page
        # (a new metric, a zoom) ends the script before anything after it, which would drop the
        # download the browser still shows (a click on it then did nothing).
        chart_downloads(store, selection.run, list(frame.columns), settings)
    with charts:
        live_fragment(store, selection.run.id, settings, selection.refresh_s, known, columns, about_run)


def sidebar_state(runs: Any, root: Any) -> tuple[frozenset[tuple[str, str]], bool]:
    """What the sidebar was drawn from: ``(id, status)`` of every run, and whether the demo runs."""
    return frozenset((r.id, r.status) for r in runs), demo_running(root)


# ----------------------------------------------------------------------------- first read
LOADING_REFRESH_S = 0.5
# A first read shorter than this (a long run read from its cache file) is waited for: the charts come
# in the first script run. Longer ones show a progress bar (and the page a rerun once they end).
QUICK_LOAD_S = 1.0


def wait_loaded(store: Any, run_id: str, timeout: float | None = None) -> bool:
    """Whether the run's background first read ended within ``timeout`` (default :data:`QUICK_LOAD_S`)."""
    try:
        return bool(store.wait_loaded(run_id, QUICK_LOAD_S if timeout is None else timeout))
    except (FileNotFoundError, KeyError):
        return True  # vanished: the refresh says so


def loading_fragment(store: Any, run_id: str) -> None:
    """A progress bar (bytes and rows read) while the run's first read runs in the background; the page
    reruns once it is done."""

    def body() -> None:
        progress = load_progress(store, run_id)
        if progress is None:
            st.rerun(scope="app")
        st.progress(progress.fraction, text=loading_text(progress))

    st.fragment(run_every=LOADING_REFRESH_S)(body)()


def load_progress(store: Any, run_id: str) -> Any:
    """``store.load_progress``, None also when the run vanished since it was listed (the fragment says so)."""
    try:
        return store.load_progress(run_id)
    except (FileNotFoundError, KeyError):
        return None


def loading_text(progress: Any) -> str:
    """``"Reading the run: 120.4 of 250.0 MB, 480,000 rows so far"``."""
    return (
        f"Reading the run: {progress.bytes_read / 1e6:.1f} of {progress.bytes_total / 1e6:.1f} MB, "
        f"{progress.rows:,} rows so far"
    )


# ----------------------------------------------------------------------------- settings
def read_run(store: Any, run_id: str, ranks: tuple[int, ...] = (), max_age: float = 0.0) -> RunFrame | None:
    """The run's frame and masks (of its lowest rank when it has several: the charts draw that rank, the
    others are aggregated at ingest), or None when its files vanished between listing and reading.
    ``max_age``: rows another session read at most this many seconds ago are shown without reading again."""
    try:
        return store.read(run_id, rank=drawn_rank(ranks), max_age=max_age)
    except (FileNotFoundError, KeyError):
        return None


def chart_controls(frame: pd.DataFrame | None, run_id: str) -> ChartSettings:
    """The row of chart controls above the charts; they need the run's columns to offer choices."""
    from monitor_cb.analysis.series import available_x, metric_columns

    metrics = metric_columns(frame) if frame is not None else []
    roles = roles_from_query()
    casting = ChartSettings(roles=roles).casting(metrics)
    offered = available_x(frame) if frame is not None else list(X_LABELS)  # once: it scans the samples column
    xs = [x for x in X_LABELS if x in offered] or ["step"]
    # Every chart is offered even before its metrics exist, so a choice made while a run has no
    # records yet (or before its first eval) still holds when they arrive.
    panel_titles = {p.key: p.title for p in PANELS}
    view_from_query(xs, list(panel_titles))

    # The chart picker on its own row, as pills with short names: every chart is in sight, on or off
    # (a multiselect's chips were cut, so you could not tell which charts were on).
    st.session_state.setdefault("panels", list(DEFAULT_PANELS))
    shown = st.pills(
        "Charts",
        list(panel_titles),
        selection_mode="multi",
        format_func=lambda key: PANEL_SHORT.get(key, panel_titles.get(key, key)),
        key="panels",
        help="; ".join(f"{PANEL_SHORT.get(k, k)}: {t}" for k, t in panel_titles.items()),
    )
    # room for "Log y", and for "Show outliers" above "Reset zoom" (a third toggle under Log x pushed the charts down)
    c2, c3, c0, c1, c5 = st.columns([2, 1.5, 2.2, 2.2, 2.0], vertical_alignment="bottom")
    x = c2.selectbox("X axis", xs, format_func=X_LABELS.get, key="x_axis")
    log_y = c3.toggle("Log y", key="log_y")
    log_x = c3.toggle("Log x", key="log_x", disabled=x == "time", help="Steps or samples on a log scale.")
    fit_bulk = _shared.outliers_toggle(c5, "show_outliers")
    st.session_state.setdefault("smoothing", 0.6)
    st.session_state.setdefault("smoother", DEFAULT_SMOOTHER)
    smoother = c0.selectbox(
        "Smoothing",
        list(SMOOTHERS),
        format_func=SMOOTHERS.get,
        key="smoother",
        help="TensorBoard's debiased EMA, a running average or a Gaussian over the points of about the same "
        "span (window (1 + w) / (1 - w) points); the raw line stays, faint.",
    )
    smoothing = c1.slider("Smoothing weight", 0.0, 0.99, step=0.01, key="smoothing")
    c5.button(
        "Reset zoom",
        on_click=_reset_zoom,
        key="reset_zoom",
        help="Drag in a chart to zoom (kept while new points arrive); double-click a chart or press this to reset.",
    )
    with st.expander("Axes, thresholds and zoom"):
        # here, not in the row above: a third toggle under Log x pushed the first chart off the first screen
        st.toggle(
            "Notes on the charts",
            key=K_NOTES,
            help="Draw info notes (a plateau) on the charts as bands; warnings and errors are always drawn. "
            "Every note is listed under the charts either way.",
        )
        a1, a2, a3 = st.columns([2, 2, 1])
        custom_left = a1.multiselect(
            "Custom chart: left axis", metrics, default=list(casting.of("loss")[:1]), key="left", format_func=shown_name
        )
        custom_right = a2.multiselect(
            "Custom chart: right axis", metrics, default=list(casting.of("lr")[:1]), key="right", format_func=shown_name
        )
        n_out = a3.selectbox(
            "Points per trace",
            N_OUT_CHOICES,
            index=N_OUT_CHOICES.index(ChartSettings.n_out),
            key="n_out",
            help="Downsampling keeps every spike, NaN and the last point; more points cost more bytes per refresh.",
        )
        text = st.text_input(
            "Red points beyond a limit",
            key="thresholds",
            placeholder="grad_norm > 10, loss > 5",
            help="One `metric > value` or `metric < value` per limit, separated by commas.",
        )
        thresholds, bad = parse_thresholds(text)
        if bad:
            st.warning("Not understood: " + ", ".join(f"`{escape_code(b)}`" for b in bad))
        zoom_inputs()
    zoom_line()
    view_to_query()
    return ChartSettings(
        panels=tuple(shown),
        x=x or "step",
        smoothing=float(smoothing),
        log_y=bool(log_y),
        thresholds=thresholds,
        custom_left=tuple(custom_left),
        custom_right=tuple(custom_right),
        n_out=int(n_out or ChartSettings.n_out),
        smoother=str(smoother or DEFAULT_SMOOTHER),
        log_x=bool(log_x) and x != "time",
        fit_bulk=fit_bulk,
        roles=roles,
    )


ROLE_QUERY_PREFIX = "role."  # ?role.loss=train/total&role.lr=lr-AdamW: a role set for this page's link


def roles_from_query() -> tuple[tuple[str, tuple[str, ...], str], ...]:
    """Roles set by hand: the log root's (Settings), then this link's (``?role.loss=train/total``) over them."""
    q = st.query_params
    chosen = parse_choices((key, q.get_all(key)) for key in q if key.startswith(ROLE_QUERY_PREFIX))
    saved = _shared.saved_roles()
    merged = {role: (names, "set in Settings") for role, names in saved.items()}
    merged.update({role: (names, "set in the URL") for role, names in chosen.items()})
    return tuple((role, names, where) for role, (names, where) in sorted(merged.items()))


# The view in the URL (with ?run=): ?x=time&logy=1&smooth=0.8&charts=loss_lr&charts=eval&from=100&to=900
Q_X, Q_LOG, Q_SMOOTH, Q_CHARTS, Q_FROM, Q_TO = "x", "logy", "smooth", "charts", "from", "to"
Q_LOGX, Q_SMOOTHER = "logx", "smoother"
URL_READ = "live_url_read"


def view_from_query(xs: list[str], panels: list[str]) -> None:
    """First render of this session: the chart settings and the zoom from the URL (each value checked;
    anything unknown keeps the default), so a copied link opens the same view."""
    if not _shared.query_once(URL_READ):
        return
    q, state = st.query_params, st.session_state
    if q.get(Q_X) in xs:
        state["x_axis"] = q.get(Q_X)
    if q.get(Q_LOG) in ("0", "1"):
        state["log_y"] = q.get(Q_LOG) == "1"
    if q.get(Q_LOGX) in ("0", "1"):
        state["log_x"] = q.get(Q_LOGX) == "1"
    if q.get(Q_SMOOTHER) in SMOOTHERS:
        state["smoother"] = q.get(Q_SMOOTHER)
    smooth = _number(q.get(Q_SMOOTH))
    if smooth is not None and 0.0 <= smooth <= 0.99:
        state["smoothing"] = round(smooth, 2)
    charts = [c for c in q.get_all(Q_CHARTS) if c in panels]
    if charts or q.get_all(Q_CHARTS) == ["none"]:
        state["panels"] = charts
    lo, hi = _number(q.get(Q_FROM)), _number(q.get(Q_TO))
    if lo is not None or hi is not None:
        state[ZOOM_LO] = None if lo is None else max(0, int(lo))
        state[ZOOM_HI] = None if hi is None else max(0, int(hi))


def view_to_query() -> None:
    """The URL follows the controls (defaults are left out, so a plain link stays ``?run=...``)."""
    state = st.session_state
    x = state.get("x_axis") or "step"
    _shared.sync_query(Q_X, None if x == "step" else str(x))
    _shared.sync_query(Q_LOG, "1" if state.get("log_y") else None)
    _shared.sync_query(Q_LOGX, "1" if state.get("log_x") else None)
    smoother = state.get("smoother") or DEFAULT_SMOOTHER
    _shared.sync_query(Q_SMOOTHER, None if smoother == DEFAULT_SMOOTHER else str(smoother))
    smooth = float(state.get("smoothing", 0.6))
    _shared.sync_query(Q_SMOOTH, None if smooth == 0.6 else f"{smooth:g}")
    panels = list(state.get("panels") or [])
    _shared.sync_query(Q_CHARTS, None if panels == list(DEFAULT_PANELS) else (panels or ["none"]))
    lo, hi = state.get(ZOOM_LO), state.get(ZOOM_HI)
    _shared.sync_query(Q_FROM, None if lo is None else str(int(lo)))
    _shared.sync_query(Q_TO, None if hi is None else str(int(hi)))


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None and len(text) <= 40 else None
    except ValueError:
        return None
    return value if value is not None and np.isfinite(value) else None


def zoom_inputs() -> None:
    """Step range inputs (the zoom), in the controls' expander: a drag in a chart fills them."""
    st.session_state.setdefault(ZOOM_LO, None)
    st.session_state.setdefault(ZOOM_HI, None)
    z1, z2 = st.columns(2)
    z1.number_input("From step", min_value=0, step=1, key=ZOOM_LO, placeholder="first")
    z2.number_input("To step", min_value=0, step=1, key=ZOOM_HI, placeholder="latest (follow)")


def zoom_line() -> None:
    """When zoomed, one line above the charts that says so (Reset zoom is in the controls' row)."""
    lo, hi = st.session_state.get(ZOOM_LO), st.session_state.get(ZOOM_HI)
    if lo is not None or hi is not None:
        shown = f"steps {'first' if lo is None else f'{lo:,}'} to {'latest' if hi is None else f'{hi:,}'}"
        st.caption(f"Zoomed to {shown}, re-read at full resolution; double-click a chart or Reset zoom to see it all.")


def _reset_zoom() -> None:
    st.session_state[ZOOM_LO] = None
    st.session_state[ZOOM_HI] = None


def _reset_zoom_on_run_change(run_id: str) -> None:
    if st.session_state.get("zoom_run") != run_id:
        st.session_state["zoom_run"] = run_id
        _reset_zoom()
        st.session_state[HIDDEN] = {}


def zoom_state() -> ZoomState:
    """The zoom as plain data, from the step inputs and the remembered legend clicks."""
    lo, hi = st.session_state.get(ZOOM_LO), st.session_state.get(ZOOM_HI)
    if lo is not None and hi is not None and hi < lo:
        lo, hi = hi, lo
    dragged = st.session_state.get(ZOOM_EXACT)
    exact = (dragged[0], dragged[3], dragged[4]) if dragged and (dragged[1], dragged[2]) == (lo, hi) else None
    return ZoomState(lo=lo, hi=hi, hidden=dict(st.session_state.get(HIDDEN, {})), exact=exact)


# ----------------------------------------------------------------------------- the live part
# What a refresh shares with the other viewers' refreshes: a listing of the root made less than
# LIST_MAX_AGE_S ago, rows read less than READ_MAX_AGE_S ago. Thirty viewers at a 1 s refresh then see
# a few data versions a second (each drawn once for all), not thirty; one viewer alone is not delayed.
LIST_MAX_AGE_S = 1.0
READ_MAX_AGE_S = 0.5


def live_fragment(
    store: Any,
    run_id: str,
    settings: ChartSettings,
    refresh_s: float | None,
    known: tuple[frozenset[tuple[str, str]], bool],
    columns: frozenset[str] = frozenset(),
    about_run: Any = None,
) -> None:
    """Draw the live part now and, when a refresh interval is set, again every ``refresh_s`` seconds.

    ``known`` (:func:`sidebar_state`) and ``columns`` (the run's metrics) are what the sidebar and
    the controls were built from; when either changes (a run appears, vanishes or ends; the demo
    ends; a new metric), the whole page reruns so they show it. The sidebar's lines about the selected run
    (its summary, its findings) are drawn by the fragment itself into ``about_run`` (a sidebar
    container), so they refresh with the tiles.
    """
    st.fragment(run_every=refresh_s)(_live_body)(store, run_id, settings, known, columns, about_run, refresh_s)


def _live_body(
    store: Any,
    run_id: str,
    settings: ChartSettings,
    known: tuple[frozenset[tuple[str, str]], bool],
    columns: frozenset[str],
    about_run: Any = None,
    refresh_s: float | None = None,
) -> None:
    listed = store.list_runs(max_age=LIST_MAX_AGE_S)
    if sidebar_state(listed, _shared.log_root()) != known:
        st.rerun(scope="app")  # a run appeared, vanished or changed status, or the demo ended: redraw the sidebar
    runs = {r.id: r for r in listed}
    run = runs.get(run_id)
    data = read_run(store, run_id, run.ranks, READ_MAX_AGE_S) if run is not None else None
    if run is None or data is None:
        st.error(f"The run `{escape_code(run_id)}` disappeared from the log root (deleted or moved).")
        return
    if frozenset(data.frame.columns) != columns:
        st.rerun(scope="app")  # first records, or a new metric (the first eval): rebuild the controls
    if event_waiting():
        st.rerun(scope="app")  # a zoom or legend click came during this refresh: the page applies it
    shared = _shared.live_shared(str(store.root))
    wait = first_findings_wait(len(data), refresh_s)
    root = _shared.log_root()
    roles = {role: names for role, names, where in settings.roles if where == "set in the URL"}
    findings = tuple(
        _findings.run_findings(run, data, root, store=store, shared=shared, first_wait_s=wait, roles=roles)
    )
    where = about_run if about_run is not None else st.sidebar
    where.caption(_shared.run_summary(run, data.frame))
    _findings.sidebar_badge(findings, where)
    # one toast at a time (a summary when several are new), never a stack over the controls
    _findings.toast_new(run.id, findings, max_toasts=1, quiet_first=True)
    others = other_rank_cells(store, run.id, data)
    notes = bool(st.session_state.get(K_NOTES))
    request = LiveRequest(settings, zoom_state(), findings, others or None, (str(store.root), run.id), notes)
    live = process(run, data, request, time.time(), shared)
    show(live)
    if not live.empty:
        ranks_section(store, run, data, settings.x, settings.smoothing)


# A run never diagnosed in this server waits for its first findings (they are drawn on the charts) when it
# is short: its diagnosis takes well under a second. A longer one (about 0.6 s per million rows on two cores)
# is drawn at once and gets its findings at the next refresh, unless no refresh is coming (off or paused).
SHORT_RUN_ROWS = 200_000


def first_findings_wait(rows: int, refresh_s: float | None) -> float | None:
    """How long this refresh waits for a run's first findings: None = the default wait, 0 = none."""
    return None if refresh_s is None or rows <= SHORT_RUN_ROWS else 0.0


def apply_chart_events(frame: pd.DataFrame, x_kind: str, zoom_event: Any, legend_event: Any) -> bool:
    """Turn browser events into session state (before the step inputs are drawn); True when the zoom changed."""
    from monitor_cb.analysis.series import x_axis

    if legend_event is not None:
        state = zoom_state()
        if apply_legend_event(state, legend_event, [CHART_KEY_PREFIX + k for k in PANEL_KEYS]):
            st.session_state[HIDDEN] = state.hidden
    if zoom_event is None or len(frame) == 0:
        return False
    if st.session_state.get("log_x") and x_kind != "time" and not zoom_event.get("reset"):
        zoom_event = _from_log_axis(zoom_event)  # a log axis reports its range in log10 units
    try:
        xa = x_axis(frame, x_kind)
    except KeyError:
        return False
    state = zoom_state()
    if not apply_zoom_event(state, zoom_event, monotonic_x(xa.values), frame["step"].to_numpy(), xa.is_datetime):
        return False
    lo = None if state.lo is None else max(0, int(np.floor(state.lo)))
    hi = None if state.hi is None else max(0, int(np.ceil(state.hi)))
    st.session_state[ZOOM_LO], st.session_state[ZOOM_HI] = lo, hi
    st.session_state[ZOOM_EXACT] = _dragged(zoom_event, x_kind, lo, hi, xa.is_datetime)
    return True


def _from_log_axis(event: Any) -> Any:
    """A zoom event of a log x axis with its ends back in data units (left as it is when unreadable)."""
    try:
        x0, x1 = float(event.get("x0")), float(event.get("x1"))
    except (TypeError, ValueError):
        return event
    if not (np.isfinite(x0) and np.isfinite(x1)) or max(abs(x0), abs(x1)) > 300:
        return event
    return {**event, "x0": 10.0**x0, "x1": 10.0**x1}


def _dragged(event: Any, x_kind: str, lo: int | None, hi: int | None, is_datetime: bool) -> tuple[Any, ...] | None:
    """``(x kind, lo, hi, x0, x1)`` of a drag (ends in order, as the browser wrote them), None for a reset."""
    if event.get("reset"):
        return None
    a, b = event.get("x0"), event.get("x1")
    if parse_x_value(a, is_datetime) > parse_x_value(b, is_datetime):  # checked by apply_zoom_event
        a, b = b, a
    return (x_kind, lo, hi, a, b)


def show_drops(run: Any) -> None:
    """The records this run's writers accepted and never wrote (the metadata's count; plain text)."""
    note = drop_note(getattr(run, "drops", WriterDrops()))
    if note:
        st.warning(_shared.md(f"{note}."), icon=":material/warning:")


def show(data: LiveData) -> None:
    """Draw the KPI row, one line about the findings, the charts, then the findings one line each.

    The charts come before the findings' text so they start within the first screen; a NaN is said
    once (by its finding when the diagnosis has one, else by the banner).
    """
    show_kpis(data.kpis, data.run)
    if data.roles:  # another framework's names, or roles set by hand: say which metric plays which role
        st.caption(_shared.md("Roles: " + " · ".join(data.roles)), help=ROLES_HELP)
    _findings.headline(data.findings)
    note = bad_lines_note(getattr(data.run, "bad_lines", 0), getattr(data.run, "partial_lines", 0))
    if note:
        st.warning(f"In this run's files: {note}.", icon=":material/warning:")
    show_drops(data.run)
    if data.run.status in ("failed", "stopped", "crashed") and getattr(data.run, "reason", None):
        reason = str(data.run.reason)
        prefix = "" if reason.lower().startswith(data.run.status) else f"{data.run.status}: "
        st.error(f"Run {prefix}{_shared.md(reason)}")
    if data.banner and not any(f.kind == "nan" for f in data.findings):
        st.error(_shared.md(data.banner), icon=":material/error:")
    if data.empty:
        st.info(
            "This run has no records yet; its curves appear here as soon as it writes some.",
            icon=":material/hourglass_empty:",
        )
        return
    if not data.figures:
        st.info("No chart selected, or this run has none of the selected charts' metrics.")
        _findings.findings_list(data.findings, run_id=data.run.id)
        return
    for key, fig in data.figures.items():
        plotly_chart(fig, CHART_KEY_PREFIX + key, _shared.PLOTLY_CONFIG)
    _findings.findings_list(data.findings, run_id=data.run.id)


def chart_downloads(store: Any, run: Any, columns: list[str], settings: ChartSettings) -> None:
    """ "Download chart data": the rows behind one chart (this run's drawn rank, the zoomed step range),
    as CSV or Parquet, read and built only when a button is pressed.

    Drawn by the page, not by the refreshing fragment: each run of the code drawing it registers a new
    download and drops the old one, so a click that came as a refresh redrew it fetched a download that no
    longer existed (nothing happened). The rows are read at the click: they hold what was logged by then."""
    from monitor_cb.views.chart_data import chart_rows

    titles = {p.key: p.title for p in PANELS}
    custom = (settings.custom_left, settings.custom_right)
    casting = settings.casting(columns)
    charts = {k: panel_columns(k, columns, custom, casting) for k in settings.panels}
    charts = {k: cols for k, cols in charts.items() if cols}
    if not charts:
        return
    zoom = zoom_state()
    steps = (zoom.lo, zoom.hi)
    with st.popover("Download chart data", icon=":material/download:"):
        key = st.selectbox("Chart", list(charts), format_func=titles.get, key="dl_chart")
        key = key if key in charts else next(iter(charts))
        span = "the whole run" if steps == (None, None) else f"steps {steps[0] or 'first'}–{steps[1] or 'latest'}"
        names = ", ".join(shown_name(c) for c in charts[key])
        st.caption(f"{_shared.md(names)} · {span} · NaN for a logged NaN, empty (null) for not logged")
        run_id, ranks, wanted = run.id, run.ranks, charts[key]

        def rows() -> Any:
            data = read_run(store, run_id, ranks, READ_MAX_AGE_S)
            if data is None:
                raise FileNotFoundError(f"the run {run_id} is no longer under the log root")
            return chart_rows(data.frame, data.masks, wanted, steps)

        stem = f"{safe_file_stem(run_id)}-{key}"
        d1, d2 = st.columns(2)
        d1.download_button(
            "CSV", data=lambda: rows().csv(), file_name=f"{stem}.csv", mime="text/csv", on_click="ignore", key="dl_csv"
        )
        d2.download_button(
            "Parquet",
            data=lambda: rows().parquet(),
            file_name=f"{stem}.parquet",
            mime="application/vnd.apache.parquet",
            on_click="ignore",
            key="dl_parquet",
        )


def safe_file_stem(name: str) -> str:
    """A run id as a download file name: letters, digits, ``-_.`` only, at most 80 characters."""
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80].strip("._")
    return stem or "run"


def show_kpis(k: Kpis, run: Any) -> None:
    """The run's value tiles (a grid that wraps rather than cut a value off)."""
    step_label = f"Step of {k.total_steps:,}" if k.total_steps else "Step"
    status = {"delta": run.status, "delta_color": "off", "delta_arrow": "off"}
    if k.stale:
        since = {"delta": "stale", "delta_color": "red", "delta_arrow": "off"}
    else:
        since = {
            "help": "Time since the run last logged: its file's last change while it runs, "
            "its last record's time once it has ended"
        }
    _shared.tiles(
        [
            (step_label, format_count(k.step), _step_delta(k)),
            ("Epoch", format_count(k.epoch), {}),
            ("Loss", format_value(k.loss), _played(k, "loss", _red_if_nonfinite(k.loss))),
            ("LR", format_value(k.lr, 3), _played(k, "lr", {})),
            ("Throughput", format_value(k.throughput, 4), _played(k, "throughput", {"help": "samples/s"})),
            ("Grad norm", format_value(k.grad_norm), _played(k, "grad_norm", _red_if_nonfinite(k.grad_norm))),
            ("Elapsed", format_duration(k.elapsed_s), status),
            ("Since update", format_age(k.age_s), since),
        ]
    )


ROLES_HELP = (
    "Which metric each chart and tile shows, told from the metric names (each framework's own), or set by hand: "
    "per link with `?role.loss=<metric>` (several: repeat it), per log root on the Settings page."
)


def _played(k: Kpis, role: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A tile's kwargs with a help naming the metric it shows, when that is not our own key."""
    name = k.metric_of(role)
    if name is None:
        return kwargs
    return {**kwargs, "help": f"{_shared.md(shown_name(name))}" + (f" ({kwargs['help']})" if "help" in kwargs else "")}


def _step_delta(k: Kpis) -> dict[str, Any]:
    if k.eta_s is None:
        return {}
    return {"delta": f"ETA {format_duration(k.eta_s)}", "delta_color": "off", "delta_arrow": "off"}


def _red_if_nonfinite(value: float | None) -> dict[str, Any]:
    if value is not None and not np.isfinite(value):
        return {"delta": "non-finite", "delta_color": "red", "delta_arrow": "off"}
    return {}
