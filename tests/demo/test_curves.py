"""The shared curve recipe: schedules, the power-law loss, bumps and hiccups, and that a seed repeats."""

from __future__ import annotations

import numpy as np
import pytest

from monitor_cb.demo.curves import bumps, hiccups, power_law_loss, random_loss, random_schedule, warmup_cosine


def test_warmup_cosine_shape() -> None:
    steps = np.arange(1, 1001)
    lr = warmup_cosine(steps, 1e-3, 100, 1e-4)
    assert lr.argmax() == 99 and lr[99] == pytest.approx(1e-3)
    assert lr[-1] == pytest.approx(1e-4) and (np.diff(lr[100:]) <= 0).all()
    assert warmup_cosine(steps, 1e-3, 100, 0.0, total=2000)[-1] > 1e-4  # halfway down a longer schedule


def test_power_law_loss_falls_to_its_floor() -> None:
    loss = power_law_loss(np.linspace(0, 1e6, 100), 1.5, 8.0, 0.5)
    assert loss[0] == pytest.approx(9.5) and (np.diff(loss) < 0).all() and loss[-1] == pytest.approx(1.5, abs=0.01)


def test_a_seed_gives_the_same_curves() -> None:
    def draw(seed: int) -> tuple[np.ndarray, np.ndarray, list[int], np.ndarray]:
        rng = np.random.default_rng(seed)
        schedule = random_schedule(rng, None, 5000, floors=(0.0, 0.1))
        loss = random_loss(rng, schedule.lr).clean
        starts = [at for at, _ in bumps(rng, 100_000)]
        return schedule.lr, loss, starts, hiccups(rng, 10_000, 0.2)

    a, b = draw(7), draw(7)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(draw(8)[1], a[1])


def test_bumps_and_hiccups_are_rare_bounded_and_decay() -> None:
    rng = np.random.default_rng(0)
    found = list(bumps(rng, 200_000, height=(2.0, 7.0), decay=6.0, max_length=40))
    assert 150 < len(found) < 450  # 1.5 per 1,000 points
    for _at, profile in found:
        assert profile.size <= 40 and 2.0 <= profile[0] <= 7.0 and (np.diff(profile) < 0).all()
    extra = hiccups(rng, (100_000, 8), 0.5)
    slow = extra[extra > 0]
    assert 1500 < slow.size < 3300 and slow.min() >= 0.5 and slow.max() <= 3.0
