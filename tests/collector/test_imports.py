"""The reading side never pays for MindSpore; the callback never pays for MindFormers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return set(out.stdout.split())


def test_import_monitor_cb_and_pure_helpers_do_not_import_mindspore() -> None:
    loaded = modules_after(
        "import monitor_cb, monitor_cb.train.extract, monitor_cb.train.guard, monitor_cb.train.lr, "
        "monitor_cb.train.timing, monitor_cb.commands.demo"
    )
    assert "monitor_cb.commands.demo" in loaded
    assert "mindspore" not in loaded


def test_live_monitor_does_not_import_mindformers() -> None:
    loaded = modules_after("from monitor_cb import LiveMonitor")
    assert "mindspore" in loaded and "monitor_cb.train.callback" in loaded
    assert "mindformers" not in loaded
