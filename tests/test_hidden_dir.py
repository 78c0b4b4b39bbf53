"""The log root's hidden folder: every read and write stays inside the root (no escape through links)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from monitor_cb.diagnosis.settings import DiagnosisSettings, load_settings_checked, save_settings
from monitor_cb.hidden_dir import OutsideRootError, hidden_path
from monitor_cb.notify.config import find_config
from monitor_cb.notify.state import WatchState
from monitor_cb.views.settings_form import notify_status


@pytest.fixture
def linked(tmp_path: Path) -> tuple[Path, Path]:
    """A root whose ``.monitor`` is a link to a folder outside it."""
    root, elsewhere = tmp_path / "logs", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / ".monitor").symlink_to(elsewhere, target_is_directory=True)
    return root, elsewhere


def test_paths_inside_the_root_pass(tmp_path: Path) -> None:
    assert hidden_path(tmp_path, "diagnosis.json") == tmp_path / ".monitor" / "diagnosis.json"
    real = tmp_path / "data"
    real.mkdir()
    (tmp_path / "logs").symlink_to(real)  # the root itself may be a link
    assert hidden_path(tmp_path / "logs", "x.json") == tmp_path / "logs" / ".monitor" / "x.json"
    (real / ".monitor").mkdir()
    (real / "inner").mkdir()
    (real / ".monitor" / "y.json").symlink_to(real / "inner" / "y.json")  # a link that stays inside
    assert hidden_path(tmp_path / "logs", "y.json")


def test_links_out_of_the_root_are_refused(linked: tuple[Path, Path], tmp_path: Path) -> None:
    root, elsewhere = linked
    with pytest.raises(OutsideRootError, match="outside the log root"):
        hidden_path(root, "diagnosis.json")
    own = tmp_path / "own"
    (own / ".monitor").mkdir(parents=True)
    (own / ".monitor" / "diagnosis.json").symlink_to(elsewhere / "target.json")  # the file itself a link
    with pytest.raises(OutsideRootError):
        hidden_path(own, "diagnosis.json")
    with pytest.raises(ValueError):
        hidden_path(own, "../escape.json")


def test_diagnosis_settings_stay_inside(linked: tuple[Path, Path]) -> None:
    root, elsewhere = linked
    (elsewhere / "diagnosis.json").write_text('{"spike_z": 3.0}')
    settings, problems = load_settings_checked(root)
    assert settings == DiagnosisSettings() and "outside the log root" in problems[0]
    with pytest.raises(OSError, match="outside the log root"):
        save_settings(root, DiagnosisSettings(spike_z=5.0))
    assert json.loads((elsewhere / "diagnosis.json").read_text()) == {"spike_z": 3.0}
    assert sorted(os.listdir(elsewhere)) == ["diagnosis.json"]


def test_notification_settings_stay_inside(linked: tuple[Path, Path]) -> None:
    root, elsewhere = linked
    (elsewhere / "notify.toml").write_text('[[channels]]\ntype = "webhook"\nurl = "http://x"\n')
    assert find_config(root, env={}) is None, "a file in (or through) the root is never settings"
    status = notify_status(root, env={})
    assert status.config is None and status.error is None and "not used" in (status.ignored or "")
    assert find_config(root, env={"MONITOR_NOTIFY_CONFIG": str(elsewhere / "notify.toml")}), "explicit: allowed"


def test_the_watchers_state_is_never_in_the_root(
    linked: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from monitor_cb.notify.state import legacy_state

    root, elsewhere = linked
    monkeypatch.setenv("MONITOR_STATE_DIR", str(tmp_path / "own"))
    path = WatchState.default_path(root)
    assert tmp_path / "own" in path.parents and root.resolve() not in path.resolve().parents
    # an old state reached through a link out of the root is not imported
    (elsewhere / "watch-state.json").write_text(json.dumps({"version": 1, "runs": {"x": {"alerted": ["nan"]}}}))
    assert legacy_state(root) is None
    assert sorted(os.listdir(elsewhere)) == ["watch-state.json"]
