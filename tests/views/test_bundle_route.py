"""Plotly's basic bundle is served at one path, immutable, gzipped when asked; every other request passes."""

from __future__ import annotations

import gzip
from typing import Any

import pytest

from monitor_cb.views import bundle_route
from monitor_cb.views.bundle_route import ServeBundle, accepts_gzip, served_path
from tests.views.helpers import asgi_request

BODY = b"window.Plotly = {};" * 1000
URL = "_monitor/test-bundle.js"  # not the real path: a served path is remembered per process


async def _app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": [(b"x-from", b"app")]})
    await send({"type": "http.response.body", "body": b"streamlit"})


def _request(
    path: str, method: str = "GET", body: bytes | None = BODY, base: str = "", encoding: bytes | None = None
) -> tuple[int, dict[bytes, bytes], bytes]:
    headers = [] if encoding is None else [(b"accept-encoding", encoding)]
    scope = {"type": "http", "method": method, "path": path, "headers": headers}
    sent = asgi_request(ServeBundle(_app, body, URL, lambda: base), scope)
    return sent[0]["status"], dict(sent[0]["headers"]), b"".join(m.get("body", b"") for m in sent[1:])


def test_the_bundle_is_served_as_immutable_javascript() -> None:
    status, headers, body = _request("/" + URL)
    assert status == 200 and body == BODY
    assert headers[b"content-type"].startswith(b"text/javascript")
    assert b"immutable" in headers[b"cache-control"] and headers[b"x-content-type-options"] == b"nosniff"
    assert headers[b"content-length"] == str(len(BODY)).encode() and b"content-encoding" not in headers


def test_a_browser_that_accepts_gzip_gets_it_compressed() -> None:
    status, headers, body = _request("/" + URL, encoding=b"gzip, deflate, br")
    assert status == 200 and headers[b"content-encoding"] == b"gzip" and gzip.decompress(body) == BODY
    assert len(body) < len(BODY) / 10 and headers[b"content-length"] == str(len(body)).encode()


def test_head_gets_the_headers_only() -> None:
    status, headers, body = _request("/" + URL, method="HEAD")
    assert status == 200 and body == b"" and headers[b"content-length"] == str(len(BODY)).encode()


@pytest.mark.parametrize(
    "path, method, body, base",
    [
        ("/" + URL, "POST", BODY, ""),
        ("/" + URL + "x", "GET", BODY, ""),
        ("/_monitor/../" + URL, "GET", BODY, ""),
        ("/" + URL, "GET", BODY, "/proxy"),  # under a base path only the prefixed path is ours
        ("/" + URL, "GET", None, ""),  # no bundle installed
    ],
)
def test_other_requests_reach_streamlit(path: str, method: str, body: bytes | None, base: str) -> None:
    status, headers, answer = _request(path, method=method, body=body, base=base)
    assert status == 404 and headers[b"x-from"] == b"app" and answer == b"streamlit"


def test_a_base_path_prefixes_the_bundle() -> None:
    assert served_path("/proxy/", URL) == "/proxy/" + URL and served_path("", URL) == "/" + URL
    status, _, body = _request("/proxy/" + URL, base="proxy")
    assert status == 200 and body == BODY


@pytest.mark.parametrize(
    "value, ok",
    [
        (b"gzip", True),
        (b"br, GZIP;q=0.5", True),
        (b"*", True),
        (b"gzip;q=0", False),
        (b"identity", False),
        (b"", False),
    ],
)
def test_accept_encoding(value: bytes, ok: bool) -> None:
    assert accepts_gzip({"headers": [(b"accept-encoding", value)]}) is ok


def test_a_path_counts_as_served_only_with_a_body(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bundle_route, "_SERVED", set())
    ServeBundle(_app, None, "_monitor/none.js")
    assert not bundle_route.serving("_monitor/none.js")
    ServeBundle(_app, BODY, "_monitor/some.js")
    assert bundle_route.serving("_monitor/some.js") and not bundle_route.serving("_monitor/other.js")
