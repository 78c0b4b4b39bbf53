import re

import numpy as np
import pytest

from monitor_cb.diagnosis import DiagnosisSettings, detect_lr_anomaly
from tests.diagnosis.helpers import decaying_loss, frame

S = DiagnosisSettings()


def cosine(n: int, warmup: int = 50, peak: float = 1e-3, floor: float = 0.0) -> np.ndarray:
    steps = np.arange(1, n + 1)
    progress = np.clip((steps - warmup) / (n - warmup), 0, 1)
    return np.where(
        steps <= warmup, peak * steps / warmup, floor + (peak - floor) * 0.5 * (1 + np.cos(np.pi * progress))
    )


def kinds(found):
    return [f.details["variant"] for f in found]


def test_healthy_schedules_are_quiet():
    loss = decaying_loss(1000)
    assert detect_lr_anomaly(frame(1000, lr=cosine(1000), loss=loss), S) == []  # cosine to zero at the end
    assert detect_lr_anomaly(frame(1000, lr=cosine(1000, floor=1e-4), loss=loss), S) == []
    assert detect_lr_anomaly(frame(1000, lr=1e-3, loss=loss), S) == []  # constant
    step_schedule = np.where(np.arange(1000) < 300, 1e-3, np.where(np.arange(1000) < 600, 1e-4, 1e-5))
    assert detect_lr_anomaly(frame(1000, lr=step_schedule, loss=loss), S) == []
    wsd = np.minimum(cosine(1000), 1e-3)
    wsd[50:800] = 1e-3  # warmup, stable, decay
    wsd[800:] = np.linspace(1e-3, 0, 200)
    assert detect_lr_anomaly(frame(1000, lr=wsd, loss=loss), S) == []


def test_drop_to_zero():
    lr = cosine(1000)
    lr[400:] = 0.0
    (f,) = detect_lr_anomaly(frame(1000, lr=lr, loss=decaying_loss(1000)), S)
    assert (kinds([f]), f.step, f.end_step) == (["zero"], 401, 1000)
    assert "stops learning" in f.message and "Why:" in f.message


def test_frozen_after_smooth_decay():
    lr = cosine(1000)
    lr[400:] = lr[399]
    (f,) = detect_lr_anomaly(frame(1000, lr=lr, loss=decaying_loss(1000)), S)
    assert kinds([f]) == ["frozen"]
    assert f.step == 401


def test_a_low_freeze_is_a_floor_only_when_the_schedule_eased_into_it():
    # cosine to min_lr = 10% of the peak by step 700, then held there: an intended floor
    held = cosine(700, floor=1e-4)
    lr = np.concatenate([held, np.full(300, held[-1])])
    assert detect_lr_anomaly(frame(1000, lr=lr, loss=decaying_loss(1000)), S) == []
    # a linear decay to 0 that stops cold at 10% of its peak: its scheduler stopped, not a floor
    lr = np.concatenate([np.linspace(1e-5, 1e-3, 50), np.linspace(1e-3, 0, 950)])
    lr[905:] = lr[904]
    (f,) = detect_lr_anomaly(frame(1000, lr=lr, loss=decaying_loss(1000)), S)
    assert kinds([f]) == ["frozen"] and f.step == 906
    assert "its last step was still 100% of its usual step" in f.why


def test_jump_inside_a_smooth_schedule():
    lr = cosine(1000)
    lr[600:] *= 5
    (f,) = detect_lr_anomaly(frame(1000, lr=lr, loss=decaying_loss(1000)), S)
    assert kinds([f]) == ["jump"]
    assert f.step == 601
    assert "jumped up 5.0×" in f.message


def test_warmup_followed_by_rising_loss():
    loss = decaying_loss(1000, seed=2)
    rise = np.minimum(np.linspace(1.0, 2.0, 900), 1.4)  # +40% within 360 points of the warmup's end
    loss[100:] = loss[90] * rise * np.random.default_rng(0).lognormal(0, 0.03, 900)
    found = detect_lr_anomaly(frame(1000, lr=cosine(1000, warmup=100), loss=loss), S)
    assert kinds(found) == ["warmup_rise"]
    assert found[0].step > 100
    assert "too high" in found[0].message and "Why:" in found[0].message


def test_a_small_bump_after_warmup_is_not_a_warmup_rise():
    # issue 12: a 6% bump on a loss that wanders by ~20% was reported as warmup_rise
    rng = np.random.default_rng(4)
    loss = decaying_loss(1000, seed=3, rel=0.2)
    loss[100:160] *= 1.06
    assert (
        detect_lr_anomaly(frame(1000, lr=cosine(1000, warmup=100), loss=loss * rng.lognormal(0, 0.05, 1000)), S) == []
    )


def test_short_and_missing():
    assert detect_lr_anomaly(frame(2, lr=[1e-3, 0.0]), S) == []
    assert detect_lr_anomaly(frame(100, loss=1.0), S) == []
    assert detect_lr_anomaly(frame(100, lr=np.nan), S) == []
    assert detect_lr_anomaly(frame(100, lr=0.0), S) == []


def test_jump_to_a_constant_lr_is_one_finding():
    lr = cosine(1000)
    lr[600:] = 6e-3
    (f,) = detect_lr_anomaly(frame(1000, lr=lr, loss=decaying_loss(1000)), S)
    assert f.details["variant"] == "jump"


def test_a_linear_decay_to_zero_at_its_last_step_is_not_a_stall():
    lr = np.linspace(5e-5, 0, 100)  # e.g. 100 logged points, lr = 0 exactly at the last one
    assert detect_lr_anomaly(frame(100, lr=lr, loss=decaying_loss(100)), S) == []


def test_warm_restarts_from_zero_are_intended():
    segment = np.linspace(4e-5, 0, 5)
    lr = np.concatenate([segment * 0.5**k for k in range(30)])  # decay to 0, restart at a lower peak, ...
    assert detect_lr_anomaly(frame(lr.size, lr=lr, loss=decaying_loss(lr.size)), S) == []


def test_an_lr_left_at_zero_while_training_goes_on_is_a_warning():
    lr = np.concatenate([np.linspace(1e-3, 0, 300), np.zeros(100)])  # the schedule ended 100 points early
    (f,) = detect_lr_anomaly(frame(400, lr=lr, loss=decaying_loss(400)), S)
    assert (f.details["variant"], f.step) == ("zero", 300) and "learn nothing" in f.message


def test_a_step_schedule_jumping_back_up_after_its_warmup_is_a_warning():
    # detectron2-style: warmup, a x0.1 step, then a resume that lost the schedule puts the lr back at its peak
    lr = np.concatenate([np.linspace(4e-4, 4e-3, 150), np.full(1250, 4e-3), np.full(150, 4e-4), np.full(500, 4e-3)])
    (f,) = detect_lr_anomaly(frame(lr.size, lr=lr, loss=decaying_loss(lr.size)), S)
    assert (f.details["variant"], f.step) == ("jump", 1551) and "jumped up 10×" in f.message


def test_a_frozen_lr_is_quoted_as_logged():
    # "stopped changing at 7.0e-04" named a value the run never logged
    lr = cosine(1000)
    lr[400:] = lr[399]
    (f,) = detect_lr_anomaly(frame(1000, lr=lr, loss=decaying_loss(1000)), S)
    quoted = re.search(r"stopped changing at (\S+) from step", f.message)
    assert quoted and float(quoted.group(1)) == pytest.approx(lr[399], rel=1e-5), f.message
