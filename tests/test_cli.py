"""One convention for every command: ``--logdir`` for the log root, usage errors as ``error: ...`` and exit 2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from monitor_cb.cli import COMMANDS, build_parser, main
from monitor_cb.train.writer import MetricsWriter

# commands that read or write runs under a log root
ROOTED = ("summary", "export", "diagnose", "watch", "demo", "dashboard")


def help_text(command: str) -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return " ".join(sub.format_help().split())


@pytest.mark.parametrize("command", ROOTED)
def test_every_command_takes_logdir_and_names_the_variable_the_code_reads(command: str) -> None:
    text = help_text(command)
    assert "--logdir" in text
    assert set(re.findall(r"\$(MONITOR\w*LOGDIR)", text)) == {"MONITOR_LOGDIR"}, text


@pytest.mark.parametrize("variable", ["MONITOR_LOGDIR", "MONITOR_CB_LOGDIR"])
@pytest.mark.parametrize("command", ["summary", "diagnose"])
def test_the_environment_variable_finds_the_run(
    command: str, variable: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``diagnose --help`` named $MONITOR_CB_LOGDIR while the code read $MONITOR_LOGDIR: both now work."""
    with MetricsWriter(tmp_path / "exp1") as writer:
        for step in range(1, 30):
            writer.log(step=step, loss=2.0 - 0.01 * step)
    monkeypatch.delenv("MONITOR_LOGDIR", raising=False)
    monkeypatch.delenv("MONITOR_CB_LOGDIR", raising=False)
    monkeypatch.setenv(variable, str(tmp_path))
    monkeypatch.chdir(tmp_path.parent)  # ./logs does not hold it
    assert main([command, "exp1"]) == 0
    assert "exp1" in capsys.readouterr().out


def test_root_is_the_same_option_as_logdir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with MetricsWriter(tmp_path / "exp1") as writer:
        writer.log(step=1, loss=1.0)
    assert main(["summary", "exp1", "--root", str(tmp_path), "--json"]) == 0
    assert main(["summary", "exp1", "--logdir", str(tmp_path), "--json"]) == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["summary", "nope"], "error: no run 'nope'"),
        (["export", "nope"], "error: no run 'nope'"),
        (["diagnose", "nope"], "error: no run 'nope'"),
        (["watch", "--once", "--logdir", "/nonexistent/root"], "error: log root /nonexistent/root is not a directory"),
        (["watch", "a", "--logdir", "b"], "error: two log roots given"),
        (["demo", "--inject", "bogus@3"], "error: --inject 'bogus@3'"),
        (["import-tb", "/nonexistent/src", "/tmp/x"], "error: /nonexistent/src is not a directory"),
    ],
)
def test_usage_errors_print_one_line_and_exit_2(
    argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MONITOR_LOGDIR", str(tmp_path))
    monkeypatch.delenv("MONITOR_NOTIFY_CONFIG", raising=False)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_every_command_module_follows_the_convention() -> None:
    import importlib

    for name, (module, _) in COMMANDS.items():
        mod = importlib.import_module(module)
        assert callable(mod.add_arguments) and callable(mod.run), name
