"""``/live?run=…`` in a real Chromium on a fresh server: the Live page of that run opens, and Streamlit's
"Page not found" dialog never appears, not even for a moment (#34 item 13: it did, before the fallback
to the main page). ``/`` and ``/?run=…`` keep working.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

from monitor_cb.demo.samples import write_sample_runs
from tests.browser.harness import browser_missing, chromium_page, poll, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]
RUNS = ("run01-lr0.0003-bs32-seed0", "run02-lr0.001-bs64-seed1")
# Records any "Page not found" text the moment it is added to the page, so a dialog shown and then
# replaced by the fallback page still counts.
WATCH_NOT_FOUND = """
window.__notFound = 0;
new MutationObserver(() => {
  if (document.body && document.body.innerText.includes('Page not found')) window.__notFound += 1;
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("live-path")
    write_sample_runs(tmp / "logs", n_runs=2, steps=200, seed=0)
    with streamlit_server(tmp / "logs", tmp / "server.log") as base:
        yield base


@pytest.mark.parametrize("path", [f"live?run={RUNS[0]}", f"live/?run={RUNS[0]}", f"?run={RUNS[0]}"])
def test_a_link_to_the_live_page_opens_it_without_page_not_found(url: str, path: str) -> None:
    with chromium_page(width=1280, height=900) as page:
        page.add_init_script(WATCH_NOT_FOUND)
        page.goto(f"{url}/{path}", wait_until="domcontentloaded", timeout=120_000)  # a loaded machine
        poll(lambda: page.get_by_text("Since update").count() > 0, 180, what="the Live page")
        poll(lambda: page.locator("[data-testid=stSidebarNav] a").count() >= 5, 60, what="the navigation")
        assert page.evaluate("window.__notFound") == 0, f"/{path}: 'Page not found' was shown"
        assert page.get_by_text("Page not found").count() == 0
        where = urlsplit(page.url)
        assert where.path == "/" and parse_qs(where.query)["run"] == [RUNS[0]], page.url
        picked = page.locator("[data-testid=stSidebar] [data-testid=stSelectbox] input").first.input_value()
        assert RUNS[0] in picked, picked
