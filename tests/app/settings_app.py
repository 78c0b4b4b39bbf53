"""Test entry for the Settings page (the lead adds it to ``dashboard.py``'s navigation).

``streamlit run tests/app/settings_app.py -- --logdir PATH``; AppTest runs it with ``from_file``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `streamlit run` puts only this file's folder on the path
    sys.path.insert(0, str(REPO))

from pages.settings_page import settings_page  # noqa: E402


def main() -> None:
    st.set_page_config(page_title="Training monitor", page_icon=str(REPO / "assets" / "favicon.png"), layout="wide")
    page = st.navigation(
        [st.Page(settings_page, title="Settings", icon=":material/settings:", url_path="settings", default=True)]
    )
    page.run()


main()
