"""A tiny Streamlit component that reports zoom and legend clicks on the page's Plotly charts.

Why: with Streamlit 1.67 a Plotly ``uirevision`` keeps the user's zoom only while the data is
unchanged; a live chart redrawn with new points every second returns to autorange. Streamlit's
``on_select`` reports box/lasso selections, not zooms. So this component (``st.components.v2``,
inline JavaScript, no iframe) listens to ``plotly_relayout`` / ``plotly_restyle`` on every chart
whose container key starts with ``chart_`` and sends the new x range (or a reset on double-click)
and the hidden legend entries to Python. The page keeps them as a step range in session state and
re-applies them to each redrawn figure as its x range, re-reading that range at full resolution.

The JavaScript is a constant written here; no user text ever reaches it.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

CHART_KEY_PREFIX = "chart_"

_JS = """
export default function (component) {
  // One listener per chart for the page's lifetime, always sending through the newest mount's
  // setTriggerValue (a remount must neither stack listeners nor leave them with a stale sender).
  const reg = (window.__monitorChartEvents = window.__monitorChartEvents || { send: null });
  reg.send = component.setTriggerValue;
  const PREFIX = "st-key-chart_";
  const chartKey = (gd) => {
    const holder = gd.closest('[class*="' + PREFIX + '"]');
    if (!holder) return null;
    const cls = Array.from(holder.classList).find((c) => c.startsWith(PREFIX));
    return cls ? cls.slice("st-key-".length) : null;
  };
  const send = (name, value) => { if (reg.send) reg.send(name, value); };
  const attach = (gd) => {
    if (gd.__monitorAttached || typeof gd.on !== "function") return;
    gd.__monitorAttached = true;
    gd.on("plotly_relayout", (ev) => {
      const key = chartKey(gd);
      if (!key || !ev) return;
      if (ev["xaxis.autorange"] === true) {
        send("zoom", { chart: key, reset: true });
        return;
      }
      let x0 = ev["xaxis.range[0]"];
      let x1 = ev["xaxis.range[1]"];
      if (x0 === undefined && Array.isArray(ev["xaxis.range"])) {
        [x0, x1] = ev["xaxis.range"];
      }
      if (x0 !== undefined && x1 !== undefined) send("zoom", { chart: key, x0: x0, x1: x1 });
    });
    gd.on("plotly_restyle", () => {
      const key = chartKey(gd);
      if (!key || !Array.isArray(gd.data)) return;
      const hidden = gd.data.filter((t) => t.visible === "legendonly" && t.name).map((t) => t.name);
      send("legend", { chart: key, hidden: hidden });
    });
  };
  const scan = () => document.querySelectorAll('[class*="' + PREFIX + '"] .js-plotly-plot').forEach(attach);
  scan();
  // Streamlit replaces a chart's element now and then; attach to new ones as they appear.
  const timer = setInterval(scan, 250);
  return () => clearInterval(timer);
}
"""

_CSS = ":host { display: none; }"

_listener = st.components.v2.component("monitor_cb_chart_events", js=_JS, css=_CSS)


def chart_events(key: str = "chart_events") -> tuple[Any, Any]:
    """Mount the listener (invisible) and return this run's ``(zoom_event, legend_event)``, None when none.

    Mount it outside the refresh fragment: an event then reruns the whole page, which lets the page
    write the zoom into the step inputs before they are drawn.
    """
    result = _listener(key=key, on_zoom_change=_ignore, on_legend_change=_ignore)
    if result is None:
        return None, None
    return getattr(result, "zoom", None), getattr(result, "legend", None)


def _ignore() -> None:
    """Trigger values are read from the mount's result; the callbacks only declare them."""
