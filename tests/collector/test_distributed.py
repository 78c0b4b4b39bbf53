"""Two real MindSpore processes under ``msrun``: one metrics file per rank, matching steps."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.mindspore, pytest.mark.slow]
SCRIPT = Path(__file__).with_name("dp_train_script.py")
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_msrun_two_workers_write_one_complete_file_each(tmp_path: Path) -> None:
    bindir = Path(sys.executable).parent
    msrun = shutil.which("msrun", path=str(bindir)) or shutil.which("msrun")
    if msrun is None:
        pytest.skip("msrun (MindSpore's launcher) is not installed")
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONPATH=str(ROOT))
    run_dir = tmp_path / "job"
    result = subprocess.run(
        [
            msrun,
            "--worker_num=2",
            "--local_worker_num=2",
            f"--master_port={free_port()}",
            f"--log_dir={tmp_path / 'msrun_logs'}",
            "--join=True",
            str(SCRIPT),
            str(run_dir),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    logs = "\n".join(p.read_text()[-2000:] for p in sorted((tmp_path / "msrun_logs").glob("worker_*.log")))
    assert result.returncode == 0, logs
    files = sorted(p.name for p in run_dir.glob("*.jsonl"))
    assert files == ["metrics.rank0.jsonl", "metrics.rank1.jsonl"], files
    steps = {}
    for rank in (0, 1):
        records = [json.loads(line) for line in (run_dir / f"metrics.rank{rank}.jsonl").read_text().splitlines()]
        train = [r for r in records if "loss" in r]
        assert {r["rank"] for r in records} == {rank}
        steps[rank] = [r["step"] for r in train]
        meta = json.loads((run_dir / f"metrics.rank{rank}.meta.json").read_text())
        assert meta["status"] == "finished" and meta["world_size"] == 2 and meta["rank"] == rank
    assert steps[0] == steps[1] == list(range(5, 41, 5))
