"""A dashboard started with a token, against real clients on 127.0.0.1: every HTTP route and the
WebSocket refuse without it; the printed link, its cookie, or a header get in; a real Chromium
meets the token form, enters the token, and gets the dashboard.

One ``streamlit run dashboard.py`` with ``$MONITOR_DASHBOARD_TOKEN=auto``, as ``monitor-cb dashboard
--token`` starts it: the token is read from the link the server prints.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import http.server
import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from monitor_cb.demo.samples import write_sample_runs
from tests.browser.harness import browser_missing, chromium_page, free_port, poll, streamlit_server

pytestmark = [pytest.mark.slow]
RUN = "run01-lr0.0003-bs32-seed0"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(base URL, token) of a fresh dashboard that needs a token."""
    tmp = tmp_path_factory.mktemp("token-server")
    root = tmp / "logs"
    write_sample_runs(root, n_runs=1, steps=200, seed=0)
    log = tmp / "server.log"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MONITOR_DASHBOARD_TOKEN", "auto")
        with streamlit_server(root, log) as url:
            printed = poll(lambda: re.search(r"http://127\.0\.0\.1:\d+/\?token=([\w-]+)", log.read_text()), 30)
            assert printed.group(0).startswith(url), (printed.group(0), url)
            assert "MONITOR_DASHBOARD_TOKEN" not in log.read_text()
            yield url, printed.group(1)


def status(url: str, headers: dict[str, str] | None = None, opener: urllib.request.OpenerDirector | None = None) -> int:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with (opener or urllib.request.build_opener()).open(request, timeout=20) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_every_http_route_refuses_without_the_token(server: tuple[str, str]) -> None:
    url, token = server
    with urllib.request.urlopen(f"{url}/?token={token}", timeout=20) as response:  # a script's way in
        page = response.read().decode()
    assets = re.findall(r'(?:src|href)="\.?/?((?:static|assets)/[^"]+)"', page)
    assert assets, page[:500]
    paths = ["/", "/settings", f"/?run={RUN}", "/_stcore/host-config", "/_stcore/allowed-message-origins"]
    paths += [f"/{asset}" for asset in assets[:3]] + ["/favicon.png", "/media/x.png", "/app/static/x"]
    for path in paths:
        assert status(url + path) == 401, path
        assert status(url + path, {"Authorization": "token not-it"}) == 401, path
        assert status(url + path, {"Cookie": f"monitor_cb_token_{urlsplit(url).port}={token}"}) == 401, path
    assert status(f"{url}/{assets[0]}", {"Authorization": f"token {token}"}) == 200
    assert status(f"{url}/_stcore/health") == 200, "liveness stays open for supervisors"


def test_the_link_sets_a_cookie_that_opens_every_page(server: tuple[str, str]) -> None:
    url, token = server
    jar = http.cookiejar.CookieJar()
    browser_like = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    html = {"Accept": "text/html"}
    assert status(f"{url}/settings?token={token}", html, browser_like) == 200  # 303 to /settings, then served
    (cookie,) = list(jar)
    assert cookie.has_nonstandard_attr("HttpOnly") and cookie.get_nonstandard_attr("SameSite") == "Strict"
    assert cookie.value != token
    for path in ("/", "/runs", "/_stcore/host-config"):
        assert status(url + path, html, browser_like) == 200, path


def test_the_websocket_refuses_without_the_token(server: tuple[str, str]) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    url, token = server
    stream = url.replace("http://", "ws://") + "/_stcore/stream"
    for headers in ({}, {"Cookie": f"monitor_cb_token_{urlsplit(url).port}=forged"}):
        with pytest.raises(InvalidStatus) as refused:
            connect(stream, subprotocols=["streamlit"], additional_headers=headers, open_timeout=20).close()
        assert refused.value.response.status_code == 403
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    assert status(f"{url}/?token={token}", {"Accept": "text/html"}, opener) == 200
    cookie = "; ".join(f"{c.name}={c.value}" for c in jar)
    for headers in ({"Cookie": cookie}, {"Authorization": f"Bearer {token}"}):
        with connect(stream, subprotocols=["streamlit"], additional_headers=headers, open_timeout=20) as ws:
            assert ws.response.status_code == 101 and ws.subprotocol == "streamlit"
    with connect(f"{stream}?token={token}", subprotocols=["streamlit"], open_timeout=20) as ws:
        assert ws.response.status_code == 101


def test_a_browser_meets_the_form_enters_the_token_and_gets_the_dashboard(server: tuple[str, str]) -> None:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)
    url, token = server
    with chromium_page(width=1200, height=900) as page:
        response = page.goto(f"{url}/settings", wait_until="domcontentloaded")
        assert response is not None and response.status == 401
        assert page.get_by_text("Token required").count() == 1
        page.fill("input[name=token]", token)
        page.click("button[type=submit]")
        poll(lambda: page.get_by_text("Diagnosis thresholds").count() > 0, 60, what="the Settings page")
        assert "token" not in page.url, page.url  # dropped from the address bar
        assert "monitor_cb_token" not in page.evaluate("document.cookie"), "HttpOnly: scripts cannot read it"
        page.goto(f"{url}/?run={RUN}", wait_until="domcontentloaded")
        poll(lambda: page.get_by_text("Since update").count() > 0, 60, what="the Live page over the WebSocket")


# ----------------------------------------------------------------------------- another port of 127.0.0.1 (#34 item 1)
def _cookie_header(url: str, token: str) -> str:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    assert status(f"{url}/?token={token}", {"Accept": "text/html"}, opener) == 200
    return "; ".join(f"{c.name}={c.value}" for c in jar)


def test_the_websocket_refuses_another_origin_even_with_the_cookie(server: tuple[str, str]) -> None:
    """As found: a handshake from a page on another port of 127.0.0.1 carries the cookie (same site) and
    was accepted; now only the dashboard's own origin opens it."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    url, token = server
    port = urlsplit(url).port
    stream = url.replace("http://", "ws://") + "/_stcore/stream"
    cookie = _cookie_header(url, token)
    for origin in (f"http://127.0.0.1:{free_port()}", f"http://localhost:{port}", "null"):
        with pytest.raises(InvalidStatus) as refused:
            connect(
                stream,
                subprotocols=["streamlit"],
                origin=origin,
                additional_headers={"Cookie": cookie},
                open_timeout=20,
            ).close()
        assert refused.value.response.status_code == 403, origin
    with connect(
        stream, subprotocols=["streamlit"], origin=url, additional_headers={"Cookie": cookie}, open_timeout=20
    ) as ws:
        assert ws.response.status_code == 101
    # behind a local TLS proxy that says so (X-Forwarded-Proto, trusted from 127.0.0.1): the https origin is its own
    behind_tls = {"Cookie": cookie, "X-Forwarded-Proto": "https"}
    https = url.replace("http://", "https://")
    with connect(
        stream, subprotocols=["streamlit"], origin=https, additional_headers=behind_tls, open_timeout=20
    ) as ws:
        assert ws.response.status_code == 101
    with pytest.raises(InvalidStatus):
        connect(stream, subprotocols=["streamlit"], origin=url, additional_headers=behind_tls, open_timeout=20).close()


ATTACKER_PAGE = """<!doctype html><html><body><script>
window.result = null;
const ws = new WebSocket(%s, ["streamlit"]);
ws.onopen = () => { window.result = "open"; };
ws.onerror = () => { if (!window.result) window.result = "error"; };
ws.onclose = (e) => { if (!window.result) window.result = "closed " + e.code; };
</script></body></html>"""


@contextlib.contextmanager
def other_port_site(html: str) -> Iterator[str]:
    """A web server on another port of 127.0.0.1 (any local web app, a notebook, a dev server) serving ``html``."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{site.server_address[1]}"
    finally:
        site.shutdown()
        site.server_close()
        thread.join(10)


def test_a_page_on_another_port_cannot_open_the_websocket_in_a_browser(server: tuple[str, str]) -> None:
    """In Chromium: the user opened the dashboard (the cookie is set), then a page on another port of
    127.0.0.1 tries the dashboard's WebSocket: refused. From the dashboard's own page it opens."""
    reason = browser_missing()
    if reason:
        pytest.skip(reason)
    url, token = server
    stream = url.replace("http://", "ws://") + "/_stcore/stream"
    with other_port_site(ATTACKER_PAGE % json.dumps(stream)) as attacker, chromium_page(1280, 900) as page:
        page.goto(f"{url}/?token={token}", wait_until="domcontentloaded")
        poll(lambda: page.get_by_text("Since update").count() > 0, 60, what="the dashboard over its WebSocket")
        page.add_script_tag(content=(ATTACKER_PAGE % json.dumps(stream)).split("<script>")[1].split("</script>")[0])
        assert poll(lambda: page.evaluate("window.result"), 20, what="the same-origin handshake") == "open"
        page.goto(attacker, wait_until="domcontentloaded")
        result = poll(lambda: page.evaluate("window.result"), 20, what="the cross-port handshake")
        assert result != "open", f"a page on {attacker} opened the dashboard's WebSocket"
