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

from monitor_cb.diagnosis.settings_text import HELP, LABELS
from monitor_cb.hidden_dir import HIDDEN_DIR, OutsideRootError, hidden_path, read_hidden
from monitor_cb.rootfile import SETTINGS_CAP, UnsafeFileError, write_atomic

SETTINGS_DIR = HIDDEN_DIR
SETTINGS_FILE = "diagnosis.json"


@dataclass(frozen=True)
class DiagnosisSettings:
    """Knobs of every detector. Points are logged rows of the metric concerned (not training steps).

    Every series is judged against its own noise (:mod:`monitor_cb.diagnosis.noise`): "sigmas" below
    are the robust noise scale of the series' residuals around its trend, on the log scale for a
    positive series. Plain-words labels and help for each knob are in
    :mod:`monitor_cb.diagnosis.settings_text` (the Settings page shows them).

    General:
        disabled: detector kinds to skip (``("plateau",)``).
        baseline_window: trailing points the trend and noise of a series are taken from.
        min_baseline: points a series needs before anything is judged against it.
    """

    disabled: tuple[str, ...] = ()
    baseline_window: int = 101
    min_baseline: int = 20
    # grad_explosion: grad norm ``grad_ratio`` x and ``grad_z`` sigmas above its trend; a warning when it
    # persists, is extreme (``spike_extreme_z``) or the loss jumps with it, an error when NaN/Inf follows
    # within ``grad_followup`` points; an isolated jump the loss ignores is an info.
    grad_ratio: float = 20.0
    grad_z: float = 6.0
    grad_followup: int = 10
    # loss_spike: loss ``spike_z`` sigmas, ``spike_rel`` (relative) and ``spike_min_frac`` of its highest level
    # above its trend; a warning only when corroborated: the median of ``spike_persist`` points (and ~2x, 3x, 5x as
    # many; from 3x on against ``spike_shift_z`` sigmas of that median) stays up, the grad norm jumps with it,
    # ``spike_repeats`` jumps within ``spike_repeat_points`` points, or it is ``spike_extreme_z`` sigmas; an
    # error when not back within ``spike_recovery`` points.
    spike_z: float = 8.0
    spike_rel: float = 0.3
    spike_min_frac: float = 0.01
    spike_persist: int = 3
    spike_shift_z: float = 7.0
    spike_extreme_z: float = 30.0
    spike_repeats: int = 3
    spike_repeat_points: int = 20
    spike_recovery: int = 50
    # nan: a non-finite loss is always an error; a non-finite grad norm with a finite loss is a step the
    # loss scaler skipped (info), a warning when ``nan_skip_persist`` of them come in a row.
    nan_skip_persist: int = 5
    # divergence: the loss level (median of 3 blocks of ``diverge_block`` points) ``diverge_rise`` (relative)
    # and ``diverge_z`` sigmas of that difference above its best earlier level, for ``diverge_persist`` blocks
    # in a row, having given back ``diverge_giveback`` of the way from its best level to its worst. A level is a
    # "best" only once ``min_baseline`` points came before it.
    diverge_block: int = 5
    diverge_rise: float = 0.15
    diverge_z: float = 5.0
    diverge_persist: int = 3
    diverge_giveback: float = 0.25
    # ...or a run-away: ``diverge_runaway_points`` points in a row, each above every earlier point and
    # ``diverge_runaway_factor`` x the trend before them, after ``diverge_runaway_history`` points.
    diverge_runaway_points: int = 3
    diverge_runaway_history: int = 30
    diverge_runaway_factor: float = 2.0
    # lr_anomaly
    lr_zero_frac: float = 1e-3  # below this fraction of the peak lr counts as zero
    lr_smooth_points: int = 15  # a "smooth schedule" changed at nearly every one of this many points
    lr_frozen_points: int = 15  # exactly unchanged (or at 0 after the schedule's end) this many points
    lr_frozen_min_frac: float = 0.2  # ...unless it froze below this fraction of the peak (a floor)
    lr_jump_rel: float = 0.2  # a one-point relative change at least this big...
    lr_jump_factor: float = 20.0  # ...and this many times the median change of the smooth schedule
    lr_warmup_min_points: int = 10  # a warmup is at least this many rising points; a rise after it lasts as long
    lr_warmup_rise: float = 0.1  # short-median loss this much above the late-warmup level = rising
    # throughput_drop: most of a window of L points (``drop_min_points`` .. ``drop_window``) below the trend by
    # ``drop_frac``, by ``drop_evidence`` / L (log units: size x persistence) and by ``drop_z`` sigmas of an
    # L-point median. A rate from throughput, step_time or the records' times.
    drop_frac: float = 0.3
    drop_window: int = 16
    drop_min_points: int = 3
    drop_evidence: float = 2.5
    drop_z: float = 4.0
    drop_data_share: float = 0.5  # data wait explaining this share of the slowdown = input pipeline
    # overfitting: the median of the last w evaluations (an eighth of them, at least ``overfit_evals``)
    # ``overfit_rel`` and ``overfit_z`` eval-noise sigmas above the best, the latest one still up, and the gap
    # to the smoothed train loss grown as much; judged from ``overfit_min_evals`` evaluations.
    overfit_evals: int = 2
    overfit_rel: float = 0.1
    overfit_z: float = 3.5
    overfit_min_evals: int = 4
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
    # stalled: a running run silent longer than max(stall_min_seconds, stall_factor x its usual interval,
    # 1.5 x its 99th-percentile gap), an error past stall_error_factor x that; a past gap between records of
    # at least stall_gap_seconds, stall_factor x the usual interval and 1.5 x the longest gap before it.
    stall_min_seconds: float = 120.0
    stall_factor: float = 10.0
    stall_error_factor: float = 5.0
    stall_gap_seconds: float = 600.0
    # plateau: info when the smoothed loss is not ``plateau_rel`` below its best for ``plateau_points`` points;
    # a warning when there is no training signal (``stuck_points`` identical losses from the start, or zero
    # grad norms), or train and eval loss both stay within ``stuck_rel`` of their start while the eval loss
    # is flat over the last half of its evaluations (at least ``stuck_evals``).
    plateau_points: int = 200
    plateau_rel: float = 0.01
    plateau_smooth: int = 25
    stuck_points: int = 10
    stuck_evals: int = 6
    stuck_rel: float = 0.1
    # straggler / rank_divergence (several ranks): per aligned step a rank is compared with the median of
    # the *other* ranks; a rank is flagged when at least ``rank_persist`` of its last ``rank_window``
    # aligned points are off. straggler: the rank costs the job ``straggler_cost`` of its step time (its
    # extra step time or extra data wait over the slowest rank's step time).
    # rank_divergence (3+ ranks): loss or grad norm ``divergence_z`` cross-rank sigmas (1.4826 x the typical
    # per-step MAD across ranks over ``baseline_window`` points) and ``divergence_rel`` (relative) from it.
    rank_window: int = 20
    rank_persist: float = 0.7
    straggler_cost: float = 0.15
    divergence_z: float = 4.0
    divergence_rel: float = 0.05
    # layer_origin: after a loss spike, grad explosion or NaN, the member of a per-parameter family
    # (``grad_norm/<param>``, ``local_norm/<param>``...) that first reached ``layer_ratio`` x its own median
    # within the ``layer_window`` points (of that family) before it.
    layer_ratio: float = 5.0
    layer_window: int = 20
    # Metric roles set by hand for every run of the root: role -> metric names (monitor_cb.analysis.roles);
    # saved as {"loss": ["train/total"]}. Pages and detectors use them over the roles told from the names.
    roles: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "roles":
                object.__setattr__(self, "roles", checked_roles(value))
            elif f.name == "disabled":
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
        if self.straggler_cost >= 1:
            raise ValueError(f"straggler_cost must be a share below 1 (0.15 = 15%), got {self.straggler_cost!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-safe values (``disabled`` as a list, ``roles`` as ``{role: [names]}``)."""
        out = asdict(self)
        out["disabled"] = list(self.disabled)
        out["roles"] = {role: list(names) for role, names in self.roles}
        return out

    def chosen_roles(self) -> dict[str, tuple[str, ...]]:
        """The roles set by hand, ``{role: names}``."""
        return dict(self.roles)

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


ROLE_NAME_CAP = 10_000  # characters of a metric name a role may be set to
ROLE_NAMES_CAP = 64  # names one role may be set to


def checked_roles(value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Roles set by hand from a mapping ``{role: [names]}`` (or pairs), checked; ``ValueError`` names the problem."""
    from monitor_cb.analysis.roles import ROLE_LABELS

    pairs = value.items() if isinstance(value, dict) else value
    try:
        pairs = [(role, names) for role, names in pairs]
    except (TypeError, ValueError):
        raise ValueError(f"roles must map a role to a list of metric names, got {str(value)[:80]!r}") from None
    out = {}
    for role, names in pairs:
        if role not in ROLE_LABELS:
            raise ValueError(f"unknown role {str(role)[:40]!r} (known: {', '.join(ROLE_LABELS)})")
        if isinstance(names, str):
            names = [names]
        if not isinstance(names, (list, tuple)) or len(names) > ROLE_NAMES_CAP:
            raise ValueError(f"role {role!r} must be a list of at most {ROLE_NAMES_CAP} metric names")
        if not all(isinstance(n, str) and len(n) <= ROLE_NAME_CAP for n in names):
            raise ValueError(f"role {role!r}: each metric name must be text of at most {ROLE_NAME_CAP:,} characters")
        out[str(role)] = tuple(dict.fromkeys(names))
    return tuple(sorted(out.items()))


_FIELDS = {f.name: f for f in fields(DiagnosisSettings)}

# Knobs that existing settings files may still hold and that are now ignored without a warning.
RETIRED: frozenset[str] = frozenset({"drop_min_seconds", "straggler_ratio"})


def settings_from_dict_lenient(data: Any) -> tuple[DiagnosisSettings, list[str]]:
    """Settings from a parsed file, keeping every valid known key; returns the problems found."""
    if not isinstance(data, dict):
        return DiagnosisSettings(), [f"expected a JSON object, got {type(data).__name__}"]
    problems = [f"unknown setting {key!r} ignored" for key in data if key not in _FIELDS and key not in RETIRED]
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

    A missing file gives the defaults and no problem; an unreadable or corrupt file, or one outside
    the log root (``.monitor`` a link elsewhere), gives the defaults and one problem; unknown keys or
    bad values are skipped, each with a problem.
    """
    path = settings_path(root)
    try:
        text = read_hidden(root, SETTINGS_FILE, SETTINGS_CAP).decode("utf-8")
    except FileNotFoundError:
        return DiagnosisSettings(), []
    except UnsafeFileError as exc:  # a FIFO, a device, a link out of the root, too large: never read
        return DiagnosisSettings(), [f"skipped {path}: {exc.reason}; using default diagnosis settings"]
    except OutsideRootError as exc:  # .monitor itself, or the file, a link out of the root
        return DiagnosisSettings(), [f"skipped {exc}; using default diagnosis settings"]
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
    """Write ``settings`` atomically (temp file + rename) to ``<root>/.monitor/diagnosis.json``.

    Raises:
        OutsideRootError: (an ``OSError``) ``.monitor`` or the file is a link out of the log root.
        OSError: the folder or file cannot be written.
    """
    path = hidden_path(root, SETTINGS_FILE)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(settings.to_dict(), indent=1) + "\n").encode("utf-8"))
    return path


__all__ = [
    "HELP",
    "LABELS",
    "RETIRED",
    "DiagnosisSettings",
    "load_settings",
    "load_settings_checked",
    "save_settings",
    "settings_from_dict_lenient",
    "settings_path",
]
