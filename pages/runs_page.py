"""The runs page: every run under the log root in one table, filtered, sorted, grouped; pick runs to compare.

Flow: ``controls()`` -> :func:`monitor_cb.views.runs_view.runs_view` (statistics filled within a
time budget from one ``StatsCache`` per store; the page renders again while some are missing) ->
the table (rows selectable; "Open in Compare" goes to ``/compare?runs=a&runs=b``), the groups of a
config key, and the Sweeps tab (parallel coordinates and a scatter over the filtered runs).

All run text (names, reasons, config values, the filter's error) is shown as plain text: table
cells are never Markdown, and everything else goes through ``_shared.md``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

import streamlit as st

from monitor_cb.charts.sweeps import MAX_RUNS, parallel_coordinates_figure, sweep_scatter_figure
from monitor_cb.compare.colors import run_colors
from monitor_cb.compare.runhealth import HealthCache
from monitor_cb.compare.runs_table import STATS, extra_group_keys, group_table
from monitor_cb.compare.runstats import StatsCache, store_loader
from monitor_cb.compare.summary_table import lower_is_better
from monitor_cb.ingest.dropnote import drop_note
from monitor_cb.ingest.viewer_work import Background
from monitor_cb.views.escape import escape_code
from monitor_cb.views.runs_view import (
    MAX_COMPARE,
    RunsQuery,
    RunsView,
    column_widths,
    compare_query,
    default_sweep_keys,
    page_table,
    picked_ids,
    runs_view,
    sweep_columns,
    table_height,
)
from monitor_cb.views.summary_cells import summary_display
from pages import _shared
from pages._chart import plotly_chart
from pages._demo import show_empty_root
from pages._findings import current_settings

K_TEXT, K_EXPR, K_SORT, K_DESC, K_GROUP, K_ALL, K_STATS = (
    "runs_filter",
    "runs_expr",
    "runs_sort",
    "runs_desc",
    "runs_group",
    "runs_all_config",
    "runs_stats",
)
K_TABLE = "runs_table"
NO_SORT, NO_GROUP = "(newest first)", "(none)"
COMPARE_COLORS = "cmp_colors"  # the compare page's sticky colours: a run compared before keeps its colour


@st.cache_resource(show_spinner=False, max_entries=16)
def _stats_cache(root: str, _store: Any) -> StatsCache:
    """One StatsCache per log root (and store) and server process."""
    return StatsCache(store_loader(_store))


@st.cache_resource(show_spinner=False, max_entries=16)
def _health_cache(root: str, _store: Any) -> HealthCache:
    """One HealthCache per log root (and store) and server process: runs are diagnosed in its own worker thread,
    once per change of a run, never on the page's request path."""
    return HealthCache(store_loader(_store), background=Background())


def runs_page() -> None:
    """The page function given to ``st.Page``."""
    root = _shared.log_root()
    store = _shared.get_store(str(root))
    runs = _shared.list_runs(store)
    st.sidebar.caption(f"Log root: `{escape_code(str(root))}`")
    if not runs:
        show_empty_root(root, store)
        st.stop()
    st.title("Runs")
    query = controls()
    cache = _stats_cache(str(root), store)
    computed = cache.computed
    health = _health_cache(str(root), store)
    health.settings = current_settings(root)
    now = time.time()
    result = runs_view(runs, cache, now, query, health=health)
    if result.error:
        st.error(f"Filter expression: {_shared.md(result.error)}", icon=":material/error:")
    sort_controls(result)
    note = f"{len(result.shown.frame)} of {len(result.table.frame)} runs"
    if result.left:
        note += f" · statistics of {result.left:,} runs still being read"
    st.caption(note)
    show_drops(runs, result)
    show_time_notes(runs, cache, result)
    table_tab, sweeps_tab = st.tabs(["Table", "Sweeps"])
    with table_tab:
        picked = show_table(result, now)
        open_in_compare(picked, st.session_state.get(K_GROUP))
        show_details(result, picked)
        show_groups(result)
    with sweeps_tab:
        show_sweeps(result)
    if result.left and cache.computed > computed:
        st.rerun()  # the rest of the statistics, within the next render's budget
    health.submit_pending()  # the worker starts once the page is drawn
    pending = health.pending(runs)
    if pending:
        st.caption(f"Health of {pending:,} runs being diagnosed…")
        st.fragment(run_every=HEALTH_POLL_S)(_rerun_when_diagnosed)(health, health.computed)


HEALTH_POLL_S = 2.0


def _rerun_when_diagnosed(health: HealthCache, seen: int) -> None:
    """While runs wait for their health: rerun the page once the worker finished more of them."""
    if health.computed > seen:
        st.rerun(scope="app")


# ----------------------------------------------------------------------------- controls
# The view in the URL: ?q=adam&expr=lr<1e-3&sort=loss.best&desc=1&group=lr&stats=last&stats=min&all=1
Q_TEXT, Q_EXPR, Q_SORT, Q_DESC, Q_GROUP, Q_STATS, Q_ALL = "q", "expr", "sort", "desc", "group", "stats", "all"
URL_READ, K_SORT_WANTED, K_GROUP_WANTED = "runs_url_read", "runs_sort_wanted", "runs_group_wanted"
MAX_QUERY_TEXT = 500  # a filter longer than this in a link is ignored


def view_from_query() -> None:
    """First render of this session: filters, statistics, sort and grouping from the URL (checked). Sort and
    group wait until the table has that column (statistics fill in over a few renders)."""
    if not _shared.query_once(URL_READ):
        return
    q, state = st.query_params, st.session_state
    for name, key in ((Q_TEXT, K_TEXT), (Q_EXPR, K_EXPR)):
        value = q.get(name)
        if value is not None and len(value) <= MAX_QUERY_TEXT:
            state[key] = value
    stats = [v for v in q.get_all(Q_STATS) if v in STATS]
    if stats:
        state[K_STATS] = list(dict.fromkeys(stats))
    if q.get(Q_DESC) in ("0", "1"):
        state[K_DESC] = q.get(Q_DESC) == "1"
    if q.get(Q_ALL) in ("0", "1"):
        state[K_ALL] = q.get(Q_ALL) == "1"
    for name, key in ((Q_SORT, K_SORT_WANTED), (Q_GROUP, K_GROUP_WANTED)):
        value = q.get(name)
        if value is not None and len(value) <= MAX_QUERY_TEXT:
            state[key] = value


def view_to_query() -> None:
    """The URL follows the controls; defaults are left out."""
    state = st.session_state
    _shared.sync_query(Q_TEXT, state.get(K_TEXT) or None)
    _shared.sync_query(Q_EXPR, state.get(K_EXPR) or None)
    stats = list(state.get(K_STATS) or [])
    _shared.sync_query(Q_STATS, None if stats == ["last", "best"] else (stats or None))
    _shared.sync_query(Q_ALL, "1" if state.get(K_ALL) else None)
    sort, group = state.get(K_SORT), state.get(K_GROUP)
    _shared.sync_query(Q_SORT, None if sort in (None, NO_SORT) else str(sort))
    _shared.sync_query(Q_DESC, "1" if state.get(K_DESC) else None)
    _shared.sync_query(Q_GROUP, None if group in (None, NO_GROUP) else str(group))


def controls() -> RunsQuery:
    """Text filter, expression filter, statistics and the all-keys switch (sort and group come after
    the table is known: their choices are its columns)."""
    view_from_query()
    if K_STATS not in st.session_state:
        st.session_state[K_STATS] = ["last", "best"]
    c1, c2 = st.columns([2, 3])
    text = c1.text_input("Filter runs", key=K_TEXT, placeholder="name, status, config value… or run0*")
    expression = c2.text_input(
        "Filter expression",
        key=K_EXPR,
        placeholder='lr < 1e-3 and status == "finished"',
        help="Columns and config keys by name (`loss.best`, `optim.lr`; others in backticks), "
        "comparisons, `in`, `and`/`or`/`not`. A run without the value is left out.",
    )
    c3, c4 = st.columns([3, 1], vertical_alignment="bottom")
    stats = c3.multiselect("Statistics per metric", list(STATS), key=K_STATS)
    all_config = c4.toggle("All config keys", key=K_ALL, help="Every config key, not only those that differ.")
    sort = st.session_state.get(K_SORT)
    return RunsQuery(
        text=text or "",
        expression=expression or "",
        sort=None if sort in (None, NO_SORT) else str(sort),
        descending=bool(st.session_state.get(K_DESC)),
        all_config=bool(all_config),
        stats=tuple(stats) or ("last",),
    )


def sort_controls(result: RunsView) -> None:
    """Sort column and direction, and the group-by key; a choice no longer in the table is reset."""
    columns = [c for c in result.table.frame.columns if c != "id"]
    keys = ["status", *extra_group_keys(result.table), *result.table.config_columns]
    state = st.session_state
    if state.get(K_SORT_WANTED) in columns:  # from a link, once the table has that column
        state[K_SORT] = state.pop(K_SORT_WANTED)
        st.rerun()  # the table was built unsorted: build it again, sorted
    if state.get(K_GROUP_WANTED) in keys:
        state[K_GROUP] = state.pop(K_GROUP_WANTED)
    if state.get(K_SORT) not in (NO_SORT, *columns):
        state[K_SORT] = NO_SORT
    if state.get(K_GROUP) not in (NO_GROUP, *keys):
        state[K_GROUP] = NO_GROUP
    c1, c2, c3 = st.columns([3, 1.6, 3], vertical_alignment="bottom")
    c1.selectbox("Sort by", [NO_SORT, *columns], key=K_SORT)
    c2.toggle("Descending", key=K_DESC)
    c3.selectbox("Group by", [NO_GROUP, *keys], key=K_GROUP, help="Mean, min and max of each metric per value.")
    view_to_query()


# ----------------------------------------------------------------------------- table
def show_drops(runs: Sequence[Any], result: RunsView) -> None:
    """One warning naming the shown runs whose writers dropped records (names escaped: plain text)."""
    shown = set(result.shown.ids)
    notes = [(info.name or info.id, drop_note(info.drops)) for info in runs if info.id in shown and info.drops]
    if not notes:
        return
    lines = [f"{_shared.md(name)}: {_shared.md(note)}" for name, note in notes[:10]]
    if len(notes) > 10:
        lines.append(f"and {len(notes) - 10} more runs (the dropped column)")
    st.warning("  \n".join(lines), icon=":material/warning:")


def show_time_notes(runs: Sequence[Any], cache: Any, result: RunsView) -> None:
    """One note naming the shown runs whose record times could not be dates (names escaped: plain text)."""
    from monitor_cb.views.runs_view import time_notes

    notes = time_notes(runs, cache, result.shown.ids)
    if notes:
        st.caption("  \n".join(f"{_shared.md(name)}: {_shared.md(note)}" for name, note in notes[:10]))


def show_table(result: RunsView, now: float) -> list[str]:
    """The runs, one selectable row each; returns the ids of the selected rows."""
    frame = page_table(result, now)
    frame.insert(0, "open", [f"./?{urlencode({_shared.QUERY_RUN: rid})}" for rid in result.shown.ids])
    widths = column_widths(frame)
    config: dict[str, Any] = {
        c: st.column_config.TextColumn(c, width=widths[c]) for c in frame.columns if c not in ("open",)
    }
    if "duration_s" in config:  # shown as h:mm:ss, so not titled in seconds; filters and sort still say duration_s
        config["duration_s"] = st.column_config.TextColumn(
            "duration", width=widths["duration_s"], help="h:mm:ss (`duration_s`, in seconds, in filters and sort)"
        )
    config["open"] = st.column_config.LinkColumn("open", display_text="live view", width=80)
    event = st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        column_config=config,
        on_select="rerun",
        selection_mode="multi-row",
        key=K_TABLE,
        height=table_height(len(frame)),
    )
    rows = list(getattr(getattr(event, "selection", None), "rows", []) or [])
    return picked_ids(result, rows)


def open_in_compare(picked: Sequence[str], group: Any) -> None:
    """A link that opens the selected runs on the compare page (``/compare?runs=a&runs=b``, grouped by
    the chosen key), so the browser's URL is the comparison and can be shared."""
    from pages.compare_page import compare_page

    group_by = None if group in (None, NO_GROUP, "status") else str(group)
    label = f"Open {len(picked)} selected in Compare" if picked else "Select rows to compare"
    row = st.container(horizontal=True, vertical_alignment="center", key="runs_open_compare")
    page = st.Page(compare_page, title="Compare", url_path="compare")
    row.page_link(
        page,
        label=label,
        icon=":material/stacked_line_chart:",
        disabled=not picked,
        query_params=compare_query(picked, group_by) if picked else None,
    )
    if len(picked) > MAX_COMPARE:
        row.caption(f"The first {MAX_COMPARE} selected runs are compared.")


def show_details(result: RunsView, picked: Sequence[str]) -> None:
    """The selected runs' names and reasons in full (a table cell may be narrower than a long reason)."""
    if not picked:
        return
    rows = {str(r["id"]): r for r in result.shown.rows}
    lines = []
    for rid in picked[:50]:
        row = rows.get(rid, {})
        reason = str(row.get("reason") or "")
        line = f"- **{_shared.md(row.get('name', rid))}** · {_shared.md(row.get('status', ''))}"
        lines.append(line + (f" · {_shared.md(reason)}" if reason else ""))
    st.markdown("\n".join(lines))


def show_groups(result: RunsView) -> None:
    key = st.session_state.get(K_GROUP)
    if key in (None, NO_GROUP) or not len(result.shown.frame):
        return
    st.subheader(f"Groups by {_shared.md(key)}", anchor=False)  # a config key: text from a run's file
    table = summary_display(group_table(result.shown, str(key)))
    st.dataframe(table, hide_index=True, width="stretch", key="runs_groups")


# ----------------------------------------------------------------------------- sweeps
def show_sweeps(result: RunsView) -> None:
    """Parallel coordinates (config keys -> a metric) and one key against the metric, over the filtered runs."""
    keys, metrics = sweep_columns(result.shown)
    if not len(result.shown.frame) or not keys or not metrics:
        st.info("Sweep views need runs whose configs differ and a logged metric (loss or eval_*).")
        return
    if len(result.shown.frame) > MAX_RUNS:
        st.caption(f"The first {MAX_RUNS} of {len(result.shown.frame)} runs (filter or sort to choose).")
    c1, c2 = st.columns([3, 2])
    dims = c1.multiselect("Config keys (axes)", keys, default=default_sweep_keys(result.shown), key="runs_sweep_keys")
    metric = c2.selectbox("Metric", metrics, key="runs_sweep_metric")
    if not dims or metric is None:
        st.info("Choose at least one config key.")
        return
    name = str(metric).rsplit(".", 1)[0]
    lower = lower_is_better(name)
    fig = parallel_coordinates_figure(result.shown.frame, dims, metric, lower_is_better=lower)
    plotly_chart(fig, "runs_parcoords", _shared.PLOTLY_CONFIG)
    x = st.selectbox("Scatter: config key", dims, key="runs_sweep_x")
    ids = result.shown.ids[:MAX_RUNS]
    colors = run_colors(ids, previous=st.session_state.get(COMPARE_COLORS))
    scatter = sweep_scatter_figure(result.shown.frame, str(x), str(metric), colors=colors)
    plotly_chart(scatter, "runs_scatter", _shared.PLOTLY_CONFIG)
