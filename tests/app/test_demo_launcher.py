"""The demo launcher (monitor_cb.demo.launcher) and its buttons: detached, logged in the hidden folder, never twice."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from monitor_cb.demo import launcher
from tests.app.conftest import DASHBOARD, write_run


@pytest.fixture
def fake_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in process that prints and sleeps (and carries the words the pid check looks for)."""

    def command(root: Path, name: str, steps: int) -> list[str]:
        code = "import sys, time; print('training', sys.argv[1:]); sys.stdout.flush(); time.sleep(30)"
        return [sys.executable, "-c", code, "monitor_cb", "demo", str(root), name]

    monkeypatch.setattr(launcher, "demo_command", command)


def _stop(state: launcher.DemoState) -> None:
    os.killpg(state.pid, signal.SIGTERM)  # the demo runs in its own session (process group)
    deadline = time.monotonic() + 10
    while launcher.demo_state(Path(state.log).parent.parent).running:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_started_once_detached_with_its_log_in_the_hidden_folder(tmp_path: Path, fake_demo: None) -> None:
    first = launcher.start_demo(tmp_path)
    try:
        again = launcher.start_demo(tmp_path)
        assert again.pid == first.pid  # a second click does not start a second training
        assert os.getsid(first.pid) == first.pid  # its own session: detached from the dashboard
        assert first.log == tmp_path / ".monitor" / "demo.log"
        state = launcher.demo_state(tmp_path)
        assert state is not None and state.running and state.name == first.name
        deadline = time.monotonic() + 10
        while "training" not in launcher.log_tail(first.log):
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        _stop(first)
    ended = launcher.demo_state(tmp_path)
    assert ended is not None and not ended.running  # reaped, not a zombie that looks alive
    restarted = launcher.start_demo(tmp_path)
    try:
        assert restarted.pid != first.pid
    finally:
        _stop(restarted)


def test_no_demo_yet(tmp_path: Path) -> None:
    assert launcher.demo_state(tmp_path) is None
    (tmp_path / ".monitor").mkdir()
    (tmp_path / ".monitor" / "demo.json").write_text("{not json")
    assert launcher.demo_state(tmp_path) is None


def test_demo_button_starts_it_the_page_waits_for_the_run_and_stop_ends_it(log_root: Path, fake_demo: None) -> None:
    at = AppTest.from_file(DASHBOARD, default_timeout=60).run()
    at.button(key="start_demo").click().run()
    assert not at.exception
    state = launcher.demo_state(log_root)
    try:
        assert state is not None and state.running
        assert any("is starting" in i.value for i in at.info)
        at.run()
        assert not at.exception
        assert not [b for b in at.button if b.key == "start_demo"]  # while it runs, no second one
        assert launcher.demo_state(log_root).pid == state.pid
        at.button(key="stop_demo").click().run()
        assert not at.exception
        deadline = time.monotonic() + 10
        while launcher.demo_state(log_root).running:
            assert time.monotonic() < deadline, "Stop did not end the demo"
            time.sleep(0.05)
        at.run()
        assert at.button(key="start_demo").label == "Start the demo training"
    finally:
        if launcher.demo_state(log_root).running:
            _stop(state)


def test_the_embedded_demo_is_paced_to_be_watched() -> None:
    """About two minutes, not the few seconds 600 unpaced steps take; a point every fraction of a second."""
    command = launcher.demo_command(Path("logs"), "demo-x", launcher.DEMO_STEPS)
    pace = float(command[command.index("--pace") + 1])
    interval = int(command[command.index("--log-interval") + 1])
    assert 90 <= launcher.DEMO_STEPS * pace <= 180
    assert launcher.DEMO_STEPS // interval >= 200
    assert "about two minutes" in launcher.DEMO_CAPTION


def test_demo_and_samples_stay_reachable_when_runs_exist(log_root: Path, fake_demo: None) -> None:
    write_run(log_root, "exp1", steps=50)
    at = AppTest.from_file(DASHBOARD, default_timeout=60).run()
    assert not at.exception
    assert at.sidebar.button(key="write_samples").label == "Generate sample runs"
    at.sidebar.button(key="write_samples").click().run()
    assert not at.exception
    assert len(at.sidebar.selectbox[0].options) >= 5  # exp1 and the four samples
    at.sidebar.button(key="start_demo").click().run()
    state = launcher.demo_state(log_root)
    try:
        assert state is not None and state.running
        assert at.sidebar.button(key="stop_demo")
    finally:
        _stop(state)


def test_the_demo_log_shown_is_always_the_one_in_the_hidden_folder(tmp_path: Path) -> None:
    """A pid file naming another log (``/etc/passwd``) does not make the page show that file."""
    (tmp_path / ".monitor").mkdir()
    info = {"pid": 999_999_999, "name": "x", "log": "/etc/passwd", "started": 1.0}
    (tmp_path / ".monitor" / "demo.json").write_text(json.dumps(info))
    state = launcher.demo_state(tmp_path)
    assert state is not None and state.log == tmp_path / ".monitor" / "demo.log" and not state.running


def test_the_demo_pid_file_and_log_stay_inside_the_root(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "logs", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / ".monitor").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(OSError, match="outside the log root"):
        launcher.start_demo(root)
    (elsewhere / "demo.json").write_text(json.dumps({"pid": os.getpid(), "name": "x", "log": "/etc/passwd"}))
    assert launcher.demo_state(root) is None
    assert sorted(os.listdir(elsewhere)) == ["demo.json"]


def test_demo_running_follows_the_process(tmp_path: Path, fake_demo: None) -> None:
    """What the live page's refresh compares to know the sidebar's Start/Stop is out of date."""
    assert not launcher.demo_running(tmp_path)
    state = launcher.start_demo(tmp_path)
    try:
        assert launcher.demo_running(tmp_path)
        assert launcher.stop_demo(tmp_path)
        deadline = time.monotonic() + 10
        while launcher.demo_running(tmp_path):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert not launcher.stop_demo(tmp_path)  # nothing left to stop
    finally:
        if launcher.demo_running(tmp_path):
            _stop(state)


def test_the_samples_caption_says_what_the_written_runs_are(log_root: Path) -> None:
    """Issue 36 item 7: the caption said "four finished runs" while one of them is listed as stopped."""
    from collections import Counter

    from monitor_cb.ingest.store import RunStore

    at = AppTest.from_file(DASHBOARD, default_timeout=120).run()
    assert not at.exception
    caption = next(c.value for c in [*at.caption, *at.sidebar.caption] if "synthetic runs" in c.value)
    at.button(key="write_samples").click().run()
    assert not at.exception
    statuses = Counter(run.status for run in RunStore(log_root).list_runs())
    assert statuses == {"finished": 3, "stopped": 1}
    assert "four synthetic runs" in caption and "three finish" in caption
    assert "one diverges and its NaN guard stops it" in caption and "finished runs" not in caption


# ----------------------------------------------------------------------------- a planted pid file (#34 item 3)
@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated live process in its own session (the worst case for a process-group signal) whose command
    line even carries the words "monitor_cb" and "demo", like a ``watch`` on a root named demo would."""
    code = "import time; time.sleep(600)"
    proc = subprocess.Popen([sys.executable, "-c", code, "monitor_cb", "demo"], start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A plain ``sleep``, in its own session."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _plant(root: Path, pid: int, **extra: object) -> None:
    (root / ".monitor").mkdir(exist_ok=True)
    info = {"pid": pid, "name": "demo-planted", "log": "x", "started": 1.0, **extra}
    (root / ".monitor" / "demo.json").write_text(json.dumps(info))


def _lives(proc: subprocess.Popen[bytes]) -> bool:
    """Still running after any signal sent has had time to land (poll: no fixed sleep decides)."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return proc.poll() is None


def test_a_planted_pid_file_is_not_a_demo_and_stop_signals_nothing(
    log_root: Path, victim: subprocess.Popen[bytes], sleeper: subprocess.Popen[bytes]
) -> None:
    for proc, extra in ((victim, {}), (sleeper, {}), (victim, {"nonce": "forged"}), (sleeper, {"nonce": ""})):
        _plant(log_root, proc.pid, **extra)
        state = launcher.demo_state(log_root)
        assert state is not None and state.pid == proc.pid and not state.running
        assert not launcher.stop_demo(log_root)
    assert _lives(victim) and _lives(sleeper)


def test_stop_clicked_after_the_pid_file_was_replaced_spares_the_named_process(
    log_root: Path, fake_demo: None, victim: subprocess.Popen[bytes]
) -> None:
    """As found: a viewer sees Stop (a real demo runs), someone replaces demo.json with one naming another
    process (copying the real file's nonce, too), the viewer clicks Stop."""
    write_run(log_root, "exp1", steps=50)
    at = AppTest.from_file(DASHBOARD, default_timeout=60).run()
    at.sidebar.button(key="start_demo").click().run()
    real = launcher.demo_state(log_root)
    try:
        assert real is not None and real.running and at.sidebar.button(key="stop_demo")
        nonce = json.loads((log_root / ".monitor" / "demo.json").read_text())["nonce"]
        _plant(log_root, victim.pid, nonce=nonce)
        at.sidebar.button(key="stop_demo").click().run()
        assert not at.exception
        assert _lives(victim), "Stop signalled a process the dashboard did not start"
        assert any("not running any more" in e.value for e in at.error)
        at.run()
        assert at.sidebar.button(key="start_demo")  # the planted pid is not shown as a running demo
    finally:
        os.killpg(real.pid, signal.SIGTERM)


def test_a_demo_another_dashboard_started_is_known_by_its_nonce_and_stopped(log_root: Path, fake_demo: None) -> None:
    """A restarted dashboard (no process object in memory) still shows and stops the demo it can prove is one."""
    state = launcher.start_demo(log_root)
    launcher._PROCS.clear()  # what a restart of the server loses
    proc_gone = False
    try:
        # Popen returns once the child's exec closed its close-on-exec pipe, a moment before the kernel
        # records where the new program's environment is: /proc/PID/environ reads empty until then (seen
        # once in a fresh clone's suite, running=False). A restarted dashboard sees the demo a moment later.
        deadline = time.monotonic() + 10
        again = launcher.demo_state(log_root)
        while again is not None and not again.running and time.monotonic() < deadline:
            time.sleep(0.05)
            again = launcher.demo_state(log_root)
        assert again is not None and again.running and again.pid == state.pid
        assert launcher.stop_demo(log_root)
        deadline = time.monotonic() + 10
        while not proc_gone:
            assert time.monotonic() < deadline
            try:
                os.waitpid(state.pid, os.WNOHANG)  # our child: reap it, as the lost Popen would have
                os.kill(state.pid, 0)
            except (ChildProcessError, ProcessLookupError):
                proc_gone = True
            time.sleep(0.05)
    finally:
        if not proc_gone:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(state.pid, signal.SIGKILL)


# ----------------------------------------------------------------------------- a read-only dashboard (#34 item 2)
WRITE_KEYS = ("start_demo", "stop_demo", "write_samples")


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if ".monitor" not in p.parts}


def test_a_read_only_dashboard_offers_no_demo_and_no_samples(
    log_root: Path, fake_demo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As found: with ``--read-only-settings`` a viewer clicked "Generate sample runs" (four runs written) and
    could start the demo. Now no page offers either, on an empty root or beside runs."""
    monkeypatch.setenv("MONITOR_READ_ONLY_SETTINGS", "1")
    at = AppTest.from_file(DASHBOARD, default_timeout=60).run()
    assert not at.exception
    assert not [b for b in at.button if b.key in WRITE_KEYS]
    assert any("read-only" in i.value for i in at.info)
    log_root = log_root.parent / "with-runs"  # a root the cached store of the empty one has not listed
    monkeypatch.setenv("MONITOR_LOGDIR", str(log_root))
    write_run(log_root, "exp1", steps=50)
    before = _files(log_root)
    at = AppTest.from_file(DASHBOARD, default_timeout=60).run()
    assert not at.exception and len(at.sidebar.selectbox[0].options) == 1
    assert not [b for b in at.button if b.key in WRITE_KEYS]
    for button in at.sidebar.button:  # whatever else the sidebar offers writes nothing into the root
        button.click().run()
        assert not at.exception
    assert _files(log_root) == before
    assert launcher.demo_state(log_root) is None  # nothing started
    monkeypatch.delenv("MONITOR_READ_ONLY_SETTINGS")
    at = AppTest.from_file(DASHBOARD, default_timeout=60).run()
    assert at.sidebar.button(key="write_samples")  # an open dashboard still offers them
