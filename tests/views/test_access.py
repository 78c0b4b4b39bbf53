"""Who may change the Settings page: the switches that decide it, and the admin token's check."""

from __future__ import annotations

from monitor_cb.views.access import SettingsAccess, settings_access


def test_open_by_default_read_only_by_flag_or_variable() -> None:
    assert settings_access(["--logdir", "x"], {}) == SettingsAccess(False, None)
    assert not settings_access([], {}).locked
    assert settings_access(["--logdir", "x", "--read-only-settings"], {}).read_only
    for value in ("1", "true", "YES", " on "):
        assert settings_access([], {"MONITOR_READ_ONLY_SETTINGS": value}).read_only, value
    for value in ("", "0", "no"):
        assert not settings_access([], {"MONITOR_READ_ONLY_SETTINGS": value}).read_only, value


def test_the_admin_token_unlocks_unless_the_server_is_read_only() -> None:
    access = settings_access([], {"MONITOR_SETTINGS_ADMIN_TOKEN": " adm "})
    assert access.locked and not access.read_only
    assert access.unlocks("adm") and not access.unlocks("adm2") and not access.unlocks("") and not access.unlocks(None)
    both = settings_access(["--read-only-settings"], {"MONITOR_SETTINGS_ADMIN_TOKEN": "adm"})
    assert not both.unlocks("adm"), "read-only wins: nobody saves from the browser"


def test_a_read_only_dashboard_lets_no_viewer_write_into_the_root() -> None:
    """The demo training and the sample runs are offered only when the server is not read-only."""
    assert settings_access([], {}).viewers_may_write
    assert settings_access([], {"MONITOR_SETTINGS_ADMIN_TOKEN": "adm"}).viewers_may_write
    assert not settings_access(["--read-only-settings"], {}).viewers_may_write
    assert not settings_access([], {"MONITOR_READ_ONLY_SETTINGS": "1"}).viewers_may_write
