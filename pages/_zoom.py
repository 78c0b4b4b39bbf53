"""A tiny Streamlit component that reports zoom and legend clicks on the page's Plotly charts.

Why: with Streamlit 1.67 a Plotly ``uirevision`` keeps the user's zoom only while the data is
unchanged; a live chart redrawn with new points every second returns to autorange. Streamlit's
``on_select`` reports box/lasso selections, not zooms. So this component (``st.components.v2``,
inline JavaScript, no iframe) listens to ``plotly_relayout`` / ``plotly_restyle`` /
``plotly_legendclick`` on every chart
whose container key starts with ``chart_`` and sends the new x range (or a reset on double-click)
and the hidden legend entries to Python. The page keeps them as a step range in session state and
re-applies them to each redrawn figure as its x range, re-reading that range at full resolution.
Events are state values with a sequence number, applied once each: a refresh of the live fragment
that runs just as an event arrives sees it waiting (:func:`event_waiting`) and reruns the page.

The JavaScript is a constant written here; no user text ever reaches it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

CHART_KEY_PREFIX = "chart_"

_JS = """
export default function (component) {
  // One listener per chart for the page's lifetime, always sending through the newest mount's
  // setStateValue (a remount must neither stack listeners nor leave them with a stale sender).
  // State, not trigger, values: a trigger lives for one script run, and a refresh of the live
  // fragment running at that moment could swallow it (the zoom was then lost). A state value
  // stays until the next event; its "seq" tells Python which events it has applied.
  const firstMount = !window.__monitorChartEvents;
  const reg = (window.__monitorChartEvents = window.__monitorChartEvents || { send: null, seq: 0 });
  reg.send = component.setStateValue;
  const PREFIX = "st-key-chart_";
  const chartKey = (gd) => {
    const holder = gd.closest('[class*="' + PREFIX + '"]');
    if (!holder) return null;
    const cls = Array.from(holder.classList).find((c) => c.startsWith(PREFIX));
    return cls ? cls.slice("st-key-".length) : null;
  };
  // Each event's seq is greater than the last one's (the clock's microseconds, or one more), so the
  // server can tell an older state value from the newest and never apply it over the newest.
  const send = (name, value) => {
    reg.seq = Math.max(Date.now() * 1000, reg.seq + 1);
    if (reg.send) reg.send(name, Object.assign({ seq: reg.seq }, value));
  };
  // The user's latest legend choice per chart, for the chart's uirevision (its run and x axis) at the
  // time. A redraw that contradicts it was built before the server had the click (the report lost in a
  // rerun, or not there yet): the choice is put back on the chart and reported again, so a click holds.
  // Plotly toggles a trace a moment after the click (it waits for a double click), from the state it
  // finds then: a chart is not put back within a second of a click on it, but looked at again after.
  reg.legend = reg.legend || {};
  reg.clicked = reg.clicked || {};
  const remember = (gd, key, hidden) => {
    const names = gd.data.map((t) => t.name).filter((n) => n);
    reg.legend[key] = { rev: gd.layout && gd.layout.uirevision, hidden: hidden, names: names };
  };
  const sendLegend = (gd, key, hidden) => {
    remember(gd, key, hidden);
    send("legend", { chart: key, hidden: hidden });
  };
  // Whether ``at`` (a time in ms) was under a second ago; if so the chart is looked at again just after.
  const tooSoon = (gd, at) => {
    const since = Date.now() - (at || 0);
    if (since >= 1000) return false;
    setTimeout(() => keepLegend(gd), 1050 - since);
    return true;
  };
  const keepLegend = (gd) => {
    const key = chartKey(gd);
    const mine = key && reg.legend[key];
    const plotly = gd.__monitorPlotly || window.Plotly;  // the Plotly that drew this chart
    if (!mine || !Array.isArray(gd.data) || !plotly) return;
    if (mine.rev !== (gd.layout && gd.layout.uirevision)) {
      delete reg.legend[key];  // another run or x axis: the server's choice stands
      return;
    }
    if (tooSoon(gd, reg.clicked[key])) return;  // Plotly's own toggle of that click is still to come
    const index = [];
    const visible = [];
    gd.data.forEach((t, i) => {
      if (!t.name || t.visible === false || mine.names.indexOf(t.name) < 0) return;  // only what the user saw
      const hide = mine.hidden.indexOf(t.name) >= 0;
      if ((t.visible === "legendonly") !== hide) {
        index.push(i);
        visible.push(hide ? "legendonly" : true);
      }
    });
    if (!index.length) return;
    if (tooSoon(gd, gd.__monitorKept)) return;  // at most one put-back a second per chart, whatever Plotly does
    gd.__monitorKept = Date.now();
    plotly.restyle(gd, { visible: visible }, index);  // reported by plotly_restyle, as a click is
  };
  const attach = (gd) => {
    if (gd.__monitorAttached || typeof gd.on !== "function") return;
    gd.__monitorAttached = true;
    attachHighlight(gd);
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
      sendLegend(gd, key, hidden);
    });
    gd.on("plotly_afterplot", () => keepLegend(gd));
    // Plotly toggles a trace a moment after a legend click (it waits for a possible double click),
    // from the trace's state then, and its restyle reports the choice. The click is not reported before:
    // a redraw with the choice made in that moment was toggled back by Plotly (a click undone for good,
    // seen in the suite). It is remembered at once, as the hidden entries it leads to (the trace and its
    // legend group toggled), so a refresh that replaces the chart in that moment cannot swallow it: the
    // new chart gets it put back (keepLegend).
    gd.on("plotly_legendclick", (ev) => {
      const key = chartKey(gd);
      if (!key || !ev || !Array.isArray(gd.data) || !gd.data[ev.curveNumber]) return true;
      reg.clicked[key] = Date.now();
      const clicked = gd.data[ev.curveNumber];
      const group = clicked.legendgroup;
      const hide = clicked.visible !== "legendonly";
      const toggled = (t, i) => i === ev.curveNumber || (group && t.legendgroup === group);
      const hidden = gd.data
        .filter((t, i) => (toggled(t, i) ? hide : t.visible === "legendonly") && t.name)
        .map((t) => t.name);
      remember(gd, key, hidden);
      return true;
    });
    keepLegend(gd);  // a chart Streamlit has just replaced may be drawn from before the last click
  };
  // Charts whose layout asks for it (meta.highlight: many runs overlaid) dim every other run while
  // the pointer is on one, as W&B does. Only the SVG is touched (no restyle, so no legend event).
  const highlight = (gd, group) => {
    gd.querySelectorAll(".scatterlayer .trace").forEach((el) => {
      const cd = el.__data__;
      const trace = cd && cd[0] && cd[0].trace;
      el.style.opacity = group === null || !trace || trace.legendgroup === group ? "" : "0.12";
    });
  };
  const attachHighlight = (gd) => {
    gd.on("plotly_hover", (ev) => {
      const meta = gd.layout && gd.layout.meta;
      if (!meta || !meta.highlight || !ev || !ev.points || !ev.points.length) return;
      const trace = gd.data[ev.points[0].curveNumber];
      if (trace && trace.legendgroup) highlight(gd, trace.legendgroup);
    });
    gd.on("plotly_unhover", () => highlight(gd, null));
  };
  const charts = () => document.querySelectorAll('[class*="' + PREFIX + '"] .js-plotly-plot');
  const scan = () => charts().forEach(attach);
  if (firstMount) {
    // This code loads a moment after the page's first charts are drawn: a zoom made in that moment
    // had nobody listening, so report any chart whose x range is not the automatic one, unless the
    // server set that range (layout.meta.server_x_range: a link's from/to): reporting it would only
    // rerun the page.
    charts().forEach((gd) => {
      const xa = gd._fullLayout && gd._fullLayout.xaxis;
      const key = chartKey(gd);
      const fromServer = gd.layout && gd.layout.meta && gd.layout.meta.server_x_range;
      if (key && xa && !fromServer && xa.autorange === false && Array.isArray(xa.range)) {
        send("zoom", { chart: key, x0: xa.range[0], x1: xa.range[1] });
      }
    });
  }
  scan();
  // Streamlit replaces a chart's element now and then: attach to a new one as soon as Plotly has
  // drawn it (a drag right after a refresh must not go unheard), with a slow scan as a fallback.
  const observer = new MutationObserver(scan);
  observer.observe(document.body, { childList: true, subtree: true });
  const timer = setInterval(scan, 1000);
  return () => { observer.disconnect(); clearInterval(timer); };
}
"""

_CSS = ":host { display: none; }"

_listener = st.components.v2.component("monitor_cb_chart_events", js=_JS, css=_CSS)


SEEN = "chart_events_seen"  # session state: (component key, event name) -> seq of the last event applied


def chart_events(key: str = "chart_events") -> tuple[Any, Any]:
    """Mount the listener (invisible) and return the ``(zoom_event, legend_event)`` not seen before, None when none.

    Mount it outside the refresh fragment: an event then reruns the whole page, which lets the page
    write the zoom into the step inputs before they are drawn. Each event is handed out once.
    """
    result = _listener(key=key, on_zoom_change=_ignore, on_legend_change=_ignore)
    return _fresh(key, "zoom", _value(result, "zoom")), _fresh(key, "legend", _value(result, "legend"))


def event_waiting(key: str = "chart_events") -> bool:
    """Whether the browser reported a zoom or legend click not applied yet (for a fragment run to rerun the page)."""
    state = st.session_state.get(key)
    seen = st.session_state.get(SEEN, {})
    return any(_newer(_value(state, name), seen.get((key, name))) for name in ("zoom", "legend"))


def _fresh(key: str, name: str, event: Any) -> Any:
    """The event when it is newer than the last one applied, else None.

    Newer, not merely different: a state value older than the last one applied (a rerun request that
    carried the component's state from before the latest click) must not undo that click (a legend
    click to show lr was seen undone by the click before it, in one suite run of many).
    """
    seen = st.session_state.setdefault(SEEN, {})
    if not _newer(event, seen.get((key, name))):
        return None
    seen[(key, name)] = event["seq"]
    return event


def _newer(event: Any, last: Any) -> bool:
    """An event with a number ``seq`` greater than ``last`` (any such event when nothing was applied yet)."""
    if not isinstance(event, Mapping):
        return False
    seq = event.get("seq")
    if not isinstance(seq, (int, float)) or isinstance(seq, bool) or seq != seq:
        return False
    return last is None or seq > last


def _value(holder: Any, name: str) -> Any:
    if holder is None:
        return None
    if isinstance(holder, Mapping):
        return holder.get(name)
    return getattr(holder, name, None)


def _ignore() -> None:
    """State values are read from the mount's result; the callbacks only declare them."""
