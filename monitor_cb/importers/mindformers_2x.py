"""MindFormers 2.x step lines read by splitting, not by regex (a million lines open like a JSONL file).

2.x's ``_print_log`` (``pynative/callback/loss_callback.py``) joins ``label: value`` parts with ``", "``
inside ``{ ... }``, after the step; which parts appear varies (``load_balancing_loss``,
``indexer_loss``, ``mtp_N_loss``, ``lr``, ``throughput`` are optional). So each part is split at its
first ``": "`` and taken by its label, wherever it stands. A line whose parts are not all known
labels returns None, and the caller reads the lines field by field instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

STEP2_MARK = "{ step:["
MAX_PARTS = 24  # the step, the loss, the step time and the optional parts, mtp depths included
NOT_COMPUTED = "NaN"  # "grad_norm: NaN": no norm computed (a NaN value prints as "nan")
PIPELINE_LOSS = "N/A (non-last PP stage"  # its text goes on past a ", ": "refer to last stage for real loss)"
# label -> (our name, unit suffix stripped, scale)
LABELS: dict[str, tuple[str, str, float]] = {
    "loss": ("loss", "", 1.0),
    "per_step_time": ("step_time", "ms", 1e-3),
    "load_balancing_loss": ("loss_load_balancing", "", 1.0),
    "indexer_loss": ("loss_indexer", "", 1.0),
    "lr": ("lr", "", 1.0),
    "grad_norm": ("grad_norm", "", 1.0),
    "throughput": ("tflops_per_npu", "T", 1.0),
}
_PIPELINE_TAIL = "refer to last stage for real loss)"

Fields = dict[str, tuple[np.ndarray, np.ndarray]]


def split_2x(line: Any) -> tuple[Fields, tuple[Any, Any, Any, Any]] | None:
    """The fields (values, logged) and (epoch, epochs, step, total) columns of 2.x step lines; None
    when a line has a part this split does not know (read field by field then)."""
    import polars as pl

    body = line.str.splitn(STEP2_MARK, 2).struct.field("field_1").str.strip_suffix(" }")
    commas = body.str.count_matches(", ", literal=True)
    n = int(commas.max() or 0) + 1
    if n >= MAX_PARTS or body.null_count():
        return None  # more parts than split here, or a line without the mark: field by field
    names = [f"p{i}" for i in range(n)]
    parts = pl.DataFrame({"body": body}).select(pl.col("body").str.splitn(", ", n).struct.rename_fields(names))
    parts = parts.unnest("body")
    texts = _same_parts(parts, body[0], n) if commas.min() == n - 1 else None
    if texts is None:
        texts = _parts_by_label(parts, n)
    if texts is None:
        return None
    step = parts["p0"].str.strip_suffix("]").str.split_exact("/", 1)
    mtp = {label: _mtp_name(label) for label in texts if _mtp_name(label)}
    fields: Fields = {}
    for label, (name, unit, scale) in LABELS.items():
        if label not in texts:
            continue
        text = texts[label]
        values_, logged = _numbers(text, unit)
        if name == "grad_norm":
            logged &= (text.str.strip_chars() != NOT_COMPUTED).fill_null(False).to_numpy()
            values_ = np.where(logged, values_, np.nan)
        if logged.any():
            fields[name] = (values_ * scale, logged)
    for label, name in mtp.items():
        fields[name] = _numbers(texts[label], "")
    total = step.struct.field("field_1").str.strip_chars().cast(pl.Int64, strict=False)
    global_step = step.struct.field("field_0").str.strip_chars().cast(pl.Int64, strict=False)
    epoch = pl.repeat(None, len(line), dtype=pl.Int64, eager=True)  # none: the step is global
    return fields, (epoch, pl.repeat(1, len(line), dtype=pl.Int64, eager=True), global_step, total)


def _same_parts(parts: Any, first: str | None, n: int) -> dict[str, Any] | None:
    """The usual case, every line with the first line's parts in its order: {label: value texts} by
    position (a prefix check per part, no search); None when a line differs."""
    if first is None:
        return None
    labels = [part.split(": ", 1)[0] for part in first.split(", ", n - 1)[1:]]
    if not all(_known(label) for label in labels) or len(set(labels)) != len(labels):
        return None
    texts: dict[str, Any] = {}
    for i, label in enumerate(labels, start=1):
        column = parts[f"p{i}"]
        if not bool(column.str.starts_with(label + ": ").all()):
            return None
        texts[label] = column.str.slice(len(label) + 2)
    return texts


def _parts_by_label(parts: Any, n: int) -> dict[str, Any] | None:
    """{label: value texts} with each line's parts in any order (null where a line lacks one); None
    when a part's label is not known."""
    import polars as pl

    halves = parts.select(
        [pl.col(f"p{i}").str.split_exact(": ", 1).struct.rename_fields([f"l{i}", f"v{i}"]) for i in range(1, n)]
    ).unnest(*(f"p{i}" for i in range(1, n)))
    found: set[str] = set()
    for i in range(1, n):
        label = halves[f"l{i}"]
        tail = halves[f"v{i}"].is_null() & (label == _PIPELINE_TAIL)
        labels = label.filter(~(label.is_null() | tail.fill_null(False))).unique().to_list()
        if not all(_known(name) for name in labels):
            return None
        found.update(labels)
    none = pl.repeat(None, parts.height, dtype=pl.String, eager=True)
    texts: dict[str, Any] = {}
    for name in found:
        out = none
        for i in range(1, n):
            here = (halves[f"l{i}"] == name).fill_null(False)
            if bool(here.any()):
                out = out.fill_null(halves[f"v{i}"].zip_with(here, none))
        texts[name] = out
    return texts


def _known(label: str) -> bool:
    return label in LABELS or bool(_mtp_name(label)) or label == _PIPELINE_TAIL


def _mtp_name(label: str) -> str:
    """``mtp_1_loss`` -> ``loss_mtp_1``; "" for any other label."""
    if label.startswith("mtp_") and label.endswith("_loss") and label[4:-5].isdigit():
        return f"loss_mtp_{int(label[4:-5])}"
    return ""


def _numbers(text: Any, unit: str) -> tuple[np.ndarray, np.ndarray]:
    """Value texts as numbers (unit stripped) and "was logged" flags; ``N/A`` and absent are not logged."""
    import polars as pl

    text = text.str.strip_chars()
    if unit:
        text = text.str.strip_suffix(unit)
    numbers = text.cast(pl.Float64, strict=False)
    return numbers.fill_null(float("nan")).to_numpy(), numbers.is_not_null().fill_null(False).to_numpy()
