"""MindFormers' TensorBoard tags -> our metric names and units (pure functions, no I/O).

MindFormers 1.9 (``MFLossMonitor.print_output_info``) writes through tensorboardX, which replaces
characters outside ``[-/\\w.]`` by ``_`` in tag names: ``"loss vs samples"`` is stored as
``"loss_vs_samples"``. Both spellings are accepted here. The table is documented in
``docs/TENSORBOARD.md``; keep the two in step.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from monitor_cb.record import RESERVED_KEYS


def _ms_to_s(value: float) -> float:
    return value / 1000.0


def _to_int(value: float) -> float | int:
    return int(value) if math.isfinite(value) and value == int(value) else value


# tag -> (our name, conversion of the value or None)
TAG_MAP: dict[str, tuple[str, Callable[[float], float | int] | None]] = {
    "loss": ("loss", None),
    "learning-rate": ("lr", None),
    "grad-norm": ("grad_norm", None),
    "batch-size": ("batch_size", _to_int),  # global batch size
    "loss-scale": ("loss_scale", None),
    "iteration-time": ("step_time", _ms_to_s),  # MindFormers writes int(milliseconds)
    "throughput": ("throughput", None),  # samples/s per device
    "model-flops-throughput-per-npu": ("tflops_per_npu", None),  # TFLOP/s per device
    "B-samples-per-day": ("b_samples_per_day", None),  # billions of samples/day, all devices
    "lm-loss": ("loss_lm", None),
    "mtp-loss": ("loss_mtp", None),
    "load-balancing-loss": ("loss_load_balancing", None),
    "indexer-loss": ("loss_indexer", None),
}

# "X vs samples" (as MindFormers spells it) and "X_vs_samples" (as tensorboardX stores it).
_VS_SAMPLES = re.compile(r"^(?P<base>.+?)(?: vs samples|_vs_samples)$")
TEXT_SUFFIX = "/text_summary"  # tensorboardX's add_text appends it to the tag


SET_ASIDE = frozenset(RESERVED_KEYS | {"event", "samples"})  # keys the reader fills itself
SET_ASIDE_PREFIX = "tb_"


def tag_key(tag: str) -> str:
    """A tag as a metric key: the tag as written (case, ``/``, ``.``, spaces, any character kept).

    ``"train/loss"`` stays ``"train/loss"`` and ``"Train/Loss"`` is another metric, so a run reads
    as TensorBoard shows it (docs/FORMAT.md, "Metric names"). Only a tag that is empty or is a
    key the reader fills itself (``step``, ``t``, ``rank``, ``seg``, ``event``, ``samples``) gets a
    ``tb_`` prefix, so it cannot overwrite the row's own step or rank.
    """
    if not tag or tag in SET_ASIDE:
        return f"{SET_ASIDE_PREFIX}{tag}"
    return tag


def samples_base(tag: str) -> str | None:
    """The base tag of a "vs samples" variant (``"loss_vs_samples"`` -> ``"loss"``), else None."""
    match = _VS_SAMPLES.match(tag)
    return match.group("base") if match else None


def metric_name(tag: str) -> str:
    """Our key for a TensorBoard scalar tag (MindFormers' mapped name, else :func:`tag_key`)."""
    mapped = TAG_MAP.get(tag)
    return mapped[0] if mapped else tag_key(tag)


def convert(tag: str, value: float) -> float | int:
    """The value in our units (``iteration-time`` ms -> s, ``batch-size`` -> int)."""
    mapped = TAG_MAP.get(tag)
    if mapped and mapped[1] is not None:
        return mapped[1](value)
    return value


def unit_divisor(tag: str) -> float:
    """What a whole array of the tag's values is divided by to be in our units (1.0: as written).

    The vectorised form of :func:`convert` (``batch-size`` stays a float in a column).
    """
    mapped = TAG_MAP.get(tag)
    return 1000.0 if mapped and mapped[1] is _ms_to_s else 1.0


def subdir_metric_name(subdir: str, tag: str) -> str:
    """Key for a scalar found in a subdirectory of a rank directory.

    tensorboardX's ``add_scalars(main_tag, {key: v})`` writes tag ``main_tag`` into
    ``<logdir>/<main_tag>/<key>/``; the subdirectory path then names the series, as written
    (``max_attention_logit/layer.0/head_3``).
    """
    if subdir == tag or subdir.startswith(tag + "/"):
        return tag_key(subdir)
    return tag_key(f"{subdir}/{tag}")
