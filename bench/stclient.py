"""A lightweight Streamlit browser session over a websocket, for benchmarks with many viewers.

Thirty Chromium pages do not fit on two cores; thirty of these do. Each :class:`Session` speaks the
protocol the browser speaks (``streamlit.proto``), as the frontend of the pinned Streamlit does it:

* connect to ``/_stcore/stream`` (subprotocol ``streamlit``) and send ``rerun_script`` with the
  page's query string, its widget states and the hashes of the messages it has cached;
* keep cacheable ``ForwardMsg``s by hash and resolve ``ref_hash`` messages from them; on each
  ``script_finished`` age the cache as the frontend does (``maxCachedMessageAge`` runs, counted only
  for the fragments that ran), so the server's "the client has it" decisions are the browser's;
* on ``auto_rerun`` (a fragment with ``run_every``) start a timer that sends ``rerun_script`` with
  that fragment id and ``is_auto_rerun`` every ``interval`` seconds: the browser, not the server,
  drives a fragment's refreshes (``setInterval`` in the frontend), and so does this client;
* keep every widget's value (its default when it appears, or what :meth:`Session.set_widget` chose)
  and send them all with every rerun, as the browser's widget manager does.

What the page shows is read from the deltas: metric tiles (``metric_values``) and the plotly specs
of charts (``charts``, only when asked: parsing them costs CPU the server should have).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

FINISHED_EARLY_FOR_RERUN = 2  # ScriptFinishedStatus; its runs do not age the cache


@dataclass
class _Cached:
    data: bytes
    run_count: int
    fragment_id: str


@dataclass
class RunRecord:
    """One script run as this session saw it: when it finished, its bytes, whether a fragment ran."""

    finished_at: float
    bytes: int
    fragment: bool
    messages: int


@dataclass
class Session:
    """One viewer. ``url``: ``http://127.0.0.1:PORT``; ``query``: the page's query string (``run=big``)."""

    url: str
    query: str = ""
    want_charts: bool = False
    on_metric: Callable[[Session, str, str], None] | None = None
    runs: list[RunRecord] = field(default_factory=list)
    metric_values: dict[str, str] = field(default_factory=dict)
    charts: dict[str, str] = field(default_factory=dict)  # element key/path -> plotly spec JSON
    errors: list[str] = field(default_factory=list)
    bytes_received: int = 0
    reruns_sent: int = 0

    def __post_init__(self) -> None:
        self._cache: dict[str, _Cached] = {}
        self._run_count = 0
        self._max_age = 2
        self._widgets: dict[str, WidgetState] = {}
        self._wanted: dict[str, Callable[[Any], WidgetState | None]] = {}
        self._timers: dict[str, asyncio.Task[None]] = {}
        self._page_hash = ""
        self._ws: Any = None
        self._pending_bytes = 0
        self._pending_msgs = 0
        self._closed = False

    # ------------------------------------------------------------------ driving
    def set_widget(self, label: str, choose: Callable[[Any], WidgetState | None]) -> None:
        """When a widget labelled ``label`` appears, set its value with ``choose(element_proto)`` (a click)."""
        self._wanted[label] = choose

    async def run(self, seconds: float) -> None:
        """Connect, load the page, follow its auto reruns for ``seconds``, then disconnect."""
        import websockets

        ws_url = self.url.replace("http://", "ws://").rstrip("/") + "/_stcore/stream"
        async with websockets.connect(ws_url, subprotocols=["streamlit"], max_size=None) as ws:
            self._ws = ws
            await self._rerun(fragment_id="", auto=False)
            try:
                await asyncio.wait_for(self._receive(), timeout=seconds)
            except asyncio.TimeoutError:
                pass
            finally:
                self._closed = True
                for task in self._timers.values():
                    task.cancel()

    async def _receive(self) -> None:
        async for raw in self._ws:
            if isinstance(raw, str):
                continue
            self.bytes_received += len(raw)
            self._pending_bytes += len(raw)
            self._pending_msgs += 1
            await self._handle(raw)

    # ------------------------------------------------------------------ messages
    async def _handle(self, raw: bytes) -> None:
        msg = ForwardMsg.FromString(raw)
        kind = msg.WhichOneof("type")
        if kind == "ref_hash":
            hit = self._cache.get(msg.ref_hash)
            if hit is None:
                self.errors.append(f"cache miss {msg.ref_hash}")
                return
            hit.run_count = self._run_count
            resolved = ForwardMsg.FromString(hit.data)
            resolved.metadata.CopyFrom(msg.metadata)
            msg, kind = resolved, resolved.WhichOneof("type")
        elif msg.metadata.cacheable and msg.hash and msg.hash not in self._cache:
            fragment = msg.delta.fragment_id if kind == "delta" else ""
            self._cache[msg.hash] = _Cached(raw, self._run_count, fragment)
        if kind == "new_session":
            self._max_age = msg.new_session.config.max_cached_message_age or 2
            self._page_hash = msg.new_session.page_script_hash
        elif kind == "delta":
            self._delta(msg)
        elif kind == "auto_rerun":
            self._auto_rerun(msg.auto_rerun.fragment_id, msg.auto_rerun.interval)
        elif kind == "stop_auto_rerun":
            for fragment_id in msg.stop_auto_rerun.fragment_ids:
                task = self._timers.pop(fragment_id, None)
                if task is not None:
                    task.cancel()
        elif kind == "script_finished":
            await self._finished(msg)
        elif kind == "page_info_changed":
            pass

    def _delta(self, msg: ForwardMsg) -> None:
        delta = msg.delta
        if delta.WhichOneof("type") != "new_element":
            return
        element = delta.new_element
        which = element.WhichOneof("type")
        if which == "metric":
            self.metric_values[element.metric.label] = element.metric.body
            if self.on_metric is not None:
                self.on_metric(self, element.metric.label, element.metric.body)
            return
        if which == "plotly_chart":
            if self.want_charts:
                key = element.plotly_chart.id or ".".join(map(str, msg.metadata.delta_path))
                self.charts[key] = element.plotly_chart.spec
            return
        proto = getattr(element, which, None)
        widget_id = getattr(proto, "id", "") if proto is not None else ""
        if not widget_id:
            return
        label = getattr(proto, "label", "")
        choose = self._wanted.pop(label, None)
        state = choose(proto) if choose is not None else None
        if state is None and widget_id not in self._widgets:
            state = _default_state(which, proto)
        if state is not None:
            state.id = widget_id
            self._widgets[widget_id] = state
            if choose is not None:  # a click: the browser reruns the page with the new value
                asyncio.get_event_loop().create_task(self._rerun(fragment_id="", auto=False))

    async def _finished(self, msg: ForwardMsg) -> None:
        run = msg.metadata.run
        fragments = list(run.fragment_ids)
        self.runs.append(RunRecord(time.monotonic(), self._pending_bytes, bool(fragments), self._pending_msgs))
        self._pending_bytes = self._pending_msgs = 0
        if msg.script_finished == FINISHED_EARLY_FOR_RERUN:
            return
        self._run_count += 1
        for key, item in list(self._cache.items()):
            if fragments and (not item.fragment_id or item.fragment_id not in fragments):
                continue  # a fragment run ages only that fragment's messages
            if self._run_count - item.run_count > self._max_age:
                del self._cache[key]

    # ------------------------------------------------------------------ reruns
    def _auto_rerun(self, fragment_id: str, interval: float) -> None:
        old = self._timers.pop(fragment_id, None)
        if old is not None:
            old.cancel()

        async def tick() -> None:
            while not self._closed:
                await asyncio.sleep(interval)
                await self._rerun(fragment_id=fragment_id, auto=True)

        self._timers[fragment_id] = asyncio.get_event_loop().create_task(tick())

    async def _rerun(self, fragment_id: str, auto: bool) -> None:
        if self._closed or self._ws is None:
            return
        back = BackMsg()
        state = back.rerun_script
        state.query_string = self.query
        state.page_script_hash = self._page_hash
        state.fragment_id = fragment_id
        state.is_auto_rerun = auto
        state.widget_states.widgets.extend(self._widgets.values())
        state.cached_message_hashes.extend(self._cache)
        info = state.context_info
        info.timezone, info.timezone_offset, info.locale = "UTC", 0, "en-US"
        info.url = f"{self.url}/?{self.query}"
        self.reruns_sent += 1
        try:
            await self._ws.send(back.SerializeToString())
        except Exception as exc:  # noqa: BLE001 - a closed socket ends the session
            self.errors.append(str(exc)[:200])


def _default_state(which: str, proto: Any) -> WidgetState | None:
    """The value a browser registers for a widget when it appears (its default)."""
    state = WidgetState()
    if which in ("radio", "selectbox"):
        options = list(proto.options)
        if proto.HasField("default") and 0 <= proto.default < len(options):
            state.string_value = options[proto.default]
            return state
        return None
    if which == "checkbox":
        state.bool_value = bool(proto.default)
        return state
    if which == "slider":
        state.double_array_value.data.extend(proto.default)
        return state
    if which == "multiselect":
        options = list(proto.options)
        state.string_array_value.data.extend(options[i] for i in proto.default if 0 <= i < len(options))
        return state
    if which == "text_input":
        if proto.HasField("default"):
            state.string_value = proto.default
            return state
        return None
    return None  # buttons and others: nothing until clicked


def choose_option(option: str) -> Callable[[Any], WidgetState | None]:
    """A click on ``option`` of a radio or selectbox."""

    def choose(proto: Any) -> WidgetState | None:
        if option not in list(proto.options):
            return None
        state = WidgetState()
        state.string_value = option
        return state

    return choose
