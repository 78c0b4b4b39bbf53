"""AppTests of the Settings page (tests/app/settings_app.py) and of the alert panel and toasts."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.errors import AppTestError

from tests.notify.conftest import HttpReceiver, http_receiver  # noqa: F401 - the fixture, reused

APP = str(Path(__file__).with_name("settings_app.py"))
SECRET_PATH = "/hooks/T0SECRET/B0SECRET/xoxo-very-secret-token"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty log root through ``MONITOR_LOGDIR``, and no notification settings from the environment.

    The user's config folder is ``tmp_path/xdg/monitor_cb`` (``$XDG_CONFIG_HOME``), so the real one is never read.
    """
    logs = tmp_path / "logs"
    logs.mkdir()
    monkeypatch.setenv("MONITOR_LOGDIR", str(logs))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("MONITOR_NOTIFY_CONFIG", raising=False)
    monkeypatch.delenv("MONITOR_READ_ONLY_SETTINGS", raising=False)
    yield logs


def run_app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def all_text(at: AppTest) -> str:
    """Every element's protobuf as text: whatever the browser could receive."""
    out: list[str] = []

    def walk(node: Any) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None:
            out.append(str(proto))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return "\n".join(out)


def write_notify(root: Path, text: str) -> Path:
    """The user's own settings (``$XDG_CONFIG_HOME/monitor_cb/notify.toml``), private as ssh wants them."""
    path = root.parent / "xdg" / "monitor_cb" / "notify.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    return path


def plant_exec(root: Path) -> Path:
    """What a hostile colleague leaves in the shared root: an ``exec`` channel; returns the file it would create."""
    marker = root.parent / "owned.txt"
    planted = root / ".monitor" / "notify.toml"
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.write_text(f'[[channels]]\ntype = "exec"\nname = "planted"\ncommand = ["sh", "-c", "id > {marker}"]\n')
    return marker


def test_no_notification_settings_shows_where_to_create_them(root: Path) -> None:
    at = run_app()
    info = " ".join(i.value for i in at.info)
    assert "No notification settings" in info
    assert str(root.parent / "xdg" / "monitor_cb" / "notify.toml") in info, info
    assert any(c.language == "toml" and "[[channels]]" in c.value for c in at.code)
    assert not at.error
    assert not [b for b in at.button if b.key == "notify_test"]


def test_channels_masked_and_test_message_delivered(
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    http_receiver: Callable[..., HttpReceiver],  # noqa: F811
) -> None:
    receiver = http_receiver()
    monkeypatch.setenv("TEST_HOOK_URL", receiver.url + SECRET_PATH)
    write_notify(root, '[[channels]]\ntype = "webhook"\nname = "team"\nurl_env = "TEST_HOOK_URL"\n')
    at = run_app()
    table = at.dataframe[0].value
    assert list(table["name"]) == ["team"]
    assert list(table["url"]) == [receiver.url + "/***"]
    assert "TEST_HOOK_URL" in table["url_from"].iloc[0]
    assert "SECRET" not in all_text(at) and "very-secret" not in all_text(at)

    at.button(key="notify_test").click().run()
    assert not at.exception
    assert [s.value for s in at.success][-1].startswith("team: delivered")
    assert not at.error
    bodies = receiver.bodies()
    assert len(bodies) == 1 and "test notification" in bodies[0]["message"]
    assert receiver.requests[0].path == SECRET_PATH
    assert "SECRET" not in all_text(at)


def test_failed_delivery_is_one_error_per_channel_without_the_secret(
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    http_receiver: Callable[..., HttpReceiver],  # noqa: F811
) -> None:
    receiver = http_receiver(default_status=403)
    monkeypatch.setenv("TEST_HOOK_URL", receiver.url + SECRET_PATH)
    write_notify(
        root, '[notify]\ntimeout = 5\n[[channels]]\ntype = "webhook"\nname = "ops"\nurl_env = "TEST_HOOK_URL"\n'
    )
    at = run_app()
    at.button(key="notify_test").click().run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("ops: ")
    assert "SECRET" not in all_text(at)


def test_delivery_state_shows_pending_and_the_last_error_as_plain_text(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from monitor_cb.notify.alert import Alert
    from monitor_cb.notify.state import RetryPolicy, WatchState

    monkeypatch.setenv("MONITOR_STATE_DIR", str(tmp_path / "own-state"))
    at = run_app()
    assert not at.dataframe and "No watcher state" in " ".join(c.value for c in at.caption)

    nasty = "**bold** <b>x</b> [link](http://evil)"
    state = WatchState()
    box = state.outbox
    for run in ("exp1", nasty):  # found long ago, never delivered: given up
        box.add(Alert(run=run, kind="nan", severity="error", message="m", step=3), ["team"], now=1_000.0)
    box.expire(now=1_000.0 + 86_401, expire_after=86_400)
    box.prune()
    now = time.time()
    box.add(Alert(run="exp3", kind="stopped", severity="error", message="m", step=9), ["team"], now=now)
    batch = box.batch("team")
    box.mark_sending("team", batch)
    box.record("team", batch, False, now, RetryPolicy(), error=f"HTTP 500 {nasty}")
    state.save(WatchState.default_path(root))

    at = run_app()
    channels = at.dataframe[0].value
    assert list(channels["channel"]) == ["team"] and list(channels["pending"]) == ["1"]
    assert list(channels["expired"]) == ["2"] and channels["last error"].iloc[0] == f"HTTP 500 {nasty}"  # plain text
    expired = at.dataframe[1].value
    assert sorted(expired["run"]) == sorted(["exp1", nasty]) and set(expired["kind"]) == {"nan"}
    shown = " ".join(e.value for e in [*at.markdown, *at.caption, *at.warning, *at.error, *at.info])
    assert "<b>" not in shown and "**bold**" not in shown  # never rendered as Markdown or HTML


@pytest.mark.parametrize(
    "text, expected",
    [
        ('[[channels]]\ntype = "slack"\nurl_env = "NOT_SET_ANYWHERE_42"\n', "NOT_SET_ANYWHERE_42"),
        ("this is = = not toml", "not valid TOML"),
        ('[[channels]]\ntype = "pigeon"\n', "type must be one of"),
    ],
)
def test_bad_notification_settings_show_an_error(root: Path, text: str, expected: str) -> None:
    write_notify(root, text)
    at = run_app()
    errors = " ".join(e.value for e in at.error)
    assert expected.replace("_", "\\_") in errors or expected in errors
    assert not at.dataframe


def test_thresholds_are_labelled_in_words_with_help(root: Path) -> None:
    at = run_app()
    spike = at.number_input(key="diag_spike_z")
    assert spike.label == "Loss spike: at least this many noise sigmas"
    assert "noise sigma" in spike.help and "`spike_z` in diagnosis.json" in spike.help
    labels = [n.label for n in at.number_input]
    assert "baseline_window" not in labels and not [label for label in labels if "_" in label]


def test_thresholds_form_saves_and_reloads(root: Path) -> None:
    at = run_app()
    assert at.number_input(key="diag_spike_z").value == 8.0
    at.number_input(key="diag_spike_z").set_value(5.5)
    at.toggle(key="diag_on_plateau").set_value(False)
    at.form_submit_button[0].click().run()  # Save
    assert not at.exception
    assert any("Saved to" in s.value for s in at.success)
    saved = json.loads((root / ".monitor" / "diagnosis.json").read_text())
    assert saved["spike_z"] == 5.5 and saved["disabled"] == ["plateau"]

    again = run_app()  # a new session (a restart): the values come from the file
    assert again.number_input(key="diag_spike_z").value == 5.5
    assert again.toggle(key="diag_on_plateau").value is False

    again.form_submit_button[1].click().run()  # Reset to defaults
    assert json.loads((root / ".monitor" / "diagnosis.json").read_text())["spike_z"] == 8.0
    assert again.number_input(key="diag_spike_z").value == 8.0
    assert again.toggle(key="diag_on_plateau").value is True


def test_invalid_thresholds_are_not_saved(root: Path) -> None:
    at = run_app()
    at.number_input(key="diag_min_baseline").set_value(5000)  # above baseline_window
    at.form_submit_button[0].click().run()
    assert not at.exception
    assert any("min\\_baseline" in e.value or "min_baseline" in e.value for e in at.error)
    assert not (root / ".monitor" / "diagnosis.json").exists()


def test_corrupt_settings_file_is_a_warning(root: Path) -> None:
    (root / ".monitor").mkdir()
    (root / ".monitor" / "diagnosis.json").write_text('{"spike_z": -1, "bogus": 1}')
    at = run_app()
    warnings = " ".join(w.value for w in at.warning)
    assert "bogus" in warnings and "spike\\_z" in warnings
    assert at.number_input(key="diag_spike_z").value == 8.0


# ----------------------------------------------------------------------------- alert panel and toasts
def _alerts_demo() -> None:
    from monitor_cb.diagnosis import Finding
    from pages._findings import alert_panel, toast_new

    findings = [
        Finding("plateau", "info", 300, "loss flat", end_step=500),
        Finding("nan", "error", 412, "loss became NaN <script>alert(1)</script> [x](http://evil)", rank=1),
        Finding("grad_explosion", "warning", 100, "grad norm 40x"),
    ] + [Finding("loss_spike", "warning", s, "spike") for s in range(1, 6)]
    alert_panel(findings, limit=3)
    toast_new("run-a", findings, max_toasts=2)


def test_alert_panel_newest_first_and_toasts_once() -> None:
    at = AppTest.from_function(_alerts_demo, default_timeout=30).run()
    assert not at.exception
    assert at.error[0].value.startswith("**nan** · step 412 · rank 1")
    assert "\\[x\\]" in at.error[0].value  # the link is escaped, shown as text
    assert [w.value.split(" · ")[:2] for w in at.warning] == [
        ["**grad\\_explosion**", "step 100 — grad norm 40x"],
        ["**loss\\_spike**", "step 5 — spike"],
    ]
    assert not at.info  # notes are only counted and listed
    assert "8 findings: 1 error, 6 warnings, 1 note" in at.caption[0].value
    assert len(at.expander) == 1 and len(at.dataframe) == 1
    table = at.dataframe[0].value
    assert list(table["step"]) == [412, 300, 100, 5, 4, 3, 2, 1]
    assert list(table.columns) == ["severity", "kind", "step", "end_step", "rank", "message"]
    toasts = [t.value for t in at.toast]
    assert len(toasts) == 3  # the newest two, then a count of the rest
    assert toasts[0].startswith("nan at step 412 \\(rank 1\\)") and toasts[1].startswith("plateau at step 300"), toasts
    assert "6 more" in toasts[2]

    at.run()  # the same findings again: no toast
    assert not at.exception
    assert not at.toast
    assert at.error[0].value.startswith("**nan**")


def test_settings_never_read_or_written_outside_the_root(root: Path, tmp_path: Path) -> None:
    """``.monitor`` a link to another folder: Save is refused with a message, notify.toml there is not read."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notify.toml").write_text('[[channels]]\ntype = "webhook"\nname = "outside"\nurl = "http://x"\n')
    (elsewhere / "diagnosis.json").write_text('{"spike_z": 3.0}')
    (root / ".monitor").symlink_to(elsewhere, target_is_directory=True)
    at = run_app()
    assert at.number_input(key="diag_spike_z").value == 8.0, "the outside settings are not used"
    warnings = " ".join(w.value for w in at.warning)
    assert "outside the log root" in warnings
    assert "is not used" in warnings and not at.dataframe, "notify.toml in (or through) the root is not read"
    assert "outside" not in " ".join(str(c) for c in at.get("arrow_data_frame"))
    at.number_input(key="diag_spike_z").set_value(5.5)
    at.form_submit_button[0].click().run()  # Save
    assert not at.exception
    assert any("Cannot write the settings" in e.value and "outside the log root" in e.value for e in at.error)
    assert json.loads((elsewhere / "diagnosis.json").read_text()) == {"spike_z": 3.0}, "nothing written there"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["diagnosis.json", "notify.toml"]


# ----------------------------------------------------------------------------- trust boundary
def test_a_planted_exec_channel_in_the_root_never_runs(root: Path) -> None:
    """``LOGROOT/.monitor/notify.toml`` with an ``exec`` channel: a note says it is not used; nothing to test-send."""
    marker = plant_exec(root)
    at = run_app()
    warnings = " ".join(w.value for w in at.warning)
    assert "shared log root and is not used" in warnings and "xdg" in warnings, warnings
    assert not [b for b in at.button if b.key == "notify_test"] and not at.dataframe
    assert not marker.exists()


def test_the_test_button_sends_only_the_users_own_channels(
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    http_receiver: Callable[..., HttpReceiver],  # noqa: F811
) -> None:
    marker = plant_exec(root)
    receiver = http_receiver()
    monkeypatch.setenv("TEST_HOOK_URL", receiver.url + "/hook")
    write_notify(root, '[[channels]]\ntype = "webhook"\nname = "mine"\nurl_env = "TEST_HOOK_URL"\n')
    at = run_app()
    assert list(at.dataframe[0].value["name"]) == ["mine"]
    at.button(key="notify_test").click().run()
    assert not at.exception
    assert [s.value for s in at.success] == ["mine: delivered"]
    assert len(receiver.bodies()) == 1 and not marker.exists()


def test_a_group_writable_user_config_is_refused_with_the_fix(root: Path) -> None:
    path = write_notify(root, '[[channels]]\ntype = "exec"\nname = "mine"\ncommand = ["true"]\n')
    path.chmod(0o664)
    at = run_app()
    errors = " ".join(e.value for e in at.error)
    assert "writable by group" in errors and "chmod go\\-w" in errors, errors
    assert not at.dataframe and not [b for b in at.button if b.key == "notify_test"]


# ----------------------------------------------------------------------------- read-only settings
def test_read_only_settings_cannot_silence_the_nan_alert(
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    http_receiver: Callable[..., HttpReceiver],  # noqa: F811
) -> None:
    """A viewer of a ``--read-only-settings`` dashboard unticks "NaN / Inf": nothing can be saved, the file
    stays as it was, nothing can be test-sent, and the watcher still alerts on a NaN run."""
    from tests.notify.test_watcher import sent, watch_once, write_run

    monkeypatch.setenv("MONITOR_READ_ONLY_SETTINGS", "1")
    receiver = http_receiver()
    monkeypatch.setenv("TEST_HOOK_URL", receiver.url + "/hook")
    write_notify(root, '[[channels]]\ntype = "webhook"\nname = "mine"\nurl_env = "TEST_HOOK_URL"\n')
    saved = root / ".monitor" / "diagnosis.json"
    saved.parent.mkdir()
    saved.write_text('{"spike_z": 6.0}')
    before = saved.read_bytes()
    at = run_app()
    assert any("Read-only" in i.value for i in at.info)
    assert not at.form_submit_button and not [b for b in at.button if b.key == "notify_test"]
    nan = at.toggle(key="diag_on_nan")
    assert nan.disabled and nan.value is True and at.number_input(key="diag_spike_z").disabled
    assert at.number_input(key="diag_spike_z").value == 6.0, "the saved values are shown"
    with pytest.raises(AppTestError, match="disabled"):
        nan.set_value(False)  # a browser cannot
    at.session_state["diag_on_nan"] = False  # what a crafted client could send: still nothing writes
    at.run()
    assert not at.exception and not at.form_submit_button
    assert saved.read_bytes() == before and sorted(p.name for p in saved.parent.iterdir()) == ["diagnosis.json"]
    write_run(root, "exp1", range(1, 201), nan_from=120)
    watch_once(root, receiver, skip_older=0)
    assert "nan" in [a["kind"] for a in sent(receiver)]


def test_an_admin_token_unlocks_saving_for_that_session_only(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_SETTINGS_ADMIN_TOKEN", "adm-7f3")
    at = run_app()
    assert not at.form_submit_button and at.toggle(key="diag_on_nan").disabled
    at.text_input(key="settings_admin_token").input("wrong").run()
    assert any("not the admin token" in e.value for e in at.error) and not at.form_submit_button
    at.text_input(key="settings_admin_token").input("adm-7f3").run()
    assert not at.exception and at.form_submit_button and not at.toggle(key="diag_on_nan").disabled
    at.toggle(key="diag_on_plateau").set_value(False)
    at.form_submit_button[0].click().run()
    assert json.loads((root / ".monitor" / "diagnosis.json").read_text())["disabled"] == ["plateau"]
    assert not run_app().form_submit_button, "another session starts locked"


def test_metric_roles_are_saved_per_root_and_reloaded(root: Path) -> None:
    at = run_app()
    at.text_area(key="diag_role_loss").input("train/total\n\n  Train/Total  \n")
    at.form_submit_button[0].click().run()  # Save
    assert not at.exception and any("Saved to" in s.value for s in at.success)
    saved = json.loads((root / ".monitor" / "diagnosis.json").read_text())
    assert saved["roles"] == {"loss": ["train/total", "Train/Total"]}  # names as written, case kept, one a line
    again = run_app()
    assert again.text_area(key="diag_role_loss").value == "train/total\nTrain/Total"
    assert again.text_area(key="diag_role_lr").value == ""
