"""A viewer of a ``--read-only-settings`` dashboard, in a real Chromium, clicks every button in every page's
sidebar (expanders opened first): nothing is written into the log root and no process is started.

As found (#34 item 2): such a viewer clicked "Generate sample runs" (four runs written into the shared root)
and could start the demo training (a MindSpore process).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from monitor_cb.demo.samples import write_sample_runs
from tests.browser.harness import browser_missing, chromium_page, poll, streamlit_servers

pytestmark = [pytest.mark.browser, pytest.mark.slow]
T = TypeVar("T")
RUNS = ("run01-lr0.0003-bs32-seed0", "run02-lr0.001-bs64-seed1")
PAGES = {  # path -> something only that page draws once it is ready
    f"?run={RUNS[0]}": "text=Since update",
    f"compare?runs={RUNS[0]}&runs={RUNS[1]}": "text=Config diff",
    f"replay?run={RUNS[1]}": "text=Jump to",
    "runs": "[data-testid=stDataFrame]",
    "settings": "text=Diagnosis thresholds",
}
SIDEBAR = "section[data-testid=stSidebar]"
# the sidebar's own chrome (collapsing it is no action of the page)
CHROME = "[data-testid=stSidebarHeader] button, [data-testid=stSidebarCollapseButton] button"


@pytest.fixture(scope="module", autouse=True)
def _need_browser() -> None:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str, str]]:
    """(root with runs, empty root, their read-only servers' URLs)."""
    tmp = tmp_path_factory.mktemp("read-only-browser")
    full, empty = tmp / "logs", tmp / "empty"
    write_sample_runs(full, n_runs=2, steps=200, seed=0)
    empty.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MONITOR_READ_ONLY_SETTINGS", "1")
        with streamlit_servers([(full, tmp / "full.log", None), (empty, tmp / "empty.log", None)]) as urls:
            yield full, empty, urls[0], urls[1]


def _contents(root: Path) -> set[str]:
    """Every path under the root but the reader's own caches and index (the server writes those, not a viewer)."""
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if not (p.relative_to(root).parts[:1] == (".monitor",) and p.name != "demo.json" and p.suffix != ".log")
    } | {str(p.relative_to(root)) for p in (root / ".monitor").glob("demo*")}


def _processes_on(root: Path) -> list[str]:
    """Command lines of processes that name the root, but the dashboard servers themselves."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if str(root) in cmdline and "streamlit run" not in cmdline and "-m streamlit" not in cmdline:
            found.append(cmdline)
    return found


def _idle(page: Any) -> bool:
    """The script run a click asked for has finished (Streamlit's "Running..." widget is gone)."""
    return page.locator("[data-testid=stStatusWidget]").count() == 0


def _steady(action: Callable[[], T], page: Any, tries: int = 5) -> T:
    """``action()``, tried again when the element was being redrawn (a live page reruns on its own)."""
    from playwright.sync_api import Error

    for attempt in range(tries):
        try:
            return action()
        except Error:
            if attempt == tries - 1:
                raise
            poll(lambda: _idle(page), 60, what="the page to settle")
    raise AssertionError("unreachable")


def _click_every_sidebar_button(page: Any) -> list[str]:
    """Open every expander of the sidebar, then click each enabled button once; the labels clicked."""
    sidebar = page.locator(SIDEBAR)
    summaries = sidebar.locator("details > summary")
    for i in range(summaries.count()):
        summary = summaries.nth(i)
        if _steady(lambda s=summary: s.is_visible() and s.evaluate("el => !el.parentElement.open", timeout=5000), page):
            _steady(lambda s=summary: s.click(timeout=5000), page)
    buttons = page.locator(f"{SIDEBAR} button:not({CHROME})")
    clicked = []
    i = 0
    while i < buttons.count():
        button = buttons.nth(i)
        i += 1
        if not _steady(lambda b=button: b.is_visible() and b.is_enabled(timeout=5000), page):
            continue
        label = _steady(lambda b=button: b.inner_text(timeout=5000) or b.get_attribute("aria-label") or "", page)
        page.keyboard.press("Escape")  # close what the last click opened (a select's list, a tooltip)
        _steady(lambda b=button: b.click(timeout=5000), page)
        clicked.append(label.strip())
        poll(lambda: _idle(page), 60, what="the click's script run")
    return clicked


def test_a_read_only_viewer_clicking_every_sidebar_button_writes_and_starts_nothing(
    roots: tuple[Path, Path, str, str],
) -> None:
    full, _, url, _ = roots
    before = _contents(full)
    clicked: dict[str, list[str]] = {}
    with chromium_page(width=1280, height=900) as page:
        for path, ready in PAGES.items():
            page.goto(f"{url}/{path}", wait_until="domcontentloaded", timeout=120_000)
            poll(lambda ready=ready: page.locator(ready).count() > 0, 90, what=f"/{path}")
            assert page.get_by_text("Generate sample runs").count() == 0, path
            assert page.get_by_text("Start the demo training").count() == 0, path
            poll(lambda: _idle(page), 60, what=f"/{path}'s first script run")  # its whole sidebar drawn
            clicked[path] = _click_every_sidebar_button(page)
            # The clicks may change what the page shows (Compare's "Clear all" empties its run picker, as a
            # viewer may): the page must have settled, with no exception, not look as before.
            poll(lambda: _idle(page), 60, what=f"/{path} to settle after the clicks")
            if page.locator("[data-testid=stException]").count():
                shown = page.locator("[data-testid=stMain]").inner_text()[:600]
                pytest.fail(f"/{path} raised after the clicks {clicked[path]}: {shown!r}")
    assert any(clicked.values()), clicked  # the sidebar had buttons, and they were clicked
    assert _contents(full) == before, "a read-only viewer's clicks wrote into the log root"
    assert not _processes_on(full), "a read-only viewer's clicks started a process"


def test_a_read_only_dashboard_on_an_empty_root_offers_nothing_to_write(roots: tuple[Path, Path, str, str]) -> None:
    _, empty, _, url = roots
    with chromium_page(width=1280, height=900) as page:
        page.goto(url, wait_until="domcontentloaded", timeout=120_000)
        poll(lambda: page.get_by_text("read-only").count() > 0, 90, what="the empty root's page")
        assert page.get_by_text("Generate sample runs").count() == 0
        assert page.get_by_text("Start the demo training").count() == 0
        for button in page.locator("[data-testid=stMain] button").all():
            if button.is_visible() and button.is_enabled():
                button.click()
                poll(lambda: _idle(page), 60, what="the click's script run")
    assert sorted(os.listdir(empty)) in ([], [".monitor"])
    assert not list(empty.rglob("demo*")) and not _processes_on(empty)
