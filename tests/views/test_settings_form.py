"""Settings page logic: threshold groups from the dataclass, the form round trip, notification status."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from monitor_cb.diagnosis import KINDS, DiagnosisSettings
from monitor_cb.views.settings_form import (
    channel_rows,
    kind_of_field,
    kind_title,
    nice_step,
    notify_status,
    settings_from_form,
    settings_groups,
)


def test_every_field_is_in_exactly_one_group() -> None:
    groups = settings_groups()
    assert groups[0].kind == "general"
    assert [g.kind for g in groups[1:] if g.kind != "ranks"] == list(KINDS)
    names = [f.name for g in groups for f in g.fields]
    assert sorted(names) == sorted(f.name for f in fields(DiagnosisSettings) if f.name not in ("disabled", "roles"))
    spike = next(g for g in groups if g.kind == "loss_spike")
    assert [f.name for f in spike.fields][:3] == ["spike_z", "spike_rel", "spike_min_frac"]
    assert spike.fields[-1].name == "spike_recovery" and spike.fields[-1].integer and not spike.fields[0].integer
    assert kind_of_field("stall_factor") == "stalled" and kind_of_field("min_baseline") == "general"
    assert kind_of_field("straggler_cost") == "straggler" and kind_of_field("rank_window") == "ranks"
    assert kind_of_field("diverge_rise") == "divergence" and kind_of_field("divergence_z") == "rank_divergence"
    assert kind_of_field("stuck_evals") == "plateau" and kind_of_field("nan_skip_persist") == "nan"
    assert kind_title("rank_divergence") == "Rank divergence" and kind_title("new_thing") == "New thing"


def test_nice_step() -> None:
    assert nice_step(20.0) == 1.0
    assert nice_step(0.3) == pytest.approx(0.01)
    assert nice_step(1e-3) == pytest.approx(1e-4)
    assert nice_step(0.0) == 0.1


def test_form_round_trip() -> None:
    values = {f.name: f.default for g in settings_groups() for f in g.fields}
    enabled = dict.fromkeys(KINDS, True)
    assert settings_from_form(values, enabled) == DiagnosisSettings()
    values["spike_z"] = 5.5
    enabled["plateau"] = False
    got = settings_from_form(values, enabled)
    assert got.spike_z == 5.5 and got.disabled == ("plateau",)
    values["min_baseline"] = 1000
    with pytest.raises(ValueError, match="min_baseline"):
        settings_from_form(values, enabled)


def test_notify_status_without_a_file(tmp_path: Path) -> None:
    status = notify_status(tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert status.path is None and status.config is None and status.error is None and status.ignored is None
    assert status.suggested == tmp_path / "xdg" / "monitor_cb" / "notify.toml"
    assert status.channels == []


def test_notify_status_of_an_s3_root_suggests_the_users_own_file(tmp_path: Path) -> None:
    """Not ``s3:/bucket/.monitor/notify.toml`` (a URL made a Path): the user's config folder."""
    status = notify_status("s3://bucket/prefix", env={"HOME": str(tmp_path)})
    assert status.suggested == tmp_path / ".config" / "monitor_cb" / "notify.toml"
    assert status.ignored is None and status.error is None


def test_notify_status_masks_secrets(tmp_path: Path) -> None:
    config = tmp_path / "xdg" / "monitor_cb" / "notify.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        '[[channels]]\ntype = "webhook"\nname = "team"\nurl_env = "HOOK"\n'
        '[[channels]]\ntype = "exec"\ncommand = ["true"]\n'
    )
    secret = "http://127.0.0.1:9/hooks/T0-SECRET-TOKEN-abcdef"
    status = notify_status(tmp_path, env={"HOOK": secret, "XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert status.error is None and status.path == config
    rows = status.channels
    assert [r["name"] for r in rows] == ["team", "exec-2"]
    assert rows[0]["url"] == "http://127.0.0.1:9/***" and rows[0]["url_from"] == "$HOOK"
    assert rows[1]["url"] == "" and rows[1]["command"] == "true"
    assert set(rows[0]) == set(rows[1])
    assert "SECRET" not in repr(rows)


def test_notify_status_reports_errors_without_secrets(tmp_path: Path) -> None:
    path = tmp_path / "n.toml"
    path.write_text('[[channels]]\ntype = "slack"\nurl_env = "MISSING_VAR"\n')
    status = notify_status(tmp_path, env={"MONITOR_NOTIFY_CONFIG": str(path)})
    assert status.from_env and status.path == path and status.config is None
    assert "MISSING_VAR" in status.error
    path.write_text("this is = = not toml")
    assert "not valid TOML" in notify_status(tmp_path, env={"MONITOR_NOTIFY_CONFIG": str(path)}).error


def test_channel_rows_cells() -> None:
    rows = channel_rows([{"name": "a", "signed": True, "to": ["x@y", "z@w"]}, {"name": "b", "quiet_hours": None}])
    assert rows == [
        {"name": "a", "signed": "yes", "to": "x@y, z@w", "quiet_hours": ""},
        {"name": "b", "signed": "", "to": "", "quiet_hours": ""},
    ]
