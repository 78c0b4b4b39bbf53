"""The channels: generic webhook, Slack, Feishu/Lark, DingTalk, WeCom, email, a local command.

Each channel turns a message (a list of :class:`~monitor_cb.notify.alert.Alert`, one alert or a
digest) into its tool's documented body, sends it once within a timeout, and raises
:class:`DeliveryError` (``retryable`` or not) on failure. Retries, rate limits and threads live in
:mod:`monitor_cb.notify.delivery`; this module does one attempt.

Each binds a vendor's format (:mod:`monitor_cb.notify.formats`) to its transport
(:mod:`monitor_cb.notify.transport`, or SMTP, or a local process).
"""

from __future__ import annotations

import contextlib
import os
import signal
import smtplib
import ssl
import subprocess
import time
from collections.abc import Callable, Sequence
from email.message import EmailMessage
from email.utils import formatdate
from typing import Any, ClassVar
from urllib.parse import urlsplit

from monitor_cb.masking import Secret, mask_url, redact
from monitor_cb.notify.alert import Alert, body_lines, message_id, plain_text, title
from monitor_cb.notify.formats import (
    body_signature,
    dingtalk_sign,
    feishu_sign,
    markdown_escape,
    no_tags,
    slack_escape,
    webhook_body,
)
from monitor_cb.notify.transport import (
    DEFAULT_TIMEOUT,
    DeliveryError,
    check_vendor_answer,
    json_bytes,
    post,
)


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
            json_bytes(payload),
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
        body = json_bytes(self.payload(alerts))
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
        check_vendor_answer(answer, mask_url(self.url), "code", self.RATE_LIMITED)


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
        check_vendor_answer(answer, mask_url(self.url), "errcode", self.RATE_LIMITED)


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
        check_vendor_answer(answer, mask_url(self.url), "errcode", self.RATE_LIMITED)


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
        stdin = json_bytes(webhook_body(alerts))
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
