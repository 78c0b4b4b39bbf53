"""Live training dashboard: ``streamlit run dashboard.py -- --logdir PATH``.

The log root is ``--logdir PATH`` (after ``--``), else ``$MONITOR_LOGDIR``, else ``./logs``. The
server listens on 127.0.0.1 only (``.streamlit/config.toml``); reach it from another machine with an
SSH tunnel: ``ssh -N -L 8501:127.0.0.1:8501 user@host``, then open http://localhost:8501.
"""

from __future__ import annotations

import streamlit as st

from pages.compare_page import compare_page
from pages.live_page import live_page
from pages.replay_page import replay_page
from pages.runs_page import runs_page
from pages.settings_page import settings_page


def main() -> None:
    """Build the navigation and run the selected page.

    (A page's ``url_path`` must not equal a file name in ``pages/``: AppTest would then rerun that
    file instead of the page function.)
    """
    st.set_page_config(page_title="Training monitor", page_icon=":material/monitoring:", layout="wide")
    page = st.navigation(
        [
            st.Page(live_page, title="Live", icon=":material/monitoring:", url_path="live", default=True),
            st.Page(compare_page, title="Compare", icon=":material/stacked_line_chart:", url_path="compare"),
            st.Page(replay_page, title="Replay", icon=":material/replay:", url_path="replay"),
            st.Page(runs_page, title="Runs", icon=":material/table_rows:", url_path="runs"),
            st.Page(settings_page, title="Settings", icon=":material/settings:", url_path="settings"),
        ]
    )
    page.run()


main()
