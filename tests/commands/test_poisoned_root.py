"""The commands, as real processes, on a root where ``x/metrics.meta.json`` (and the summary index, and
diagnosis.json) are FIFOs: each finishes, reads the other run, and (summary, diagnose, export) names the
skipped files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ingest.helpers import line

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60  # a command that hangs on a FIFO is killed here and the test fails


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    for name in ("good", "x"):
        run = root / name
        run.mkdir(parents=True)
        (run / "metrics.jsonl").write_bytes(b"".join(line({"step": s, "loss": 1.0 / s}) for s in range(1, 31)))
    (root / "good" / "metrics.meta.json").write_text(json.dumps({"name": "good", "status": "finished"}))
    os.mkfifo(root / "x" / "metrics.meta.json")
    (root / ".monitor" / "cache").mkdir(parents=True)
    os.mkfifo(root / ".monitor" / "cache" / "index.json")
    os.mkfifo(root / ".monitor" / "diagnosis.json")
    return root


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MONITOR_")}
    env.update(PYTHONPATH=str(REPO), HOME=str(cwd), XDG_CONFIG_HOME=str(cwd / ".config"))  # no user settings
    return subprocess.run(
        [sys.executable, "-m", "monitor_cb", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


@pytest.mark.parametrize("command", ["summary", "diagnose", "export"])
def test_a_command_on_another_run_finishes(root: Path, tmp_path: Path, command: str) -> None:
    done = run_cli(command, "good", "--logdir", str(root), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"note: skipped {root / 'x' / 'metrics.meta.json'}: is not a regular file (a FIFO)" in done.stderr
    if command == "summary":
        assert "records    30" in done.stdout
    if command == "diagnose":
        assert "diagnosis.json" in done.stderr  # its settings file was skipped, the defaults used


def test_watch_once_finishes(root: Path, tmp_path: Path) -> None:
    done = run_cli("watch", str(root), "--once", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "good [finished]: run finished at step 30" in done.stderr  # the other run was read and judged
