"""The settings file: channels from TOML/JSON, secrets from the environment, masked everywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor_cb.masking import Secret, mask_url, redact
from monitor_cb.notify.config import ConfigError, add_flag_channels, load_config

EXAMPLE = """
[notify]
min_severity = "warning"
quiet_hours = "23:00-07:00"
quiet_min_severity = "error"
timeout = 8
retries = 2
group_window = 120
dashboard_url = "http://gpu-box:8501"

[[channels]]
type = "slack"
name = "team"
url_env = "SLACK_WEBHOOK_URL"
min_severity = "error"

[[channels]]
type = "feishu"
url_env = "FEISHU_WEBHOOK_URL"
secret_env = "FEISHU_SECRET"

[[channels]]
type = "dingtalk"
url_env = "DINGTALK_WEBHOOK_URL"
secret_env = "DINGTALK_SECRET"
quiet_hours = "off"

[[channels]]
type = "wecom"
url_env = "WECOM_WEBHOOK_URL"
markdown = true

[[channels]]
type = "email"
host = "smtp.example.com"
port = 587
starttls = true
username = "bot@example.com"
password_env = "SMTP_PASSWORD"
from = "bot@example.com"
to = ["me@example.com"]

[[channels]]
type = "exec"
command = ["notify-send", "Training"]

[[channels]]
type = "webhook"
url_env = "OPS_WEBHOOK_URL"
enabled = false
"""

ENV = {
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T01/B02/slackSECRETtoken123",
    "FEISHU_WEBHOOK_URL": "https://open.feishu.cn/open-apis/bot/v2/hook/feishu-SECRET-hook-id",
    "FEISHU_SECRET": "feishuSIGNINGsecret",
    "DINGTALK_WEBHOOK_URL": "https://oapi.dingtalk.com/robot/send?access_token=dingSECRETtoken456",
    "DINGTALK_SECRET": "SECdingSIGNINGsecret",
    "WECOM_WEBHOOK_URL": "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=wecomSECRETkey789",
    "SMTP_PASSWORD": "smtpSECRETpassword",
}
SECRET_VALUES = ["slackSECRETtoken123", "feishu-SECRET-hook-id", "feishuSIGNINGsecret", "dingSECRETtoken456"]
SECRET_VALUES += ["SECdingSIGNINGsecret", "wecomSECRETkey789", "smtpSECRETpassword"]


def test_example_file_loads_with_secrets_from_the_environment(tmp_path: Path):
    path = tmp_path / "notify.toml"
    path.write_text(EXAMPLE)
    config = load_config(path, env=ENV)
    assert [r.channel.type for r in config.routes] == ["slack", "feishu", "dingtalk", "wecom", "email", "exec"]
    assert (config.timeout, config.retries, config.group_window) == (8.0, 2, 120.0)
    slack, feishu, ding, wecom, mail, command = config.routes
    assert wecom.channel.markdown
    assert slack.min_severity == "error" and feishu.min_severity == "warning"
    assert str(feishu.quiet) == "23:00-07:00" and ding.quiet is None
    assert slack.channel.url.reveal() == ENV["SLACK_WEBHOOK_URL"]
    assert mail.channel.password.reveal() == "smtpSECRETpassword" and mail.channel.starttls
    assert command.channel.argv == ["notify-send", "Training"]
    assert config.link("bert/exp 1") == "http://gpu-box:8501/?run=bert%2Fexp%201"
    shown = json.dumps(config.describe()) + repr(config) + repr(config.routes) + str(slack.channel.url)
    for secret in SECRET_VALUES:
        assert secret not in shown
    described = {d["name"]: d for d in config.describe()}
    assert described["team"]["url"] == "https://hooks.slack.com/***"
    assert described["team"]["url_from"] == "$SLACK_WEBHOOK_URL"
    assert described["feishu-2"]["signed"] is True


def test_json_settings_are_accepted(tmp_path: Path):
    path = tmp_path / "notify.json"
    path.write_text(json.dumps({"channels": [{"type": "webhook", "url_env": "HOOK", "min_severity": "info"}]}))
    config = load_config(path, env={"HOOK": "http://127.0.0.1:1/x"})
    assert config.routes[0].channel.type == "webhook" and config.routes[0].min_severity == "info"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[[channels]]\ntype = "slack"\nurl_env = "NOT_SET_ANYWHERE"\n', "NOT_SET_ANYWHERE"),
        ('[[channels]]\ntype = "pager"\n', "type must be one of"),
        ('[[channels]]\ntype = "slack"\nurl_env = "SLACK_WEBHOOK_URL"\ncolour = "red"\n', "colour"),
        ('[notify]\nquiet_hours = "late"\n', "quiet_hours"),
        ('[notify]\nmin_severity = "loud"\n', "min_severity"),
        ("[notify]\ntimeout = -1\n", "timeout"),
        ('[[channels]]\ntype = "slack"\n', "url_env"),
        ("not toml at all [", "not valid TOML"),
    ],
)
def test_bad_settings_say_what_is_wrong_without_secrets(tmp_path: Path, text: str, expected: str):
    path = tmp_path / "notify.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path, env=ENV)
    assert expected in str(err.value) and str(path) in str(err.value)
    for secret in SECRET_VALUES:
        assert secret not in str(err.value)


def test_flag_channels():
    config = add_flag_channels(
        load_config(None, env={}), exec_command="notify-send 'Training run'", min_severity="error"
    )
    (route,) = config.routes
    assert route.channel.argv == ["notify-send", "Training run"] and route.min_severity == "error"


def test_masking_helpers():
    url = "https://oapi.dingtalk.com/robot/send?access_token=dingSECRETtoken456"
    assert mask_url(url) == "https://oapi.dingtalk.com/***"
    assert mask_url("not a url") == "***"
    secret = Secret(url, source="$DINGTALK_WEBHOOK_URL")
    assert "dingSECRETtoken456" not in repr(secret) + str(secret) + f"{secret}"
    text = f"failed: {url} and token=dingSECRETtoken456 and access_token%3DdingSECRETtoken456"
    assert "dingSECRETtoken456" not in redact(text, [secret])
    with pytest.raises(TypeError):
        import pickle

        pickle.dumps(secret)


def test_find_config(tmp_path: Path):
    """The user's own file (``$XDG_CONFIG_HOME``, else ``$HOME/.config``), never one in the log root."""
    from monitor_cb.notify.config import find_config, ignored_root_settings

    root = tmp_path / "logs"
    env = {"HOME": str(tmp_path / "home")}
    assert find_config(root, env=env) is None
    (root / ".monitor").mkdir(parents=True)
    (root / ".monitor" / "notify.toml").write_text("")
    assert find_config(root, env=env) is None, "a file in the root is not settings"
    note = ignored_root_settings(root, env)
    assert note and "not used" in note and str(tmp_path / "home" / ".config" / "monitor_cb" / "notify.toml") in note
    mine = tmp_path / "home" / ".config" / "monitor_cb"
    mine.mkdir(parents=True)
    (mine / "notify.json").write_text("{}")
    assert find_config(root, env=env) == mine / "notify.json"
    (mine / "notify.toml").write_text("")
    assert find_config(root, env=env) == mine / "notify.toml"
    xdg = {**env, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert find_config(root, env=xdg) is None
    assert find_config(root, env={"MONITOR_NOTIFY_CONFIG": "/etc/x.toml"}) == Path("/etc/x.toml")
