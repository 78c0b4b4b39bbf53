"""The demo training and the sample runs the dashboard offers, without Streamlit.

``start_demo`` runs ``python -m monitor_cb demo`` (real MindSpore, paced to last about two minutes so
its curves visibly grow) detached in the background: own session, output to ``<root>/.monitor/demo.log``,
guarded by a process-wide lock plus a pid file in the same hidden folder, so two clicks (or two browser
tabs, or two dashboards on the same root) never start two trainings at once. ``stop_demo`` sends it
SIGTERM, which the demo takes as Ctrl-C: the run ends as ``stopped``. ``write_samples`` writes finished
sample runs instantly (no MindSpore). The page layer (``pages/_demo.py``) only draws the buttons.

The pid file lies in a shared root anyone may write, so a pid in it proves nothing: a planted file naming
someone's ``watch`` would have Stop signal that. A pid counts as the demo (shown running, stopped by Stop)
only when this server started it (the process object kept in memory), or when the process carries in its
own environment the random nonce its pid file names (``$MONITOR_DEMO_NONCE``, given at start by the
dashboard that started it, on this or another server): nobody can put that into a process of ours.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from monitor_cb.hidden_dir import hidden_path, read_hidden
from monitor_cb.rootfile import STATE_CAP, create_new, open_regular, write_atomic

DEMO_STEPS = 600
DEMO_PACE_S = 0.2  # seconds per step at least: 600 steps take about two minutes
DEMO_LOG_INTERVAL = 2  # a point every 0.4 s
_LOCK = threading.Lock()
_PROCS: dict[str, subprocess.Popen[bytes]] = {}  # pid file -> the process this server started
NONCE_ENV = "MONITOR_DEMO_NONCE"  # the demo's proof that a dashboard started it (see the module docstring)


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


def _proves_demo(pid: int, nonce: str) -> bool:
    """A live, non-zombie process with this pid whose environment holds ``NONCE_ENV=nonce``.

    False when that cannot be shown: no nonce, another user's process, no ``/proc`` (macOS; there only a
    demo this server started is known).
    """
    if not nonce:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return False
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except (OSError, IndexError):
        return False
    return f"{NONCE_ENV}={nonce}".encode() in environ.split(b"\0")


def demo_state(root: Path) -> DemoState | None:
    """The demo last started on ``root`` (by any dashboard), or None."""
    try:
        path, log = _pid_file(root), hidden_path(root, "demo.log")  # the log's place is ours, not the file's
        info = json.loads(read_hidden(root, path.name, STATE_CAP))
        pid, name, started = int(info["pid"]), str(info["name"]), float(info["started"])
        nonce = str(info.get("nonce") or "")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    proc = _PROCS.get(str(path))
    if proc is not None and proc.pid == pid:
        code = proc.poll()  # also reaps it, so a finished demo is not a zombie that looks alive
        return DemoState(pid, name, log, started, code is None, code)
    return DemoState(pid, name, log, started, pid > 0 and _proves_demo(pid, nonce))


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
        nonce = secrets.token_hex(16)
        with os.fdopen(create_new(log), "wb") as out:  # a FIFO or link planted as the log is replaced
            proc = subprocess.Popen(
                demo_command(root, name, steps),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # detached: a dashboard restart does not kill the training
                close_fds=True,
                env={**os.environ, NONCE_ENV: nonce},
            )
        _PROCS[str(path)] = proc
        info = {"pid": proc.pid, "name": name, "log": str(log), "started": time.time(), "nonce": nonce}
        write_atomic(path, json.dumps(info).encode())
        return DemoState(proc.pid, name, log, time.time(), True)


def stop_demo(root: Path) -> bool:
    """Ask the running demo to stop (SIGTERM to its process group); False when none is running.

    Only a pid :func:`demo_state` proved to be a demo a dashboard started is signalled, and only as the
    leader of its own process group (the demo's session), never a group it merely belongs to.
    """
    state = demo_state(root)
    if state is None or not state.running:
        return False
    try:
        if os.getpgid(state.pid) != state.pid:
            return False
    except OSError:
        return False
    try:
        os.killpg(state.pid, signal.SIGTERM)  # its own session: the group is the demo and its children
    except (ProcessLookupError, PermissionError):
        return False
    return True


def log_tail(path: Path, max_bytes: int = 3000) -> str:
    """The end of the demo's output, for a failed start."""
    with contextlib.suppress(OSError), open_regular(path, root=path.parent.parent) as (fd, st):
        return os.pread(fd, max_bytes, max(0, st.st_size - max_bytes)).decode("utf-8", "replace")
    return ""


def write_samples(root: Path) -> list[Path]:
    """Finished sample runs under ``root``, written instantly (no MindSpore)."""
    from monitor_cb.demo.samples import write_sample_runs

    root.mkdir(parents=True, exist_ok=True)
    return write_sample_runs(root)


DEMO_CAPTION = (
    "Trains a small Transformer with MindSpore on the CPU for about two minutes "
    f"({DEMO_STEPS} steps, paced so the curves grow while you watch) and shows its curves live. "
    "Stop it any time."
)
# What write_samples writes (monitor_cb.demo.samples.sample_specs): three runs finish, the second diverges and
# its guard stops it (status "stopped"); a test reads the written runs' statuses against these words.
SAMPLES_CAPTION = (
    "Writes four synthetic runs so every page has something to show: three finish, "
    "one diverges and its NaN guard stops it."
)
