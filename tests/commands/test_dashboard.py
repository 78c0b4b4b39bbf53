"""``monitor-cb dashboard``: the streamlit command line it runs, and its defaults against .streamlit/config.toml."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import tomllib

from monitor_cb.cli import build_parser, main
from monitor_cb.commands import dashboard

REPO = Path(__file__).resolve().parents[2]


def test_flags_are_the_checkouts_streamlit_config() -> None:
    """Installed, there is no .streamlit/config.toml: the command must give the same settings as flags."""
    config = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    flat = {
        f"{section}.{key}": value
        if isinstance(value, list)
        else str(value).lower()
        if isinstance(value, bool)
        else str(value)
        for section, values in config.items()
        for key, value in values.items()
    }
    assert flat == dashboard.SERVER_OPTIONS


def test_streamlit_argv(tmp_path: Path) -> None:
    script = dashboard.app_script()
    assert script == REPO / "dashboard.py"  # a source checkout runs its own dashboard.py
    argv = dashboard.streamlit_argv(script, tmp_path, "127.0.0.1", 8600)
    assert argv[:5] == [sys.executable, "-m", "streamlit", "run", str(script)]
    assert argv[-3:] == ["--", "--logdir", str(tmp_path)]
    pairs = dict(zip(argv[5:-3:2], argv[6:-3:2], strict=True))  # a repeated flag keeps its last value here
    assert pairs["--server.port"] == "8600" and pairs["--server.address"] == "127.0.0.1"
    assert pairs["--server.headless"] == "true" and pairs["--browser.gatherUsageStats"] == "false"
    assert pairs["--server.enableXsrfProtection"] == "true"
    hosts = [argv[i + 1] for i, part in enumerate(argv[:-3]) if part == "--server.allowedHosts"]
    assert hosts == ["localhost", "127.0.0.1", "::1"]  # a list option: the flag repeated


def test_allowed_hosts_add_to_the_loopback_names(tmp_path: Path) -> None:
    argv = dashboard.streamlit_argv(dashboard.app_script(), tmp_path, "0.0.0.0", 8600, "gpu-node-7, dash.example")
    hosts = [argv[i + 1] for i, part in enumerate(argv[:-3]) if part == "--server.allowedHosts"]
    assert hosts == ["localhost", "127.0.0.1", "::1", "gpu-node-7", "dash.example"]
    assert build_parser().parse_args(["dashboard", "--allowed-hosts", "x"]).allowed_hosts == "x"


def test_parser_defaults_listen_on_localhost_only() -> None:
    args = build_parser().parse_args(["dashboard", "--logdir", "runs"])
    assert (args.host, args.port, args.logdir) == ("127.0.0.1", 8501, "runs")


def test_without_streamlit_it_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = dashboard.importlib.util.find_spec
    monkeypatch.setattr(
        dashboard.importlib.util, "find_spec", lambda name, *a: None if name == "streamlit" else real(name, *a)
    )
    assert main(["dashboard"]) == 2
    assert "pip install 'monitor-cb[dashboard]'" in capsys.readouterr().err


def test_token_and_read_only_reach_the_server_through_its_environment_not_its_argv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    parse = build_parser().parse_args
    assert parse(["dashboard", "--token"]).token == "auto"
    assert parse(["dashboard", "--token", "pw 1", "--logdir", "runs"]).token == "pw 1"
    assert parse(["dashboard"]).token is None and parse(["dashboard"]).read_only_settings is False
    env = dashboard.server_env({"PATH": "/bin"}, "auto", True)
    assert env == {"PATH": "/bin", "MONITOR_DASHBOARD_TOKEN": "auto", "MONITOR_READ_ONLY_SETTINGS": "1"}
    assert dashboard.server_env({"PATH": "/bin"}, None, False) == {"PATH": "/bin"}

    started: list[tuple[list[str], dict[str, str]]] = []
    monkeypatch.setattr(dashboard.os, "execve", lambda exe, argv, env: started.append((argv, env)))
    monkeypatch.delenv("MONITOR_DASHBOARD_TOKEN", raising=False)
    main(["dashboard", "--logdir", str(tmp_path), "--token", "s3cret-pw", "--read-only-settings"])
    argv, env = started[-1]
    assert "s3cret-pw" not in " ".join(argv) and env["MONITOR_DASHBOARD_TOKEN"] == "s3cret-pw"
    assert env["MONITOR_READ_ONLY_SETTINGS"] == "1" and "warning" not in capsys.readouterr().err
    main(["dashboard", "--logdir", str(tmp_path), "--host", "0.0.0.0"])
    assert "without --token" in capsys.readouterr().err
