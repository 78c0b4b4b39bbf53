"""The runs page: every run under the log root in one table (status, steps, last update, problems)."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from monitor_cb.dashboard.escape import escape_code
from monitor_cb.dashboard.runlist import filter_runs, format_age
from pages import _shared
from pages._demo import show_empty_root


def runs_page() -> None:
    """The page function given to ``st.Page``."""
    root = _shared.log_root()
    store = _shared.get_store(str(root))
    runs = _shared.list_runs(store)
    st.sidebar.caption(f"Log root: `{escape_code(str(root))}`")
    if not runs:
        show_empty_root(root, store)
        st.stop()
    st.title("Runs")
    text = st.text_input("Filter runs", key="runs_filter", placeholder="name, status…")
    st.dataframe(
        runs_table(filter_runs(runs, text), time.time()),
        hide_index=True,
        width="stretch",
        column_config={
            "open": st.column_config.LinkColumn("open", display_text="live view"),
            "last step": st.column_config.NumberColumn(format="localized"),  # 1,000,000
            "records": st.column_config.NumberColumn(format="localized"),
            "corrupt lines": st.column_config.NumberColumn(format="localized"),
        },
    )


def runs_table(runs: list[Any], now: float) -> pd.DataFrame:
    """One row per run; st.dataframe shows the cells as plain text, ``open`` links to the live page."""
    return pd.DataFrame(
        {
            "open": [f"./?{urlencode({_shared.QUERY_RUN: r.id})}" for r in runs],
            "run": [r.id for r in runs],
            "status": [r.status for r in runs],
            "last step": [r.last_step for r in runs],
            "records": [r.n_records for r in runs],
            "ranks": [len(r.ranks or ()) for r in runs],
            "last update": [format_age(now - r.last_write) + " ago" for r in runs],
            "corrupt lines": [r.bad_lines for r in runs],
            "reason": [r.reason or "" for r in runs],
        }
    )
