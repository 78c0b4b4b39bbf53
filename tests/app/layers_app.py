"""Test entry for the Layers page: ``streamlit run tests/app/layers_app.py``; AppTest runs it with ``from_file``."""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `streamlit run` puts only this file's folder on the path
    sys.path.insert(0, str(REPO))

from pages.layers_page import layers_page  # noqa: E402


def main() -> None:
    st.set_page_config(page_title="Training monitor", layout="wide")
    st.navigation([st.Page(layers_page, title="Layers", url_path="layers", default=True)]).run()


main()
