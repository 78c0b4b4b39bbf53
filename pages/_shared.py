"""Streamlit pieces every page shares: the log root, the cached RunStore, the run picker, refresh.

Only this folder and ``dashboard.py`` import Streamlit; the decisions live in ``monitor_cb.views``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from monitor_cb.views.escape import escape_code, escape_markdown
from monitor_cb.views.logdir import apply_endpoint_arg, redact, resolve_logdir
from monitor_cb.views.runlist import DEFAULT_REFRESH, REFRESH_CHOICES, filter_runs, pick_run, resolve_wanted, run_label

QUERY_RUN = "run"
RUN_KEY = "run_select"
# Every chart's Plotly toolbar: no logo link, no tips popping up over a live chart.
PLOTLY_CONFIG = {"displaylogo": False, "showTips": False}
PENDING_RUN = "run_pending"  # a run id to select as soon as it appears (the demo just started)


@dataclass(frozen=True)
class Selection:
    """What the sidebar decided: the root, the runs found, the chosen one and how often to refresh."""

    root: Path
    runs: tuple[Any, ...]  # RunInfo, newest first
    run: Any | None  # the selected RunInfo
    refresh_s: float | None  # None = no automatic refresh (off or paused)


def log_root() -> Path:
    """``--logdir`` after ``--`` on the ``streamlit run`` line, else ``$MONITOR_LOGDIR``, else ``./logs``.

    A URL (``s3://bucket/prefix``) comes back as a string without credentials; ``--endpoint-url URL``
    on the same line sets the S3 endpoint (MinIO, Ceph, Huawei OBS).
    """
    apply_endpoint_arg(sys.argv[1:], os.environ)
    return resolve_logdir(sys.argv[1:], os.environ)


def settings_access() -> Any:
    """Who may change the Settings page (:mod:`monitor_cb.views.access`): ``--read-only-settings``
    after ``--`` on the ``streamlit run`` line, ``$MONITOR_READ_ONLY_SETTINGS``, ``$MONITOR_SETTINGS_ADMIN_TOKEN``."""
    from monitor_cb.views.access import settings_access as _access

    return _access(sys.argv[1:], os.environ)


@st.cache_resource(show_spinner=False)
def _store(root: str) -> Any:
    from monitor_cb.ingest import RunStore

    with _PREWARM_LOCK:
        store = _PREWARMED.pop(root, None)
    return store if store is not None else RunStore(root)


# The store that :func:`prewarm` made at server start, handed to the first session (once, then it is cached).
_PREWARMED: dict[str, Any] = {}
_PREWARM_LOCK = threading.Lock()


def prewarm(root: str) -> None:
    """At server start (a thread of ``dashboard.py``'s lifespan): the root's first listing and the first read of
    the run a fresh page opens (the newest), into the store the pages will use.

    This overlaps with the browser loading Streamlit's bundles and opening its websocket (about two seconds
    on this machine), instead of starting when the first script run does: a 1M-step run's first listing and
    read is most of the first chart's wait. A run too long to read at once starts its background read here
    (the page shows its progress). Errors are left to the page, which says them where the user looks.
    """
    from monitor_cb.ingest import RunStore
    from monitor_cb.views.live import drawn_rank

    store = RunStore(root)
    with _PREWARM_LOCK:
        _PREWARMED.setdefault(root, store)
    runs = store.list_runs()
    run_id = pick_run([r.id for r in runs], None)
    if run_id is None:
        return
    run = next(r for r in runs if r.id == run_id)
    if store.load_progress(run_id) is None:  # else its background read started: nothing to wait for here
        store.read(run_id, rank=drawn_rank(run.ranks))


@st.cache_resource(show_spinner=False)
def _live_shared(root: str) -> Any:
    from monitor_cb.views.live_refresh import LiveShared

    return LiveShared()


def live_shared(root: str) -> Any:
    """What every viewer of the root's runs shares (one per log root and server process): the series and
    figures per data version and settings, and the background worker that diagnoses runs."""
    return _live_shared(root)


COMPARE_VIEWS = 8  # compare views kept: a 20-run view's figures are a few MB, its x values are not kept


@st.cache_resource(show_spinner=False)
def compare_views(root: str) -> Any:
    """The compare page's views for every viewer (one per log root and server process), by the runs' data
    versions and the page's settings: reopening a comparison does not build it again."""
    from monitor_cb.ingest.viewer_work import SharedResults

    return SharedResults(COMPARE_VIEWS)


def get_store(root: str) -> Any:
    """One RunStore per log root and server process; it polls files incrementally and is thread-safe."""
    try:
        return _store(root)
    except (ValueError, OSError) as exc:  # an object-store URL whose package is missing, a malformed URL
        st.error(f"Cannot open the log root: {md(redact(exc))}")
        st.stop()
    return None  # pragma: no cover - st.stop() raises


FIRST_LISTING = "Reading the log root for the first time (long runs take a few seconds; later, an index lists them)…"


def list_runs(store: Any) -> list[Any]:
    """All runs under the root, newest first; a broken root becomes an error message, not a traceback."""
    # A server's first listing reads files no index describes yet (seconds for a root of long runs): say so.
    # (Streamlit shows a spinner only after half a second, so a quick listing shows nothing.)
    first = not getattr(store, "has_listed", True)
    try:
        with st.spinner(FIRST_LISTING) if first else contextlib.nullcontext():
            runs = list(store.list_runs())
    except OSError as exc:
        st.error(f"Cannot read the log root: {md(redact(exc))}")
        st.stop()
    remote = getattr(store, "remote", None)
    if remote is not None and remote.last_error and not runs:  # never read: an error, not "no runs yet"
        st.error(
            f"Cannot read the log root: {md(redact(remote.last_error))}. Reload the page to try again.",
            icon=":material/cloud_off:",
        )
        st.stop()
    if remote is not None and remote.last_error:  # showing what was read before; the next refresh retries
        st.sidebar.warning(f"Object store unreachable: {md(redact(remote.last_error))}", icon=":material/cloud_off:")
    show_skipped(store)
    return runs


def show_skipped(store: Any) -> None:
    """Sidebar: the files of the root not read because they are unsafe ("skipped PATH: reason"), as plain text
    (paths are user text: never Markdown, never a link); the other runs are shown as usual."""
    notes = store.skipped_files() if hasattr(store, "skipped_files") else []
    if not notes:
        return
    with st.sidebar.expander(f"{len(notes)} file(s) of the log root skipped", icon=":material/block:"):
        st.text("\n".join(notes[:50]) + (f"\n… and {len(notes) - 50} more" if len(notes) > 50 else ""))


def saved_roles() -> dict[str, tuple[str, ...]]:
    """The metric roles set by hand for every run of this log root (Settings page), ``{role: names}``."""
    from monitor_cb.diagnosis.settings import load_settings_checked

    return load_settings_checked(log_root())[0].chosen_roles()


def md(text: Any) -> str:
    """User text (run names, paths, metadata) made inert for Streamlit Markdown: no formatting, no links."""
    return escape_markdown(str(text))


def run_picker(runs: list[Any]) -> Any | None:
    """Sidebar: filter box and run select box; the choice is kept in the URL (``?run=<id>``)."""
    now = time.time()
    text = st.sidebar.text_input("Filter runs", key="run_filter", placeholder="name, status…")
    shown = filter_runs(runs, text)
    if not shown:
        st.sidebar.info("No run matches the filter.")
        return None
    ids = [r.id for r in shown]
    by_id = {r.id: r for r in shown}
    wanted = st.query_params.get(QUERY_RUN)
    resolved = resolve_wanted(runs, wanted)
    if resolved is not None and resolved != wanted:  # a folder or a run's name: the run it means
        if st.session_state.get(RUN_KEY) not in by_id:
            st.session_state[PENDING_RUN] = resolved
        wanted = resolved
    if wanted and wanted not in {r.id for r in runs}:
        st.warning(f"The run `{escape_code(wanted)}` is no longer under the log root (deleted or moved).")
    # The select box has a stable key: its labels carry the run's status, and a keyless widget
    # whose labels change would forget the user's choice.
    pending = st.session_state.get(PENDING_RUN)
    if pending in by_id:
        st.session_state[RUN_KEY] = st.session_state.pop(PENDING_RUN)
    elif st.session_state.get(RUN_KEY) not in by_id:
        st.session_state[RUN_KEY] = pick_run(ids, wanted)
    else:
        # Set, not just kept: the browser shows the label it was last sent for the chosen value, so
        # after a refresh that changed the run's label (it finished) only a value set here redraws it.
        st.session_state[RUN_KEY] = st.session_state[RUN_KEY]
    choice = st.sidebar.selectbox(
        f"Run ({len(shown)} of {len(runs)})",
        ids,
        key=RUN_KEY,
        format_func=lambda rid: run_label(by_id[rid], now),
    )
    if st.query_params.get(QUERY_RUN) != choice:
        st.query_params[QUERY_RUN] = choice
    return by_id[choice]


def refresh_control() -> float | None:
    """Sidebar: refresh interval (off / 1 / 2 / 5 / 10 s) and a pause switch; seconds or None."""
    labels = list(REFRESH_CHOICES)
    choice = st.sidebar.radio("Refresh", labels, index=labels.index(DEFAULT_REFRESH), horizontal=True, key="refresh")
    paused = st.sidebar.toggle(
        "Pause", key="paused", help="Freeze the charts (zoom and inspect) without losing the run."
    )
    if paused:
        return None
    return REFRESH_CHOICES.get(choice or "off")


def sidebar(root: Path, runs: list[Any]) -> Selection:
    """The whole sidebar; returns the selection the page works on."""
    st.sidebar.caption(f"Log root: `{escape_code(str(root))}`")
    run = run_picker(runs) if runs else None
    refresh = refresh_control()
    return Selection(root=root, runs=tuple(runs), run=run, refresh_s=refresh)


def sync_query(name: str, value: str | list[str] | None) -> None:
    """Keep ``?name=`` equal to ``value`` (None or empty: no parameter), writing only on a change, so a
    link copied from the address bar opens the same view."""
    current = st.query_params.get_all(name)
    wanted = [] if value in (None, "", []) else (value if isinstance(value, list) else [value])
    if current == wanted:
        return
    if wanted:
        st.query_params[name] = wanted if isinstance(value, list) else wanted[0]
    else:
        del st.query_params[name]


def query_once(flag: str) -> bool:
    """True the first time this session renders the page that owns ``flag``: the moment the URL's
    view parameters are read into the widgets (afterwards the widgets are the truth and the URL follows)."""
    if st.session_state.get(flag):
        return False
    st.session_state[flag] = True
    return True


def run_summary(run: Any, frame: Any = None) -> str:
    """One Markdown line about the selected run (its text escaped); the live page's fragment draws it.

    ``frame``: the rows the tiles were drawn from (read after the listing): its last step and row count
    win when newer, so the sidebar never lags the tiles.
    """
    first, last, records = run.first_step, run.last_step, run.n_records
    if frame is not None and len(frame) and "step" in frame.columns:
        steps_read = frame["step"]
        last = int(steps_read.max()) if last is None else max(int(last), int(steps_read.max()))
        first = int(steps_read.min()) if first is None else min(int(first), int(steps_read.min()))
        records = max(int(records or 0), len(frame))
    steps = f"steps {_count(first)}–{_count(last)}" if last is not None else "no steps yet"
    ranks = f" · {len(run.ranks)} ranks" if len(getattr(run, "ranks", ()) or ()) > 1 else ""
    return f"{md(run.name)} · {md(run.status)} · {steps} · {records:,} records{ranks}"


def _count(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


# ----------------------------------------------------------------------------- value tiles
TILE_MIN_PX = 170  # 4 tiles a row at 1280 px, 5 at 1440 px
TILES_KEY = "kpi_tiles"
TILES_CSS = (
    "<style>.st-key-kpi_tiles{display:grid!important;grid-template-columns:repeat(4,minmax(0,1fr));}"
    "@media (min-width:1500px){.st-key-kpi_tiles{grid-template-columns:repeat(8,minmax(0,1fr));}}"
    '.st-key-kpi_tiles [data-testid="stMetricValue"]{font-size:1.6rem;}</style>'
)
VALUE_PX_PER_CHAR = 19  # the metric value font (36 px): digits are about 16 px wide
LABEL_PX_PER_CHAR = 8  # labels and deltas (14 px)


def tiles(items: Sequence[tuple[str, str, dict[str, Any]]]) -> None:
    """A grid of ``st.metric`` tiles, ``(label, value, metric kwargs)`` each, that never cuts a value off.

    Streamlit ends a value too long for its tile with "…" (0.00325 read "3.25…", step 1,000,000
    "1,00…"). Here every tile is as wide as the longest value, label or delta of the row needs
    (and at least ``TILE_MIN_PX``), and the row wraps onto another line when out of room.
    """
    width = max(TILE_MIN_PX, *(tile_width(label, value, kw.get("delta")) for label, value, kw in items))
    row = st.container(horizontal=True, gap="medium", key=TILES_KEY)
    if len(items) == 8 and width <= TILE_MIN_PX:
        # The live page's eight tiles: even rows (4 + 4, or 8 from 1600 px), never one tile alone on a
        # second row ("Since update" was, at 1920 px). Our own constant CSS, no user text.
        st.html(TILES_CSS)
        width = "stretch"
    for label, value, kwargs in items:
        row.metric(label, value, width=width, **kwargs)


def tile_width(label: str, value: str, delta: Any = None) -> int:
    """Pixels a tile needs for its value (36 px font), label and delta (14 px), with a margin."""
    small = max(len(label) + 3, len(str(delta or "")) + 4)  # + the help icon / the delta's padding
    return int(max(VALUE_PX_PER_CHAR * len(value), LABEL_PX_PER_CHAR * small)) + 8


# ----------------------------------------------------------------------------- outliers
Q_OUTLIERS = "outliers"
OUTLIERS_HELP = (
    "Off: the y axis fits the bulk of the points, and a point far outside it (a first loss of 1e12) is a "
    "triangle at the edge, its value in the hover. On: the axis spans every point."
)


def outliers_toggle(where: Any, key: str) -> bool:
    """A "Show outliers" switch (off by default, ``?outliers=1`` in the URL); True when the y axes should fit
    the bulk of the points (:mod:`monitor_cb.charts.outliers`)."""
    if key not in st.session_state:  # first render on this page: the URL decides
        st.session_state[key] = st.query_params.get(Q_OUTLIERS) == "1"
    shown = bool(where.toggle("Show outliers", key=key, help=OUTLIERS_HELP))
    sync_query(Q_OUTLIERS, "1" if shown else None)
    return not shown
