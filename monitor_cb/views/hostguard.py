"""Refuse requests whose ``Host`` header is not one of the dashboard's names (DNS-rebinding guard).

Why: the dashboard listens on 127.0.0.1, but a web page on ``evil.example`` whose DNS name is
re-pointed at 127.0.0.1 can make the user's browser talk to it, same-origin as far as the browser
knows. Such requests carry ``Host: evil.example:PORT``; refusing every Host that is not a name
the user really opens the dashboard by stops them. Streamlit checks ``server.allowedHosts`` for
its WebSocket only; :class:`HostGuard` (an ASGI middleware, no Streamlit import) applies the same
list to every HTTP request and WebSocket, so nothing is served to a foreign Host.

The patterns follow ``server.allowedHosts``: ``name`` (exact, case-insensitive, port ignored),
``*.example.com`` (any subdomain), ``*`` (anything); an empty list accepts every Host.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
_NAME = re.compile(r"[a-z0-9._:-]+")  # DNS names and IP addresses (urlsplit lower-cases the name)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

REFUSED_TEXT = (
    b"This Host is not one the training dashboard answers to. To open it under another name, add "
    b"that name to server.allowedHosts (.streamlit/config.toml or --server.allowedHosts).\n"
)


def hostname(host: str | None) -> str | None:
    """The lower-case name in a ``Host`` header (``"LocalHost:8501"`` -> ``"localhost"``), None if malformed."""
    if not host or len(host) > 300:
        return None
    try:
        parts = urlsplit(f"//{host}")
        _ = parts.port  # a port that is not a number in range makes the header malformed
    except ValueError:
        return None
    name = parts.hostname
    if not name or not _NAME.fullmatch(name) or "@" in host or parts.path or parts.query:
        return None
    return name.rstrip(".")


def host_allowed(host: str | None, patterns: Iterable[str]) -> bool:
    """Whether a ``Host`` header matches one of ``patterns`` (``server.allowedHosts`` semantics)."""
    wanted = [p.strip().lower().rstrip(".") for p in patterns if p and p.strip()]
    if not wanted:
        return True
    name = hostname(host)
    if name is None:
        return False
    for pattern in wanted:
        if pattern == "*" or name == pattern.strip("[]"):
            return True
        if pattern.startswith("*.") and name.endswith(pattern[1:]):
            return True
    return False


class HostGuard:
    """ASGI middleware: a request whose Host is not allowed gets 403 (HTTP) or a refused handshake.

    ``patterns`` is read on every request, so a change of the server's configuration applies at once.
    """

    def __init__(self, app: ASGIApp, patterns: Callable[[], Iterable[str]]) -> None:
        self.app = app
        self.patterns = patterns

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") not in ("http", "websocket") or host_allowed(_host(scope), self.patterns()):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # before accept: the handshake gets 403
            return
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"cache-control", b"no-store")],
            }
        )
        await send({"type": "http.response.body", "body": REFUSED_TEXT})


def _host(scope: Scope) -> str | None:
    values = [v for k, v in scope.get("headers") or () if k.lower() == b"host"]
    if len(values) != 1:  # none, or two Host headers: refuse rather than guess which one counts
        return None
    try:
        return values[0].decode("ascii")
    except UnicodeDecodeError:
        return None
