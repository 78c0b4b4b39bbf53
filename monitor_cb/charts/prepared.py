"""A finished figure whose plotly dict is built once, for figures many viewers are sent.

``st.plotly_chart`` turns a figure into its dict (``fig.to_dict()``, a deep copy of every trace:
about 13 ms for the live page's three charts of a 200k-step run) and then into JSON (about 1.5 ms),
on every call. Thirty viewers of one run at a 1 s refresh asked for the same three figures thirty
times a second. A :class:`PreparedFigure` is made once per data version and settings
(``monitor_cb.views.live_refresh``) and hands every caller the same dict, so each viewer pays only the
JSON encoding.

A prepared figure is finished: it is the dict it was prepared with. Its plotly objects (``.data``,
``.layout``) are built from that dict only when something reads them (a test, a notebook): the
page never does, and building them cost about 5 ms a chart on every new data version. Any change
(findings, notes, hidden traces) comes before :meth:`PreparedFigure.of`. The dict is shared: callers
read it, never change it (plotly's own ``to_json`` only removes trace ``uid`` keys, which these
figures never have).
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go


class PreparedFigure(go.Figure):
    """A ``go.Figure`` whose :meth:`to_dict` returns the dict it was prepared with, without copying."""

    _spec: dict[str, Any] | None = None
    _objects: go.Figure | None = None

    @classmethod
    def of(cls, fig: go.Figure | dict[str, Any]) -> PreparedFigure:
        """``fig`` made final: its dict built now, once (an already prepared figure is returned as it is).

        ``fig`` may be the dict itself (``fig.to_dict()``, changed since): it is taken as it is,
        unvalidated, so it must come from a figure (this module's callers build it so).
        """
        if isinstance(fig, PreparedFigure):
            return fig
        spec = dict(fig) if isinstance(fig, dict) else fig.to_dict()
        spec.setdefault("data", [])
        spec.setdefault("layout", {})
        prepared = cls()
        prepared._spec = spec
        return prepared

    def to_dict(self) -> dict[str, Any]:
        """The prepared dict itself (shared: read it, do not change it)."""
        return self._spec if self._spec is not None else super().to_dict()

    def _built(self) -> go.Figure | None:
        """The plotly objects of the prepared dict, built on first use."""
        if self._spec is None:
            return None
        if self._objects is None:
            self._objects = go.Figure(self._spec)
        return self._objects

    @property  # type: ignore[override]
    def data(self) -> Any:
        built = self._built()
        return go.Figure.data.fget(self) if built is None else built.data  # type: ignore[attr-defined]

    @property  # type: ignore[override]
    def layout(self) -> Any:
        built = self._built()
        return go.Figure.layout.fget(self) if built is None else built.layout  # type: ignore[attr-defined]
