"""Test entry for the runs page with the compare page beside it (so "Open in Compare" can switch to it).

``streamlit run tests/app/runs_app.py -- --logdir PATH``; AppTest runs it with ``from_file``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `streamlit run` puts only this file's folder on the path
    sys.path.insert(0, str(REPO))

from pages.compare_page import compare_page  # noqa: E402
from pages.runs_page import runs_page  # noqa: E402


def main() -> None:
    st.set_page_config(page_title="Training monitor", page_icon=str(REPO / "assets" / "favicon.png"), layout="wide")
    page = st.navigation(
        [
            st.Page(runs_page, title="Runs", icon=":material/table_rows:", url_path="runs", default=True),
            st.Page(compare_page, title="Compare", icon=":material/stacked_line_chart:", url_path="compare"),
        ]
    )
    page.run()


main()
