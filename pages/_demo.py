"""The embedded default: what a newcomer sees when the log root holds no runs.

Two ways to see something real: start the demo training (``python -m monitor_cb demo``, real
MindSpore, about a minute) in the background and watch its curves grow, or write a sample of
finished runs instantly (``monitor_cb.samples.write_sample_runs``, no MindSpore).

The demo process is detached (own session, output to ``<root>/.monitor/demo.log``) and guarded by a
process-wide lock plus a pid file in the same hidden folder, so two clicks (or two browser tabs, or
two dashboards on the same root) never start two trainings at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from monitor_cb import view
from pages._shared import md

HIDDEN_DIR = ".monitor"
DEMO_STEPS = 600
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
    return root / HIDDEN_DIR / "demo.json"


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
    path = _pid_file(root)
    try:
        info = json.loads(path.read_text())
        pid, name, log, started = int(info["pid"]), str(info["name"]), Path(info["log"]), float(info["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    proc = _PROCS.get(str(path))
    if proc is not None and proc.pid == pid:
        code = proc.poll()  # also reaps it, so a finished demo is not a zombie that looks alive
        return DemoState(pid, name, log, started, code is None, code)
    return DemoState(pid, name, log, started, _alive(pid))


def demo_command(root: Path, name: str, steps: int) -> list[str]:
    """The collector's demo training, writing the run ``root/name``."""
    return [sys.executable, "-m", "monitor_cb", "demo", "--logdir", str(root), "--name", name, "--steps", str(steps)]


def start_demo(root: Path, steps: int = DEMO_STEPS) -> DemoState:
    """Start the demo training in the background unless one is already running on ``root``."""
    with _LOCK:
        state = demo_state(root)
        if state is not None and state.running:
            return state
        hidden = root / HIDDEN_DIR
        hidden.mkdir(parents=True, exist_ok=True)
        name = time.strftime("demo-%Y%m%d-%H%M%S")
        log = hidden / "demo.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                demo_command(root, name, steps),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # detached: a dashboard restart does not kill the training
                close_fds=True,
            )
        path = _pid_file(root)
        _PROCS[str(path)] = proc
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"pid": proc.pid, "name": name, "log": str(log), "started": time.time()}))
        os.replace(tmp, path)
        return DemoState(proc.pid, name, log, time.time(), True)


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


def show_empty_root(root: Path, store: Any) -> None:
    """The page for a root without runs: offer the demo and the samples; wait for the first run."""
    st.title("Training monitor")
    if getattr(store, "remote", None) is not None:
        show_empty_bucket(root, store)
        return
    st.info(
        f"No runs under `{view.escape_code(str(root))}` yet. Point the dashboard at your runs with "
        "`streamlit run dashboard.py -- --logdir PATH` (or `MONITOR_LOGDIR`), add `LiveMonitor` to "
        "your training, or try one of these:"
    )
    state = demo_state(root)
    left, right = st.columns(2)
    with left:
        st.subheader("Watch a real training")
        st.caption("Trains a small Transformer with MindSpore on the CPU (about a minute) and shows its curves live.")
        if st.button(
            "Start the demo training", type="primary", disabled=bool(state and state.running), key="start_demo"
        ):
            state = start_demo(root)
    with right:
        st.subheader("Finished runs, instantly")
        st.caption("Writes four synthetic finished runs (one diverges) so every page has something to show.")
        if st.button("Generate sample runs", key="write_samples"):
            try:
                write_samples(root)
                store.refresh(force=True)  # list the new runs now, not at the next rescan
            except OSError as exc:
                st.error(f"Could not write sample runs under the log root: {md(str(exc))}")
                st.stop()
            st.rerun()
    if state is not None:
        _wait_for_first_run(root, store, state)


def show_empty_bucket(root: Any, store: Any) -> None:
    """A log root on object storage without runs: how to ship one there; wait for the first run."""
    st.info(
        f"No runs under `{view.escape_code(str(root))}` yet. Ship runs there from the training nodes with "
        '`LiveMonitor(..., upload="s3://bucket/prefix/RUN")` or `python -m monitor_cb sync LOCAL_RUN URL` '
        "(docs/DEPLOYMENT.md); they appear here as their first chunks arrive."
    )

    @st.fragment(run_every=2.0)
    def poll() -> None:
        if list(store.list_runs()):
            st.rerun(scope="app")

    poll()


def _wait_for_first_run(root: Path, store: Any, state: DemoState) -> None:
    """Poll (a fragment, every second) until the demo's run appears, then rerun the whole page onto it."""

    @st.fragment(run_every=1.0)
    def poll() -> None:
        if list(store.list_runs()):
            st.rerun(scope="app")
        current = demo_state(root) or state
        if current.running:
            st.info(f"Demo training `{view.escape_code(current.name)}` is starting (pid {current.pid})…", icon="⏳")
        else:
            st.error(
                f"The demo training ended (exit code {current.returncode}) before writing a run. "
                "Its output is below; the sample runs work without MindSpore."
            )
            st.code(log_tail(current.log) or "(no output)", language=None)

    poll()
