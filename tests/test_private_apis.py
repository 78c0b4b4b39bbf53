"""Private APIs of Plotly and Streamlit that the product relies on, each checked to still behave as used.

An upgrade of either library could change these without notice; each test fails loudly, naming the
version pinned in requirements.txt that the behaviour was checked against, so whoever bumps a pin
knows which module to revisit.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import plotly
import plotly.graph_objects as go
import pytest
import streamlit

REQUIREMENTS = Path(__file__).resolve().parents[1] / "requirements.txt"


def pinned(package: str) -> str:
    """The version requirements.txt pins for ``package`` (what these checks were written against)."""
    match = re.search(rf"^{re.escape(package)}==(\S+)", REQUIREMENTS.read_text(), re.MULTILINE)
    return match.group(1) if match else "unpinned"


def changed(package: str, installed: str, what: str, where: str) -> str:
    return (
        f"{package} {installed} changed {what} (checked against {pinned(package)}, the version requirements.txt "
        f"pins): revisit {where}"
    )


def test_plotly_typed_array_spec_is_what_figures_write() -> None:
    """``charts/traces.typed_arrays`` writes arrays as ``_plotly_utils.utils.to_typed_array_spec`` does."""
    try:
        from _plotly_utils.utils import to_typed_array_spec
    except ImportError:
        pytest.fail(
            changed("plotly", plotly.__version__, "_plotly_utils.utils.to_typed_array_spec", "charts/traces.py")
        )
    for array in (np.linspace(0.0, 1.0, 7), np.arange(5, dtype=np.int64), np.array([1.5, np.nan], dtype=np.float32)):
        written = go.Figure(go.Scatter(y=array)).to_dict()["data"][0]["y"]
        assert to_typed_array_spec(array) == written, changed(
            "plotly", plotly.__version__, "the typed-array form of figures' arrays", "charts/traces.py"
        )


def test_streamlit_sends_a_figure_through_its_to_dict() -> None:
    """``charts/prepared.PreparedFigure`` overrides ``to_dict``: st.plotly_chart must serialise through it
    and never read ``.data``/``.layout`` (which would rebuild the plotly objects on every refresh)."""
    from streamlit.testing.v1 import AppTest

    def script() -> None:
        import plotly.graph_objects as go
        import streamlit as st

        from monitor_cb.charts.prepared import PreparedFigure

        prepared = PreparedFigure.of(go.Figure(go.Scatter(x=[1, 2], y=[3.0, 4.0], name="loss-marker")))
        st.plotly_chart(prepared)
        st.text(f"objects built: {prepared._objects is not None}")

    at = AppTest.from_function(script).run(timeout=60)
    assert not at.exception, at.exception
    where = "charts/prepared.py (PreparedFigure) and dashboard/live_refresh.py"
    assert at.text[0].value == "objects built: False", changed(
        "streamlit", streamlit.__version__, "how st.plotly_chart serialises a figure", where
    )
    spec = at.get("plotly_chart")[0].proto.spec
    assert "loss-marker" in spec, changed("streamlit", streamlit.__version__, "the chart spec it sends", where)


def test_streamlit_pages_manager_flag_is_read() -> None:
    """dashboard.py sets ``PagesManager.uses_pages_directory = False`` before the first session so a shared
    link to a page is not looked up among the files of ``pages/``."""
    from streamlit.runtime.pages_manager import PagesManager

    message = changed(
        "streamlit", streamlit.__version__, "PagesManager.uses_pages_directory", "dashboard.py (_lifespan)"
    )
    assert "uses_pages_directory" in vars(PagesManager), message
    assert "uses_pages_directory" in inspect.getsource(PagesManager), message
