"""Real MindSpore 2.9 summary files for the tests, written by ``ms_summary_script.py`` in a subprocess."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).with_name("ms_summary_script.py")


def write_real_summaries(out: Path) -> dict[str, list[dict[str, Any]]]:
    """Write ``out/collector`` and ``out/record``; returns every event as MindSpore's own protos read it,
    keyed by the file's path relative to ``out``. Skips when MindSpore is not installed."""
    if importlib.util.find_spec("mindspore") is None:  # not importorskip: its protos must load in their own process
        pytest.skip("mindspore is not installed")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(out)], cwd=out.parent, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and "wrote 3 files" in done.stdout, done.stderr[-3000:]
    return json.loads((out / "expected.json").read_text())


def only(expected: dict[str, Any], part: str, suffix: str = "_MS") -> tuple[str, list[dict[str, Any]]]:
    """The one file of ``part`` ("collector" or "record") ending in ``suffix``, and its events."""
    (name,) = [k for k in expected if k.startswith(part + "/") and k.endswith(suffix)]
    return name, expected[name]
