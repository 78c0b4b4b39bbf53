"""Old or guessed page paths that mean a page served elsewhere: ``/live?run=…`` is the Live page at ``/``.

Why: the Live page is the default page, which Streamlit serves at the app's root; its ``url_path``
("live") is reserved but not served, so a link to ``/live?run=…`` showed Streamlit's "Page not found"
dialog before falling back to the main page. :class:`PageAlias` (an ASGI middleware beside the Host and
token guards, no Streamlit import) answers a browser's GET of such a path with a redirect to the page's
real path, the query kept, so the link opens the page with no dialog.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LIVE_ALIASES = {"live": ""}  # alias -> the page's served path ("" = the app's root)


def alias_target(path: str, query: str, aliases: Mapping[str, str], base: str = "") -> str | None:
    """Where a request for ``path`` should go (``/<base>/<target>?<query>``), None when it is no alias."""
    base = base.strip("/")
    prefix = f"/{base}" if base else ""
    if not path.startswith(prefix + "/"):
        return None
    name = path[len(prefix) + 1 :]
    name = name[:-1] if name.endswith("/") else name  # "/live/" as "/live", nothing looser
    if name not in aliases:
        return None
    return f"{prefix}/{aliases[name]}" + (f"?{query}" if query else "")


class PageAlias:
    """ASGI middleware: a GET or HEAD of an alias path gets a 302 to the page's served path.

    ``base_path`` gives Streamlit's ``server.baseUrlPath`` (read on every request).
    """

    def __init__(
        self, app: ASGIApp, aliases: Mapping[str, str] = LIVE_ALIASES, base_path: Callable[[], str] = lambda: ""
    ) -> None:
        self.app = app
        self.aliases = dict(aliases)
        self.base_path = base_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        target = None
        if scope.get("type") == "http" and scope.get("method") in ("GET", "HEAD"):
            query = (scope.get("query_string") or b"").decode("latin-1")
            target = alias_target(str(scope.get("path", "")), query, self.aliases, self.base_path())
        if target is None:
            await self.app(scope, receive, send)
            return
        headers = [(b"location", target.encode("latin-1", "replace")), (b"cache-control", b"no-store")]
        await send({"type": "http.response.start", "status": 302, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
