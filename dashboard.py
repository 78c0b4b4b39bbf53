"""Live training dashboard: ``streamlit run dashboard.py -- --logdir PATH``.

The log root is ``--logdir PATH`` (after ``--``), else ``$MONITOR_LOGDIR``, else ``./logs``. The
server listens on 127.0.0.1 only (``.streamlit/config.toml``); reach it from another machine with an
SSH tunnel: ``ssh -N -L 8501:127.0.0.1:8501 user@host``, then open http://localhost:8501.

This file is two things. Run by Streamlit's script runner (``__name__ == "__main__"``) it draws the
pages. Imported by ``streamlit run`` (which finds the ``app = st.App(...)`` below and serves it),
it is the server: every HTTP request and WebSocket whose ``Host`` is not in ``server.allowedHosts``
is refused (:mod:`monitor_cb.views.hostguard`; Streamlit itself checks only the WebSocket); the
page's HTML loads Streamlit's Plotly module at once (:mod:`monitor_cb.views.preload`); at start a thread
imports the pages, lists the log root and reads its newest run while the first browser loads the page
(``_warm_up``; the port answers before the pages are imported); with
``$MONITOR_DASHBOARD_TOKEN`` set (a value, or ``auto`` for a random one), every route but
``/_stcore/health`` and the WebSocket need that token (:mod:`monitor_cb.views.tokenguard`), and
the link to open is printed at start (``http://127.0.0.1:8501/?token=…``), as Jupyter does; ``/live?run=…``
is redirected to the Live page at ``/`` (:mod:`monitor_cb.views.page_alias`); and the
page registry is set up before the first browser connects, so a shared link to any page opens
cleanly on a fresh server.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import streamlit as st

PAGES = (
    "pages.live_page",
    "pages.compare_page",
    "pages.replay_page",
    "pages.runs_page",
    "pages.all_metrics_page",
    "pages.layers_page",
    "pages.settings_page",
)
# The tab icon ships with the app: a ":material/...:" page icon is fetched from a Google font host.
FAVICON = Path(__file__).resolve().parent / "assets" / "favicon.png"
# Streamlit's lazily loaded modules every page needs at once (:mod:`monitor_cb.views.preload`)
PRELOAD = ("PlotlyChart.",)
# "off" turns either aid off (bench/bench_tensorboard.py --before-after compares; a root to read only on demand)
ENV_PREWARM, ENV_PRELOAD, OFF = "MONITOR_PREWARM", "MONITOR_PRELOAD", ("off", "0", "false", "no")
STREAMLIT_JS = Path(st.__file__).resolve().parent / "static" / "static" / "js"  # its built, hashed modules


def main() -> None:
    """Build the navigation and run the selected page.

    (A page's ``url_path`` must not equal a file name in ``pages/``: AppTest would then rerun that
    file instead of the page function.)
    """
    from pages.all_metrics_page import all_metrics_page
    from pages.compare_page import compare_page
    from pages.layers_page import layers_page
    from pages.live_page import live_page
    from pages.replay_page import replay_page
    from pages.runs_page import runs_page
    from pages.settings_page import settings_page

    st.set_page_config(page_title="Training monitor", page_icon=str(FAVICON), layout="wide")
    page = st.navigation(
        [
            st.Page(live_page, title="Live", icon=":material/monitoring:", url_path="live", default=True),
            st.Page(compare_page, title="Compare", icon=":material/stacked_line_chart:", url_path="compare"),
            st.Page(replay_page, title="Replay", icon=":material/replay:", url_path="replay"),
            st.Page(runs_page, title="Runs", icon=":material/table_rows:", url_path="runs"),
            st.Page(all_metrics_page, title="All metrics", icon=":material/grid_view:", url_path="metrics"),
            st.Page(layers_page, title="Layers", icon=":material/view_list:", url_path="layers"),
            st.Page(settings_page, title="Settings", icon=":material/settings:", url_path="settings"),
        ]
    )
    page.run()


def _allowed_hosts() -> list[str]:
    """``server.allowedHosts`` as configured (``.streamlit/config.toml``, ``--server.allowedHosts``)."""
    from streamlit import config

    return list(config.get_option("server.allowedHosts") or [])


def _base_path() -> str:
    """``server.baseUrlPath`` (the dashboard served under a prefix by a reverse proxy), "" for none."""
    from streamlit import config

    return str(config.get_option("server.baseUrlPath") or "")


@contextlib.asynccontextmanager
async def _lifespan(_app: Any) -> AsyncIterator[None]:
    """Before the first session: this app navigates with ``st.navigation``, not a ``pages/`` folder.

    Streamlit takes a ``pages/`` folder next to the script for its older multipage layout until a
    script run calls ``st.navigation``; the first run on a fresh server would then look a shared
    link's page (``/settings``) up among the files in ``pages/`` and show "Page not found".
    """
    from streamlit.runtime.pages_manager import PagesManager

    PagesManager.uses_pages_directory = False
    if _TOKEN:
        _print_token_links(_TOKEN)
    if os.environ.get(ENV_PREWARM, "on").strip().lower() in OFF:
        _import_pages()  # before the port answers, and nothing read until a page asks
    else:
        threading.Thread(target=_warm_up, name="monitor-cb-warm-up", daemon=True).start()
    yield


def _import_pages() -> None:
    """The pages' modules and the libraries they import (about 0.8 s), so the first script run need not."""
    import importlib

    with contextlib.suppress(Exception):  # the script run imports them again and shows any error
        for name in PAGES:
            importlib.import_module(name)


def _warm_up() -> None:
    """What the first script run needs, made while the first browser still loads the page's bundles (about two
    seconds): the pages' modules, so the port answers without waiting for them; then the log root's first listing
    and the newest run's first read (see :func:`pages._shared.prewarm`). A failure is the first page's to say,
    not the server's. ``$MONITOR_PREWARM=off``: none of this (the pages are imported before the port answers)."""
    _import_pages()
    from pages._shared import log_root, prewarm

    with contextlib.suppress(Exception):  # the page reads the root again and shows the error
        prewarm(str(log_root()))


def _print_token_links(token: str) -> None:
    """The links that open a token-protected dashboard, on the server's output (as Jupyter prints them)."""
    from streamlit import config

    from monitor_cb.views.tokenguard import token_url

    address = str(config.get_option("server.address") or "")
    port = config.get_option("server.port")
    base = str(config.get_option("server.baseUrlPath") or "").strip("/")
    names = ["127.0.0.1"] if address in ("", "0.0.0.0", "::", "127.0.0.1", "localhost") else [address]
    if address in ("", "0.0.0.0", "::"):
        import socket

        names.insert(0, socket.gethostname())
    lines = [f"    {token_url(f'http://{name}:{port}/{base}'.rstrip('/'), token)}" for name in names]
    print("\n  The dashboard needs a token. Open it with:\n" + "\n".join(lines) + "\n", file=sys.stderr, flush=True)


def _preloads() -> tuple[list[str], list[str]]:
    """The modules and the classic scripts the page's HTML loads at once (none with ``$MONITOR_PRELOAD=off``):
    Plotly's basic bundle when it is installed (the pages' line charts are drawn with it), else Streamlit's
    Plotly module."""
    from monitor_cb.views.plotly_bundle import URL_PATH
    from monitor_cb.views.preload import chunk_hrefs

    if os.environ.get(ENV_PRELOAD, "on").strip().lower() in OFF:
        return [], []
    if _PLOTLY_BUNDLE is not None:
        return [], ["./" + URL_PATH]
    return chunk_hrefs(STREAMLIT_JS, PRELOAD), []


_TOKEN: str | None = None  # the token every request needs (server side only), None for an open dashboard
_PLOTLY_BUNDLE: bytes | None = None  # Plotly's basic bundle, served at plotly_bundle.URL_PATH; None when not installed

if __name__ == "__main__":
    main()
else:
    from starlette.middleware import Middleware

    from monitor_cb.views.bundle_route import ServeBundle
    from monitor_cb.views.hostguard import HostGuard
    from monitor_cb.views.page_alias import PageAlias
    from monitor_cb.views.plotly_bundle import URL_PATH, configured_path, load_bundle
    from monitor_cb.views.preload import ModulePreload
    from monitor_cb.views.tokenguard import ENV_TOKEN, TokenGuard, resolve_token

    # Read once and taken out of the environment: processes the dashboard starts (the demo) need not see it.
    _TOKEN = resolve_token(os.environ.pop(ENV_TOKEN, None))
    _PLOTLY_BUNDLE = load_bundle(configured_path())
    _modules, _scripts = _preloads()
    app = st.App(
        __file__,
        middleware=[
            Middleware(HostGuard, patterns=_allowed_hosts),
            Middleware(TokenGuard, token=_TOKEN, base_path=_base_path),
            # /live?run=… opens the Live page (served at "/") without Streamlit's "Page not found" dialog
            Middleware(PageAlias, base_path=_base_path),
            # Plotly's basic bundle (pages._chart draws the line charts with it), cached by browsers for good
            Middleware(ServeBundle, body=_PLOTLY_BUNDLE, url_path=URL_PATH, base_path=_base_path),
            # Plotly (the basic bundle, else Streamlit's module) loaded and run with the page, not after the first
            # chart arrives
            Middleware(ModulePreload, hrefs=_modules, scripts=_scripts),
        ],
        lifespan=_lifespan,
    )
