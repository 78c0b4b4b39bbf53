"""Each channel against a real local receiver: the documented body, escaping, signing, secrets."""

from __future__ import annotations

import base64
import email
import email.policy
import hashlib
import hmac
import json
import logging
import sys
from pathlib import Path
from urllib.parse import quote_plus

import pytest

from monitor_cb.masking import Secret
from monitor_cb.notify.alert import Alert
from monitor_cb.notify.channels import (
    CommandChannel,
    DingTalkChannel,
    EmailChannel,
    FeishuChannel,
    SlackChannel,
    WebhookChannel,
    WeComChannel,
)
from monitor_cb.notify.delivery import deliver
from monitor_cb.notify.formats import dingtalk_sign, feishu_sign
from monitor_cb.notify.transport import DeliveryError

NASTY = 'exp "7"\n<script>alert(1)</script> *bold* _it_ [x](http://e.vil) <!channel> <at user_id="all"></at> & `c`'
FIXED_NOW = 1_764_698_400.0


def nasty_alert(**overrides: object) -> Alert:
    fields = {
        "run": "bert/exp7",
        "run_name": NASTY,
        "kind": "nan",
        "severity": "error",
        "message": "loss is NaN\nsince step 412 <b>bold</b>",
        "step": 412,
        "time": FIXED_NOW,
        "link": "http://127.0.0.1:8501/?run=bert%2Fexp7",
    }
    fields.update(overrides)
    return Alert(**fields)  # type: ignore[arg-type]


def secret_url(receiver, path: str = "/hook/T000/B000/XXXXsecretTOKENxxxx") -> Secret:
    return Secret(receiver.url + path, source="$HOOK_URL")


def test_webhook_body_is_documented_json_and_signed(http_receiver):
    rx = http_receiver()
    channel = WebhookChannel("hook", secret_url(rx), secret=Secret("body-signing-key"))
    channel.send([nasty_alert()], timeout=5)
    (request,) = rx.requests
    body = request.json
    assert request.headers["Content-Type"].startswith("application/json")
    assert {"run", "run_name", "kind", "severity", "step", "message", "time", "link"} <= set(body)
    assert body["run_name"] == NASTY  # JSON escaping round-trips the exact text
    assert body["message"] == "loss is NaN\nsince step 412 <b>bold</b>"
    assert (body["kind"], body["severity"], body["step"], body["count"]) == ("nan", "error", 412, 1)
    assert body["time"] == "2025-12-02T18:00:00Z"
    assert body["link"].startswith("http://127.0.0.1:8501/?run=")
    expected = "sha256=" + hmac.new(b"body-signing-key", request.raw, hashlib.sha256).hexdigest()
    assert request.headers["X-Monitor-Signature"] == expected
    # The text rendering keeps run content on its own line: no injected newline.
    lines = body["text"].splitlines()
    assert len(lines) == 5 and lines[2] == "time: 2025-12-02T18:00:00Z"
    # The stable id: in the body, in the text, and as the idempotency header.
    assert body["id"] == body["alerts"][0]["id"] == nasty_alert().id and body["id"].startswith("a-")
    assert lines[4] == f"id: {body['id']}" and request.headers["Idempotency-Key"] == body["id"]


def test_webhook_digest_body(http_receiver):
    rx = http_receiver()
    alerts = [nasty_alert(run=f"r{i}", kind="nan") for i in range(3)]
    WebhookChannel("hook", secret_url(rx)).send(alerts, timeout=5)
    body = rx.requests[0].json
    assert (body["kind"], body["count"], body["run"]) == ("digest", 3, None)
    assert [a["run"] for a in body["alerts"]] == ["r0", "r1", "r2"]
    ids = [a["id"] for a in body["alerts"]]
    assert len(set(ids)) == 3 and all(f"id {i}" in body["text"] for i in ids)  # each alert's id, in every format
    assert body["id"].startswith("d-") and rx.requests[0].headers["Idempotency-Key"] == body["id"]


def test_slack_text_escapes_control_characters(http_receiver):
    rx = http_receiver()
    SlackChannel("slack", secret_url(rx)).send([nasty_alert()], timeout=5)
    body = rx.requests[0].json
    assert set(body) == {"text", "mrkdwn"} and body["mrkdwn"] is False
    text = body["text"]
    assert "<" not in text and ">" not in text  # no <!channel>, no <http://...|link>
    assert "&lt;!channel&gt;" in text and "&lt;script&gt;" in text and " &amp; " in text
    assert "&amp;lt;" not in text  # & escaped first, once


def test_slack_blocks_are_plain_text(http_receiver):
    rx = http_receiver()
    SlackChannel("slack", secret_url(rx), blocks=True).send([nasty_alert()], timeout=5)
    body = rx.requests[0].json
    assert body["text"]  # the notification fallback stays
    assert [b["type"] for b in body["blocks"]] == ["header", "section"]
    assert all(b["text"]["type"] == "plain_text" for b in body["blocks"])
    assert len(body["blocks"][0]["text"]["text"]) <= 150


def test_feishu_signature_matches_the_documented_formula(http_receiver):
    rx = http_receiver(answer={"code": 0, "msg": "success"})
    channel = FeishuChannel("lark", secret_url(rx), secret=Secret("demo-feishu-secret"), clock=lambda: FIXED_NOW)
    channel.send([nasty_alert()], timeout=5)
    body = rx.requests[0].json
    # The known vector, from the formula in Feishu's docs: key = "{timestamp}\n{secret}", message empty.
    key = f"{int(FIXED_NOW)}\n" + "demo-feishu-secret"
    expected = base64.b64encode(hmac.new(key.encode(), b"", hashlib.sha256).digest()).decode()
    assert body["timestamp"] == str(int(FIXED_NOW))
    assert body["sign"] == expected == feishu_sign(int(FIXED_NOW), "demo-feishu-secret")
    assert body["msg_type"] == "text" and set(body["content"]) == {"text"}
    text = body["content"]["text"]
    assert "<at" not in text and "<script>" not in text  # tags neutralised (fullwidth)
    assert '＜at user_id="all"＞' in text


def test_feishu_unsigned_and_vendor_error(http_receiver):
    rx = http_receiver(answer={"code": 19021, "msg": "sign match fail or timestamp is not within one hour"})
    channel = FeishuChannel("lark", secret_url(rx))
    with pytest.raises(DeliveryError) as err:
        channel.send([nasty_alert()], timeout=5)
    assert not err.value.retryable and "19021" in str(err.value)
    assert set(rx.requests[0].json) == {"msg_type", "content"}


def test_dingtalk_signed_url_and_body(http_receiver):
    rx = http_receiver(answer={"errcode": 0, "errmsg": "ok"})
    url = Secret(rx.url + "/robot/send?access_token=abcdef0123456789abcdef", source="$DINGTALK_URL")
    channel = DingTalkChannel("ding", url, secret=Secret("SECdemo0123456789"), clock=lambda: FIXED_NOW)
    channel.send([nasty_alert()], timeout=5)
    request = rx.requests[0]
    ts = str(int(FIXED_NOW * 1000))
    digest = hmac.new(b"SECdemo0123456789", f"{ts}\nSECdemo0123456789".encode(), hashlib.sha256).digest()
    assert request.query["access_token"] == ["abcdef0123456789abcdef"]
    assert request.query["timestamp"] == [ts]
    assert request.query["sign"] == [base64.b64encode(digest).decode()]  # parse_qs undid the urlencoding
    assert dingtalk_sign(ts, "SECdemo0123456789") == quote_plus(base64.b64encode(digest).decode())
    body = request.json
    assert body["msgtype"] == "text" and body["at"] == {"isAtAll": False}
    assert NASTY.replace("\n", " ").split("<script>")[0].strip() in body["text"]["content"]


def test_dingtalk_rate_limit_answer_is_retryable(http_receiver):
    rx = http_receiver(answer={"errcode": 130101, "errmsg": "send too fast"})
    with pytest.raises(DeliveryError) as err:
        DingTalkChannel("ding", secret_url(rx)).send([nasty_alert()], timeout=5)
    assert err.value.retryable


def test_wecom_text_and_markdown(http_receiver):
    rx = http_receiver(answer={"errcode": 0, "errmsg": "ok"})
    WeComChannel("wecom", secret_url(rx)).send([nasty_alert()], timeout=5)
    WeComChannel("wecom-md", secret_url(rx), markdown=True).send([nasty_alert()], timeout=5)
    text_body, md_body = rx.bodies()
    assert text_body["msgtype"] == "text" and "<" not in text_body["text"]["content"]
    assert md_body["msgtype"] == "markdown"
    content = md_body["markdown"]["content"]
    assert content.startswith("**") and "<" not in content
    assert r"\*bold\*" in content and r"\[x\](http://e.vil)" in content and r"\_it\_" in content and r"\`c\`" in content
    assert all(line.startswith(("**", "ERROR", "time:", "link:", "id:")) for line in content.splitlines())


def test_email_plain_smtp(smtp_receiver):
    server = smtp_receiver()
    channel = EmailChannel(
        "mail", host=server.host, port=server.port, sender="bot@example.com", recipients=["me@example.com"]
    )
    channel.send([nasty_alert()], timeout=5)
    (message,) = server.messages
    assert message["to"] == ["me@example.com"]
    parsed = email.message_from_bytes(message["data"], policy=email.policy.default)
    assert "\n" not in parsed["Subject"] and parsed["Subject"].startswith("[monitor_cb] ERROR")
    assert "loss is NaN since step 412" in parsed.get_content()


def test_email_starttls_and_login(smtp_receiver):
    server = smtp_receiver(tls=True)
    channel = EmailChannel(
        "mail",
        host=server.host,
        port=server.port,
        sender="bot@example.com",
        recipients=["me@example.com"],
        starttls=True,
        username="bot",
        password=Secret("s3cret-pass"),
        cafile=server.cafile,
    )
    channel.send([nasty_alert()], timeout=10)
    assert server.logins == [("bot", "s3cret-pass")]
    assert len(server.messages) == 1


def test_email_wrong_password_is_not_retried_and_not_shown(smtp_receiver, caplog):
    server = smtp_receiver(tls=True)
    channel = EmailChannel(
        "mail",
        host=server.host,
        port=server.port,
        sender="bot@example.com",
        recipients=["me@example.com"],
        starttls=True,
        username="bot",
        password=Secret("wrong-password-XYZ"),
        cafile=server.cafile,
    )
    with caplog.at_level(logging.DEBUG, logger="monitor_cb.notify"):
        result = deliver(channel, [nasty_alert()], timeout=10, retries=3, backoff=0.01)
    assert not result.ok and result.attempts == 1
    assert "wrong-password-XYZ" not in caplog.text + (result.error or "")


def test_exec_gets_environment_and_stdin_without_a_shell(tmp_path: Path):
    out = tmp_path / "out.json"
    script = (
        "import json, os, sys; "
        f"json.dump({{'env': {{k: v for k, v in os.environ.items() if k.startswith('MONITOR_')}}, "
        f"'stdin': json.load(sys.stdin), 'argv': sys.argv[1:]}}, open({str(out)!r}, 'w'))"
    )
    evil = "x; touch " + str(tmp_path / "pwned") + " $(touch " + str(tmp_path / "pwned2") + ")"
    channel = CommandChannel("cmd", [sys.executable, "-c", script, "fixed-arg"])
    channel.send([nasty_alert(run_name=evil)], timeout=10)
    data = json.loads(out.read_text())
    assert data["argv"] == ["fixed-arg"]
    assert data["env"]["MONITOR_RUN"] == "bert/exp7" and data["env"]["MONITOR_RUN_NAME"] == evil
    assert data["env"]["MONITOR_STEP"] == "412" and data["env"]["MONITOR_SEVERITY"] == "error"
    assert data["stdin"]["run_name"] == evil
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


def test_exec_timeout_and_failure():
    slow = CommandChannel("slow", [sys.executable, "-c", "import time; time.sleep(30)"])
    with pytest.raises(DeliveryError) as err:
        slow.send([nasty_alert()], timeout=0.5)
    assert err.value.retryable and "0.5 s" in str(err.value)
    failing = CommandChannel("fail", [sys.executable, "-c", "import sys; sys.exit(3)"])
    with pytest.raises(DeliveryError) as err:
        failing.send([nasty_alert()], timeout=5)
    assert not err.value.retryable and "exited with 3" in str(err.value)
    with pytest.raises(ValueError):
        CommandChannel("shell-string", "notify-send hi")  # type: ignore[arg-type]


@pytest.mark.parametrize("status", [404, 500])
def test_secrets_never_in_logs_or_errors(http_receiver, caplog, status):
    rx = http_receiver(default_status=status)
    token = "T0SECRET/B0SECRET/zzTopSecretTokenzz"
    url = Secret(f"{rx.url}/services/{token}?key=qq-secret-key-qq", source="$SLACK_WEBHOOK_URL")
    channels = [
        SlackChannel("slack", url),
        FeishuChannel("lark", url, secret=Secret("feishu-signing-secret")),
        DingTalkChannel("ding", url, secret=Secret("SECdingsigningsecret")),
        WebhookChannel("hook", url, secret=Secret("hook-signing-secret")),
    ]
    with caplog.at_level(logging.DEBUG, logger="monitor_cb.notify"):
        results = [deliver(c, [nasty_alert()], timeout=5, retries=1, backoff=0.01) for c in channels]
        results.append(
            deliver(
                SlackChannel("gone", Secret("http://127.0.0.1:9/x/zzTopSecretTokenzz")),
                [nasty_alert()],
                timeout=2,
                retries=0,
                backoff=0,
            )
        )
    shown = (
        caplog.text
        + " ".join(r.error or "" for r in results)
        + repr(channels)
        + json.dumps([c.describe() for c in channels])
    )
    for secret in (
        "zzTopSecretTokenzz",
        "qq-secret-key-qq",
        "feishu-signing-secret",
        "SECdingsigningsecret",
        "hook-signing-secret",
    ):
        assert secret not in shown
    assert all(not r.ok for r in results)
    assert f"HTTP {status}" in caplog.text and "127.0.0.1" in caplog.text  # the host is still named


def test_dns_failure_is_retried(monkeypatch):
    """Name resolution fails (simulated: no packet leaves the machine) -> retryable, logged, bounded."""
    import socket

    def no_dns(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    channel = SlackChannel("slack", Secret("https://hooks.example.invalid/services/T/B/dnsSECRETtoken"))
    result = deliver(channel, [nasty_alert()], timeout=1, retries=2, backoff=0.01)
    assert not result.ok and result.attempts == 3
    assert "hooks.example.invalid" in (result.error or "") and "dnsSECRETtoken" not in (result.error or "")
