"""A URL in a run's name stays text in a real Chromium: on Live and Replay no ``<a>`` points at it.

Streamlit's Markdown links ``http://…`` in text even when every character is escaped; the pages
break the pattern with an invisible word joiner (:func:`monitor_cb.views.escape.break_autolinks`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app.conftest import write_run
from tests.browser.harness import browser_missing, chromium_page, poll, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]
URL = "http://127.0.0.1:1/x"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("autolink")
    root = tmp / "logs"
    write_run(root, "urlrun", steps=80)
    meta_path = root / "urlrun" / "metrics.meta.json"
    meta = json.loads(meta_path.read_text())
    meta["name"] = f"run {URL} by ana@example.com"
    meta_path.write_text(json.dumps(meta))
    with streamlit_server(root, tmp / "server.log") as url:
        yield url


@pytest.mark.parametrize("path", ["/?run=urlrun", "/replay?run=urlrun"])
def test_a_url_in_the_run_name_is_no_link(server: str, path: str, tmp_path: Path) -> None:
    with chromium_page(width=1300, height=900) as page:
        page.goto(server + path, wait_until="domcontentloaded")
        poll(lambda: page.get_by_text("127.0.0.1:1/x", exact=False).count() > 0, 60, what="the run name on the page")
        links = page.eval_on_selector_all("a", "els => els.map(a => a.href)")
        assert not [h for h in links if "127.0.0.1:1" in h or h.startswith("mailto:")], links
