"""Test entry for the All metrics page alone (AppTest opens a navigation's default page).

``streamlit run tests/app/all_metrics_app.py -- --logdir PATH``; AppTest runs it with ``from_file``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `streamlit run` puts only this file's folder on the path
    sys.path.insert(0, str(REPO))

from pages.all_metrics_page import all_metrics_page  # noqa: E402


def main() -> None:
    st.set_page_config(page_title="Training monitor", page_icon=str(REPO / "assets" / "favicon.png"), layout="wide")
    page = st.navigation([st.Page(all_metrics_page, title="All metrics", url_path="metrics", default=True)])
    page.run()


main()
