"""The page aliases' redirects, driven with ASGI messages as uvicorn sends them (the real server and a real
Chromium: ``tests/browser/test_live_path_browser.py``)."""

from __future__ import annotations

import asyncio
from typing import Any

from monitor_cb.views.page_alias import LIVE_ALIASES, PageAlias, alias_target


def test_live_goes_to_the_root_with_its_query() -> None:
    assert alias_target("/live", "run=a%2Fb&x=time", LIVE_ALIASES) == "/?run=a%2Fb&x=time"
    assert alias_target("/live/", "", LIVE_ALIASES) == "/"
    assert alias_target("/dash/live", "run=r", LIVE_ALIASES, base="/dash/") == "/dash/?run=r"
    for path in ("/", "/compare", "/lives", "/live/x", "/static/live", "//live", "/dash/live"):
        assert alias_target(path, "run=r", LIVE_ALIASES) is None, path
    assert alias_target("/live", "", LIVE_ALIASES, base="dash") is None  # outside the base path


def _drive(path: str, method: str = "GET", kind: str = "http") -> tuple[int, dict[bytes, bytes]]:
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": kind, "method": method, "path": path, "query_string": b"run=exp1"}
    asyncio.run(PageAlias(app)(scope, receive, send))
    return sent[0]["status"], dict(sent[0]["headers"])


def test_the_middleware_redirects_only_a_browsers_get_of_an_alias() -> None:
    status, headers = _drive("/live")
    assert status == 302 and headers[b"location"] == b"/?run=exp1"
    assert _drive("/live", "HEAD")[0] == 302
    assert _drive("/live", "POST")[0] == 200
    assert _drive("/", "GET")[0] == 200 and _drive("/settings")[0] == 200
