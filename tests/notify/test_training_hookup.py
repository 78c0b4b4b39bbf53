"""The guard's decision from inside training: LiveMonitor(notify=...) on a real MindSpore demo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.notify.test_watcher import sent, watch_once

pytestmark = [pytest.mark.mindspore, pytest.mark.slow]


def test_demo_with_nan_and_guard_stop_notifies_once_from_training(tmp_path: Path, http_receiver) -> None:
    pytest.importorskip("mindspore")
    rx = http_receiver()
    config = tmp_path / "notify.toml"
    config.write_text(f'[notify]\ngather = 0\n\n[[channels]]\ntype = "webhook"\nurl = "{rx.url}/hook"\n')
    root = tmp_path / "logs"
    command = [sys.executable, "-m", "monitor_cb", "demo", "--steps", "200", "--inject", "nan@60", "--on-nan", "stop"]
    command += ["--logdir", str(root), "--name", "nan-demo", "--notify", str(config)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    meta = json.loads((root / "nan-demo" / "metrics.meta.json").read_text())
    assert meta["status"] == "stopped" and "non-finite" in meta["reason"]
    assert meta["notified"] == ["guard_stop"]
    assert len(rx.requests) == 1
    (alert,) = sent(rx)
    assert alert["kind"] == "guard_stop" and alert["severity"] == "error"
    assert "non-finite loss at step" in alert["message"] and alert["run"] == "nan-demo"
    # The watcher, started later, knows the stop was already sent from training.
    watch_once(root, rx)
    assert [a["kind"] for a in sent(rx)].count("stopped") == 0, "the stop was already told from training"
