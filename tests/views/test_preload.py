"""The page's HTML loads Streamlit's Plotly module; nothing else the server sends is touched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from monitor_cb.views.preload import HTML_CAP, ModulePreload, chunk_hrefs, with_preloads
from tests.views.helpers import asgi_request

PAGE = b'<html><head>\n<script type="module" src="./static/js/index.abc.js"></script>\n</head><body></body></html>'
HREF = "./static/js/PlotlyChart.D9Z0_fxz.js"
LINK = b'<script type="module" crossorigin src="./static/js/PlotlyChart.D9Z0_fxz.js"></script>'


class App:
    """The app behind the middleware: answers with ``chunks`` of a body of ``content_type``."""

    def __init__(self, chunks: list[bytes], content_type: bytes = b"text/html", status: int = 200) -> None:
        self.chunks, self.content_type, self.status = chunks, content_type, status

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        size = str(sum(len(c) for c in self.chunks)).encode()
        headers = [(b"content-type", self.content_type), (b"content-length", size), (b"etag", b'"1"')]
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        for i, chunk in enumerate(self.chunks):
            await send({"type": "http.response.body", "body": chunk, "more_body": i < len(self.chunks) - 1})


def _get(app: Any, method: str = "GET") -> tuple[dict[str, Any], bytes]:
    """Drive one request through ``ModulePreload(app)``: the response's start message and whole body."""
    scope = {"type": "http", "method": method, "path": "/", "headers": []}
    sent = asgi_request(ModulePreload(app, [HREF]), scope)
    assert sent[-1].get("more_body", False) is False  # the response is ended
    return sent[0], b"".join(m.get("body", b"") for m in sent[1:])


def test_the_page_gets_the_link_before_its_head_ends_with_a_matching_length() -> None:
    start, body = _get(App([PAGE[:30], PAGE[30:]]))  # a body in two parts is held until whole
    assert body == with_preloads(PAGE, [HREF]) and LINK in body
    assert body.index(LINK) < body.index(b"</head>")
    headers = dict(start["headers"])
    assert headers[b"content-length"] == str(len(body)).encode() and headers[b"etag"] == b'"1"'
    assert [k for k, _ in start["headers"]].count(b"content-length") == 1


@pytest.mark.parametrize(
    "app, method",
    [
        (App([b"console.log(1)"], b"text/javascript"), "GET"),  # a bundle
        (App([PAGE], status=304), "GET"),  # the browser's copy is current
        (App([PAGE]), "HEAD"),
        (App([b"<html>no head here</html>"]), "GET"),
        (App([PAGE], b"text/html; charset=utf-8"), "POST"),
    ],
)
def test_other_responses_pass_unchanged(app: App, method: str) -> None:
    start, body = _get(app, method)
    assert body == b"".join(app.chunks) and start["status"] == app.status
    assert dict(start["headers"])[b"content-length"] == str(len(body)).encode()


def test_an_html_body_past_the_cap_goes_out_as_it_came() -> None:
    big = [PAGE, b"x" * HTML_CAP, b"tail"]
    start, body = _get(App(big))
    assert body == b"".join(big) and LINK not in body
    assert dict(start["headers"])[b"content-length"] == str(len(body)).encode()


def test_a_module_the_page_already_names_is_not_added_twice() -> None:
    page = PAGE.replace(b"</head>", LINK + b"</head>")
    assert with_preloads(page, [HREF]) == page
    preloaded = PAGE.replace(b"</head>", f'<link rel="modulepreload" href="{HREF}"></head>'.encode())
    assert with_preloads(preloaded, [HREF]) == preloaded


def test_hrefs_are_the_built_modules_with_that_prefix(tmp_path: Path) -> None:
    for name in ("PlotlyChart.D9Z0_fxz.js", "PlotlyChart.D9Z0_fxz.js.map", "index.abc.js", "PlotlyChart.x y.js"):
        (tmp_path / name).write_text("")
    assert chunk_hrefs(tmp_path, ("PlotlyChart.",)) == [HREF]
    assert chunk_hrefs(tmp_path / "missing", ("PlotlyChart.",)) == []


def test_streamlits_build_still_has_a_plotly_module() -> None:
    """A Streamlit upgrade that renames the chunk would silently end the preload: this says so."""
    streamlit = pytest.importorskip("streamlit")
    js = Path(streamlit.__file__).resolve().parent / "static" / "static" / "js"
    assert len(chunk_hrefs(js, ("PlotlyChart.",))) == 1


def test_a_classic_script_is_deferred_after_the_modules() -> None:
    """Plotly's basic bundle is a UMD file: a deferred classic script, run in order after Streamlit's bundle."""
    bundle = "./_monitor/plotly-basic-4.1.1.min.js"
    page = with_preloads(PAGE, [], [bundle])
    tag = b'<script defer src="./_monitor/plotly-basic-4.1.1.min.js"></script>'
    assert page.index(b"index.abc.js") < page.index(tag) < page.index(b"</head>")
    assert with_preloads(page, [], [bundle]) == page  # named once


def test_a_href_is_escaped_in_the_tag() -> None:
    page = with_preloads(PAGE, [], ['./x".js'])
    assert b'src="./x&quot;.js"' in page and b'"./x".js"' not in page
