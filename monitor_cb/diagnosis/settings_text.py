"""What each diagnosis knob means, in words a user can act on: a short label and a one-paragraph help.

The Settings page shows :data:`LABELS` as the field names and :data:`HELP` as their tooltips, so a
user sees "Loss spike: noise sigmas" and what it does, not ``spike_z``. Every field of
:class:`~monitor_cb.diagnosis.settings.DiagnosisSettings` has an entry in both (a test checks it).
"""

from __future__ import annotations

LABELS: dict[str, str] = {
    "disabled": "Detectors switched off",
    "baseline_window": "History used for a series' trend and noise (points)",
    "min_baseline": "Points needed before anything is judged",
    "grad_ratio": "Grad-norm jump: at least this many times its trend",
    "grad_z": "Grad-norm jump: at least this many noise sigmas",
    "grad_followup": "Points watched after a grad-norm jump",
    "spike_z": "Loss spike: at least this many noise sigmas",
    "spike_rel": "Loss spike: at least this much above the trend (0.3 = +30%)",
    "spike_min_frac": "Loss spike: smallest size, as a share of the loss's highest level",
    "spike_persist": "Loss spike: points it must stay up to count as real",
    "spike_shift_z": "Loss spike: noise sigmas for the median of many points (a lasting shift)",
    "spike_extreme_z": "Loss spike: noise sigmas that make even a one-point jump a warning",
    "spike_repeats": "Loss spike: jumps that make a burst",
    "spike_repeat_points": "Loss spike: points a burst of jumps must fit in",
    "spike_recovery": "Loss spike: points it has to come back in (then it is an error)",
    "nan_skip_persist": "Skipped steps in a row before they are a warning",
    "diverge_block": "Divergence: points per block of the loss level",
    "diverge_rise": "Divergence: rise above the best level (0.15 = +15%)",
    "diverge_z": "Divergence: rise in noise sigmas",
    "diverge_persist": "Divergence: blocks in a row the rise must last",
    "diverge_giveback": "Divergence: share of the progress made that must be lost",
    "diverge_runaway_points": "Run-away: points in a row above every earlier point",
    "diverge_runaway_history": "Run-away: earlier points needed first",
    "diverge_runaway_factor": "Run-away: at least this many times the trend",
    "lr_zero_frac": "Learning rate counted as zero below this share of its peak",
    "lr_smooth_points": "Points a schedule must change at to count as smooth",
    "lr_frozen_points": "Points an unchanged (or zero) learning rate may last",
    "lr_frozen_min_frac": "A learning rate frozen below this share of its peak is a floor",
    "lr_jump_rel": "Learning-rate jump: smallest one-point change (0.2 = 20%)",
    "lr_jump_factor": "Learning-rate jump: times the schedule's usual change",
    "lr_warmup_min_points": "Warmup: rising points that make one (and that a rise after it must last)",
    "lr_warmup_rise": "Warmup: loss rise after it that is a problem (0.1 = +10%)",
    "drop_frac": "Throughput drop: smallest fall below the trend (0.3 = -30%)",
    "drop_window": "Throughput drop: longest window looked at (points)",
    "drop_min_points": "Throughput drop: fewest points a drop must last",
    "drop_evidence": "Throughput drop: size x duration needed",
    "drop_z": "Throughput drop: fall in noise sigmas",
    "drop_data_share": "Throughput drop: share of it data waits must explain to blame the input",
    "overfit_evals": "Overfitting: fewest recent evaluations judged together",
    "overfit_rel": "Overfitting: eval-loss rise above its best (0.1 = +10%)",
    "overfit_z": "Overfitting: eval-loss rise in eval-noise sigmas",
    "overfit_min_evals": "Overfitting: evaluations needed before it is judged",
    "sawtooth_window": "Step-time oscillation: points per window",
    "sawtooth_hop": "Step-time oscillation: points between windows",
    "sawtooth_power": "Step-time oscillation: share of the variation the period explains",
    "sawtooth_amplitude": "Step-time oscillation: smallest swing (0.2 = 20% of the step time)",
    "sawtooth_windows": "Step-time oscillation: windows in a row with the same period",
    "sawtooth_repeats": "Step-time oscillation: repeats of the period per window",
    "stall_min_seconds": "Stalled run: shortest silence (seconds)",
    "stall_factor": "Stalled run: silence in usual logging intervals",
    "stall_error_factor": "Stalled run: times the threshold that make it an error",
    "stall_gap_seconds": "Past stall: shortest gap between records (seconds)",
    "plateau_points": "Plateau note: points without improvement",
    "plateau_rel": "Plateau note: improvement that counts (0.01 = 1%)",
    "plateau_smooth": "Plateau note: points per block median",
    "stuck_points": "Not learning: identical losses (or zero grad norms) in a row",
    "stuck_evals": "Not learning: fewest flat evaluations",
    "stuck_rel": "Not learning: distance from the start that counts as none (0.1 = 10%)",
    "rank_window": "Ranks: aligned steps compared",
    "rank_persist": "Ranks: share of them a rank must be off (0.7 = 70%)",
    "straggler_cost": "Straggler: share of the job's step time a slow rank costs (0.15 = 15%)",
    "divergence_z": "Rank apart: distance in cross-rank sigmas",
    "divergence_rel": "Rank apart: distance from the others (0.05 = 5%)",
    "layer_ratio": "Which layer: times its own baseline a parameter must reach",
    "layer_window": "Which layer: points of the family looked at before a blow-up",
    "roles": "Metric roles",
}

_SIGMA = (
    "A noise sigma is the series' own spread around its trend (robust, on a log scale for a positive series), "
    "so a noisy per-batch loss needs a bigger jump than a smooth one."
)

HELP: dict[str, str] = {
    "disabled": "Detectors that do not run at all.",
    "baseline_window": (
        "How many recent logged points each series' trend and noise are measured over. Longer is steadier "
        "but follows a falling loss more slowly."
    ),
    "min_baseline": "A series is not judged until it has this many points (the first ones are noisy warmup).",
    "grad_ratio": "The gradient norm must reach this many times its recent trend to count as a jump.",
    "grad_z": f"...and this many noise sigmas above it. {_SIGMA}",
    "grad_followup": (
        "After a grad-norm jump, this many points are checked: NaN/Inf there makes it an error, a loss jump a "
        "warning; a jump the loss ignores (clipping absorbed it) is only a note."
    ),
    "spike_z": f"A loss point (or the median of a few) must be this many noise sigmas above the trend. {_SIGMA}",
    "spike_rel": "...and at least this much above the trend, relative (0.3 = 30% higher).",
    "spike_min_frac": (
        "...and at least this share of the highest loss level seen, so a loss rounded near zero (0.0002 to "
        "0.0005) is not a spike."
    ),
    "spike_persist": (
        "A jump is a warning when the median of this many points (or of about 2, 3 or 5 times as many) "
        "stays up. A single batch that is back at the next point is per-batch noise: only a note."
    ),
    "spike_shift_z": (
        "The median of about 3 and 5 times 'points it must stay up' must be this many noise sigmas of that median "
        "above the trend (its noise shrinks with the number of points, so a lasting x3 shift inside per-batch noise "
        "that spans a decade is caught)."
    ),
    "spike_extreme_z": "A one-point jump this many noise sigmas above the trend is a warning even if it comes back.",
    "spike_repeats": "This many jumps close together (see the next setting) make a warning even if each comes back.",
    "spike_repeat_points": "The number of points the repeated jumps must fall within.",
    "spike_recovery": "A warning spike that has not come back within this many points becomes an error (diverged).",
    "nan_skip_persist": (
        "A NaN/Inf grad norm with a finite loss is a step the mixed-precision loss scaler skipped: a note with "
        "their count. This many in a row (every update skipped) is a warning. A NaN loss is always an error."
    ),
    "diverge_block": (
        "The loss level is the median of 3 blocks of this many points, compared with its best level since the first "
        "'points needed before anything is judged' (a loss that climbs from its very first values, like an RL "
        "critic whose targets grow, has no best level yet)."
    ),
    "diverge_rise": "The level must sit this much above its best (0.15 = 15% higher) for divergence.",
    "diverge_z": f"...and this many noise sigmas of that difference. {_SIGMA}",
    "diverge_persist": "...for this many blocks in a row (a shorter bump of a noisy objective is not divergence).",
    "diverge_giveback": (
        "...having lost this share of the progress made (from its worst level to its best), so a loss that fell "
        "from 10 to 0.02 is not diverging when it drifts to 0.03."
    ),
    "diverge_runaway_points": (
        "Divergence is also a run-away: this many points in a row, each higher than every earlier point of the "
        "run (its start included, so a loss that fell must climb back above where it began). One or two new "
        "highs are per-batch noise on real runs; several in a row are a run going away."
    ),
    "diverge_runaway_history": (
        "...only after this many points, so the first values and warm-up, where a loss may still climb, set the "
        "highs to beat."
    ),
    "diverge_runaway_factor": (
        "...and each of those points at least this many times the loss's trend just before them (2 = twice its "
        "usual level), so a loss that only creeps past an old high is not called a run-away."
    ),
    "lr_zero_frac": "A learning rate below this share of its peak counts as zero.",
    "lr_smooth_points": (
        "A schedule that changed at nearly every one of this many points is smooth (cosine, linear); jumps in it "
        "are suspicious, steps in a step schedule are not."
    ),
    "lr_frozen_points": (
        "An lr that stops changing after a smooth decay for this many points is frozen; one that reached 0 at the "
        "schedule's end while training goes on this long is wasted steps."
    ),
    "lr_frozen_min_frac": "An lr that freezes below this share of its peak is taken as an intended floor.",
    "lr_jump_rel": "A one-point lr change must be at least this big (relative) to be a jump...",
    "lr_jump_factor": "...and this many times the schedule's usual change between points.",
    "lr_warmup_min_points": "This many rising lr points make a warmup; a loss rise after it must last this long.",
    "lr_warmup_rise": "A loss this much above its late-warmup level after the warmup means the peak lr is too high.",
    "drop_frac": "Throughput must fall at least this far below its recent trend (0.3 = 30% slower).",
    "drop_window": "The longest stretch of points looked at for a smaller, longer drop.",
    "drop_min_points": "Even a huge drop must last this many logged points (one slow step never counts).",
    "drop_evidence": (
        "Size x duration: the fall (log of before/after) times the points it lasted. With 2.5 a halving must last "
        "4 points and a 30% drop 7."
    ),
    "drop_z": f"The fall must also be this many noise sigmas of the rate. {_SIGMA}",
    "drop_data_share": "If data-loading time grew by this share of the slowdown, the input pipeline is named.",
    "overfit_evals": "The recent eval level is the median of at least this many evaluations (an eighth of them).",
    "overfit_rel": "Eval loss this much above its best (0.1 = 10% higher) while the train loss does not rise...",
    "overfit_z": "...and this many eval-noise sigmas above it.",
    "overfit_min_evals": "Overfitting is judged from this many evaluations on.",
    "sawtooth_window": "Points per window in which a step-time oscillation is looked for.",
    "sawtooth_hop": "Points between consecutive windows.",
    "sawtooth_power": "Share of the window's variation the periodic profile must explain (R squared).",
    "sawtooth_amplitude": "Peak-to-peak swing of the profile, relative to the mean step time.",
    "sawtooth_windows": "Windows in a row that must show the same period.",
    "sawtooth_repeats": "Repeats a period must show in one window (the longest period is window / repeats).",
    "stall_min_seconds": "A running run silent at least this long may be stalled...",
    "stall_factor": "...if that is also this many of its usual logging intervals (and longer than any gap before).",
    "stall_error_factor": "A silence this many times the threshold is an error.",
    "stall_gap_seconds": (
        "A past gap between two records at least this long (and stall_factor usual intervals, and 1.5x any gap "
        "before it) is reported as time the job was down."
    ),
    "plateau_points": "Points without improvement that make a plateau note (info: often just convergence).",
    "plateau_rel": "An improvement smaller than this (relative) does not count.",
    "plateau_smooth": "Points per block median when looking for a plateau.",
    "stuck_points": "This many identical losses from the start, or zero grad norms in a row, mean no training signal.",
    "stuck_evals": (
        "A run is not learning when train and eval loss stay near their start and the eval loss is flat for at "
        "least this many evaluations (and half of them so far)."
    ),
    "stuck_rel": "'Near the start' means within this share of the first values (0.1 = 10%).",
    "rank_window": "Aligned steps over which one rank is compared with the others.",
    "rank_persist": "Share of those steps a rank must be off to be flagged (0.7 = most of them).",
    "straggler_cost": (
        "A rank is a straggler when the time the job waits for it (its extra step time or data wait) is at least "
        "this share of the job's step time (0.15 = 15%)."
    ),
    "divergence_z": "Loss or grad norm this many cross-rank sigmas from the other ranks' median departs...",
    "divergence_rel": "...and at least this far from it, relative (0.05 = 5%).",
    "layer_ratio": (
        "When the loss or the gradient norm blows up, a per-parameter series (grad_norm/<param>, "
        "local_norm/<param>...) counts as having left its baseline at this many times its own median."
    ),
    "layer_window": "How many logged points of the family before the blow-up are searched for the first to leave.",
    "roles": (
        "Which metrics play the training loss, eval loss, learning rate, ... in every run of the root, over the "
        "roles told from the names ({role: [metric names]})."
    ),
}

__all__ = ["HELP", "LABELS"]
