"""Message formats and transports: generic webhook, Slack, Feishu/Lark, DingTalk, WeCom, email, a local command.

Each channel turns a message (a list of :class:`~monitor_cb.notify.alert.Alert`, one alert or a
digest) into its tool's documented body, sends it once within a timeout, and raises
:class:`DeliveryError` (``retryable`` or not) on failure. Retries, rate limits and threads live in
:mod:`monitor_cb.notify.delivery`; this module does one attempt.

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
import contextlib
import hashlib
import hmac
import http.client
import ipaddress
import json
import os
import signal
import smtplib
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from email.message import EmailMessage
from email.utils import formatdate
from typing import Any, ClassVar
from urllib.parse import quote_plus, urlsplit

from monitor_cb.notify.alert import Alert, body_lines, iso_time, message_id, plain_text, title, top_severity
from monitor_cb.notify.masking import Secret, mask_url, redact

DEFAULT_TIMEOUT = 10.0
_MAX_RESPONSE = 64 * 1024
_FULLWIDTH = str.maketrans({"<": "\uff1c", ">": "\uff1e"})
_MARKDOWN_SPECIAL = set("\\`*_[]~|")  # inline markup; lines never start with run content


class DeliveryError(Exception):
    """One failed attempt to deliver; the message never contains a secret.

    Args:
        message: what failed (already redacted).
        retryable: True for timeouts, connection/DNS errors, 5xx, 429 and vendor rate limits.
        retry_after: seconds the receiver asked us to wait, when it said so.
        unknown: the message was sent and then the answer never came (a read timeout, a reset): the
            receiver may have it. A retry carries the same id, so the receiver can tell.
    """

    def __init__(
        self, message: str, *, retryable: bool, retry_after: float | None = None, unknown: bool = False
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.unknown = unknown


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


# --- HTTP -----------------------------------------------------------------------------------


def _is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A webhook that redirects is misconfigured; following it could resend the body elsewhere."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Probe:
    """One request's two clocks: ``timeout`` until connected, ``response_timeout`` once connected.

    ``sent`` turns True when the whole request has gone out and only the answer is awaited: a
    failure after that point has an unknown outcome (the receiver may have acted on it).
    """

    def __init__(self, response_timeout: float | None) -> None:
        self.response_timeout = response_timeout
        self.sent = False


class _ProbedHTTP(http.client.HTTPConnection):
    def __init__(self, *args: Any, probe: _Probe, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._probe = probe

    def connect(self) -> None:
        super().connect()
        if self._probe.response_timeout is not None and self.sock is not None:
            self.sock.settimeout(self._probe.response_timeout)

    def getresponse(self) -> http.client.HTTPResponse:
        self._probe.sent = True  # urllib calls this once the request is written
        return super().getresponse()


class _ProbedHTTPS(http.client.HTTPSConnection):
    def __init__(self, *args: Any, probe: _Probe, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._probe = probe

    def connect(self) -> None:
        super().connect()  # TCP, a proxy tunnel and the TLS handshake, all within ``timeout``
        if self._probe.response_timeout is not None and self.sock is not None:
            self.sock.settimeout(self._probe.response_timeout)

    def getresponse(self) -> http.client.HTTPResponse:
        self._probe.sent = True
        return super().getresponse()


class _ProbedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, probe: _Probe) -> None:
        super().__init__()
        self._probe = probe

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_ProbedHTTP, req, probe=self._probe)


class _ProbedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, probe: _Probe) -> None:
        super().__init__()
        self._probe = probe

    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_ProbedHTTPS, req, context=self._context, probe=self._probe)


def _opener(url: str, probe: _Probe) -> urllib.request.OpenerDirector:
    """Loopback receivers directly, others through the environment's proxy settings; no redirects."""
    handlers: list[Any] = [_ProbedHTTPHandler(probe), _ProbedHTTPSHandler(probe), _NoRedirect()]
    if _is_loopback(url):
        handlers.append(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener(*handlers)


def post(
    url: str,
    body: bytes,
    *,
    timeout: float,
    secrets: Sequence[Secret | str | None],
    headers: dict[str, str] | None = None,
    response_timeout: float | None = None,
) -> bytes:
    """POST ``body`` as JSON; the response body (at most 64 KiB), or :class:`DeliveryError`.

    Two clocks: ``timeout`` bounds connecting (TCP, proxy tunnel, TLS); once the request is sent,
    the answer may take ``response_timeout`` (default: ``timeout``). A receiver that answers 200
    slowly has still accepted the message, so giving up early would only make a duplicate. A
    failure after the request went out (no answer in time, connection reset) raises a
    :class:`DeliveryError` with ``unknown=True``: the receiver may have acted on it; the caller
    retries with the same id and the receiver deduplicates.
    """
    all_headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": "monitor_cb-notify"}
    all_headers.update(headers or {})
    request = urllib.request.Request(url, data=body, headers=all_headers, method="POST")
    probe = _Probe(response_timeout if response_timeout is not None else timeout)
    where = mask_url(url)
    try:
        with _opener(url, probe).open(request, timeout=timeout) as response:
            return response.read(_MAX_RESPONSE)
    except urllib.error.HTTPError as exc:
        status = exc.code
        retry_after = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
        with contextlib.suppress(Exception):
            exc.close()
        retryable = status >= 500 or status in (408, 429)
        raise DeliveryError(f"{where} answered HTTP {status}", retryable=retryable, retry_after=retry_after) from None
    except TimeoutError:
        if probe.sent:
            raise DeliveryError(
                f"{where} did not answer within {probe.response_timeout:g} s of receiving the message "
                "(outcome unknown; retried with the same id)",
                retryable=True,
                unknown=True,
            ) from None
        raise DeliveryError(f"{where} did not answer within {timeout:g} s", retryable=True) from None
    except urllib.error.URLError as exc:
        reason = redact(getattr(exc, "reason", exc), secrets)
        raise DeliveryError(f"cannot reach {where}: {reason}", retryable=True) from None
    except (OSError, http.client.HTTPException) as exc:
        reason = redact(f"{type(exc).__name__}: {exc}", secrets)
        if probe.sent:
            raise DeliveryError(
                f"{where} dropped the connection after receiving the message: {reason} (outcome unknown)",
                retryable=True,
                unknown=True,
            ) from None
        raise DeliveryError(f"cannot reach {where}: {reason}", retryable=True) from None


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _json_bytes(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _check_vendor_answer(answer: bytes, where: str, code_key: str, rate_limited: set[int]) -> None:
    """Chat tools answer HTTP 200 with an error code in the body; a non-zero code is a failure."""
    try:
        data = json.loads(answer or b"{}")
    except ValueError:
        return  # not JSON: nothing more to check
    if not isinstance(data, dict):
        return
    code = data.get(code_key, data.get("StatusCode", 0))
    if code in (0, None, "0"):
        return
    detail = str(data.get("msg") or data.get("errmsg") or "")[:200]
    try:
        numeric = int(code)
    except (TypeError, ValueError):
        numeric = -1
    raise DeliveryError(
        f"{where} refused the message: code {code} {detail}".rstrip(), retryable=numeric in rate_limited
    )


# --- channels -------------------------------------------------------------------------------


class Channel:
    """One destination. Subclasses set ``type`` and implement :meth:`payload` and :meth:`send`.

    Args:
        name: the channel's name in logs and in the settings page.
    """

    type: ClassVar[str] = ""

    def __init__(self, name: str) -> None:
        self.name = name

    def secrets(self) -> list[Secret]:
        """Every secret this channel holds, for redaction."""
        return [v for v in vars(self).values() if isinstance(v, Secret)]

    def describe(self) -> dict[str, Any]:
        """What a settings page may show: type, name, and settings with secrets masked."""
        return {"name": self.name, "type": self.type}

    def payload(self, alerts: Sequence[Alert]) -> Any:
        raise NotImplementedError

    def send(
        self, alerts: Sequence[Alert], timeout: float = DEFAULT_TIMEOUT, response_timeout: float | None = None
    ) -> None:
        """One attempt. ``timeout`` bounds connecting; ``response_timeout`` the wait for the answer
        once the message is out (HTTP channels; others use ``timeout`` for the whole attempt)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()!r})"


class _HttpChannel(Channel):
    def __init__(self, name: str, url: Secret) -> None:
        super().__init__(name)
        if not url or not urlsplit(url.reveal()).scheme.startswith("http"):
            raise ValueError(f"channel {name!r}: the webhook URL ({url.source or 'given'}) must start with http(s)://")
        self.url = url

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "url": mask_url(self.url), "url_from": self.url.source or "config"}

    def _post(
        self,
        url: str,
        payload: dict[str, Any],
        timeout: float,
        response_timeout: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> bytes:
        return post(
            url,
            _json_bytes(payload),
            timeout=timeout,
            secrets=self.secrets(),
            headers=headers,
            response_timeout=response_timeout,
        )


class WebhookChannel(_HttpChannel):
    """Generic JSON webhook; see docs/NOTIFICATIONS.md for the body."""

    type = "webhook"

    def __init__(self, name: str, url: Secret, secret: Secret | None = None) -> None:
        super().__init__(name, url)
        self.secret = secret

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "signed": bool(self.secret)}

    def payload(self, alerts: Sequence[Alert]) -> dict[str, Any]:
        return webhook_body(alerts)

    def send(
        self, alerts: Sequence[Alert], timeout: float = DEFAULT_TIMEOUT, response_timeout: float | None = None
    ) -> None:
        body = _json_bytes(self.payload(alerts))
        headers = {"Idempotency-Key": message_id(alerts)}
        if self.secret:
            headers["X-Monitor-Signature"] = body_signature(body, self.secret.reveal())
        post(
            self.url.reveal(),
            body,
            timeout=timeout,
            secrets=self.secrets(),
            headers=headers,
            response_timeout=response_timeout,
        )


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


class SlackChannel(_HttpChannel):
    """Slack incoming webhook: ``{"text": ...}``, or with ``blocks=True`` a header and a section."""

    type = "slack"

    def __init__(self, name: str, url: Secret, blocks: bool = False) -> None:
        super().__init__(name, url)
        self.blocks = blocks

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "blocks": self.blocks}

    def payload(self, alerts: Sequence[Alert]) -> dict[str, Any]:
        body: dict[str, Any] = {"text": slack_escape(plain_text(alerts)), "mrkdwn": False}
        if self.blocks:
            body["blocks"] = [
                {"type": "header", "text": {"type": "plain_text", "text": title(alerts)[:150], "emoji": False}},
                {
                    "type": "section",
                    "text": {"type": "plain_text", "text": "\n".join(body_lines(alerts))[:3000], "emoji": False},
                },
            ]
        return body

    def send(
        self, alerts: Sequence[Alert], timeout: float = DEFAULT_TIMEOUT, response_timeout: float | None = None
    ) -> None:
        self._post(self.url.reveal(), self.payload(alerts), timeout, response_timeout)


class FeishuChannel(_HttpChannel):
    """Feishu/Lark custom bot text message, signed when ``secret`` is set."""

    type = "feishu"
    RATE_LIMITED: ClassVar[set[int]] = {11232, 9499}

    def __init__(
        self, name: str, url: Secret, secret: Secret | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(name, url)
        self.secret = secret
        self._clock = clock

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "signed": bool(self.secret)}

    def payload(self, alerts: Sequence[Alert]) -> dict[str, Any]:
        body: dict[str, Any] = {"msg_type": "text", "content": {"text": no_tags(plain_text(alerts))}}
        if self.secret:
            timestamp = str(int(self._clock()))
            body = {"timestamp": timestamp, "sign": feishu_sign(timestamp, self.secret.reveal()), **body}
        return body

    def send(
        self, alerts: Sequence[Alert], timeout: float = DEFAULT_TIMEOUT, response_timeout: float | None = None
    ) -> None:
        answer = self._post(self.url.reveal(), self.payload(alerts), timeout, response_timeout)
        _check_vendor_answer(answer, mask_url(self.url), "code", self.RATE_LIMITED)


class DingTalkChannel(_HttpChannel):
    """DingTalk custom robot text message; ``secret`` (``SEC...``) signs the URL."""

    type = "dingtalk"
    RATE_LIMITED: ClassVar[set[int]] = {130101}

    def __init__(
        self, name: str, url: Secret, secret: Secret | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(name, url)
        self.secret = secret
        self._clock = clock

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "signed": bool(self.secret)}

    def payload(self, alerts: Sequence[Alert]) -> dict[str, Any]:
        return {"msgtype": "text", "text": {"content": plain_text(alerts)}, "at": {"isAtAll": False}}

    def signed_url(self) -> str:
        url = self.url.reveal()
        if not self.secret:
            return url
        timestamp = str(int(self._clock() * 1000))
        joiner = "&" if urlsplit(url).query else ("" if url.endswith("?") else "?")
        return f"{url}{joiner}timestamp={timestamp}&sign={dingtalk_sign(timestamp, self.secret.reveal())}"

    def send(
        self, alerts: Sequence[Alert], timeout: float = DEFAULT_TIMEOUT, response_timeout: float | None = None
    ) -> None:
        answer = self._post(self.signed_url(), self.payload(alerts), timeout, response_timeout)
        _check_vendor_answer(answer, mask_url(self.url), "errcode", self.RATE_LIMITED)


class WeComChannel(_HttpChannel):
    """WeCom group robot: ``text`` (default) or ``markdown`` message."""

    type = "wecom"
    RATE_LIMITED: ClassVar[set[int]] = {45009}

    def __init__(self, name: str, url: Secret, markdown: bool = False) -> None:
        super().__init__(name, url)
        self.markdown = markdown

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "markdown": self.markdown}

    def payload(self, alerts: Sequence[Alert]) -> dict[str, Any]:
        if not self.markdown:
            return {"msgtype": "text", "text": {"content": no_tags(plain_text(alerts))}}
        lines = [f"**{markdown_escape(title(alerts))}**", *(markdown_escape(line) for line in body_lines(alerts))]
        return {"msgtype": "markdown", "markdown": {"content": "\n".join(lines)}}

    def send(
        self, alerts: Sequence[Alert], timeout: float = DEFAULT_TIMEOUT, response_timeout: float | None = None
    ) -> None:
        answer = self._post(self.url.reveal(), self.payload(alerts), timeout, response_timeout)
        _check_vendor_answer(answer, mask_url(self.url), "errcode", self.RATE_LIMITED)


class EmailChannel(Channel):
    """Plain-text email over SMTP.

    Args:
        host, port: the SMTP server.
        sender: the From address.
        recipients: To addresses.
        starttls: upgrade the connection with STARTTLS (port 587).
        tls: implicit TLS from the first byte (port 465).
        username, password: log in when given.
    """

    type = "email"

    def __init__(
        self,
        name: str,
        *,
        host: str,
        port: int = 25,
        sender: str,
        recipients: Sequence[str],
        starttls: bool = False,
        tls: bool = False,
        username: str | None = None,
        password: Secret | None = None,
        cafile: str | None = None,
    ) -> None:
        super().__init__(name)
        if not recipients:
            raise ValueError(f"channel {name!r}: give at least one recipient (to = [...])")
        if starttls and tls:
            raise ValueError(f"channel {name!r}: use either starttls (port 587) or tls (port 465), not both")
        for address in (sender, *recipients):
            if any(ch in address for ch in "\r\n"):
                raise ValueError(f"channel {name!r}: an address contains a line break")
        self.host, self.port, self.sender, self.recipients = host, int(port), sender, list(recipients)
        self.starttls, self.tls, self.username, self.password = starttls, tls, username, password
        self.cafile = cafile

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "server": f"{self.host}:{self.port}",
            "from": self.sender,
            "to": self.recipients,
            "security": "tls" if self.tls else ("starttls" if self.starttls else "none"),
            "login": self.username or None,
        }

    def payload(self, alerts: Sequence[Alert]) -> EmailMessage:
        message = EmailMessage()
        message["Subject"] = title(alerts)  # title() is one line: no header injection
        message["From"] = self.sender
        message["To"] = ", ".join(self.recipients)
        message["Date"] = formatdate(localtime=True)
        # the same id on a retry: mail clients and archives fold copies with one Message-ID
        message["Message-ID"] = f"<{message_id(alerts)}@monitor-cb.local>"
        message.set_content("\n".join(body_lines(alerts)) + "\n")
        return message

    def send(
        self, alerts: Sequence[Alert], timeout: float = DEFAULT_TIMEOUT, response_timeout: float | None = None
    ) -> None:
        where = f"smtp://{self.host}:{self.port}"
        try:
            self._send(self.payload(alerts), timeout)
        except smtplib.SMTPAuthenticationError as exc:
            raise DeliveryError(f"{where} refused the login ({exc.smtp_code})", retryable=False) from None
        except smtplib.SMTPResponseException as exc:
            detail = redact(exc.smtp_error.decode(errors="replace")[:200], self.secrets())
            raise DeliveryError(f"{where} answered {exc.smtp_code} {detail}", retryable=exc.smtp_code < 500) from None
        except smtplib.SMTPRecipientsRefused:
            raise DeliveryError(f"{where} refused every recipient", retryable=False) from None
        except TimeoutError:
            raise DeliveryError(f"{where} did not answer within {timeout:g} s", retryable=True) from None
        except (OSError, smtplib.SMTPException) as exc:
            detail = redact(f"{type(exc).__name__}: {exc}", self.secrets())
            raise DeliveryError(f"cannot deliver via {where}: {detail}", retryable=True) from None

    def _send(self, message: EmailMessage, timeout: float) -> None:
        context = ssl.create_default_context(cafile=self.cafile)
        if self.tls:
            client: smtplib.SMTP = smtplib.SMTP_SSL(self.host, self.port, timeout=timeout, context=context)
        else:
            client = smtplib.SMTP(self.host, self.port, timeout=timeout)
        try:
            if self.starttls:
                client.starttls(context=context)
            if self.username:
                client.login(self.username, self.password.reveal() if self.password else "")
            client.send_message(message)
        except BaseException:
            client.close()  # no QUIT: a server that stopped answering would cost another timeout
            raise
        with contextlib.suppress(smtplib.SMTPException, OSError):
            client.quit()


class CommandChannel(Channel):
    """Run a local command (``["notify-send", "Training"]``) without a shell.

    The alert is given in environment variables ``MONITOR_TITLE``, ``MONITOR_TEXT``,
    ``MONITOR_RUN``, ``MONITOR_RUN_NAME``, ``MONITOR_KIND``, ``MONITOR_SEVERITY``, ``MONITOR_STEP``,
    ``MONITOR_MESSAGE``, ``MONITOR_TIME``, ``MONITOR_LINK``, ``MONITOR_COUNT``, ``MONITOR_ID``, and as the generic
    webhook's JSON on stdin. Run content never becomes part of the command line.
    """

    type = "exec"

    def __init__(self, name: str, argv: Sequence[str]) -> None:
        super().__init__(name)
        if isinstance(argv, str) or not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"channel {name!r}: command must be a non-empty list of strings, got {argv!r}")
        self.argv = list(argv)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "command": self.argv}

    def payload(self, alerts: Sequence[Alert]) -> dict[str, str]:
        body = webhook_body(alerts)
        env = {
            "MONITOR_TITLE": body["title"],
            "MONITOR_TEXT": body["text"],
            "MONITOR_RUN": body["run"] or "",
            "MONITOR_RUN_NAME": body["run_name"] or "",
            "MONITOR_KIND": body["kind"],
            "MONITOR_SEVERITY": body["severity"],
            "MONITOR_STEP": "" if body["step"] is None else str(body["step"]),
            "MONITOR_MESSAGE": body["message"],
            "MONITOR_TIME": body["time"],
            "MONITOR_LINK": body["link"] or "",
            "MONITOR_COUNT": str(body["count"]),
            "MONITOR_ID": body["id"],
        }
        return {k: v.replace("\0", "") for k, v in env.items()}

    def send(
        self, alerts: Sequence[Alert], timeout: float = DEFAULT_TIMEOUT, response_timeout: float | None = None
    ) -> None:
        env = {**os.environ, **self.payload(alerts)}
        stdin = _json_bytes(webhook_body(alerts))
        try:
            process = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,  # so a timeout can end the command's children too
            )
        except OSError as exc:
            raise DeliveryError(f"cannot run {self.argv[0]!r}: {exc.strerror or exc}", retryable=False) from None
        try:
            _, stderr = process.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            raise DeliveryError(f"{self.argv[0]!r} did not finish within {timeout:g} s", retryable=True) from None
        if process.returncode != 0:
            tail = stderr.decode(errors="replace").strip()[-200:]
            raise DeliveryError(f"{self.argv[0]!r} exited with {process.returncode}: {tail}", retryable=False)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        process.communicate(timeout=1.0)


CHANNEL_TYPES: dict[str, type[Channel]] = {
    cls.type: cls
    for cls in (
        WebhookChannel,
        SlackChannel,
        FeishuChannel,
        DingTalkChannel,
        WeComChannel,
        EmailChannel,
        CommandChannel,
    )
}
