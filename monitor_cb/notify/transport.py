"""One attempt to send bytes to a receiver: an HTTP POST, errors mapped to :class:`DeliveryError`.

Connecting is bounded by ``timeout``; once the request is out, the wait for the answer by
``response_timeout`` (a read timeout then means "outcome unknown", retried with the same id).
Redirects are refused, the answer is read up to a cap, and no message ever holds a secret.
Retries, rate limits and threads live in :mod:`monitor_cb.notify.delivery`.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from monitor_cb.masking import Secret, mask_url, redact

DEFAULT_TIMEOUT = 10.0
_MAX_RESPONSE = 64 * 1024


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


def json_bytes(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def check_vendor_answer(answer: bytes, where: str, code_key: str, rate_limited: set[int]) -> None:
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
