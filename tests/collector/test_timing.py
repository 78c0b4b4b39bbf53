"""Interval bookkeeping with explicit timestamps: due steps, step/data/eval time, throughput."""

from __future__ import annotations

import pytest

from monitor_cb.train.timing import IntervalClock


def run(clock: IntervalClock, steps: list[int], step_s: float, wait_s: float, now: float = 0.0) -> tuple:
    due = []
    for step in steps:
        now += wait_s
        clock.step_begin(now)
        now += step_s
        if clock.step_end(step):
            due.append(step)
        clock.last_end = now
    return due, now


def test_due_steps_every_interval_and_across_sink_jumps() -> None:
    assert run(IntervalClock(3, 0, 0.0), list(range(1, 10)), 0.1, 0.0)[0] == [3, 6, 9]
    assert run(IntervalClock(10, 0, 0.0), [4, 8, 12, 16, 20, 24, 32], 0.1, 0.0)[0] == [12, 20, 32]
    assert run(IntervalClock(10, 37, 0.0), [38, 39, 40, 41], 0.1, 0.0)[0] == [40]  # resumed at global step 37


def test_interval_metrics() -> None:
    clock = IntervalClock(4, 0, 0.0)
    _, now = run(clock, [1, 2, 3, 4], step_s=0.09, wait_s=0.01)
    out = clock.take(4, now, batch_size=8, seq_length=16)
    assert out["step_time"] == pytest.approx(0.1) and out["data_time"] == pytest.approx(0.01)
    assert out["throughput"] == pytest.approx(80.0) and out["tokens_per_s"] == pytest.approx(1280.0)
    assert out["samples"] == 32
    _, now = run(clock, [8], step_s=0.3, wait_s=0.1, now=now)  # one sink callback of 4 steps
    out = clock.take(8, now, batch_size=8)
    assert out["step_time"] == pytest.approx(0.1) and out["data_time"] == pytest.approx(0.025)
    assert "tokens_per_s" not in out and clock.take(9, now + 1)["step_time"] == pytest.approx(1.0)


def test_evaluation_is_neither_step_time_nor_data_time() -> None:
    clock = IntervalClock(2, 0, 0.0)
    _, now = run(clock, [1], step_s=0.1, wait_s=0.0)
    clock.eval_begin(now)
    clock.eval_end(now + 5.0)
    _, now = run(clock, [2], step_s=0.1, wait_s=0.0, now=now + 5.0)
    out = clock.take(2, now)
    assert out == {"step_time": pytest.approx(0.1), "data_time": pytest.approx(0.0)}
