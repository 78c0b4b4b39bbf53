"""The Host allow-list (DNS-rebinding guard): which names pass, and what a refused request gets.

The real server is tested in ``tests/browser/test_pages_browser.py``; here the rules and the ASGI
answers, driving :class:`HostGuard` with ASGI messages as uvicorn would.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from monitor_cb.views.hostguard import LOOPBACK_HOSTS, HostGuard, host_allowed, hostname


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("localhost:8501", "localhost"),
        ("LocalHost", "localhost"),
        ("127.0.0.1:8501", "127.0.0.1"),
        ("[::1]:8501", "::1"),
        ("example.com.:80", "example.com"),
        ("", None),
        (None, None),
        ("a b", None),
        ("user@localhost", None),
        ("localhost:notaport", None),
        ("localhost:99999", None),
        ("localhost/path", None),
        ("x" * 400, None),
    ],
)
def test_hostname(host: str | None, name: str | None) -> None:
    assert hostname(host) == name


def test_loopback_names_pass_and_others_do_not() -> None:
    for host in ("localhost:8501", "127.0.0.1:8501", "[::1]:8501", "LOCALHOST"):
        assert host_allowed(host, LOOPBACK_HOSTS), host
    for host in ("evil.example:8501", "localhost.evil.example", "127.0.0.1.nip.io", "", None, "0.0.0.0:8501"):
        assert not host_allowed(host, LOOPBACK_HOSTS), host


def test_patterns_follow_streamlits_allowed_hosts() -> None:
    assert host_allowed("a.example.com", ["*.example.com"]) and host_allowed("x.y.example.com", ["*.example.com"])
    assert not host_allowed("example.com.evil", ["*.example.com"])
    assert host_allowed("anything:1", ["*"])
    assert host_allowed("evil.example", [])  # an empty list accepts every Host, as Streamlit's option does
    assert host_allowed("[::1]:8501", ["[::1]"])  # the bracketed spelling of an IPv6 name works too


class Downstream:
    """The app behind the guard: records what reached it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.calls.append(scope["type"])
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})


def _drive(guard: HostGuard, scope_type: str, headers: list[tuple[bytes, bytes]]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"} if scope_type == "websocket" else {"type": "http.request"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": scope_type, "path": "/", "headers": headers}
    asyncio.run(guard(scope, receive, send))
    return sent


def test_guard_refuses_http_and_websocket_from_a_foreign_host() -> None:
    app = Downstream()
    guard = HostGuard(app, patterns=lambda: LOOPBACK_HOSTS)
    sent = _drive(guard, "http", [(b"host", b"evil.example:8501")])
    assert sent[0]["status"] == 403 and b"server.allowedHosts" in sent[1]["body"]
    assert _drive(guard, "websocket", [(b"host", b"evil.example:8501")]) == [{"type": "websocket.close", "code": 1008}]
    assert _drive(guard, "http", [])[0]["status"] == 403  # no Host at all
    two = [(b"host", b"localhost"), (b"host", b"evil.example")]
    assert _drive(guard, "http", two)[0]["status"] == 403  # two Host headers: refused, not guessed
    assert app.calls == []


def test_guard_passes_loopback_and_reads_the_list_each_time() -> None:
    app = Downstream()
    allowed = list(LOOPBACK_HOSTS)
    guard = HostGuard(app, patterns=lambda: allowed)
    assert _drive(guard, "http", [(b"host", b"127.0.0.1:8501")])[0]["status"] == 200
    assert _drive(guard, "websocket", [(b"host", b"localhost:8501")]) == []
    allowed.append("dash.example")
    assert _drive(guard, "http", [(b"host", b"dash.example")])[0]["status"] == 200
    assert app.calls == ["http", "websocket", "http"]
