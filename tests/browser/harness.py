"""Drive the real dashboard in a real Chromium: start ``streamlit run`` on a free port, open a page.

Used by the browser test and the dashboard benchmark. Playwright cannot download browsers on these
machines, so it launches Debian's Chromium (``/usr/bin/chromium``, ``apt-get install chromium``).
Waits are polls with deadlines, never fixed sleeps.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "dashboard.py"
CHROMIUM = os.environ.get("MONITOR_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
T = TypeVar("T")


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is not installed"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def poll(check: Callable[[], T], timeout: float, interval: float = 0.05, what: str = "condition") -> T:
    """Call ``check`` until it returns something truthy; raise TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - keep polling; report the last error on timeout
            last_error = exc
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}") from last_error
        time.sleep(interval)


@contextlib.contextmanager
def streamlit_server(
    log_root: Path, log_file: Path, extra: list[str] | None = None, script: Path = DASHBOARD
) -> Iterator[str]:
    """``streamlit run SCRIPT -- --logdir ROOT`` (default the dashboard) on a free port; yields its base URL."""
    with streamlit_servers([(log_root, log_file, extra)], script=script) as urls:
        yield urls[0]


@contextlib.contextmanager
def streamlit_servers(
    specs: list[tuple[Path, Path, list[str] | None]], script: Path = DASHBOARD
) -> Iterator[list[str]]:
    """Several fresh servers, ``(log_root, log_file, extra_args)`` each, started side by side; yields their URLs."""
    with contextlib.ExitStack() as stack:
        started = [stack.enter_context(_started(root, log, extra, script)) for root, log, extra in specs]
        for url, proc, log in started:
            # 180 s: seven servers started side by side on two loaded cores once took over 60 s (a poll: no cost
            # when they are quick)
            poll(lambda url=url, proc=proc: _healthy(url) or proc.poll() is not None, 180, 0.1, "streamlit to start")
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {proc.returncode}; see {log}")
        yield [url for url, _, _ in started]


@contextlib.contextmanager
def _started(
    log_root: Path, log_file: Path, extra: list[str] | None, script: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(script),
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        *(extra or []),
        "--",
        "--logdir",
        str(log_root),
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("MONITOR_LOGDIR", None)
    env.pop("MONITOR_TEST_PAGE", None)
    with open(log_file, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield f"http://127.0.0.1:{port}", proc, log_file
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _healthy(url: str) -> bool:
    """The server answers (a server that refuses this Host with 403 is up too)."""
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as response:
            return response.status == 200
    except urllib.error.HTTPError as exc:
        return exc.code == 403
    except OSError:
        return False


_shared: dict[str, Any] = {}


def _browser() -> Any:
    """One headless Chromium, started on first use and kept until :func:`stop_browser` (the suite's conftest
    calls it after each test module) or the exit: a launch costs about 1.8 s of CPU, paid once a module
    instead of once a test. Each page still gets a context of its own (below)."""
    browser = _shared.get("browser")
    if browser is not None and browser.is_connected():
        return browser
    from playwright.sync_api import sync_playwright

    if "playwright" not in _shared:
        _shared["playwright"] = sync_playwright().start()
        atexit.register(stop_browser)
    _shared["browser"] = _shared["playwright"].chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    return _shared["browser"]


def stop_browser() -> None:
    """Close the shared Chromium and stop Playwright (its event loop leaves the thread)."""
    with contextlib.suppress(Exception):
        _shared.pop("browser").close()
    with contextlib.suppress(Exception):
        _shared.pop("playwright").stop()


@contextlib.contextmanager
def chromium_page(width: int = 1500, height: int = 1300) -> Iterator[Any]:
    """A fresh page in headless system Chromium: a new browser context (no cookies, storage or cache from any
    other page, as a fresh browser), in the process's one Chromium."""
    context = _browser().new_context(viewport={"width": width, "height": height})
    # Playwright's 30 s default for a locator or a navigation is a speed bound: on a VM whose hypervisor took
    # half its CPU (30-70% steal measured here), a Streamlit page took longer than that to draw its first
    # control. A missing element still fails, at 120 s; what a test asserts is unchanged.
    context.set_default_timeout(120_000)
    try:
        yield context.new_page()
    finally:
        try:
            context.close()
        except Exception:  # noqa: BLE001 - a browser left unusable (a crash, a timeout mid-call): start anew
            _shared.pop("browser", None)


# JavaScript run in the page to read what a chart really shows.
JS_CHART = """
([key, name]) => {
  const gd = document.querySelector('.st-key-' + key + ' .js-plotly-plot');
  if (!gd || !gd._fullData || !gd._fullLayout) return null;
  const trace = gd._fullData.find((t) => t.name === name);
  let maxX = null, n = 0, visible = null;
  if (trace && trace.x) {
    n = trace.x.length;
    for (let i = 0; i < n; i++) { const v = Number(trace.x[i]); if (maxX === null || v > maxX) maxX = v; }
    visible = trace.visible;
  }
  const xa = gd._fullLayout.xaxis;
  return { range: xa.range.map(Number), autorange: xa.autorange, maxX: maxX, n: n, visible: visible };
}
"""


def chart_state(page: Any, key: str, trace: str) -> dict[str, Any] | None:
    """``{range, autorange, maxX, n, visible}`` of one trace in the chart with container key ``key``."""
    return page.evaluate(JS_CHART, [key, trace])


_JS_LISTENING = """([key]) => {
  const gd = document.querySelector('.st-key-' + key + ' .js-plotly-plot');
  const reg = window.__monitorChartEvents;
  return Boolean(gd && gd.__monitorAttached && reg && reg.send);
}"""


def wait_listening(page: Any, key: str, timeout: float = 30.0) -> None:
    """Wait until the page's chart listener (pages/_zoom.py) hears chart ``key``.

    A page's charts are drawn a moment before the listener's code runs (0.2-0.8 s quiet, up to 1.8 s
    under two busy loops). A zoom made in that moment is reported when the listener loads, from the
    chart's x range, unless a refresh has redrawn the chart first (its zoom then gone); a legend click
    then is Plotly's alone and the next refresh undoes it. A test that zooms or clicks the instant a chart
    shows races the page's loading (the zoom-holds test failed so in CI, the legend-hold test in a fresh
    clone's suite, each at its first try), which a person's first drag or click hardly ever does.
    """
    poll(lambda: page.evaluate(_JS_LISTENING, [key]), timeout=timeout, what=f"the chart listener on {key}")


def plot_box(page: Any, key: str, timeout: float = 10.0) -> dict[str, float]:
    """The plot area of chart ``key`` on the screen. Plotly redraws a refreshing chart by replacing its SVG,
    so for a moment the drag layer is detached and has no box (``bounding_box()`` is None): wait that out."""
    drag_layer = page.locator(f".st-key-{key} .js-plotly-plot .nsewdrag").first
    return poll(drag_layer.bounding_box, timeout=timeout, what=f"chart {key}'s plot area on the screen")


def drag_zoom(page: Any, key: str, frm: float, to: float) -> None:
    """Drag across the plot area of chart ``key`` from fraction ``frm`` to ``to`` of its width, once the page's
    chart listener hears the chart (see :func:`wait_listening`)."""
    wait_listening(page, key)
    box = plot_box(page, key)
    y = box["y"] + box["height"] * 0.5
    page.mouse.move(box["x"] + box["width"] * frm, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * to, y + 2, steps=10)
    page.mouse.up()


# Counts plotly_legendclick on every chart of the page. Streamlit replaces a chart's element now and then:
# a counter attached only when asked missed a click on a chart drawn in between, the click was made again
# and undid the first (lr shown where the test wanted it hidden). So every chart gets the counter as soon
# as Plotly has drawn it, as the page's own listener does (pages/_zoom.py).
_COUNT_LEGEND_CLICKS = """
() => {
  if (!window.__legendClickCounter) {
    window.__legendClicks = 0;
    const attach = (gd) => {
      if (gd.__legendClicksCounted || typeof gd.on !== 'function') return;
      gd.__legendClicksCounted = true;
      gd.on('plotly_legendclick', () => { window.__legendClicks += 1; });
    };
    const scan = () => document.querySelectorAll('.js-plotly-plot').forEach(attach);
    window.__legendClickCounter = new MutationObserver(scan);
    window.__legendClickCounter.observe(document.body, { childList: true, subtree: true });
    scan();
  }
  return window.__legendClicks;
}
"""


def legend_click_taken(page: Any, toggle: Any, done: Callable[[], bool] | None = None) -> bool:
    """Click a legend entry once; whether Plotly took it (a ``plotly_legendclick`` on any
    chart of the page) within 10 s, or ``done()`` already holds.

    A click on a legend being redrawn under the pointer never reaches Plotly; a person clicks again, and so
    does a test polling this. A click Plotly took is never made twice, so losing it still fails the test."""
    before = page.evaluate(_COUNT_LEGEND_CLICKS)
    try:
        toggle.click(force=True, timeout=1000)
    except Exception:  # noqa: BLE001 - the entry was being redrawn ("not visible"): not taken
        return False
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if page.evaluate(_COUNT_LEGEND_CLICKS) > before or (done is not None and done()):
            return True
        time.sleep(0.05)
    return False
