"""The NaN guard policy, without MindSpore."""

from __future__ import annotations

import math

import pytest

from monitor_cb.train.guard import NanGuard

NAN = math.nan


def verdicts(guard: NanGuard, losses: list[float], norms: list[float] | None = None) -> list:
    norms = norms or [None] * len(losses)
    return [guard.check(step, loss, norm) for step, (loss, norm) in enumerate(zip(losses, norms, strict=True), 1)]


def test_warn_mode_records_and_warns_once_per_streak_and_never_stops() -> None:
    out = verdicts(NanGuard("warn"), [1.0, NAN, NAN, 1.0, math.inf])
    assert [v.record for v in out] == [False, True, False, False, True]
    assert [v.stop for v in out] == [False] * 5
    assert "non-finite loss at step 2" in out[1].warning
    assert out[2].warning is None


def test_stop_mode_waits_for_patience_consecutive_steps() -> None:
    guard = NanGuard("stop", patience=3)
    out = verdicts(guard, [NAN, NAN, 1.0, NAN, NAN, NAN, NAN])
    assert [v.stop for v in out] == [False, False, False, False, False, True, False]
    assert out[5].reason == "stopped: non-finite loss at step 6"
    assert guard.stopped


def test_grad_norm_limit_and_non_finite_norm() -> None:
    out = verdicts(NanGuard("stop", max_grad_norm=10.0), [1.0, 1.0], [5.0, 50.0])
    assert not out[0].stop
    assert out[1].stop and out[1].reason == "stopped: gradient norm above limit (50 > 10) at step 2"
    nan_norm = NanGuard("stop", max_grad_norm=10.0).check(7, 1.0, NAN)
    assert nan_norm.stop and "non-finite gradient norm at step 7" in nan_norm.reason
    assert not NanGuard("stop").check(1, 1.0, 1e9).stop  # no limit given: norms are not judged


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"on_nan": "raise"}, "on_nan must be one of"),
        ({"patience": 0}, "nan_patience"),
        ({"max_grad_norm": -1.0}, "max_grad_norm"),
    ],
)
def test_bad_options_are_refused_up_front(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NanGuard(**kwargs)


def test_stop_mode_announces_the_streak_before_stopping() -> None:
    out = verdicts(NanGuard("stop", patience=2), [NAN, NAN])
    assert "stopping after 2 consecutive steps" in out[0].warning and not out[0].stop
    assert out[1].stop and "stopping training" in out[1].warning
