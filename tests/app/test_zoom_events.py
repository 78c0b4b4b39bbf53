"""The chart listener's events are state values with a sequence number: each is applied exactly once,
and a refresh that runs while one waits can tell (then it reruns the page, which applies it)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _script() -> None:
    import streamlit as st

    from pages import _zoom

    key = "events_under_test"
    st.session_state.setdefault("log", [])
    event = {"chart": "chart_loss_lr", "x0": 50, "x1": 120, "seq": st.session_state.get("seq", 1)}
    st.session_state[key] = {"zoom": event}  # what the component's state holds after a drag
    waiting = _zoom.event_waiting(key)
    handed = _zoom._fresh(key, "zoom", event)
    st.session_state["log"].append((waiting, handed is not None, _zoom.event_waiting(key)))


def test_each_event_is_handed_out_once_and_seen_waiting_until_then() -> None:
    at = AppTest.from_function(_script).run()
    assert not at.exception
    assert at.session_state["log"][-1] == (True, True, False)  # waiting, handed out, then applied
    at.run()  # the same state value on the next run: not an event again
    assert at.session_state["log"][-1] == (False, False, False)
    at.session_state["seq"] = 2  # the next drag
    at.run()
    assert at.session_state["log"][-1] == (True, True, False)


def test_an_older_state_value_never_undoes_a_newer_event() -> None:
    """A rerun request may carry the component's state from before the latest click; applied, it undid that
    click (lr shown, then hidden again by the click before). Only an event newer than the last applied counts."""
    at = AppTest.from_function(_script)
    at.session_state["seq"] = 1_700_000_000_000_002
    at.run()
    assert at.session_state["log"][-1] == (True, True, False)
    at.session_state["seq"] = 1_700_000_000_000_001  # the click before, come back
    at.run()
    assert at.session_state["log"][-1] == (False, False, False), "neither waiting nor applied"
    at.session_state["seq"] = 1_700_000_000_000_003
    at.run()
    assert at.session_state["log"][-1] == (True, True, False)


def test_an_event_without_a_number_seq_is_no_event() -> None:
    from pages import _zoom

    for seq in (None, "5", True, float("nan")):
        assert not _zoom._newer({"seq": seq}, None), seq
    assert not _zoom._newer(None, None) and _zoom._newer({"seq": 2}, 1) and not _zoom._newer({"seq": 1}, 1)


def test_no_state_no_event() -> None:
    from pages import _zoom

    assert _zoom._value(None, "zoom") is None and _zoom._value({"zoom": 1}, "zoom") == 1
    assert _zoom._value(type("R", (), {"zoom": 2})(), "zoom") == 2
