"""The trust boundary: notification settings come only from the user's own, private configuration.

Driven as a user meets it: ``python -m monitor_cb watch --once`` as a subprocess on a root where a
colleague planted an ``exec`` channel, and on the user's own file with good and bad permissions.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from monitor_cb.notify.config import ConfigError, load_config
from monitor_cb.notify.trust import read_private
from tests.notify.test_watcher import sent, write_run

REPO = Path(__file__).resolve().parents[2]
HOOK = (
    '[notify]\ngather = 0\ngroup_window = 0\ntimeout = 2\n[[channels]]\ntype = "webhook"\nurl_env = "TEST_HOOK_URL"\n'
)


def plant(root: Path, marker: Path) -> None:
    """``ROOT/.monitor/notify.toml`` with a command-running channel, as found on a shared cluster."""
    (root / ".monitor").mkdir(parents=True, exist_ok=True)
    (root / ".monitor" / "notify.toml").write_text(
        f'[[channels]]\ntype = "exec"\nname = "planted"\ncommand = ["sh", "-c", "id > {marker}"]\n'
    )


def user_config(home: Path, text: str) -> Path:
    folder = home / ".config" / "monitor_cb"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    path = folder / "notify.toml"
    path.write_text(text)
    path.chmod(0o600)
    return path


def watch(root: Path, home: Path, *extra: str, hook: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MONITOR_NOTIFY_CONFIG", "XDG_CONFIG_HOME")}
    env.update(HOME=str(home), TEST_HOOK_URL=hook, PYTHONPATH=str(REPO))
    command = [sys.executable, "-m", "monitor_cb", "watch", str(root), "--once", "--skip-older", "0", *extra]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, cwd=REPO)


def test_a_planted_exec_channel_never_runs_and_the_users_own_channel_alerts(tmp_path: Path, http_receiver) -> None:
    root, home, marker = tmp_path / "logs", tmp_path / "home", tmp_path / "owned.txt"
    write_run(root, "exp1", range(1, 201), nan_from=120)
    plant(root, marker)
    done = watch(root, home)
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), "the planted command ran"
    assert "shared log root and is not used" in done.stderr and ".config/monitor_cb/notify.toml" in done.stderr

    rx = http_receiver()
    user_config(home, HOOK)
    done = watch(root, home, "--state", str(tmp_path / "state.json"), hook=rx.url + "/hook")
    assert done.returncode == 0, done.stderr
    assert [a["kind"] for a in sent(rx)].count("nan") == 1, "the user's own channel still gets the NaN alert"
    assert not marker.exists()


def test_a_group_writable_user_config_is_refused_with_the_fix(tmp_path: Path) -> None:
    root, home, marker = tmp_path / "logs", tmp_path / "home", tmp_path / "ran.txt"
    write_run(root, "exp1", range(1, 50), nan_from=20)
    path = user_config(home, f'[[channels]]\ntype = "exec"\ncommand = ["sh", "-c", "id > {marker}"]\n')
    path.chmod(0o664)
    done = watch(root, home)
    assert done.returncode != 0 and not marker.exists()
    assert f"the file {path} is writable by group" in done.stderr, done.stderr
    assert "-rw-rw-r-- 0664" in done.stderr and f"chmod go-w {path}" in done.stderr
    path.chmod(0o600)
    path.parent.chmod(0o777)
    done = watch(root, home)
    assert done.returncode != 0 and f"the folder {path.parent} is writable by group and others" in done.stderr
    assert not marker.exists()


def test_a_config_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("giving a file to another user needs root")
    path = user_config(tmp_path / "home", HOOK)
    os.chown(path, 54321, -1)
    with pytest.raises(ConfigError, match=r"is owned by uid 54321, not by you \(root\) or root.*chown root"):
        load_config(path, env={"TEST_HOOK_URL": "http://127.0.0.1:9/x"})


def test_a_good_config_loads_and_an_explicit_flag_is_checked_too(tmp_path: Path) -> None:
    path = user_config(tmp_path / "home", HOOK)
    assert load_config(path, env={"TEST_HOOK_URL": "http://127.0.0.1:9/x"}).routes
    link = tmp_path / "home" / "dotfiles-link.toml"
    link.symlink_to(path)  # a link into a private folder: the file and the folder it really is in count
    assert read_private(link) == path.read_bytes()
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "notify.toml").write_text(HOOK)
    with pytest.raises(ConfigError, match=r"folder .*shared is writable by group and others"):
        load_config(shared / "notify.toml", env={"TEST_HOOK_URL": "http://127.0.0.1:9/x"})


def test_a_fifo_as_the_settings_file_is_refused_without_hanging(tmp_path: Path) -> None:
    folder = tmp_path / "cfg"
    folder.mkdir(mode=0o700)
    os.mkfifo(folder / "notify.toml", 0o600)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config(folder / "notify.toml", env={})
