"""``monitor-cb dashboard --token`` as a user starts it: the output holds one link, the one that works
(issue 36, item 8). Streamlit's own "URL: http://localhost:…" line, without the token, used to come first."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor_cb.demo.samples import write_sample_runs
from tests.browser.harness import free_port, poll

pytestmark = [pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def _started_dashboard(tmp_path: Path, *flags: str) -> Iterator[str]:
    """The command's output once it has printed its link and answers on the port; stopped on exit."""
    root = tmp_path / "logs"
    write_sample_runs(root, n_runs=1, steps=50, seed=0)
    port = free_port()
    log = tmp_path / "out.log"
    env = {k: v for k, v in os.environ.items() if k not in ("MONITOR_DASHBOARD_TOKEN", "MONITOR_LOGDIR")}
    cmd = [sys.executable, "-m", "monitor_cb", "dashboard", "--logdir", str(root), "--port", str(port), *flags]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env={**env, "PYTHONUNBUFFERED": "1"}
        )
    try:

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as response:
                    return response.status == 200
            except OSError:
                return proc.poll() is not None

        poll(healthy, 120, 0.1, "the dashboard to answer")
        assert proc.poll() is None, log.read_text()
        poll(lambda: "http://" in log.read_text(), 30, what="a link on the output")
        yield log.read_text()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_with_a_token_the_only_link_printed_is_the_working_one(tmp_path: Path) -> None:
    with _started_dashboard(tmp_path, "--token") as out:
        links = re.findall(r"https?://\S+", out)
        assert len(links) == 1, out
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]+", links[0]), out
        assert "URL:" not in out, out
        with urllib.request.urlopen(links[0], timeout=20) as response:  # the link opens the dashboard
            assert response.status == 200


def test_without_a_token_streamlit_prints_its_link(tmp_path: Path) -> None:
    with _started_dashboard(tmp_path) as out:
        pass
    assert re.search(r"URL: http://localhost:\d+", out), out
    assert "token" not in out
