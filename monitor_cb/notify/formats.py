"""What each chat tool expects: escaping, signatures, the generic webhook body.

Pure functions (no I/O); :mod:`monitor_cb.notify.channels` builds each vendor's body with them and
sends it through :mod:`monitor_cb.notify.transport`.

Formats (checked against the vendors' documentation and its copies, December 2026):

* **Slack incoming webhook** (https://api.slack.com/messaging/webhooks,
  https://api.slack.com/reference/surfaces/formatting#escaping): POST ``{"text": ...}``; optional
  ``blocks`` with ``text`` kept as the notification fallback. ``&``, ``<`` and ``>`` are the only
  characters to escape (``&amp;`` ``&lt;`` ``&gt;``) so ``<!channel>`` in a run name pings nobody;
  ``"mrkdwn": false`` stops ``*bold*``/``_italic_`` in run content from rendering. Blocks use
  ``plain_text`` objects, which Slack never parses as markup.
* **Feishu / Lark custom bot** (https://open.feishu.cn/document/client-docs/bot-v3/add-custom-bot):
  POST ``{"msg_type": "text", "content": {"text": ...}}``; with signature verification on, the body
  also carries ``"timestamp"`` (Unix seconds, string) and ``"sign"`` =
  base64(HMAC-SHA256(key=f"{timestamp}\\n{secret}", msg=b"")). Answers HTTP 200 with
  ``{"code": 0}`` on success, a non-zero ``code`` otherwise (11232: rate limited). Text messages
  parse ``<at user_id="all"></at>``, so ``<``/``>`` from runs become fullwidth ``＜``/``＞``.
* **DingTalk custom robot** (https://open.dingtalk.com/document/robots/custom-robot-access,
  .../customize-robot-security-settings): POST ``{"msgtype": "text", "text": {"content": ...}}`` to
  ``https://oapi.dingtalk.com/robot/send?access_token=...``; with "加签" (signing) on, append
  ``&timestamp={ms}&sign={urlencode(base64(HMAC-SHA256(key=secret, msg=f"{ms}\\n{secret}")))}``.
  Answers ``{"errcode": 0, "errmsg": "ok"}``; 130101 means "sending too fast" (20 messages/minute
  per robot). Plain text mentions nobody unless ``at.atMobiles`` lists them, which we never set.
* **WeCom (企业微信) group robot** (https://developer.work.weixin.qq.com/document/path/91770):
  POST ``{"msgtype": "text", "text": {"content": ...}}`` or ``{"msgtype": "markdown", "markdown":
  {"content": ...}}`` to ``https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=...``. Answers
  ``{"errcode": 0}``; 45009 means rate limited (20 messages/minute). ``<@userid>`` mentions work in
  both types, so ``<``/``>`` become fullwidth; in markdown, markdown punctuation is backslash-escaped.
* **Generic webhook**: our own JSON body, documented in ``docs/NOTIFICATIONS.md``; optional
  ``X-Monitor-Signature: sha256=<hex HMAC of the body>``.
* **Email**: ``smtplib`` with optional implicit TLS, STARTTLS and login; plain-text body.
* **Command**: an argv list run without a shell; the alert arrives in ``MONITOR_*`` environment
  variables and as the generic webhook's JSON on stdin.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote_plus

from monitor_cb.notify.alert import Alert, iso_time, message_id, plain_text, title, top_severity

_FULLWIDTH = str.maketrans({"<": "\uff1c", ">": "\uff1e"})
_MARKDOWN_SPECIAL = set("\\`*_[]~|")  # inline markup; lines never start with run content


# --- escaping -------------------------------------------------------------------------------


def slack_escape(text: str) -> str:
    """Slack's three control characters as entities (``&`` first)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def no_tags(text: str) -> str:
    """``<`` and ``>`` as fullwidth lookalikes, so ``<at user_id="all">`` or ``<@id>`` mention nobody."""
    return text.translate(_FULLWIDTH)


def markdown_escape(text: str) -> str:
    """Backslash-escape inline markdown (emphasis, code, links) and make angle brackets fullwidth (HTML, mentions).

    Every line starts with our own text (severity, ``time:``), so block markers (``#``, ``>``,
    ``-``) in run content cannot start a heading or a quote and stay unescaped (``lr 0.045``).
    """
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIAL else ch for ch in no_tags(text))


# --- signing --------------------------------------------------------------------------------


def feishu_sign(timestamp: int | str, secret: str) -> str:
    """Feishu/Lark custom bot signature: base64(HMAC-SHA256(key=f"{timestamp}\\n{secret}", msg=b""))."""
    key = f"{timestamp}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


def dingtalk_sign(timestamp_ms: int | str, secret: str) -> str:
    """DingTalk robot signature, URL-encoded: quote_plus(base64(HMAC-SHA256(key=secret, msg=f"{ts}\\n{secret}")))."""
    digest = hmac.new(secret.encode(), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256).digest()
    return quote_plus(base64.b64encode(digest).decode())


def body_signature(body: bytes, secret: str) -> str:
    """The generic webhook's ``X-Monitor-Signature`` header value."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def webhook_body(alerts: Sequence[Alert]) -> dict[str, Any]:
    """The generic body: the first (or only) alert's fields, plus ``count``, ``title``, ``text``, ``alerts``.

    ``id`` is the message's id (the alert's, or a digest's own); every entry of ``alerts`` carries its own ``id``.
    """
    if len(alerts) == 1:
        head = alerts[0].to_json()
    else:
        runs = sorted({a.run for a in alerts})
        head = {
            "id": message_id(alerts),
            "run": runs[0] if len(runs) == 1 else None,
            "run_name": None,
            "kind": "digest",
            "severity": top_severity(alerts),
            "step": None,
            "message": f"{len(alerts)} alerts from {len(runs)} run(s)",
            "time": iso_time(max(a.time for a in alerts)),
            "link": None,
        }
    return {
        **head,
        "count": len(alerts),
        "title": title(alerts),
        "text": plain_text(alerts),
        "alerts": [a.to_json() for a in alerts],
    }
