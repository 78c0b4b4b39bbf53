"""Every threshold the detectors use, in one dataclass, saved per log root in ``.monitor/diagnosis.json``.

Defaults are set from principles (robust z-scores far beyond noise, ratios a person would call
"an order of magnitude") and checked by ``bench/bench_diagnosis.py``; the dashboard lets users
change them and saves them here so they apply to every run under the root and survive a restart.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

SETTINGS_DIR = ".monitor"
SETTINGS_FILE = "diagnosis.json"


@dataclass(frozen=True)
class DiagnosisSettings:
    """Knobs of every detector. Points are logged rows of the metric concerned (not training steps).

    General:
        disabled: detector kinds to skip (``("plateau",)``).
        baseline_window: trailing points of the rolling median/MAD baselines.
        min_baseline: points a baseline needs before anything is judged against it.
    """

    disabled: tuple[str, ...] = ()
    baseline_window: int = 101
    min_baseline: int = 20
    # grad_explosion: grad norm at least ``grad_ratio`` x its trailing median and ``grad_z`` robust sigmas
    # above it (log scale); an error when non-finite values or a loss spike follow within ``grad_followup``.
    grad_ratio: float = 20.0
    grad_z: float = 6.0
    grad_followup: int = 10
    # loss_spike: loss ``spike_z`` robust sigmas and ``spike_rel`` (relative) above its trailing median;
    # it "recovers" when it is back within that band within ``spike_recovery`` points.
    spike_z: float = 8.0
    spike_rel: float = 0.3
    spike_recovery: int = 50
    # lr_anomaly
    lr_zero_frac: float = 1e-3  # below this fraction of the peak lr counts as zero
    lr_smooth_points: int = 15  # a "smooth schedule" changed at nearly every one of this many points
    lr_frozen_points: int = 15  # exactly unchanged this many points after a smooth decay = frozen
    lr_frozen_min_frac: float = 0.2  # ...unless it froze below this fraction of the peak (a floor)
    lr_jump_rel: float = 0.2  # a one-point relative change at least this big...
    lr_jump_factor: float = 20.0  # ...and this many times the median change of the smooth schedule
    lr_warmup_min_points: int = 10  # a warmup is at least this many rising points
    lr_warmup_rise: float = 0.05  # short-median loss this much above the late-warmup level = rising
    # throughput_drop: the median of the last ``drop_window`` points at least ``drop_frac`` below the
    # trailing baseline for ``drop_min_points`` points in a row and ``drop_min_seconds`` of wall time
    # (a few seconds, the scale of a dashboard refresh: shorter bursts of contention are not "sustained").
    drop_frac: float = 0.3
    drop_window: int = 9
    drop_min_points: int = 5
    drop_min_seconds: float = 3.0
    drop_data_share: float = 0.5  # data wait explaining this share of the slowdown = input pipeline
    # overfitting: the last ``overfit_evals`` evaluations all above the best by ``overfit_rel`` and
    # ``overfit_z`` eval-noise sigmas, while the train loss did not rise.
    overfit_evals: int = 3
    overfit_rel: float = 0.02
    overfit_z: float = 4.0
    # sawtooth: step time folded by each period p in windows of ``sawtooth_window`` points; the per-phase
    # means must explain ``sawtooth_power`` of the variance (R^2) and swing ``sawtooth_amplitude`` x the
    # mean, with the same period in ``sawtooth_windows`` windows in a row. Periods up to
    # window / sawtooth_repeats points are looked for (2..4 by default); a longer window sees longer
    # periods but needs about as many points to flag them.
    sawtooth_window: int = 16
    sawtooth_hop: int = 2
    sawtooth_power: float = 0.85
    sawtooth_amplitude: float = 0.2
    sawtooth_windows: int = 2
    sawtooth_repeats: int = 4
    # stalled: silence longer than max(stall_min_seconds, stall_factor x median interval,
    # 1.5 x the run's 99th-percentile gap); an error past stall_error_factor x that.
    stall_min_seconds: float = 120.0
    stall_factor: float = 20.0
    stall_error_factor: float = 5.0
    # plateau (info): smoothed loss not ``plateau_rel`` below its best for ``plateau_points`` points.
    plateau_points: int = 200
    plateau_rel: float = 0.01
    plateau_smooth: int = 25
    # straggler / rank_divergence (several ranks): per aligned step a rank is compared with the median of
    # the *other* ranks; a rank is flagged when at least ``rank_persist`` of its last ``rank_window``
    # aligned points are off. straggler: step time at least ``straggler_ratio`` x the others' median.
    # rank_divergence (3+ ranks): loss or grad norm ``divergence_z`` cross-rank sigmas (1.4826 x the typical
    # per-step MAD across ranks over ``baseline_window`` points) and ``divergence_rel`` (relative) from it.
    rank_window: int = 20
    rank_persist: float = 0.7
    straggler_ratio: float = 1.3
    divergence_z: float = 4.0
    divergence_rel: float = 0.05

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "disabled":
                if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                    raise ValueError(f"disabled must be a list of detector kinds, got {value!r}")
                object.__setattr__(self, "disabled", tuple(value))
            elif isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{f.name} must be a positive number, got {value!r}")
            elif f.type == "int" and int(value) != value:
                raise ValueError(f"{f.name} must be a whole number, got {value!r}")
            elif f.type == "int":
                object.__setattr__(self, f.name, int(value))
        if self.min_baseline > self.baseline_window:
            raise ValueError(f"min_baseline ({self.min_baseline}) exceeds baseline_window ({self.baseline_window})")
        if self.rank_persist > 1:
            raise ValueError(f"rank_persist must be a share in (0, 1], got {self.rank_persist!r}")
        if self.straggler_ratio <= 1:
            raise ValueError(f"straggler_ratio must be above 1 (1.3 = 30% slower), got {self.straggler_ratio!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-safe values (``disabled`` as a list)."""
        out = asdict(self)
        out["disabled"] = list(self.disabled)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, strict: bool = True) -> DiagnosisSettings:
        """Build from :meth:`to_dict` output; missing keys take defaults.

        Raises:
            ValueError: with ``strict``, an unknown key or a bad value (the message names it).
                Without it, those keys are skipped and reported by :func:`settings_from_dict_lenient`.
        """
        settings, problems = settings_from_dict_lenient(data)
        if strict and problems:
            raise ValueError("; ".join(problems))
        return settings

    def enabled(self, kind: str) -> bool:
        """Whether the detector of ``kind`` runs."""
        return kind not in self.disabled


_FIELDS = {f.name: f for f in fields(DiagnosisSettings)}

# One line per knob, for a settings form (``st.number_input(name, help=HELP[name])``).
HELP: dict[str, str] = {
    "disabled": "detectors to skip",
    "baseline_window": "logged points in the trailing robust baseline (median of block medians)",
    "min_baseline": "points a baseline needs before anything is judged",
    "grad_ratio": "grad norm this many times its recent median is an explosion",
    "grad_z": "...and this many robust sigmas above it (log scale)",
    "grad_followup": "points after an explosion checked for NaN/Inf or a loss jump (then: error)",
    "spike_z": "loss this many robust sigmas above its recent median is a spike",
    "spike_rel": "...and this much above it, relative (0.3 = +30%)",
    "spike_recovery": "points a spike has to come back before it counts as divergence (error)",
    "lr_zero_frac": "lr below this fraction of its peak counts as zero",
    "lr_smooth_points": "points a schedule must have changed at, to count as smooth",
    "lr_frozen_points": "unchanged points after a smooth decay that count as a frozen lr",
    "lr_frozen_min_frac": "a freeze below this fraction of the peak is taken as a floor, not a fault",
    "lr_jump_rel": "a one-point lr change at least this big (relative) may be a jump...",
    "lr_jump_factor": "...if it is this many times the schedule's usual change",
    "lr_warmup_min_points": "rising lr points that make a warmup",
    "lr_warmup_rise": "loss this much above its late-warmup level after the warmup = rising",
    "drop_frac": "throughput this much below its recent level is a drop (0.3 = -30%)",
    "drop_window": "points in the short window whose majority must be low",
    "drop_min_points": "points the drop must last",
    "drop_min_seconds": "seconds the drop must last",
    "drop_data_share": "share of the slowdown data wait must explain to blame the input pipeline",
    "overfit_evals": "evaluations in a row that must sit above the best",
    "overfit_rel": "...by at least this much, relative",
    "overfit_z": "...and this many eval-noise sigmas",
    "sawtooth_window": "points per window in which a step-time oscillation is looked for",
    "sawtooth_hop": "points between windows",
    "sawtooth_power": "share of the window's variance the periodic profile must explain (R^2)",
    "sawtooth_amplitude": "peak-to-peak swing of the profile, relative to the mean step time",
    "sawtooth_windows": "windows in a row with the same period",
    "sawtooth_repeats": "repeats a period must show in one window (longest period = window / repeats)",
    "stall_min_seconds": "a running run silent this long (at least) is stalled",
    "stall_factor": "...or this many of its usual intervals, if longer",
    "stall_error_factor": "stalled for this many times the threshold is an error",
    "plateau_points": "points without improvement that make a plateau (info)",
    "plateau_rel": "improvement smaller than this (relative) does not count",
    "plateau_smooth": "points per block median when looking for a plateau",
    "rank_window": "aligned steps in the window over which one rank is compared with the others",
    "rank_persist": "share of that window a rank must be off to be flagged (0.7 = most of it)",
    "straggler_ratio": "a rank this many times slower than the other ranks' median step time is slow",
    "divergence_z": "loss / grad norm this many cross-rank sigmas from the other ranks' median departs",
    "divergence_rel": "...and at least this much from it, relative (0.05 = 5%)",
}


def settings_from_dict_lenient(data: Any) -> tuple[DiagnosisSettings, list[str]]:
    """Settings from a parsed file, keeping every valid known key; returns the problems found."""
    if not isinstance(data, dict):
        return DiagnosisSettings(), [f"expected a JSON object, got {type(data).__name__}"]
    problems = [f"unknown setting {key!r} ignored" for key in data if key not in _FIELDS]
    settings = DiagnosisSettings()
    for key, value in data.items():
        if key not in _FIELDS:
            continue
        try:
            settings = replace(settings, **{key: value})
        except (ValueError, TypeError) as exc:
            problems.append(f"{exc}; using the default {getattr(DiagnosisSettings(), key)!r}")
    return settings, problems


def settings_path(root: str | os.PathLike[str]) -> Path:
    """``<root>/.monitor/diagnosis.json`` (for an object-store root, in its local state folder)."""
    from monitor_cb.storage.urls import state_dir

    return state_dir(root) / SETTINGS_DIR / SETTINGS_FILE


def load_settings_checked(root: str | os.PathLike[str]) -> tuple[DiagnosisSettings, list[str]]:
    """Settings saved under ``root`` and the problems met reading them (for a page to show).

    A missing file gives the defaults and no problem; an unreadable or corrupt file gives the
    defaults and one problem; unknown keys or bad values are skipped, each with a problem.
    """
    path = settings_path(root)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return DiagnosisSettings(), []
    except (OSError, UnicodeDecodeError) as exc:
        return DiagnosisSettings(), [f"cannot read {path}: {exc}; using default diagnosis settings"]
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return DiagnosisSettings(), [f"{path} is not valid JSON ({exc}); using default diagnosis settings"]
    settings, problems = settings_from_dict_lenient(data)
    return settings, [f"{path}: {p}" for p in problems]


def load_settings(root: str | os.PathLike[str]) -> DiagnosisSettings:
    """Settings saved under ``root`` (defaults when absent); each problem becomes one ``UserWarning``."""
    settings, problems = load_settings_checked(root)
    for problem in problems:
        warnings.warn(problem, UserWarning, stacklevel=2)
    return settings


def save_settings(root: str | os.PathLike[str], settings: DiagnosisSettings) -> Path:
    """Write ``settings`` atomically (temp file + rename) to ``<root>/.monitor/diagnosis.json``."""
    path = settings_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(settings.to_dict(), indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


__all__ = [
    "HELP",
    "DiagnosisSettings",
    "load_settings",
    "load_settings_checked",
    "save_settings",
    "settings_from_dict_lenient",
    "settings_path",
]
