"""The embedded default: a live demo training and sample runs, for a newcomer (or anyone) to try.

Two ways to see something real: start the demo training (``python -m monitor_cb demo``, real
MindSpore, paced to last about two minutes so its curves visibly grow; stoppable) in the background
and watch it, or write a sample of finished runs instantly (``monitor_cb.demo.samples.write_sample_runs``,
no MindSpore). An empty log root shows both on the page and keeps looking for runs; once runs
exist, the live page's sidebar keeps both under "Demo and sample runs".

On a read-only dashboard (``--read-only-settings``) none of it is offered: a viewer writes nothing into
the shared root and starts nothing.

Starting, stopping and finding the demo process (a pid file under the root's hidden folder) is
:mod:`monitor_cb.demo.launcher`; this module only draws the buttons and polls for the first run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from monitor_cb.demo import launcher
from monitor_cb.views.escape import escape_code
from pages._shared import PENDING_RUN, md, settings_access

POLL_S = 2.0  # how often a page without runs looks for the first one
STARTED_HERE = "demo_started_pid"  # session state: the demo this browser session started


def show_empty_root(root: Path, store: Any) -> None:
    """The page for a root without runs: offer the demo and the samples; keep looking for a run."""
    st.title("Training monitor")
    if getattr(store, "remote", None) is not None:
        show_empty_bucket(root, store)
        return
    where = (
        f"No runs under `{escape_code(str(root))}` yet. Point the dashboard at your runs with "
        "`streamlit run dashboard.py -- --logdir PATH` (or `MONITOR_LOGDIR`), add `LiveMonitor` to your training"
    )
    if not settings_access().viewers_may_write:
        st.info(f"{where}. (This dashboard is read-only: it offers no demo or sample runs.)")
        _poll_for_runs(root, store)
        return
    st.info(f"{where}, or try one of these:")
    left, right = st.columns(2)
    with left:
        st.subheader("Watch a real training")
        demo_buttons(root)
    with right:
        st.subheader("Finished runs, instantly")
        sample_button(root, store)
    _poll_for_runs(root, store)


def demo_sidebar(root: Path, store: Any) -> None:
    """The same two offers in the sidebar once runs exist, collapsed (open while the demo runs).

    Not for a log root on object storage (the demo and the samples write local files), nor on a read-only
    dashboard.
    """
    if getattr(store, "remote", None) is not None or not settings_access().viewers_may_write:
        return
    state = launcher.demo_state(root)
    running = bool(state and state.running)
    with st.sidebar.expander("Demo and sample runs", expanded=running):
        demo_buttons(root, state)
        sample_button(root, store)


def show_empty_bucket(root: Any, store: Any) -> None:
    """A log root on object storage without runs: how to ship one there; wait for the first run.

    A prefix that holds no object at all is said so: it may be mistyped.
    """
    remote = getattr(store, "remote", None)
    if remote is not None and remote.holds_nothing():
        st.warning(
            f"Nothing is stored under `{escape_code(str(root))}`: check the bucket's prefix for a typo "
            "(the bucket exists; runs are listed as soon as one arrives there).",
            icon=":material/search_off:",
        )
    st.info(
        f"No runs under `{escape_code(str(root))}` yet. Ship runs there from the training nodes with "
        '`LiveMonitor(..., upload="s3://bucket/prefix/RUN")` or `python -m monitor_cb sync LOCAL_RUN URL` '
        "(docs/DEPLOYMENT.md); they appear here as their first chunks arrive."
    )

    @st.fragment(run_every=POLL_S)
    def poll() -> None:
        if list(store.list_runs()):
            st.rerun(scope="app")

    poll()


def demo_buttons(root: Path, state: launcher.DemoState | None = None) -> None:
    """Start (disabled while one runs) and, while it runs, Stop."""
    state = state or launcher.demo_state(root)
    running = bool(state and state.running)
    st.caption(launcher.DEMO_CAPTION)
    if running and state is not None:
        st.caption(f"Demo training `{escape_code(state.name)}` is running (pid {state.pid}).")
        st.button("Stop the demo training", key="stop_demo", on_click=_on_stop, args=(str(root),))
    else:
        st.button("Start the demo training", type="primary", key="start_demo", on_click=_on_start, args=(str(root),))
    problem = st.session_state.pop("demo_problem", None)
    if problem:
        st.error(problem)


def sample_button(root: Path, store: Any) -> None:
    """Write the sample runs and show them now."""
    st.caption(launcher.SAMPLES_CAPTION)
    if st.button("Generate sample runs", key="write_samples"):
        try:
            launcher.write_samples(root)
            store.refresh(force=True)  # list the new runs now, not at the next rescan
        except OSError as exc:
            st.error(f"Could not write sample runs under the log root: {md(str(exc))}")
            st.stop()
        st.rerun()


def _on_start(root: str) -> None:
    try:
        state = launcher.start_demo(Path(root))
    except OSError as exc:
        st.session_state["demo_problem"] = f"Could not start the demo: {md(str(exc))}"
        return
    st.session_state[STARTED_HERE] = state.pid
    st.session_state[PENDING_RUN] = state.name  # the run picker selects it as soon as it appears


def _on_stop(root: str) -> None:
    if not launcher.stop_demo(Path(root)):
        st.session_state["demo_problem"] = "The demo training is not running any more."


def _poll_for_runs(root: Path, store: Any) -> None:
    """Every ``POLL_S`` seconds: when a run appears (the demo's, a training's, a copied one), show it.

    Always on, not only after a click: a run deleted and written again, or a training started in a
    terminal, must show up without a reload.
    """

    @st.fragment(run_every=POLL_S)
    def poll() -> None:
        if list(store.list_runs()):
            st.rerun(scope="app")
        current = launcher.demo_state(root)
        if current is None:
            return
        if current.running:
            st.info(
                f"Demo training `{escape_code(current.name)}` is starting (pid {current.pid})…",
                icon=":material/hourglass_empty:",
            )
        elif st.session_state.get(STARTED_HERE) == current.pid:  # started from this page: say why nothing came
            st.error(
                f"The demo training ended (exit code {current.returncode}) before writing a run. "
                "Its output is below; the sample runs work without MindSpore."
            )
            st.code(launcher.log_tail(current.log) or "(no output)", language=None)

    poll()
