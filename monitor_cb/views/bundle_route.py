"""Serve one pinned JavaScript file (Plotly's basic bundle) at one path, cached by the browser for good.

Why: Streamlit serves its own modules, not ours, and its static folder serves ``.js`` as plain text. The
bundle's name holds its version and its bytes are checked at start (:mod:`monitor_cb.views.plotly_bundle`),
so it is served as immutable: a reopened page takes it from the browser's cache without asking. An ASGI
middleware beside the Host and token guards (behind them: a token-protected dashboard protects it too),
no Streamlit import. Any other request passes through untouched.
"""

from __future__ import annotations

import gzip
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


_SERVED: set[str] = set()  # the url paths a ServeBundle of this process serves (a body, not None)


def serving(url_path: str) -> bool:
    """Whether this process's server serves ``url_path``: a page may then point the browser at it (a page
    run by another entry script, or by AppTest, has no such server and draws with ``st.plotly_chart``)."""
    return url_path in _SERVED


def served_path(base: str, url_path: str) -> str:
    """The request path of ``url_path`` under Streamlit's ``server.baseUrlPath`` ``base``."""
    base = base.strip("/")
    return ("/" + base if base else "") + "/" + url_path.lstrip("/")


class ServeBundle:
    """ASGI middleware: a GET or HEAD of exactly ``url_path`` (under the base path) gets ``body``.

    ``body`` None (no bundle installed) serves nothing: every request passes through. A browser that
    accepts gzip gets it compressed once, here (1.19 MB as 0.36 MB: it matters on a remote link).
    """

    def __init__(
        self, app: ASGIApp, body: bytes | None, url_path: str, base_path: Callable[[], str] = lambda: ""
    ) -> None:
        self.app = app
        self.body = body
        self.gzipped = None if body is None else gzip.compress(body, compresslevel=6, mtime=0)
        if body is not None:
            _SERVED.add(url_path)
        self.url_path = url_path
        self.base_path = base_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            self.body is None
            or scope.get("type") != "http"
            or scope.get("method") not in ("GET", "HEAD")
            or scope.get("path") != served_path(self.base_path(), self.url_path)
        ):
            await self.app(scope, receive, send)
            return
        body = self.body
        headers = [
            (b"content-type", b"text/javascript; charset=utf-8"),
            (b"cache-control", b"public, max-age=31536000, immutable"),
            (b"x-content-type-options", b"nosniff"),
            (b"vary", b"accept-encoding"),
        ]
        if self.gzipped is not None and accepts_gzip(scope):
            body = self.gzipped
            headers.append((b"content-encoding", b"gzip"))
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope.get("method") == "HEAD" else body})


def accepts_gzip(scope: Scope) -> bool:
    """Whether the request's ``Accept-Encoding`` names gzip (not with ``q=0``)."""
    for name, value in scope.get("headers") or []:
        if bytes(name).lower() != b"accept-encoding":
            continue
        for item in bytes(value).decode("latin-1").lower().split(","):
            coding, _, params = item.strip().partition(";")
            if coding.strip() in ("gzip", "*") and _quality(params) > 0:
                return True
    return False


def _quality(params: str) -> float:
    """The ``q`` of an ``Accept-Encoding`` item's parameters (1 when absent, 0 when unreadable)."""
    for param in params.split(";"):
        name, _, value = param.strip().partition("=")
        if name.strip() == "q":
            try:
                return float(value)
            except ValueError:
                return 0.0
    return 1.0
