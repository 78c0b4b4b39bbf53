"""monitor_cb.views.logdir: the dashboard's log root."""

from __future__ import annotations

from pathlib import Path

from monitor_cb.views.logdir import resolve_logdir


def test_logdir_from_argv_env_default(tmp_path: Path) -> None:
    assert resolve_logdir(["--logdir", str(tmp_path)], {}) == tmp_path.resolve()
    assert resolve_logdir([f"--logdir={tmp_path}"], {}) == tmp_path.resolve()
    assert resolve_logdir([], {"MONITOR_LOGDIR": str(tmp_path / "x")}) == (tmp_path / "x").resolve()
    assert resolve_logdir([], {}, cwd=tmp_path) == (tmp_path / "logs").resolve()
    # the command line wins over the environment
    assert resolve_logdir(["--logdir", "a"], {"MONITOR_LOGDIR": "b"}, cwd=tmp_path) == tmp_path / "a"
