"""Groups of compared runs by a config key (seeds of one setting), for the compare page's mean-and-band view."""

from __future__ import annotations

from collections.abc import Sequence

from monitor_cb.compare.configdiff import MISSING, run_config, show_value
from monitor_cb.compare.rundata import RunData


def group_keys(runs: Sequence[RunData]) -> list[str]:
    """Config keys whose shown values differ between the runs (a key some runs lack differs), sorted."""
    texts = [{k: show_value(v) for k, v in run_config(r.meta).items()} for r in runs]
    keys = sorted({k for t in texts for k in t})
    return [k for k in keys if len({t.get(k, MISSING) for t in texts}) > 1]


def group_runs(runs: Sequence[RunData], key: str) -> dict[str, tuple[str, ...]]:
    """Shown value of ``key`` -> the ids of the runs with it, in order of first appearance.

    Runs without the key form the group :data:`~monitor_cb.compare.configdiff.MISSING` (``—``);
    values are compared as shown (``show_value``), so a list or a dict value is one group, and a
    NaN is a group of its own.
    """
    found: dict[str, list[str]] = {}
    for run in runs:
        config = run_config(run.meta)
        value = show_value(config[key]) if key in config and config[key] is not None else MISSING
        found.setdefault(value, []).append(run.id)
    return {value: tuple(ids) for value, ids in found.items()}


def group_label(key: str, value: str, n_runs: int) -> str:
    """How a group is named in a legend: ``lr=0.001 (3 runs)``."""
    return f"{key}={value} ({n_runs} run{'s' if n_runs != 1 else ''})"
