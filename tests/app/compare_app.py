"""Test entry for the compare and replay pages (the lead adds them to ``dashboard.py``'s navigation).

``streamlit run tests/app/compare_app.py -- --logdir PATH``; AppTest runs it with ``from_file``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import streamlit as st

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `streamlit run` puts only this file's folder on the path
    sys.path.insert(0, str(REPO))

from pages.compare_page import compare_page  # noqa: E402
from pages.replay_page import replay_page  # noqa: E402


def main() -> None:
    st.set_page_config(page_title="Training monitor", page_icon=str(REPO / "assets" / "favicon.png"), layout="wide")
    # AppTest opens the default page: MONITOR_TEST_PAGE=replay makes it the replay page.
    replay_first = os.environ.get("MONITOR_TEST_PAGE") == "replay"
    page = st.navigation(
        [
            st.Page(
                compare_page,
                title="Compare",
                icon=":material/stacked_line_chart:",
                url_path="compare",
                default=not replay_first,
            ),
            st.Page(replay_page, title="Replay", icon=":material/replay:", url_path="replay", default=replay_first),
        ]
    )
    page.run()


main()
