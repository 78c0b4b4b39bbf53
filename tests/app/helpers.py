"""What every AppTest of a page needs: run an entry script with a query, and read what it drew."""

from __future__ import annotations

import json
from typing import Any

from streamlit.testing.v1 import AppTest

TIMEOUT = 60


def run_entry(entry: str, query: dict[str, Any] | None = None, timeout: float = TIMEOUT) -> AppTest:
    """``AppTest.from_file(entry)`` with ``query`` as the URL's query parameters, run once."""
    at = AppTest.from_file(entry, default_timeout=timeout)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    return at.run()


def assert_ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


THIN_CHART = "monitor_cb_plotly"  # pages/_chart.py's component (Plotly's basic bundle)


def charts(at: Any) -> list[dict[str, Any]]:
    """The plotly figures on the page (or in one of its blocks), as the JSON spec the browser receives: those
    drawn by ``pages._chart``'s component, then those drawn by ``st.plotly_chart``."""
    return thin_charts(at) + [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def thin_charts(at: Any) -> list[dict[str, Any]]:
    """The figures drawn by ``pages._chart``'s component (Plotly's basic bundle), in page order."""
    return [
        json.loads(json.loads(el.proto.json)["figure"])
        for el in at.get("bidi_component")
        if el.proto.component_name == THIN_CHART
    ]


def texts(at: AppTest) -> str:
    parts = [*at.info, *at.warning, *at.error, *at.caption, *at.markdown]
    return "\n".join(str(p.value) for p in parts)


def values(array: Any) -> list[float]:
    """A figure array as the browser reads it: a list, or plotly's ``{"dtype", "bdata"}`` base64 form."""
    import base64

    import numpy as np

    if isinstance(array, dict) and "bdata" in array:
        raw = np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"]))
        return [float(v) for v in raw.astype(float)]
    return [float("nan") if v is None else float(v) for v in array]
