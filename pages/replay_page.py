"""The replay page: watch a finished (or crashed) run, or an uploaded JSONL file, unfold again.

Flow: the sidebar picks the source (a run under the log root, ``?run=<id>`` as on the live page, or
an upload) -> the run is read (an upload is checked and parsed in memory, never written anywhere) ->
the step slider and Play grow the charts up to a step (a fragment with ``run_every`` advances the
cursor while playing) -> "Jump to" opens ±50 logged steps around a notable step at full resolution.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from monitor_cb.compare.browser_upload import UploadError, check_size, max_upload_bytes, parse_upload
from monitor_cb.ingest.badnote import bad_lines_note
from monitor_cb.views import replay
from monitor_cb.views.escape import escape_code
from monitor_cb.views.kpis import format_count, format_value
from monitor_cb.views.runlist import pick_run, run_label
from pages import _shared
from pages._chart import plotly_chart

QUERY_RUN = "run"
K_SOURCE, K_RUN, K_UPLOAD, K_PARSED = "rp_source", "rp_run", "rp_upload", "rp_parsed"
K_CURSOR, K_PLAYING, K_SPEED, K_JUMP, K_SUBJECT, K_FINDINGS = (
    "rp_cursor",
    "rp_playing",
    "rp_speed",
    "rp_jump",
    "rp_subject",
    "rp_findings",
)
K_POSITION = "rp_position"  # where playback is: its own, not the slider's (see _replay_body)
SOURCES = {"run": "A run under the log root", "upload": "Upload a JSONL file"}
REPLAYABLE = ("finished", "failed", "stopped", "crashed", "ended")  # ended: a run that recorded no status
SPEEDS = {"slow (1 s)": 1.0, "normal (0.5 s)": 0.5, "fast (0.25 s)": 0.25}
WHOLE_RUN = -1  # the "jump to" choice that replays the whole run
K_FIT_BULK = "rp_fit_bulk"  # y axes fit the bulk of the points (the sidebar's "Show outliers" off)


@dataclass(frozen=True)
class Subject:
    """The run being replayed, from the store or an upload."""

    key: str  # changes when the user picks another run or file
    title: str
    frame: pd.DataFrame
    logged: dict[str, np.ndarray] = field(default_factory=dict)
    findings: tuple[Any, ...] = ()
    status: str | None = None
    reason: str | None = None
    bad_lines: int = 0
    partial_lines: int = 0


def replay_page() -> None:
    """The page function given to ``st.Page``."""
    root = _shared.log_root()
    store = _shared.get_store(str(root))
    runs = _shared.list_runs(store)
    st.sidebar.caption(f"Log root: `{escape_code(str(root))}`")
    st.title("Replay")
    source = st.sidebar.radio("Replay", list(SOURCES), format_func=SOURCES.get, key=K_SOURCE)
    subject = upload_subject() if source == "upload" else run_subject(store, runs, root)
    st.session_state[K_FIT_BULK] = _shared.outliers_toggle(st.sidebar, "rp_outliers")
    steps = replay.unique_steps(subject.frame)
    if steps.size == 0:
        st.info("This run has no training steps to replay.")
        st.stop()
    _reset_on_new_subject(subject, steps)
    show_header(subject)
    notable = replay.notable_steps(subject.frame, subject.logged, subject.findings)
    jump = jump_control(notable)
    if jump is not None:
        show_window(subject, jump)
        return
    play_controls()
    playing = bool(st.session_state.get(K_PLAYING))
    interval = SPEEDS.get(st.session_state.get(K_SPEED) or "", 0.5) if playing else None
    st.fragment(run_every=interval)(_replay_body)(subject, steps)


# ----------------------------------------------------------------------------- sources
def run_subject(store: Any, runs: list[Any], root: Any) -> Subject:
    """Sidebar: a finished, failed, stopped or crashed run (``?run=`` as on the live page)."""
    from monitor_cb.views.compare_session import load_run

    done = [r for r in runs if r.status in REPLAYABLE]
    if not done:
        st.info("No ended run (finished, failed, stopped, crashed) under the log root. Upload a JSONL file instead.")
        st.stop()
    by_id = {r.id: r for r in done}
    now = time.time()
    if st.session_state.get(K_RUN) not in by_id:
        wanted = st.query_params.get(QUERY_RUN)
        st.session_state[K_RUN] = pick_run(list(by_id), wanted)
    choice = st.sidebar.selectbox(
        f"Run ({len(done)} replayable)", list(by_id), key=K_RUN, format_func=lambda rid: run_label(by_id[rid], now)
    )
    if st.query_params.get(QUERY_RUN) != choice:
        st.query_params[QUERY_RUN] = choice
    info = by_id[choice]
    data = load_run(store, info)
    if data is None:
        st.error(f"The run `{escape_code(choice)}` disappeared from the log root (deleted or moved).")
        st.stop()
    findings = _findings((f"run:{info.id}", data.version), data.frame, data.logged, root, info.status, info.last_write)
    return Subject(
        key=f"run:{info.id}",
        title=str(info.name),
        frame=data.frame,
        logged=dict(data.logged),
        findings=findings,
        status=info.status,
        reason=info.reason,
        bad_lines=int(info.bad_lines or 0),
        partial_lines=int(getattr(info, "partial_lines", 0) or 0),
    )


def upload_limit_bytes() -> int:
    """The upload limit the uploader states and enforces: ``$MONITOR_UPLOAD_MAX_MB`` (default 400),
    never above the server's ``server.maxUploadSize``, which refuses a larger request before the
    page sees it (the browser then showed only "AxiosError: Request failed with status code 413")."""
    server_mb = int(st.get_option("server.maxUploadSize") or 0)
    cap = max_upload_bytes()
    return min(cap, server_mb * 2**20) if server_mb > 0 else cap


def upload_subject() -> Subject:
    """Sidebar: a JSONL upload, size-capped, checked and parsed in memory (never written to disk).

    The uploader refuses a file over the limit in the browser, with its own message, before
    sending it (it counts a MB as 10^6 bytes, 2^20 on Windows); the size is checked here again,
    with 2^20, before the file is read.
    """
    cap = upload_limit_bytes()
    uploaded = st.sidebar.file_uploader(
        "Metrics file (JSONL)",
        key=K_UPLOAD,
        max_upload_size=max(1, math.floor(cap / 2**20)),
        help=f"The collector's metrics.jsonl or plain json.dumps lines; at most {cap / 2**20:,.3g} MB. "
        "It is read in memory and never saved.",
    )
    if uploaded is None:
        # A file over the limit never reaches the page (the uploader only marks it red): say it here.
        st.info(
            f"Upload a metrics JSONL file in the sidebar to replay it, at most {cap / 2**20:,.3g} MB. "
            "A larger file is refused there (marked red); put that run under the log root instead and "
            "pick it under “A run under the log root”."
        )
        st.stop()
    file_id = getattr(uploaded, "file_id", None) or f"{uploaded.name}:{uploaded.size}"
    cached = st.session_state.get(K_PARSED)
    if cached is None or cached[0] != file_id:
        cached = (file_id, _parse(uploaded, cap))
        st.session_state[K_PARSED] = cached
    parsed = cached[1]
    if isinstance(parsed, str):
        st.error(_shared.md(parsed))  # it quotes the file's name and lines: shown as plain text
        st.stop()
    findings = _findings((f"upload:{file_id}",), parsed.frame, parsed.logged, None, None, None)  # a file never changes
    return Subject(
        key=f"upload:{file_id}",
        title=str(parsed.name),
        frame=parsed.frame,
        logged=parsed.logged,
        findings=findings,
        bad_lines=parsed.bad_lines,
        partial_lines=parsed.partial_lines,
    )


def _parse(uploaded: Any, cap: int) -> Any:
    """The parsed upload, or the message (plain text, to be escaped) saying why it was refused."""
    name = str(uploaded.name)
    try:
        check_size(int(uploaded.size), cap)  # before reading a byte of it
        return parse_upload(name, uploaded.getvalue(), cap)
    except UploadError as exc:
        return f"Cannot replay {name!r}: {exc}"
    except Exception as exc:  # noqa: BLE001 - a hostile file must end as a message, never a traceback
        return f"Cannot replay {name!r}: it could not be read as metrics JSONL ({type(exc).__name__})."


def _findings(
    key: tuple[Any, ...],
    frame: pd.DataFrame,
    logged: Mapping[str, np.ndarray],
    root: Any,
    status: str | None,
    last_write: float | None,
) -> tuple:
    """Diagnosis findings for the "jump to" list, computed once per ``key`` (the run and its data version).

    The "was logged" masks go to ``diagnose`` so a column that stops being logged is not a NaN.
    """
    from monitor_cb.diagnosis import diagnose, load_settings

    cached = st.session_state.get(K_FINDINGS)
    if cached is not None and cached[0] == key:
        return cached[1]
    try:
        settings = load_settings(root) if root is not None else None
    except Exception:  # noqa: BLE001 - a broken settings file must not stop the replay
        settings = None
    found = tuple(diagnose(frame, settings, status=status, last_write=last_write, logged=dict(logged) or None))
    st.session_state[K_FINDINGS] = (key, found)
    return found


# ----------------------------------------------------------------------------- controls
def _reset_on_new_subject(subject: Subject, steps: np.ndarray) -> None:
    state = st.session_state
    if state.get(K_SUBJECT) != subject.key:
        state[K_SUBJECT] = subject.key
        state[K_CURSOR] = int(steps[-1])
        state[K_PLAYING] = False
        state[K_JUMP] = WHOLE_RUN


def show_header(subject: Subject) -> None:
    """Name, status and anything skipped."""
    status = f" · {_shared.md(subject.status)}" if subject.status else ""
    st.caption(f"**{_shared.md(subject.title)}**{status} · {len(subject.frame):,} rows")
    note = bad_lines_note(subject.bad_lines, subject.partial_lines)
    if note:
        st.warning(f"{note}.", icon=":material/warning:")
    if subject.status in ("failed", "stopped", "crashed") and subject.reason:
        reason = str(subject.reason)
        prefix = "" if reason.lower().startswith(str(subject.status)) else f"{subject.status}: "
        st.error(f"Run {prefix}{_shared.md(reason)}")


def jump_control(notable: list[replay.Notable]) -> replay.Notable | None:
    """The "jump to" list; the chosen notable step, or None for the replay of the whole run."""
    if not notable:
        st.caption("No notable steps (no NaN, no loss spike, no diagnosis finding).")
        return None
    options = [WHOLE_RUN, *range(len(notable))]  # -1, not None: None reads as "nothing chosen"
    if st.session_state.get(K_JUMP) not in options:
        st.session_state[K_JUMP] = WHOLE_RUN
    j1, j2 = st.columns([6, 1], vertical_alignment="bottom")
    choice = j1.selectbox(
        f"Jump to ({len(notable)} notable steps)",
        options,
        key=K_JUMP,
        format_func=lambda i: "— replay the whole run —" if i == WHOLE_RUN else replay.notable_label(notable[i]),
        help="Opens ±50 logged steps around the step at full resolution.",
    )
    if choice is not None and choice != WHOLE_RUN:
        j2.button("Back to replay", key="rp_back", on_click=_clear_jump)
        return notable[choice]
    return None


def _clear_jump() -> None:
    st.session_state[K_JUMP] = WHOLE_RUN


def play_controls() -> None:
    """Play / Pause and the speed; a change reruns the page so the fragment's timer starts or stops."""
    playing = bool(st.session_state.get(K_PLAYING))
    p1, p2, _ = st.columns([1, 2, 5], vertical_alignment="bottom")
    if playing:
        p1.button("Pause", icon=":material/pause:", key="rp_pause", on_click=_pause)
    else:
        p1.button("Play", icon=":material/play_arrow:", key="rp_play", on_click=_start)
    p2.selectbox("Speed", list(SPEEDS), index=1, key=K_SPEED)


def _start() -> None:
    """Play from the start when the cursor is at the end, else from where it is."""
    state = st.session_state
    if state.get("rp_at_end"):
        state[K_CURSOR] = state.get("rp_first_step", 0)
    state[K_POSITION] = state.get(K_CURSOR)
    state[K_PLAYING] = True


def _pause() -> None:
    """Stop where playback is (the slider may not show its last tick yet)."""
    state = st.session_state
    state[K_PLAYING] = False
    if state.get(K_POSITION) is not None:
        state[K_CURSOR] = state[K_POSITION]


# ----------------------------------------------------------------------------- the replay
def _replay_body(subject: Subject, steps: np.ndarray) -> None:
    state = st.session_state
    first, last = int(steps[0]), int(steps[-1])
    playing = bool(state.get(K_PLAYING))
    # Playing, the position is playback's own: every rerun the browser asks for carries the slider's value as it
    # last saw it, and one asked for before a tick reached it (the moment Play was clicked, say) moved playback
    # back to that value, the end included, which stopped it. The slider is disabled meanwhile.
    held = state.get(K_POSITION) if playing else state.get(K_CURSOR)
    cursor = int(np.clip(int(held if held is not None else last), first, last))
    if playing:
        cursor = replay.next_cursor(steps, cursor)
        if cursor >= last:
            state[K_PLAYING] = False
    state[K_CURSOR] = state[K_POSITION] = cursor  # before the slider is drawn: it shows the advanced cursor
    state["rp_first_step"], state["rp_at_end"] = first, cursor >= last
    if last > first:
        st.slider(
            "Step",
            min_value=first,
            max_value=last,
            key=K_CURSOR,
            disabled=bool(state.get(K_PLAYING)),
            help="The charts show the run up to here (Pause to move it).",
        )
    rows = replay.rows_until(subject.frame, cursor)
    show_position(subject, rows, cursor, last)
    fit_bulk = bool(state.get(K_FIT_BULK, True))
    figures = replay.replay_figures(subject.frame, subject.logged, rows, x_range=(first, last), fit_bulk=fit_bulk)
    for i, fig in enumerate(figures):
        plotly_chart(fig, f"rp_chart_{i}", _shared.PLOTLY_CONFIG)
    if not state.get(K_PLAYING) and state.get("rp_was_playing"):
        state["rp_was_playing"] = False
        st.rerun(scope="app")  # the replay reached its end: stop the timer, show Play again
    state["rp_was_playing"] = bool(state.get(K_PLAYING))


def show_position(subject: Subject, rows: slice, cursor: int, last: int) -> None:
    """A row of tiles: the step and the values logged at or before it."""
    from monitor_cb.analysis.series import latest

    part = subject.frame.iloc[rows]
    masks = {k: v[rows] for k, v in subject.logged.items()} if subject.logged else None
    items = [("Step", format_count(cursor), {"delta": f"of {last:,}", "delta_color": "off", "delta_arrow": "off"})]
    for label, column in (("Loss", "loss"), ("LR", "lr"), ("Grad norm", "grad_norm"), ("Throughput", "throughput")):
        found = latest(part, column, masks) if column in part.columns else None
        items.append((label, format_value(None if found is None else found[1]), {}))
    _shared.tiles(items)


def show_window(subject: Subject, item: replay.Notable) -> None:
    """±50 logged steps around a notable step, every point drawn."""
    st.session_state[K_PLAYING] = False
    rows = replay.window_rows(subject.frame, item.step)
    n_rows = rows.stop - rows.start
    st.markdown(f"**Step {item.step:,}** · {_shared.md(item.label)}")
    st.caption(f"{n_rows:,} rows around it, at full resolution (±{replay.WINDOW} logged steps).")
    figures = replay.replay_figures(
        subject.frame,
        subject.logged,
        rows,
        marker=item,
        n_out=max(1000, n_rows),
        uirevision=f"window{item.step}",
        fit_bulk=bool(st.session_state.get(K_FIT_BULK, True)),
    )
    for i, fig in enumerate(figures):
        plotly_chart(fig, f"rp_window_{i}", _shared.PLOTLY_CONFIG)
