"""The embedded default's demo launcher: detached, logged inside the root's hidden folder, never twice."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pages import _demo
from tests.app.conftest import DASHBOARD


@pytest.fixture
def fake_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in process that prints and sleeps (and carries the words the pid check looks for)."""

    def command(root: Path, name: str, steps: int) -> list[str]:
        code = "import sys, time; print('training', sys.argv[1:]); sys.stdout.flush(); time.sleep(30)"
        return [sys.executable, "-c", code, "monitor_cb", "demo", str(root), name]

    monkeypatch.setattr(_demo, "demo_command", command)


def _stop(state: _demo.DemoState) -> None:
    os.killpg(state.pid, signal.SIGTERM)  # the demo runs in its own session (process group)
    deadline = time.monotonic() + 10
    while _demo.demo_state(Path(state.log).parent.parent).running:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_started_once_detached_with_its_log_in_the_hidden_folder(tmp_path: Path, fake_demo: None) -> None:
    first = _demo.start_demo(tmp_path)
    try:
        again = _demo.start_demo(tmp_path)
        assert again.pid == first.pid  # a second click does not start a second training
        assert os.getsid(first.pid) == first.pid  # its own session: detached from the dashboard
        assert first.log == tmp_path / ".monitor" / "demo.log"
        state = _demo.demo_state(tmp_path)
        assert state is not None and state.running and state.name == first.name
        deadline = time.monotonic() + 10
        while "training" not in _demo.log_tail(first.log):
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        _stop(first)
    ended = _demo.demo_state(tmp_path)
    assert ended is not None and not ended.running  # reaped, not a zombie that looks alive
    restarted = _demo.start_demo(tmp_path)
    try:
        assert restarted.pid != first.pid
    finally:
        _stop(restarted)


def test_no_demo_yet(tmp_path: Path) -> None:
    assert _demo.demo_state(tmp_path) is None
    (tmp_path / ".monitor").mkdir()
    (tmp_path / ".monitor" / "demo.json").write_text("{not json")
    assert _demo.demo_state(tmp_path) is None


def test_demo_button_starts_it_and_the_page_waits_for_the_run(log_root: Path, fake_demo: None) -> None:
    at = AppTest.from_file(DASHBOARD, default_timeout=60).run()
    at.button(key="start_demo").click().run()
    assert not at.exception
    state = _demo.demo_state(log_root)
    try:
        assert state is not None and state.running
        assert any("is starting" in i.value for i in at.info)
        at.run()
        assert not at.exception
        assert at.button(key="start_demo").disabled  # while it runs, no second one
        assert _demo.demo_state(log_root).pid == state.pid
    finally:
        _stop(state)
