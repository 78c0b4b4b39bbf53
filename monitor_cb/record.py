"""The on-disk record format: one place for names, versions and the NaN/Inf codec.

Every metrics line is one strict RFC 8259 JSON object. Non-finite floats are
written as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (the proto3
JSON mapping) so that "was NaN" stays distinct from "was not logged" and any
strict parser (``JSON.parse``, orjson, polars) accepts the file. See
``docs/FORMAT.md`` for the full description.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1

NAN = "NaN"
POS_INF = "Infinity"
NEG_INF = "-Infinity"
NONFINITE_STRINGS = {NAN: math.nan, POS_INF: math.inf, NEG_INF: -math.inf}

# Keys the writer owns; user metrics may not use them.
RESERVED_KEYS = frozenset({"step", "t", "rank", "seg"})

# Well-known metric keys (a record may hold any subset, plus user keys).
KNOWN_KEYS: dict[str, str] = {
    "step": "global training step (int, 1-based, from the optimizer's view)",
    "epoch": "epoch number (int, 1-based)",
    "t": "wall-clock time the record was made (float, Unix seconds)",
    "rank": "rank of the process that wrote the record (int)",
    "seg": "writer segment: a new value each time a writer starts on this file",
    "loss": "training loss (total when the network returns components)",
    "lr": "learning rate actually used at this step",
    "throughput": "samples per second over the last logging interval",
    "tokens_per_s": "tokens per second (when a sequence length is known)",
    "samples": "samples seen so far by this rank",
    "step_time": "seconds per step, averaged over the interval",
    "data_time": "seconds per step spent waiting for the next batch",
    "grad_norm": "global L2 norm of the gradients (before clipping)",
    "loss_scale": "loss-scale value (mixed precision)",
    "overflow": "whether this step overflowed (bool)",
    "mem_device": "device memory allocated, bytes",
    "mem_device_peak": "peak device memory allocated, bytes",
    "mem_host_rss": "host resident memory of the process, bytes",
    "loss_<name>": "one component of a multi-part loss",
    "eval_<metric>": "evaluation metric, tagged with the train step it follows",
    "event": "a non-metric record, e.g. 'guard_stop' (with 'reason')",
}

METRICS_SUFFIX = ".jsonl"
META_SUFFIX = ".meta.json"
DEFAULT_STEM = "metrics"
_RANK_RE = re.compile(r"\.rank(\d+)$")


def encode_value(value: Any) -> Any:
    """Return ``value`` as a JSON-safe plain Python value.

    numpy and MindSpore scalars become numbers, non-finite floats become the
    proto3 strings, mappings and sequences are converted recursively. Anything
    unknown becomes its ``str()`` so a log call never fails on a value.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _nonfinite_string(value)
    if isinstance(value, Mapping):
        return {str(k): encode_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode_value(v) for v in value]
    item = _scalar_item(value)
    if item is not _NO_ITEM:
        return encode_value(item)
    return str(value)


def encode_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """Encode every value of a record (see :func:`encode_value`).

    Plain floats, ints and strings, by far the common case, take a fast path.
    """
    out: dict[str, Any] = {}
    for key, value in record.items():
        kind = type(value)
        if kind is float:
            out[key] = value if value - value == 0.0 else _nonfinite_string(value)  # inf-inf, nan-nan are nan
        elif kind is int or kind is str or kind is bool or value is None:
            out[key] = value
        else:
            out[key] = encode_value(value)
    if not all(type(key) is str for key in out):
        out = {str(k): v for k, v in out.items()}
    return out


def decode_value(value: Any) -> Any:
    """Inverse of :func:`encode_value` for one value: proto3 strings become floats."""
    if isinstance(value, str):
        return NONFINITE_STRINGS.get(value, value)
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    if isinstance(value, dict):
        return {k: decode_value(v) for k, v in value.items()}
    return value


def decode_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """Decode every value of a parsed record (see :func:`decode_value`)."""
    return {k: decode_value(v) for k, v in record.items()}


def metrics_filename(rank: int, world_size: int, stem: str = DEFAULT_STEM) -> str:
    """File name for one rank's metrics stream inside a run directory."""
    if world_size <= 1 and rank == 0:
        return f"{stem}{METRICS_SUFFIX}"
    return f"{stem}.rank{rank}{METRICS_SUFFIX}"


def meta_path_for(metrics_path: Path) -> Path:
    """The metadata file that belongs to a metrics file (``x.jsonl`` -> ``x.meta.json``)."""
    name = metrics_path.name
    stem = name[: -len(METRICS_SUFFIX)] if name.endswith(METRICS_SUFFIX) else name
    return metrics_path.with_name(stem + META_SUFFIX)


def rank_from_filename(path: Path) -> int | None:
    """Rank encoded in a metrics file name (``metrics.rank3.jsonl`` -> 3), else None."""
    name = path.name
    stem = name[: -len(METRICS_SUFFIX)] if name.endswith(METRICS_SUFFIX) else name
    match = _RANK_RE.search(stem)
    return int(match.group(1)) if match else None


def _nonfinite_string(value: float) -> str:
    if math.isnan(value):
        return NAN
    return POS_INF if value > 0 else NEG_INF


_NO_ITEM = object()


def _scalar_item(value: Any) -> Any:
    """``value.item()`` for numpy/MindSpore scalars and 1-element arrays, else a sentinel."""
    size = getattr(value, "size", None)
    if size is None:
        return _NO_ITEM
    try:
        if callable(size):  # MindSpore Tensor.size is a property; some libs use a method
            size = size()
        if int(size) == 1:
            if hasattr(value, "asnumpy"):
                value = value.asnumpy()
            return value.item() if hasattr(value, "item") else _NO_ITEM
        if hasattr(value, "tolist"):
            return value.tolist()
        if hasattr(value, "asnumpy"):
            return value.asnumpy().tolist()
    except Exception:  # noqa: BLE001 - a strange value must never break logging
        return _NO_ITEM
    return _NO_ITEM
