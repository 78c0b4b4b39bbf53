import numpy as np

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
    assert "stopped learning" in f.message


def test_frozen_after_smooth_decay():
    lr = cosine(1000)
    lr[400:] = lr[399]
    (f,) = detect_lr_anomaly(frame(1000, lr=lr, loss=decaying_loss(1000)), S)
    assert kinds([f]) == ["frozen"]
    assert f.step == 401


def test_jump_inside_a_smooth_schedule():
    lr = cosine(1000)
    lr[600:] *= 5
    (f,) = detect_lr_anomaly(frame(1000, lr=lr, loss=decaying_loss(1000)), S)
    assert kinds([f]) == ["jump"]
    assert f.step == 601
    assert "jumped up 5.0×" in f.message


def test_warmup_followed_by_rising_loss():
    loss = decaying_loss(1000, seed=2)
    loss[100:] = loss[90] * np.linspace(1.0, 1.6, 900) * np.random.default_rng(0).lognormal(0, 0.03, 900)
    found = detect_lr_anomaly(frame(1000, lr=cosine(1000, warmup=100), loss=loss), S)
    assert kinds(found) == ["warmup_rise"]
    assert found[0].step > 100
    assert "too high" in found[0].message


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
