"""The token guard's rules, driven with ASGI messages as uvicorn sends them.

The real server (``streamlit run dashboard.py`` with a token, real HTTP and WebSocket clients, a real
Chromium) is tested in ``tests/browser/test_token_server.py``.
"""

from __future__ import annotations

from typing import Any

from monitor_cb.views.tokenguard import TokenGuard, resolve_token, token_url
from tests.views.helpers import asgi_request

TOKEN = "s3cret-Token_42"


class Downstream:
    """The app behind the guard: records the paths that reached it."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.paths.append(scope["path"])
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})


def drive(
    guard: TokenGuard, path: str = "/", query: str = "", headers: list[tuple[bytes, bytes]] | None = None, **scope: Any
) -> tuple[int, dict[bytes, bytes], bytes]:
    """One request through the guard: (status, headers, body); a WebSocket refusal is status 403."""
    full = {"type": "http", "method": "GET", "path": path, "query_string": query.encode(), "server": ("h", 8501)}
    full.update(headers=headers or [], **scope)
    sent = asgi_request(guard, full)
    if full["type"] == "websocket":
        return (403 if sent == [{"type": "websocket.close", "code": 1008}] else 101), {}, b""
    start, body = sent[0], sent[1]
    return start["status"], dict(start["headers"]), body["body"]


def test_no_token_configured_passes_everything() -> None:
    app = Downstream()
    assert drive(TokenGuard(app, None), "/settings")[0] == 200
    assert resolve_token("") is None and resolve_token(None) is None


def test_every_route_and_the_websocket_refuse_without_the_token() -> None:
    app = Downstream()
    guard = TokenGuard(app, TOKEN)
    for path in ("/", "/settings", "/_stcore/host-config", "/static/js/index.js", "/media/x.png", "/component/x"):
        assert drive(guard, path)[0] == 401, path
        assert drive(guard, path, "token=wrong")[0] == 401, path
        assert drive(guard, path, headers=[(b"cookie", b"monitor_cb_token_8501=" + TOKEN.encode())])[0] == 401
    assert drive(guard, "/_stcore/stream", type="websocket")[0] == 403
    assert drive(guard, "/_stcore/health")[0] == 200, "liveness stays open"
    assert app.paths == ["/_stcore/health"]
    assert drive(guard, "/static/_stcore/health")[0] == 401, "only the health route itself"
    behind = TokenGuard(app, TOKEN, base_path=lambda: "/dash/")
    assert drive(behind, "/dash/_stcore/health")[0] == 200 and drive(behind, "/_stcore/health")[0] == 401


def test_a_browser_without_the_token_gets_a_form_and_no_page() -> None:
    status, headers, body = drive(TokenGuard(Downstream(), TOKEN), "/", headers=[(b"accept", b"text/html")])
    assert status == 401 and headers[b"content-type"].startswith(b"text/html") and b'name="token"' in body
    assert headers[b"cache-control"] == b"no-store"


def test_the_token_link_sets_a_private_cookie_and_drops_the_token_from_the_address() -> None:
    app = Downstream()
    guard = TokenGuard(app, TOKEN)
    html = [(b"accept", b"text/html,application/xhtml+xml")]
    status, headers, _ = drive(guard, "/compare", f"runs=a&token={TOKEN}&runs=b", html)
    assert status == 303 and headers[b"location"] == b"/compare?runs=a&runs=b"
    cookie = headers[b"set-cookie"].decode()
    name, value = cookie.split(";")[0].split("=", 1)
    assert name == "monitor_cb_token_8501" and value != TOKEN and TOKEN not in cookie, "a keyed hash, not the token"
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie and "Secure" not in cookie
    assert app.paths == []
    jar = [(b"cookie", f"other=1; {name}={value}".encode())]
    assert drive(guard, "/compare", "runs=a", jar)[0] == 200
    assert drive(guard, "/_stcore/stream", headers=jar, type="websocket")[0] == 101
    other_port = drive(guard, "/", headers=jar, server=("h", 8502))[0]
    assert other_port == 401, "another dashboard on the same host does not accept this one's cookie"
    https = drive(guard, "/", f"token={TOKEN}", html, scheme="https")[1][b"set-cookie"]
    assert b"Secure" in https


def test_scripts_use_the_query_or_an_authorization_header() -> None:
    guard = TokenGuard(Downstream(), TOKEN)
    status, headers, body = drive(guard, "/_stcore/host-config", f"token={TOKEN}")
    assert status == 200 and body == b"ok" and b"set-cookie" in headers
    for scheme in (b"token", b"Bearer"):
        assert drive(guard, "/", headers=[(b"authorization", scheme + b" " + TOKEN.encode())])[0] == 200
    assert drive(guard, "/", headers=[(b"authorization", b"Basic " + TOKEN.encode())])[0] == 401


def test_the_redirect_cannot_inject_a_header_or_leave_the_site() -> None:
    guard = TokenGuard(Downstream(), TOKEN)
    html = [(b"accept", b"text/html")]
    location = drive(guard, "/x\r\nSet-Cookie: evil=1", f"token={TOKEN}", html)[1][b"location"]
    assert b"\r" not in location and b"\n" not in location and location.startswith(b"/x%0D%0A")
    assert drive(guard, "//evil.example/x", f"token={TOKEN}", html)[1][b"location"] == b"/"


def test_auto_makes_a_long_random_token_and_the_link_carries_it() -> None:
    one, two = resolve_token("auto"), resolve_token("AUTO")
    assert one and two and one != two and len(one) >= 40
    assert token_url("http://127.0.0.1:8501", "a b&c") == "http://127.0.0.1:8501/?token=a+b%26c"
    guard = TokenGuard(Downstream(), "a b&c")  # a password with spaces and symbols works through the form
    assert drive(guard, "/", "token=a+b%26c")[0] == 200


def test_the_websocket_opens_only_from_the_dashboards_own_origin() -> None:
    """A page on another port of 127.0.0.1 gets the SameSite=Strict cookie sent along (ports are one site):
    its handshake is refused by origin, whatever credentials come with it."""
    guard = TokenGuard(Downstream(), TOKEN)
    host = [(b"host", b"127.0.0.1:8501")]
    cookie = [(b"cookie", f"monitor_cb_token_8501={guard.cookie_value}".encode())]

    def handshake(origin: str | None, extra: list[tuple[bytes, bytes]] = cookie, **scope: Any) -> int:
        headers = host + extra + ([(b"origin", origin.encode())] if origin is not None else [])
        return drive(guard, "/_stcore/stream", headers=headers, type="websocket", **scope)[0]

    assert handshake("http://127.0.0.1:8501") == 101
    assert handshake("HTTP://127.0.0.1:8501/") == 101
    assert handshake(None) == 101  # a script: no Origin, judged by its credentials
    for foreign in (
        "http://127.0.0.1:8888",
        "http://localhost:8501",  # another host name is another origin
        "https://127.0.0.1:8501",
        "http://127.0.0.1",
        "null",
        "http://evil@127.0.0.1:8501",
        "file://",
        "",
    ):
        assert handshake(foreign) == 403, foreign
    assert handshake("http://127.0.0.1:8888", [(b"authorization", f"token {TOKEN}".encode())]) == 403
    assert (
        drive(guard, "/_stcore/stream", f"token={TOKEN}", [*host, (b"origin", b"http://x:1")], type="websocket")[0]
        == 403
    )
    assert handshake("https://127.0.0.1:8501", scheme="wss") == 101
    two = host + cookie + [(b"origin", b"http://127.0.0.1:8501"), (b"origin", b"http://127.0.0.1:8501")]
    assert drive(guard, "/_stcore/stream", headers=two, type="websocket")[0] == 403
    open_dashboard = TokenGuard(Downstream(), None)  # no token: nothing to steal, nothing checked
    assert (
        drive(open_dashboard, "/_stcore/stream", headers=[*host, (b"origin", b"http://x:1")], type="websocket")[0]
        == 101
    )
