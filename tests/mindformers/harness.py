"""Run ``train_job.py`` (MindFormers 1.9's Trainer on a tiny LLaMA) in a subprocess, and read what it wrote.

MindFormers' context, registry and ``./output/log`` are process-global, so each training runs in
its own interpreter with its own working directory. The MFLossMonitor lines are parsed here by a
regex of the test's own, independent of the product's log importer, so the comparison of
LiveMonitor's records with MindFormers' printed values checks both.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monitor_cb.record import decode_record

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
YAML = HERE / "tiny_llama.yaml"
JOB = HERE / "train_job.py"
# Only a bound on a training that hangs: three trainings share the cores with the rest of the suite, and
# on a loaded machine (load 25 seen here) 20 steps of import, compile and train took longer than 240 s.
TIMEOUT_S = 900

# "{ Epoch:[  1/  1], step:[    2/   20], loss:[4.148911/4.159635], per_step_time: 25ms, lr: 0.0005,
#  overflow cond: False, loss_scale: 65536.0, global_norm: [1.3723053], ..."
STEP_LINE = re.compile(
    r"\{ Epoch:\[\s*(?P<epoch>\d+)/\s*\d+\], step:\[\s*(?P<step>\d+)/\s*\d+\], "
    r"loss:\[(?P<loss>[^/]+)/[^\]]+\], per_step_time: (?P<ms>\d+)ms, lr: (?P<lr>\S+), "
    r"overflow cond: (?P<overflow>\w+), loss_scale: (?P<scale>[^,]+), global_norm: \[(?P<norm>[^\]]+)\]"
)


@dataclass(frozen=True)
class TrainedRun:
    """One finished training: its working directory, LiveMonitor's run and MindFormers' log."""

    cwd: Path
    run_dir: Path
    stdout: str

    @property
    def tensorboard_dir(self) -> Path:
        """MindFormers' ``tensorboard_dir`` (``--tensorboard tensorboard``): event files in ``rank_0``."""
        return self.cwd / "tensorboard"

    @property
    def info_log(self) -> Path:
        return self.cwd / "output" / "log" / "rank_0" / "info.log"

    def records(self) -> list[dict[str, Any]]:
        """LiveMonitor's step records (telemetry-only rows left out), NaN strings decoded."""
        rows = [decode_record(json.loads(line)) for line in (self.run_dir / "metrics.jsonl").read_text().splitlines()]
        return [r for r in rows if "loss" in r]

    def meta(self) -> dict[str, Any]:
        return json.loads((self.run_dir / "metrics.meta.json").read_text())

    def step_lines(self) -> list[str]:
        """MFLossMonitor's per-step lines of ``info.log``, as written."""
        return [line for line in self.info_log.read_text().splitlines() if STEP_LINE.search(line)]

    def printed(self) -> dict[int, dict[str, str]]:
        """MFLossMonitor's printed values by step."""
        found = (STEP_LINE.search(line) for line in self.step_lines())
        return {int(m["step"]): m.groupdict() for m in found if m}


@dataclass
class Training:
    """A training started in its own process (by this test process or another); :meth:`wait` returns what it
    wrote. The process writes its exit code to ``exit_code`` when it ends, so a test process that did not start
    it can wait for it too."""

    workdir: Path
    process: subprocess.Popen | None = None  # None: started by another test process

    @property
    def exit_file(self) -> Path:
        return self.workdir / "exit_code"

    def ended(self) -> bool:
        return self.exit_file.exists()

    def wait(self) -> TrainedRun:
        """Wait for the training to end; fail with its output if it failed."""
        deadline = time.monotonic() + TIMEOUT_S
        while not self.ended():
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"training in {self.workdir} still running after {TIMEOUT_S} s")
            time.sleep(0.2)
        code = int(self.exit_file.read_text().strip() or -1)
        stdout = (self.workdir / "stdout.txt").read_text(errors="replace")
        stderr = (self.workdir / "stderr.txt").read_text(errors="replace")
        assert code == 0, f"training failed ({code}):\n{stdout[-3000:]}\n{stderr[-3000:]}"
        return TrainedRun(cwd=self.workdir, run_dir=self.workdir / "out" / "run", stdout=stdout)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # the shell and the job: one process group
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


# The job, then its exit code written whole (renamed into place) for any process waiting on it.
_WRAPPER = 'code=0; "$@" || code=$?; echo $code > exit_code.tmp && mv exit_code.tmp exit_code'


def start(workdir: Path, *flags: str) -> Training:
    """Start ``train_job.py`` with ``flags`` in ``workdir`` (created), output to files there."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python"}
    with open(workdir / "stdout.txt", "wb") as out, open(workdir / "stderr.txt", "wb") as err:
        process = subprocess.Popen(
            ["sh", "-c", _WRAPPER, "sh", sys.executable, str(JOB), str(YAML), str(workdir / "out"), *flags],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    return Training(workdir, process)
