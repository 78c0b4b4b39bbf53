"""One Plotly chart, drawn with Plotly's basic bundle when it is installed, else with ``st.plotly_chart``.

Why: Streamlit's own Plotly module is the whole of plotly.js; compiling and running it was the largest
single cost of opening a page (see :mod:`monitor_cb.views.plotly_bundle`). This element (a
``st.components.v2`` component in the page's own DOM, no iframe) draws the same figure JSON with
``Plotly.react`` into a div in the same keyed container ``st.plotly_chart`` would use, so the chart
listener (:mod:`pages._zoom`), the browser tests and people see the same Plotly chart: zoom, hover,
legend and the modebar. A refresh hands Plotly a new figure and Plotly redraws only what changed, as
``st.plotly_chart`` does (one chart per browser task, so the first is on screen before the next is
drawn). A figure with a trace type the basic bundle lacks (a heatmap, a box) is
drawn by ``st.plotly_chart``, and so is every figure when this server does not serve the bundle (not
installed, ``$MONITOR_PLOTLY_BUNDLE=off``, or the page run by AppTest or another entry script).

The JavaScript is a constant written here; the figure reaches it as JSON data, never as markup.
"""

from __future__ import annotations

from typing import Any

import plotly.io
import streamlit as st

from monitor_cb.charts.prepared import PreparedFigure
from monitor_cb.views.bundle_route import serving
from monitor_cb.views.plotly_bundle import TRACE_TYPES, URL_PATH

DEFAULT_HEIGHT = 450  # st.plotly_chart's height for a figure that sets none

_JS = """
export default function (component) {
  const { data, parentElement } = component;
  if (!data || typeof data.figure !== "string") return;
  // The bundle is loaded once per page (the page's HTML usually has it already: see ModulePreload);
  // whichever Plotly the page has first is kept for our charts.
  const plotly = () => window.__monitorPlotly || (window.Plotly && (window.__monitorPlotly = window.Plotly));
  const load = () => {
    if (plotly()) return Promise.resolve(plotly());
    if (!window.__monitorPlotlyLoad) {
      window.__monitorPlotlyLoad = new Promise((resolve, reject) => {
        const script = document.createElement("script");
        script.src = new URL(data.src, document.baseURI).href;
        script.onload = () => (plotly() ? resolve(plotly()) : reject(new Error("no Plotly in " + data.src)));
        script.onerror = () => reject(new Error("could not load " + data.src));
        document.head.appendChild(script);
      }).catch((err) => {
        window.__monitorPlotlyLoad = null;  // the next redraw tries again
        throw err;
      });
    }
    return window.__monitorPlotlyLoad;
  };
  let gd = parentElement.querySelector(":scope > .monitor-plot");
  if (!gd) {
    gd = document.createElement("div");
    gd.className = "monitor-plot";
    parentElement.appendChild(gd);
    // The chart follows its column's width (the sidebar opened or closed, the window resized).
    new ResizeObserver(() => {
      if (gd._fullLayout && gd.__monitorPlotly) gd.__monitorPlotly.Plots.resize(gd);
    }).observe(gd);
  }
  gd.style.height = data.height + "px";
  // Charts are drawn one per task, in the order they arrive (the page's order), so the browser shows the
  // first chart before it draws the next, and a chart whose newer figure came meanwhile is drawn once.
  gd.__monitorNext = { figure: data.figure, config: data.config || {} };
  const draw = (P) => {
    const next = gd.__monitorNext;
    if (!next) return null;
    gd.__monitorNext = null;
    gd.__monitorPlotly = P;
    const figure = JSON.parse(next.figure);
    return P.react(gd, figure.data || [], figure.layout || {}, next.config);
  };
  const task = () => new Promise((resolve) => setTimeout(resolve, 0));
  window.__monitorDraws = (window.__monitorDraws || Promise.resolve())
    .then(() => load())
    .then(
      (P) => task().then(() => draw(P)),
      (err) => {
        gd.textContent = "Chart not drawn: " + err.message;  // text, never markup
      },
    )
    .catch(() => null);  // one chart's failure must not stop the others
}
"""

_CSS = ".monitor-plot { width: 100%; }"

_thin = st.components.v2.component("monitor_cb_plotly", js=_JS, css=_CSS, isolate_styles=False)


def plotly_chart(fig: Any, key: str, config: dict[str, Any]) -> None:
    """Draw ``fig`` (a figure or a :class:`PreparedFigure`) in the keyed container ``key``."""
    types, height = _shape(fig)
    if not serving(URL_PATH) or not set(types) <= TRACE_TYPES:
        st.plotly_chart(fig, key=key, config=config, theme=None)
        return
    data = {
        "figure": plotly.io.to_json(fig, validate=False),
        "config": config,
        "height": int(height) if isinstance(height, (int, float)) and height > 0 else DEFAULT_HEIGHT,
        "src": "./" + URL_PATH,
    }
    _thin(key=key, data=data)


def _shape(fig: Any) -> tuple[list[str], Any]:
    """The figure's trace types (scatter when none is named) and its layout height, read without copying it:
    a prepared figure's dict as it is, a plotly figure's objects (``to_dict`` copies every trace)."""
    if isinstance(fig, (PreparedFigure, dict)):
        spec = fig.to_dict() if isinstance(fig, PreparedFigure) else fig
        layout = spec.get("layout") or {}
        return [trace.get("type") or "scatter" for trace in spec.get("data") or []], layout.get("height")
    return [trace.type or "scatter" for trace in fig.data], fig.layout.height
