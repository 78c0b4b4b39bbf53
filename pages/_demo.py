"""The embedded default: a live demo training and sample runs, for a newcomer (or anyone) to try.

Two ways to see something real: start the demo training (``python -m monitor_cb demo``, real
MindSpore, paced to last about two minutes so its curves visibly grow; stoppable) in the background
and watch it, or write a sample of finished runs instantly (``monitor_cb.samples.write_sample_runs``,
no MindSpore). An empty log root shows both on the page and keeps looking for runs; once runs
exist, the live page's sidebar keeps both under "Demo and sample runs".

The demo process is detached (own session, output to ``<root>/.monitor/demo.log``) and guarded by a
process-wide lock plus a pid file in the same hidden folder, so two clicks (or two browser tabs, or
two dashboards on the same root) never start two trainings at once. Stop sends it SIGTERM, which
the demo takes as Ctrl-C: the run ends as ``stopped``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from monitor_cb import view
from monitor_cb.hidden import hidden_path
from pages._shared import PENDING_RUN, md

DEMO_STEPS = 600
DEMO_PACE_S = 0.2  # seconds per step at least: 600 steps take about two minutes
DEMO_LOG_INTERVAL = 2  # a point every 0.4 s
POLL_S = 2.0  # how often a page without runs looks for the first one
STARTED_HERE = "demo_started_pid"  # session state: the demo this browser session started
_LOCK = threading.Lock()
_PROCS: dict[str, subprocess.Popen[bytes]] = {}  # pid file -> the process this server started


@dataclass(frozen=True)
class DemoState:
    """The demo launched on a root: its pid, run name, log file, and whether it is still running."""

    pid: int
    name: str
    log: Path
    started: float
    running: bool
    returncode: int | None = None


def _pid_file(root: Path) -> Path:
    return hidden_path(root, "demo.json")


def _alive(pid: int) -> bool:
    """A live, non-zombie process with this pid that is a monitor_cb demo."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return False
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        return b"monitor_cb" in cmdline and b"demo" in cmdline
    except (OSError, IndexError):
        return True  # no /proc (macOS): trust kill(0)


def demo_state(root: Path) -> DemoState | None:
    """The demo last started on ``root`` (by any dashboard), or None."""
    try:
        path, log = _pid_file(root), hidden_path(root, "demo.log")  # the log's place is ours, not the file's
        info = json.loads(path.read_text())
        pid, name, started = int(info["pid"]), str(info["name"]), float(info["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    proc = _PROCS.get(str(path))
    if proc is not None and proc.pid == pid:
        code = proc.poll()  # also reaps it, so a finished demo is not a zombie that looks alive
        return DemoState(pid, name, log, started, code is None, code)
    return DemoState(pid, name, log, started, _alive(pid))


def demo_running(root: Path) -> bool:
    """Whether a demo started on ``root`` is still running (what the sidebar's Start/Stop shows)."""
    state = demo_state(root)
    return bool(state and state.running)


def demo_command(root: Path, name: str, steps: int) -> list[str]:
    """The collector's demo training, writing the run ``root/name``, paced to be watched."""
    return [
        sys.executable,
        "-m",
        "monitor_cb",
        "demo",
        "--logdir",
        str(root),
        "--name",
        name,
        "--steps",
        str(steps),
        "--pace",
        str(DEMO_PACE_S),
        "--log-interval",
        str(DEMO_LOG_INTERVAL),
    ]


def start_demo(root: Path, steps: int = DEMO_STEPS) -> DemoState:
    """Start the demo training in the background unless one is already running on ``root``.

    Raises:
        OSError: the hidden folder cannot be written, or leads outside the root (``OutsideRootError``).
    """
    with _LOCK:
        state = demo_state(root)
        if state is not None and state.running:
            return state
        path, log = _pid_file(root), hidden_path(root, "demo.log")
        path.parent.mkdir(parents=True, exist_ok=True)
        name = time.strftime("demo-%Y%m%d-%H%M%S")
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                demo_command(root, name, steps),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # detached: a dashboard restart does not kill the training
                close_fds=True,
            )
        _PROCS[str(path)] = proc
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"pid": proc.pid, "name": name, "log": str(log), "started": time.time()}))
        os.replace(tmp, path)
        return DemoState(proc.pid, name, log, time.time(), True)


def stop_demo(root: Path) -> bool:
    """Ask the running demo to stop (SIGTERM to its process group); False when none is running."""
    state = demo_state(root)
    if state is None or not state.running:
        return False
    try:
        os.killpg(state.pid, signal.SIGTERM)  # its own session: the group is the demo and its children
    except (ProcessLookupError, PermissionError):
        return False
    return True


def log_tail(path: Path, max_bytes: int = 3000) -> str:
    """The end of the demo's output, for a failed start."""
    with contextlib.suppress(OSError), open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - max_bytes))
        return f.read().decode("utf-8", "replace")
    return ""


def write_samples(root: Path) -> list[Path]:
    """Finished sample runs under ``root``, written instantly (no MindSpore)."""
    from monitor_cb.samples import write_sample_runs

    root.mkdir(parents=True, exist_ok=True)
    return write_sample_runs(root)


# ----------------------------------------------------------------------------- the pieces of the pages
DEMO_CAPTION = (
    "Trains a small Transformer with MindSpore on the CPU for about two minutes "
    f"({DEMO_STEPS} steps, paced so the curves grow while you watch) and shows its curves live. "
    "Stop it any time."
)
SAMPLES_CAPTION = "Writes four synthetic finished runs (one diverges) so every page has something to show."


def show_empty_root(root: Path, store: Any) -> None:
    """The page for a root without runs: offer the demo and the samples; keep looking for a run."""
    st.title("Training monitor")
    if getattr(store, "remote", None) is not None:
        show_empty_bucket(root, store)
        return
    st.info(
        f"No runs under `{view.escape_code(str(root))}` yet. Point the dashboard at your runs with "
        "`streamlit run dashboard.py -- --logdir PATH` (or `MONITOR_LOGDIR`), add `LiveMonitor` to "
        "your training, or try one of these:"
    )
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

    Not for a log root on object storage: the demo and the samples write local files.
    """
    if getattr(store, "remote", None) is not None:
        return
    state = demo_state(root)
    running = bool(state and state.running)
    with st.sidebar.expander("Demo and sample runs", expanded=running):
        demo_buttons(root, state)
        sample_button(root, store)


def show_empty_bucket(root: Any, store: Any) -> None:
    """A log root on object storage without runs: how to ship one there; wait for the first run."""
    st.info(
        f"No runs under `{view.escape_code(str(root))}` yet. Ship runs there from the training nodes with "
        '`LiveMonitor(..., upload="s3://bucket/prefix/RUN")` or `python -m monitor_cb sync LOCAL_RUN URL` '
        "(docs/DEPLOYMENT.md); they appear here as their first chunks arrive."
    )

    @st.fragment(run_every=POLL_S)
    def poll() -> None:
        if list(store.list_runs()):
            st.rerun(scope="app")

    poll()


def demo_buttons(root: Path, state: DemoState | None = None) -> None:
    """Start (disabled while one runs) and, while it runs, Stop."""
    state = state or demo_state(root)
    running = bool(state and state.running)
    st.caption(DEMO_CAPTION)
    if running and state is not None:
        st.caption(f"Demo training `{view.escape_code(state.name)}` is running (pid {state.pid}).")
        st.button("Stop the demo training", key="stop_demo", on_click=_on_stop, args=(str(root),))
    else:
        st.button("Start the demo training", type="primary", key="start_demo", on_click=_on_start, args=(str(root),))
    problem = st.session_state.pop("demo_problem", None)
    if problem:
        st.error(problem)


def sample_button(root: Path, store: Any) -> None:
    """Write the sample runs and show them now."""
    st.caption(SAMPLES_CAPTION)
    if st.button("Generate sample runs", key="write_samples"):
        try:
            write_samples(root)
            store.refresh(force=True)  # list the new runs now, not at the next rescan
        except OSError as exc:
            st.error(f"Could not write sample runs under the log root: {md(str(exc))}")
            st.stop()
        st.rerun()


def _on_start(root: str) -> None:
    try:
        state = start_demo(Path(root))
    except OSError as exc:
        st.session_state["demo_problem"] = f"Could not start the demo: {md(str(exc))}"
        return
    st.session_state[STARTED_HERE] = state.pid
    st.session_state[PENDING_RUN] = state.name  # the run picker selects it as soon as it appears


def _on_stop(root: str) -> None:
    if not stop_demo(Path(root)):
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
        current = demo_state(root)
        if current is None:
            return
        if current.running:
            st.info(
                f"Demo training `{view.escape_code(current.name)}` is starting (pid {current.pid})…",
                icon=":material/hourglass_empty:",
            )
        elif st.session_state.get(STARTED_HERE) == current.pid:  # started from this page: say why nothing came
            st.error(
                f"The demo training ended (exit code {current.returncode}) before writing a run. "
                "Its output is below; the sample runs work without MindSpore."
            )
            st.code(log_tail(current.log) or "(no output)", language=None)

    poll()
