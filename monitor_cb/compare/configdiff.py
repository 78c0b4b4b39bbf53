"""Hyperparameters side by side: each run's metadata ``config`` flattened, keeping the keys that differ."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

MISSING = "—"  # shown where a run does not have the key
# Facts the collector stores beside the config that often explain a difference between runs.
META_KEYS = ("world_size", "batch_size", "seq_length", "total_steps", "mindspore_version", "mindformers_version")
_MAX_DEPTH = 20


def flatten(config: Any, prefix: str = "", depth: int = 0) -> dict[str, Any]:
    """Nested dicts as dotted keys (``{"optim": {"lr": 1}}`` -> ``{"optim.lr": 1}``); other values as they are.

    Lists stay one value (shown as JSON). A non-dict config becomes ``{prefix or "config": value}``.
    """
    if not isinstance(config, Mapping):
        return {prefix or "config": config}
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value and depth < _MAX_DEPTH:
            out.update(flatten(value, name, depth + 1))
        else:
            out[name] = value
    return out


def run_config(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """A run's flattened ``config`` plus the :data:`META_KEYS` it has (as ``meta.<key>``)."""
    meta = meta or {}
    config = meta.get("config")
    flat = flatten(config) if isinstance(config, Mapping) else ({} if config is None else {"config": config})
    for key in META_KEYS:
        if meta.get(key) is not None:
            flat[f"meta.{key}"] = meta[key]
    return flat


NOT_DIFFERENT = "The runs' configs do not differ."
NONE_RECORDED = (
    "No config was recorded for these runs: their metadata holds none "
    "(TensorBoard, MindFormers-log and JSONL runs without a meta file have no config to compare)."
)


def empty_diff_note(configs: Mapping[str, Mapping[str, Any]]) -> str:
    """What an empty diff table means: "do not differ" would be wrong when there was nothing to compare."""
    return NOT_DIFFERENT if any(configs.values()) else NONE_RECORDED


def show_value(value: Any) -> str:
    """One cell as text: JSON for numbers, lists and dicts, strings as they are."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):  # mixed key types, an int of 5,000 digits, deep nesting
        try:
            return repr(value)[:200]
        except (ValueError, RecursionError):
            return f"<{type(value).__name__} that cannot be shown>"


def config_diff(
    configs: Mapping[str, Mapping[str, Any]], labels: Sequence[str] | None = None, all_keys: bool = False
) -> pd.DataFrame:
    """A table with one row per key and one column per run (cells as text, :data:`MISSING` when absent).

    Args:
        configs: run id -> flattened config (:func:`run_config`), in column order.
        labels: column titles (default the run ids).
        all_keys: keep every key, not only those whose values differ between runs.

    Returns:
        Index ``key`` (sorted), one text column per run.
    """
    ids = list(configs)
    titles = list(labels) if labels is not None else ids
    keys = sorted({k for c in configs.values() for k in c})
    rows, kept = [], []
    for key in keys:
        cells = [show_value(configs[i][key]) if key in configs[i] else MISSING for i in ids]
        if all_keys or len(set(cells)) > 1:
            rows.append(cells)
            kept.append(key)
    return pd.DataFrame(rows, columns=_unique(titles), index=pd.Index(kept, name="key"), dtype=object)


def _unique(titles: Sequence[str]) -> list[str]:
    """Column titles made unique (two runs may share a name)."""
    seen: dict[str, int] = {}
    out = []
    for title in titles:
        n = seen.get(title, 0)
        seen[title] = n + 1
        out.append(title if n == 0 else f"{title} ({n + 1})")
    return out
