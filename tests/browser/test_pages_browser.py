"""Every page's shared link on a fresh server, in a real Chromium: it opens cleanly the first time,
nothing is fetched from outside, and the server answers only to loopback names (DNS rebinding).

One fresh ``streamlit run dashboard.py`` per page (a fresh server is what a shared link meets:
Streamlit's "Page not found" came only on a server's first session), all started side by side.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from monitor_cb.demo.samples import write_sample_runs
from tests.browser.harness import browser_missing, chromium_page, poll, streamlit_servers

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SHOTS = Path(__file__).parent / "screenshots"
RUNS = ("run01-lr0.0003-bs32-seed0", "run02-lr0.001-bs64-seed1")
# path and query of each page's link -> a selector for something only the page itself draws
LINKS = {
    "live": (f"?run={RUNS[1]}", "text=Since update"),  # the default page lives at "/"
    "compare": (f"compare?runs={RUNS[0]}&runs={RUNS[1]}&metric=loss&align=step", "text=Config diff"),
    "replay": (f"replay?run={RUNS[1]}", "text=Jump to"),
    "runs": ("runs", "[data-testid=stDataFrame]"),
    "settings": ("settings", "text=Diagnosis thresholds"),
}
LOCAL = {"127.0.0.1", "localhost", "::1"}


@pytest.fixture(scope="module", autouse=True)
def _need_browser() -> None:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One fresh server per page, one told to answer to another name (``--server.allowedHosts``), and
    one whose server refuses uploads over 1 MB (the ``maxUploadSize = 1`` the config once had)."""
    tmp = tmp_path_factory.mktemp("pages-browser")
    root = tmp / "logs"
    write_sample_runs(root, n_runs=2, steps=300, seed=0)
    names = [*LINKS, "override", "small-uploads"]
    specs = [(root, tmp / f"{name}.log", None) for name in LINKS]
    specs.append((root, tmp / "override.log", ["--server.allowedHosts", "dash.example"]))
    specs.append((root, tmp / "small-uploads.log", ["--server.maxUploadSize", "1"]))
    with streamlit_servers(specs) as urls:
        yield dict(zip(names, urls, strict=True))


@pytest.mark.parametrize("name", list(LINKS))
def test_a_shared_link_opens_cleanly_on_a_fresh_server_and_fetches_nothing_from_outside(
    servers: dict[str, str], name: str
) -> None:
    url = servers[name]
    link, drawn = LINKS[name]
    SHOTS.mkdir(exist_ok=True)
    requested: list[str] = []
    with chromium_page(width=1440, height=1000) as page:
        page.on("request", lambda request: requested.append(request.url))
        page.on("websocket", lambda ws: requested.append(ws.url))
        page.goto(f"{url}/{link}", wait_until="domcontentloaded")
        poll(lambda: page.locator(drawn).count() > 0, timeout=60, what=f"the {name} page")
        # the page is drawn; the modal came before the page's elements, so it would be here by now
        poll(lambda: page.locator("[data-testid=stSidebarNav] a").count() >= 5, timeout=20, what="the navigation")
        favicon = poll(lambda: page.evaluate(_JS_ICON), timeout=20, what="the tab icon")
        page.screenshot(path=str(SHOTS / f"link-{name}.png"))
        assert page.get_by_text("Page not found").count() == 0, f"/{link}: Streamlit's 'Page not found' modal"
        assert page.get_by_test_id("stException").count() == 0
        assert urlsplit(page.url).path.rstrip("/").endswith(link.split("?")[0])  # not sent to another page
        requested.append(favicon)  # a browser fetches the tab icon outside the page's own requests
    foreign = [u for u in requested if urlsplit(u).scheme not in ("data", "blob") and urlsplit(u).hostname not in LOCAL]
    assert not foreign, foreign
    assert len(requested) > 5


_JS_ICON = """() => { const link = document.querySelector('link[rel~="icon"]'); return link ? link.href : null; }"""


def _http_status(url: str, host: str, path: str = "/") -> int:
    port = int(urlsplit(url).port)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", host)
        conn.endheaders()
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def _websocket_status(url: str, host: str) -> int:
    """The HTTP status of a WebSocket handshake on Streamlit's stream (101 = accepted)."""
    port = int(urlsplit(url).port)
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET /_stcore/stream HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: streamlit\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request.encode())
        status_line = sock.recv(4096).split(b"\r\n", 1)[0].decode()
    return int(status_line.split()[1])


def test_a_foreign_host_is_refused_on_http_and_websocket(servers: dict[str, str]) -> None:
    url = servers["settings"]
    port = urlsplit(url).port
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}", "", "a b"):
        for path in ("/", "/settings", "/_stcore/health", "/_stcore/host-config"):
            assert _http_status(url, host, path) in (400, 403), (host, path)
        assert _websocket_status(url, host) in (400, 403), host
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LocalHost:{port}", f"[::1]:{port}"):
        assert _http_status(url, host) == 200, host
        assert _http_status(url, host, "/_stcore/health") == 200, host
        assert _websocket_status(url, host) == 101, host


def test_the_allowed_names_can_be_changed(servers: dict[str, str]) -> None:
    url = servers["override"]
    port = urlsplit(url).port
    assert _http_status(url, f"dash.example:{port}") == 200
    assert _websocket_status(url, f"dash.example:{port}") == 101
    assert _http_status(url, f"evil.example:{port}") == 403
    assert _websocket_status(url, f"localhost:{port}") == 403  # the list replaces the default


def _upload(page: Any, url: str, path: Path) -> str:
    """Open Replay, choose the upload, give it ``path``; the limit the uploader states."""
    page.goto(f"{url}/replay", wait_until="domcontentloaded")
    page.get_by_text("Upload a JSONL file").click()
    stated = page.get_by_test_id("stFileUploaderDropzoneInstructions").first.inner_text()
    page.locator(".st-key-rp_upload input[type=file]").set_input_files(str(path))
    return stated


def test_the_upload_limit_shown_is_the_one_enforced(servers: dict[str, str], tmp_path: Path) -> None:
    """A 1.4 MB run (the size that met "AxiosError: Request failed with status code 413") replays on
    the default server; where the server takes 1 MB, the uploader says 1 MB and refuses it with a
    message, and nothing reaches the server's 413."""
    lines = [
        json.dumps({"step": s, "loss": 2 * math.exp(-s / 900) + 0.1, "lr": 1e-3, "ts": 1.7e9 + s, "note": "x" * 200})
        for s in range(1, 5001)
    ]
    run = tmp_path / "run.jsonl"
    run.write_text("\n".join(lines) + "\n")
    assert 1.3 * 2**20 < run.stat().st_size < 1.5 * 2**20
    SHOTS.mkdir(exist_ok=True)
    with chromium_page(width=1440, height=1000) as page:
        responses: list[int] = []
        page.on("response", lambda response: responses.append(response.status))
        stated = _upload(page, servers["replay"], run)
        assert stated.startswith("400MB per file"), stated
        poll(lambda: page.locator(".st-key-rp_chart_0 .js-plotly-plot").count() > 0, 45, what="the uploaded run")
        page.screenshot(path=str(SHOTS / "upload-accepted.png"))

        stated = _upload(page, servers["small-uploads"], run)
        assert stated.startswith("1MB per file"), stated
        poll(lambda: page.get_by_text("File must be 1.0MB or smaller").count() > 0, 20, what="the refusal")
        # the box saying the limit (the run's own boxes from before the switch to uploads may still be there)
        said = poll(
            lambda: next((t for t in page.get_by_test_id("stAlert").all_inner_texts() if "at most 1 MB" in t), None),
            20,
            what="the limit stated in the page",
        )
        assert "A larger file is refused" in said, said
        page.screenshot(path=str(SHOTS / "upload-refused.png"))
        assert page.get_by_text("AxiosError").count() == 0
        assert 413 not in responses
