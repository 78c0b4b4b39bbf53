"""Let the browser load and run Streamlit's Plotly module with the page, not after the first chart arrives.

Why: Streamlit loads the code that draws ``st.plotly_chart`` (one 4.7 MB module, ``PlotlyChart.<hash>.js``)
only when the first chart's message arrives on the websocket. The browser then downloads, compiles and runs
it while the chart waits (``bench/bench_tensorboard.py --breakdown``). Every page of this dashboard draws
Plotly charts, so :class:`ModulePreload` (an ASGI middleware, no Streamlit import) adds
``<script type="module" crossorigin src="...">`` for that module to the page's HTML, after Streamlit's own
bundle: it is fetched while the page loads and run while the websocket opens and the first script run reads
the run. A module runs once per URL, so Streamlit's own import of it later finds it ready. Measured on a
1,000-step run (three pairs in one run, load 4-5): drawn 5.03-5.52 s against 5.56-6.28 s with a
``modulepreload`` link only (fetched and compiled, not run).

With Plotly's basic bundle installed (:mod:`monitor_cb.views.plotly_bundle`) the pages' line charts are
drawn with it and Streamlit's module is not needed on them: the HTML then loads the bundle instead, as a
classic ``<script defer>`` (a UMD file that sets ``window.Plotly``), run in order after Streamlit's bundle.

Only HTML responses (the page, served for every page path) are touched; a response that is not a whole
``text/html`` body below :data:`HTML_CAP`, or without a ``</head>``, passes unchanged.
"""

from __future__ import annotations

import html
import re
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

HTML_CAP = 1_000_000  # Streamlit's index.html is about 10 kB; anything larger is not that page
_CHUNK_NAME = re.compile(r"[A-Za-z0-9_.-]+\.js")


def chunk_hrefs(js_dir: Path, prefixes: Sequence[str]) -> list[str]:
    """``./static/js/<name>`` of the modules in ``js_dir`` whose names start with one of ``prefixes``
    (``"PlotlyChart."``): the build's hashed names, found at server start; [] when there are none."""
    try:
        names = sorted(p.name for p in js_dir.iterdir() if p.is_file())
    except OSError:
        return []
    return [f"./static/js/{n}" for n in names if n.startswith(tuple(prefixes)) and _CHUNK_NAME.fullmatch(n)]


def with_preloads(page: bytes, hrefs: Sequence[str], scripts: Sequence[str] = ()) -> bytes:
    """The HTML with one module ``<script>`` per href and one deferred classic ``<script>`` per entry of
    ``scripts`` before ``</head>`` (unchanged without a ``</head>``, and for a href the page already names)."""
    at = page.find(b"</head>")
    tags = [(h, f'<script type="module" crossorigin src="{html.escape(h)}"></script>') for h in hrefs]
    tags += [(h, f'<script defer src="{html.escape(h)}"></script>') for h in scripts]
    links = b"".join(f"    {tag}\n".encode() for h, tag in tags if f'"{h}"'.encode() not in page)
    if at < 0 or not links:
        return page
    return page[:at] + links + page[at:]


class ModulePreload:
    """ASGI middleware: HTML pages load and run the modules ``hrefs`` (see the module's docstring)."""

    def __init__(self, app: ASGIApp, hrefs: Sequence[str], scripts: Sequence[str] = ()) -> None:
        self.app = app
        self.hrefs = list(hrefs)
        self.scripts = list(scripts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "GET" or not (self.hrefs or self.scripts):
            await self.app(scope, receive, send)
            return
        start: MutableMapping[str, Any] | None = None
        body: list[bytes] = []
        size = 0

        async def send_page(message: MutableMapping[str, Any]) -> None:
            nonlocal start, size
            if message["type"] == "http.response.start":
                if _is_html(message):
                    start = message  # held until the whole body is here
                    return
                await send(message)
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            body.append(message.get("body", b""))
            size += len(body[-1])
            if size > HTML_CAP:  # not the page: what was held goes out as it came
                held, start = start, None
                await send(held)
                await send({"type": "http.response.body", "body": b"".join(body), "more_body": True})
                if message.get("more_body", False) is False:
                    await send({"type": "http.response.body", "body": b""})
                return
            if message.get("more_body", False):
                return
            page = with_preloads(b"".join(body), self.hrefs, self.scripts)
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(page)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": page})

        await self.app(scope, receive, send_page)


def _is_html(start: MutableMapping[str, Any]) -> bool:
    """A 200 whose body is HTML and not already encoded (gzip: left as it is)."""
    headers = {bytes(k).lower(): bytes(v).lower() for k, v in start.get("headers", [])}
    return (
        start.get("status") == 200
        and headers.get(b"content-type", b"").startswith(b"text/html")
        and headers.get(b"content-encoding", b"identity") == b"identity"
    )
