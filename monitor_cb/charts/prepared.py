"""A finished figure whose plotly dict is built once, for figures many viewers are sent.

``st.plotly_chart`` turns a figure into its dict (``fig.to_dict()``, a deep copy of every trace:
about 13 ms for the live page's three charts of a 200k-step run) and then into JSON (about 1.5 ms),
on every call. Thirty viewers of one run at a 1 s refresh asked for the same three figures thirty
times a second. A :class:`PreparedFigure` is made once per data version and settings
(``monitor_cb.dashboard.live_refresh``) and hands every caller the same dict, so each viewer pays only the
JSON encoding.

A prepared figure is finished: change it and :meth:`PreparedFigure.to_dict` would still give the
dict it was prepared with, so any change (findings, notes, hidden traces) comes before
:meth:`PreparedFigure.of`. The dict is shared: callers read it, never change it (plotly's own
``to_json`` only removes trace ``uid`` keys, which these figures never have).
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go


class PreparedFigure(go.Figure):
    """A ``go.Figure`` whose :meth:`to_dict` returns the dict it was prepared with, without copying."""

    _spec: dict[str, Any]

    @classmethod
    def of(cls, fig: go.Figure) -> PreparedFigure:
        """``fig`` made final: its dict built now, once (an already prepared figure is returned as it is)."""
        if isinstance(fig, PreparedFigure):
            return fig
        spec = fig.to_dict()
        spec.setdefault("layout", {})
        prepared = cls(data=spec["data"], layout=spec["layout"], _validate=False)
        prepared._spec = spec
        return prepared

    def to_dict(self) -> dict[str, Any]:
        """The prepared dict itself (shared: read it, do not change it)."""
        return self._spec
