"""monitor_cb.views.thresholds: user-typed thresholds."""

from __future__ import annotations

from monitor_cb.views.thresholds import parse_thresholds


def test_parse_thresholds() -> None:
    limits, bad = parse_thresholds("grad_norm > 10, loss < 0.01; loss > 5\nnonsense")
    assert limits == {"grad_norm": (None, 10.0), "loss": (0.01, 5.0)}
    assert bad == ["nonsense"]
    assert parse_thresholds("") == ({}, [])
