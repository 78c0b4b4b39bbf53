"""``sync``, ``summary``, ``export``, ``diagnose`` and ``watch`` on a bucket, as a user runs them (subprocesses)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

from monitor_cb.train.writer import MetricsWriter
from tests.objectstore import KEY_ID, SECRET, S3Env, list_keys
from tests.storage.helpers import bucket_matches_local

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    result = subprocess.run(
        [sys.executable, "-m", "monitor_cb", *args], capture_output=True, text=True, env=full, timeout=timeout
    )
    for secret in (SECRET, KEY_ID):
        assert secret not in result.stdout + result.stderr
    return result


def two_rank_run(run: Path, steps: int = 60, status: str = "finished") -> None:
    for rank in (0, 1):
        writer = MetricsWriter(run, rank=rank, world_size=2, fsync_interval=0, extra_meta={"device_id": rank})
        for step in range(1, steps + 1):
            loss = float("nan") if (rank, step) == (1, steps) else 2.0 / step
            writer.log_at(1.7e9 + step, step=step, loss=loss, grad_norm=1.0)
        writer.close(status)


def test_sync_once_ships_a_run_and_is_idempotent(s3_env: S3Env, tmp_path: Path) -> None:
    run = tmp_path / "exp1"
    two_rank_run(run)
    first = cli("sync", str(run), s3_env.url("runs", "exp1"), "--once")
    assert first.returncode == 0, first.stderr
    bucket_matches_local(s3_env.endpoint, s3_env.bucket, "runs/exp1", run)
    before = list_keys(s3_env.endpoint, s3_env.bucket)
    again = cli("sync", str(run), s3_env.url("runs", "exp1"), "--once")
    assert again.returncode == 0 and "0 chunk(s)" in again.stderr
    assert list_keys(s3_env.endpoint, s3_env.bucket) == before


def test_sync_follows_until_finished(s3_env: S3Env, tmp_path: Path) -> None:
    run = tmp_path / "exp1"
    writer = MetricsWriter(run, rank=0, world_size=1, fsync_interval=0)
    writer.log(step=1, loss=1.0)
    writer.flush()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "monitor_cb",
            "sync",
            str(run),
            s3_env.url("exp1"),
            "--interval",
            "0.2",
            "--until-finished",
        ],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for step in range(2, 40):
            writer.log(step=step, loss=1.0 / step)
        writer.close()
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    bucket_matches_local(s3_env.endpoint, s3_env.bucket, "exp1", run)


def test_sync_with_credentials_in_the_url_never_prints_them(s3_env: S3Env, tmp_path: Path) -> None:
    run = tmp_path / "exp1"
    two_rank_run(run, steps=5)
    url = f"s3://{KEY_ID}:{SECRET}@{s3_env.bucket}/exp1"
    result = cli("sync", str(run), url, "--once")  # cli() asserts neither value is printed
    assert result.returncode == 0 and f"s3://{s3_env.bucket}/exp1" in result.stderr


def test_sync_reports_a_missing_package_or_bad_url_clearly(tmp_path: Path) -> None:
    (tmp_path / "exp1").mkdir()
    result = cli("sync", str(tmp_path / "exp1"), "nosuchproto://bucket/x", "--once")
    assert result.returncode == 2 and "error:" in result.stderr and "Traceback" not in result.stderr


def test_summary_export_diagnose_read_a_bucket(s3_env: S3Env, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    two_rank_run(logs / "exp1")
    assert cli("sync", str(logs), s3_env.url("logs"), "--once").returncode == 0

    summary = cli("summary", "exp1", "--root", s3_env.url("logs"), "--json")
    assert summary.returncode == 0, summary.stderr
    data = json.loads(summary.stdout)
    assert (data["status"], data["ranks"], data["records"], data["path"]) == (
        "finished",
        [0, 1],
        120,
        f"s3://{s3_env.bucket}/logs/exp1",
    )
    by_url = cli("summary", s3_env.url("logs", "exp1"), "--json")
    assert json.loads(by_url.stdout)["records"] == 120

    exported = cli("export", "exp1", "--root", s3_env.url("logs"))
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert len(rows) == 120 and rows[-1]["loss"] == "NaN"

    diagnosis = cli("diagnose", s3_env.url("logs", "exp1"), "--json")
    assert diagnosis.returncode == 1, diagnosis.stderr  # the NaN on rank 1 is an error finding
    findings = json.loads(diagnosis.stdout)["findings"]
    assert any(f["kind"] == "nan_loss" or "nan" in f["kind"] for f in findings)

    missing = cli("summary", "nope", "--root", s3_env.url("logs"))
    assert missing.returncode != 0 and "no run 'nope'" in missing.stderr


def test_watch_once_on_a_bucket(s3_env: S3Env, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    two_rank_run(logs / "exp1", status="failed")
    assert cli("sync", str(logs), s3_env.url("logs"), "--once").returncode == 0
    out = tmp_path / "alerts.jsonl"
    hook = f"{sys.executable} -c \"import sys; open({str(out)!r}, 'a').write(sys.stdin.read() + chr(10))\""
    result = cli("watch", s3_env.url("logs"), "--once", "--skip-older", "0", "--exec", hook)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert "exp1" in text and "failed" in text
    state = Path(os.environ["MONITOR_STATE_DIR"]) / "watch"
    assert any(state.rglob("watch-state.json"))  # the watcher's state is kept locally, not in the bucket


def test_sync_once_with_a_fifo_as_metadata_finishes(s3_env: S3Env, tmp_path: Path) -> None:
    """A FIFO where rank 1's metadata should be: the metrics are shipped, the FIFO is named, nothing hangs."""
    run = tmp_path / "exp1"
    two_rank_run(run)
    meta = run / "metrics.rank1.meta.json"
    meta.unlink()
    os.mkfifo(meta)
    done = cli("sync", str(run), s3_env.url("runs", "exp1"), "--once", timeout=60)
    assert done.returncode == 0, done.stderr
    assert "metrics.rank1.meta.json is not a regular file (a FIFO); not uploaded" in done.stderr
    keys = list_keys(s3_env.endpoint, s3_env.bucket, "runs/exp1")
    assert "runs/exp1/metrics.rank0.meta.json" in keys
    assert any(k.startswith("runs/exp1/metrics.rank1.jsonl.chunks/") for k in keys)
    assert "runs/exp1/metrics.rank1.meta.json" not in keys
