"""Require a token for the whole dashboard (every page, file, API route and the WebSocket), as Jupyter does.

Why: "127.0.0.1 only" keeps out other machines but not other users logged into the same node, and
``--host 0.0.0.0`` serves anyone who can reach the port. With a token set (``monitor-cb dashboard
--token``, ``$MONITOR_DASHBOARD_TOKEN``), a request passes only with it: in the query
(``/?token=…``, the link printed at start), in the cookie set on that first visit (HttpOnly,
SameSite=Strict, one per port; it holds a keyed hash of the token, not the token), or in an
``Authorization: token …`` / ``Bearer …`` header for scripts. Anything else gets 401 (HTTP: a
small page asking for the token) or a refused WebSocket handshake (403). Only ``/_stcore/health``
stays open, so a supervisor can still tell the server is up.

The WebSocket opens only from the dashboard's own origin: a browser sends the SameSite=Strict cookie to
every port of a host (ports are one "site"), so a page another program serves on 127.0.0.1:8888 could
otherwise open the dashboard's WebSocket with the user's cookie and read every message. A handshake whose
``Origin`` is not this server's scheme, host and port (as the ``Host`` header names it) is refused, with
or without a valid token; one without ``Origin`` (not a browser: a script) is judged by its token alone.

A page opened with ``?token=…`` is redirected to the same address without it, so the token does not
stay in the address bar, the history or a link copied from the page. Comparisons are constant-time.
:class:`TokenGuard` is an ASGI middleware beside :class:`~monitor_cb.views.hostguard.HostGuard`
(no Streamlit import).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

ENV_TOKEN = "MONITOR_DASHBOARD_TOKEN"
AUTO = "auto"
COOKIE = "monitor_cb_token"
COOKIE_MAX_AGE = 30 * 24 * 3600
HEALTH = "/_stcore/health"  # liveness only: says "ok", nothing about runs

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOGIN_PAGE = b"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Training monitor: token required</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:sans-serif;max-width:34em;margin:4em auto;padding:0 1em;color:#222}
input{font-size:1em;padding:.3em;width:22em}button{font-size:1em;padding:.3em .8em}</style></head>
<body><h1>Token required</h1>
<p>This training dashboard needs a token. Open the link printed when it started
(<code>http://&hellip;/?token=&hellip;</code>), or enter the token or password here.</p>
<form method="get"><input type="password" name="token" autocomplete="current-password" autofocus
aria-label="token"> <button type="submit">Open</button></form></body></html>
"""


def resolve_token(value: str | None) -> str | None:
    """The token to require: ``"auto"`` -> a fresh random one (43 URL-safe characters); empty -> None."""
    value = (value or "").strip()
    if not value:
        return None
    return secrets.token_urlsafe(32) if value.lower() == AUTO else value


def token_url(base: str, token: str) -> str:
    """The link to print at start (``http://127.0.0.1:8501/?token=…``)."""
    return f"{base.rstrip('/')}/?{urlencode({'token': token})}"


def cookie_name(scope: Scope) -> str:
    """One cookie per port: browsers share cookies between ports of one host, dashboards must not."""
    server = scope.get("server") or (None, None)
    return f"{COOKIE}_{server[1]}" if server and server[1] else COOKIE


class TokenGuard:
    """ASGI middleware: no valid token, no page, file or WebSocket (see the module docstring).

    ``token`` is None for an open dashboard (the middleware then passes everything through).
    ``base_path`` gives Streamlit's ``server.baseUrlPath`` (read on every request), so exactly
    ``/<base>/_stcore/health`` stays open and no static file that happens to end so.
    """

    def __init__(self, app: ASGIApp, token: str | None, base_path: Callable[[], str] = lambda: "") -> None:
        self.app = app
        self.base_path = base_path
        self.token = token.encode() if token else None
        self.cookie_value = (
            hmac.new(self.token, b"monitor_cb dashboard cookie", hashlib.sha256).hexdigest() if token else ""
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if self.token is None or kind not in ("http", "websocket") or self._open_path(scope):
            await self.app(scope, receive, send)
            return
        if kind == "websocket" and not origin_allowed(scope):
            await _refuse(scope, send)
            return
        query = parse_qsl((scope.get("query_string") or b"").decode("latin-1"), keep_blank_values=True)
        from_query = next((v for k, v in query if k == "token"), None)
        if from_query is not None and self._valid(from_query):
            if kind == "http" and scope.get("method") == "GET" and _wants_html(scope):
                await _redirect_without_token(scope, query, send, self._cookie(scope))
                return
            await self.app(scope, receive, _adding_cookie(send, self._cookie(scope)) if kind == "http" else send)
            return
        cookie, header = _cookie(scope), _header_token(scope)
        if (
            cookie is not None and hmac.compare_digest(cookie.encode("utf-8", "replace"), self.cookie_value.encode())
        ) or (header is not None and self._valid(header)):
            await self.app(scope, receive, send)
            return
        await _refuse(scope, send)

    def _open_path(self, scope: Scope) -> bool:
        base = self.base_path().strip("/")
        return scope["type"] == "http" and scope.get("path") == (f"/{base}{HEALTH}" if base else HEALTH)

    def _valid(self, given: str) -> bool:
        assert self.token is not None
        return hmac.compare_digest(given.encode("utf-8", "replace"), self.token)

    def _cookie(self, scope: Scope) -> bytes:
        assert self.token is not None
        secure = "; Secure" if scope.get("scheme") in ("https", "wss") else ""
        return (
            f"{cookie_name(scope)}={self.cookie_value}; Path=/; Max-Age={COOKIE_MAX_AGE}; "
            f"HttpOnly; SameSite=Strict{secure}"
        ).encode()


Origin = tuple[str, str, int]  # (scheme, lower-case host, port)
_DEFAULT_PORTS = {"http": 80, "https": 443}


def own_origin(scope: Scope) -> Origin | None:
    """This server's origin as the request names it: its scheme and its single ``Host`` header (None if malformed)."""
    hosts = _headers(scope, b"host")
    scheme = "https" if scope.get("scheme") in ("https", "wss") else "http"
    return _origin(f"{scheme}://{hosts[0]}") if len(hosts) == 1 else None


def origin_allowed(scope: Scope) -> bool:
    """Whether a WebSocket handshake may go on: no ``Origin`` (not a browser), or exactly this server's origin."""
    origins = _headers(scope, b"origin")
    if not origins:
        return True
    mine = own_origin(scope)
    return len(origins) == 1 and mine is not None and _origin(origins[0]) == mine


def _origin(text: str) -> Origin | None:
    """``(scheme, host, port)`` of ``http(s)://host[:port]`` (the default port filled in), None for anything else
    (``null``, another scheme, a path, credentials)."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc or parts.path not in ("", "/"):
        return None
    return parts.scheme, parts.hostname.rstrip("."), port if port is not None else _DEFAULT_PORTS[parts.scheme]


def _headers(scope: Scope, name: bytes) -> list[str]:
    return [v.decode("latin-1") for k, v in scope.get("headers") or () if k.lower() == name]


def _wants_html(scope: Scope) -> bool:
    return any("text/html" in accept for accept in _headers(scope, b"accept"))


def _cookie(scope: Scope) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    for header in _headers(scope, b"cookie"):
        try:
            jar.load(header)
        except CookieError:
            continue
    morsel = jar.get(cookie_name(scope))
    return morsel.value if morsel is not None else None


def _header_token(scope: Scope) -> str | None:
    for header in _headers(scope, b"authorization"):
        scheme, _, value = header.partition(" ")
        if scheme.lower() in ("token", "bearer") and value.strip():
            return value.strip()
    return None


def _adding_cookie(send: Send, cookie: bytes) -> Send:
    async def wrapped(message: MutableMapping[str, Any]) -> None:
        if message.get("type") == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie)]}
        await send(message)

    return wrapped


async def _redirect_without_token(scope: Scope, query: list[tuple[str, str]], send: Send, cookie: bytes) -> None:
    rest = urlencode([(k, v) for k, v in query if k != "token"])
    path = quote(str(scope.get("path", "/")), safe="/:@!$&'()*+,;=-._~")  # no CR/LF into a header
    location = (path if path.startswith("/") and not path.startswith("//") else "/") + (f"?{rest}" if rest else "")
    headers = [(b"location", location.encode("latin-1", "replace")), (b"set-cookie", cookie)]
    await send({"type": "http.response.start", "status": 303, "headers": [*headers, (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": b""})


async def _refuse(scope: Scope, send: Send) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})  # before accept: the handshake gets 403
        return
    html = _wants_html(scope)
    headers = [
        (b"content-type", b"text/html; charset=utf-8" if html else b"text/plain; charset=utf-8"),
        (b"cache-control", b"no-store"),
        (b"www-authenticate", b'Token realm="training monitor"'),
    ]
    body = LOGIN_PAGE if html else b"This training dashboard needs a token: open the link printed when it started.\n"
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})
