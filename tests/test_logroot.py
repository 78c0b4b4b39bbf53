"""The log root is decided in one place: --logdir, else $MONITOR_LOGDIR, else $MONITOR_CB_LOGDIR, else ./logs."""

from __future__ import annotations

from pathlib import Path

from monitor_cb.logroot import log_root, logdir_argument
from monitor_cb.views.logdir import resolve_logdir


def test_precedence() -> None:
    env = {"MONITOR_LOGDIR": "/a", "MONITOR_CB_LOGDIR": "/b"}
    assert log_root("/given", env) == Path("/given")
    assert log_root(None, env) == Path("/a")
    assert log_root("", {"MONITOR_CB_LOGDIR": "/b"}) == Path("/b")  # the older name still works
    assert log_root(None, {}) == Path("logs")
    assert log_root("~/runs", {}) == Path.home() / "runs"
    assert log_root(None, {"MONITOR_LOGDIR": "file:///data/runs"}) == Path("/data/runs")


def test_a_bucket_root_stays_a_url_without_credentials() -> None:
    root = log_root("s3://KEY:SECRET@bucket/runs", {})
    assert isinstance(root, str) and "SECRET" not in root and root.endswith("bucket/runs")
    assert resolve_logdir([], {"MONITOR_LOGDIR": "s3://bucket/runs"}) == root


def test_logdir_argument_forms() -> None:
    assert logdir_argument(["--logdir", "x"]) == "x"
    assert logdir_argument(["--logdir=y", "--other"]) == "y"
    assert logdir_argument(["--logdir", "x", "--logdir", "z"]) == "z"
    assert logdir_argument(["--logdir"]) is None and logdir_argument([]) is None


def test_the_dashboard_resolves_the_same_root(tmp_path: Path) -> None:
    assert resolve_logdir(["--logdir", str(tmp_path)], {}) == tmp_path.resolve()
    assert resolve_logdir([], {"MONITOR_CB_LOGDIR": str(tmp_path / "b")}) == (tmp_path / "b").resolve()
    assert resolve_logdir([], {}, cwd=tmp_path) == (tmp_path / "logs").resolve()


def test_a_file_given_as_the_root_means_its_folder(tmp_path: Path) -> None:
    """A run's file pasted as ``--logdir`` (``…/rank_0/info.log``, ``…/metrics.jsonl``) opens the run it belongs to."""
    log = tmp_path / "output" / "log" / "rank_0" / "info.log"
    log.parent.mkdir(parents=True)
    log.write_text("")
    assert log_root(str(log)) == log.parent
    assert log_root(str(tmp_path / "output")) == tmp_path / "output"
    assert log_root(str(tmp_path / "missing.jsonl")) == tmp_path / "missing.jsonl", "a path that does not exist stays"
