"""The on-disk record format: one place for names, versions and the NaN/Inf codec.

Every metrics line is one strict RFC 8259 JSON object. Non-finite floats are
written as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (the proto3
JSON mapping) so that "was NaN" stays distinct from "was not logged" and any
strict parser (``JSON.parse``, orjson, polars) accepts the file. See
``docs/FORMAT.md`` for the full description.
"""

from __future__ import annotations

import decimal
import math
import numbers
import operator
import re
import sys
import warnings
from collections.abc import Callable, Mapping
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

# Keys a reader always treats as numbers: text under them is a bad value, never a text column.
NUMERIC_KEYS = frozenset(
    {"t", "ts", "epoch", "loss", "lr", "throughput", "tokens_per_s", "samples", "step_time", "data_time"}
    | {"grad_norm", "loss_scale", "overflow", "mem_device", "mem_device_peak", "mem_host_rss"}
)
NUMERIC_PREFIXES = ("loss_", "eval_", "lr_group")

# A step is an integer in [0, STEP_LIMIT) (about 1.1e12, beyond any training); a segment in [1, SEG_LIMIT).
# Together they pack into one int64 (seg * STEP_LIMIT + step), which the reader sorts by.
STEP_LIMIT = 1 << 40
SEG_LIMIT = 1 << 22

METRICS_SUFFIX = ".jsonl"
META_SUFFIX = ".meta.json"
DEFAULT_STEM = "metrics"
_RANK_RE = re.compile(r"\.rank(\d+)$")


class Unwritable(ValueError):
    """A value that cannot be written as a JSON number that reads back right (the message says why)."""


def encode_value(value: Any, fallback: Callable[[Any], Any] | None = None, _depth: int = 0) -> Any:
    """Return ``value`` as a JSON-safe plain Python value.

    Every numeric scalar becomes a number: Python ints and floats of any subclass, numpy
    scalars of any width, 0-d and 1-element arrays, MindSpore Tensor scalars, ``Decimal``
    and ``Fraction``. Integers in the 64-bit range are written exactly; larger ones as the
    nearest double (readers hold metrics as doubles anyway). Non-finite floats become the
    proto3 strings; mappings and sequences are converted recursively; other objects
    become their ``str()``.

    Raises:
        Unwritable: a number no double can hold (``10**400``, ``Decimal("1e400")``, a
            signalling NaN) or nesting deeper than :data:`MAX_DEPTH`, unless ``fallback``
            is given: then that value becomes ``fallback(value)`` (metadata uses ``str``).
    """
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is float:
        return value if value - value == 0.0 else _nonfinite_string(value)
    if kind is int:
        return value if _INT_MIN <= value <= _INT_MAX else _wide_int(value, fallback)
    if isinstance(value, (Mapping, list, tuple)):
        if _depth >= MAX_DEPTH:
            return _unwritable(value, f"nested deeper than {MAX_DEPTH} levels", fallback)
        if isinstance(value, Mapping):
            return {str(k): encode_value(v, fallback, _depth + 1) for k, v in value.items()}
        return [encode_value(v, fallback, _depth + 1) for v in value]
    if isinstance(value, str):  # a str subclass (an enum's value, say)
        return str(value)
    try:
        number = scalar_number(value)
    except Unwritable as exc:
        return _unwritable(value, str(exc), fallback)
    if number is not _NOT_A_NUMBER:
        return encode_value(number, fallback, _depth)
    item = _array_items(value)
    if item is not _NOT_A_NUMBER:
        return encode_value(item, fallback, _depth + 1)
    return str(value)


def encode_record(
    record: Mapping[str, Any],
    dropped: list[tuple[str, str]] | None = None,
    fallback: Callable[[Any], Any] | None = None,
) -> dict[str, Any]:
    """Encode every value of a record (see :func:`encode_value`).

    Plain floats, ints and strings, by far the common case, take a fast path; a plain int
    passes whatever its size (valid JSON; an encoder limited to 64 bits maps it with
    :func:`encode_value`, as the writer does for the rare line orjson refuses). A value
    that cannot be written leaves its key out; ``(key, why)`` is appended to ``dropped``.
    """
    out: dict[str, Any] = {}
    for key, value in record.items():
        kind = type(value)
        if kind is float:
            out[key] = value if value - value == 0.0 else _nonfinite_string(value)  # inf-inf, nan-nan are nan
        elif kind is int or kind is str or kind is bool or value is None:
            out[key] = value
        else:
            try:
                out[key] = encode_value(value, fallback)
            except Unwritable as exc:
                if dropped is not None:
                    dropped.append((str(key), str(exc)))
    if not all(type(key) is str for key in out):
        out = {str(k): v for k, v in out.items()}
    return out


def scalar_number(value: Any) -> Any:
    """``value`` as a plain bool, int or float when it is one numeric scalar, else a sentinel.

    Raises:
        Unwritable: numeric, but no double can hold it (``Decimal("1e400")``, a signalling NaN).
    """
    if isinstance(value, (bool, np_bool_types())):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return operator.index(value)
    if isinstance(value, (numbers.Real, decimal.Decimal)):
        return _as_double(value)
    if isinstance(value, numbers.Complex):
        raise Unwritable(f"{_describe(value)} is a complex number; log its real part or magnitude")
    item = _one_item(value)
    if item is _NOT_A_NUMBER or item is value:
        return _NOT_A_NUMBER
    kind = type(item)
    if kind is bool or kind is int or kind is float:
        return item
    if isinstance(item, numbers.Complex) and not isinstance(item, numbers.Real):
        raise Unwritable(f"{_describe(item)} is a complex number; log its real part or magnitude")
    if isinstance(item, (numbers.Number, decimal.Decimal)) or hasattr(item, "__float__"):
        return _as_double(item)  # numpy longdouble, ml_dtypes bfloat16, ... whose .item() is not a Python number
    return _NOT_A_NUMBER


def np_bool_types() -> tuple[type, ...]:
    """numpy's bool scalar type, when numpy is loaded (it is not a ``bool`` subclass)."""
    numpy = sys.modules.get("numpy")
    return (numpy.bool_,) if numpy is not None else ()


def is_numeric_key(name: str) -> bool:
    """Whether the format defines ``name`` as a number (``loss``, ``lr``, ``eval_*``, ...)."""
    return name in NUMERIC_KEYS or name.startswith(NUMERIC_PREFIXES)


def step_of(value: Any) -> int | None:
    """The step a record's ``step`` value names, or None when it is not one.

    A step is an integer in ``[0, STEP_LIMIT)``; an integral float (``5.0``) counts as
    that integer. Booleans, strings, fractions, negatives, non-finite and huge values
    are not steps.
    """
    kind = type(value)
    if kind is int:
        return value if 0 <= value < STEP_LIMIT else None
    if kind is float:
        return int(value) if value.is_integer() and 0 <= value < STEP_LIMIT else None
    return None


def check_step(value: Any) -> int:
    """A step argument given to the writer, as an int (numpy and 0-d integers accepted).

    Raises:
        ValueError: not an integer in ``[0, STEP_LIMIT)``; the message names the value.
    """
    if not isinstance(value, (bool, str)):
        try:
            number = scalar_number(value)
        except Unwritable:
            number = None
        step = step_of(number)
        if step is not None:
            return step
    raise ValueError(
        f"step must be an integer from 0 to {STEP_LIMIT - 1:,} (or None for a record between steps), "
        f"got {_describe(value)}"
    )


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


_NOT_A_NUMBER = object()
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 64) - 1  # what orjson writes exactly (int64 and uint64)
MAX_DEPTH = 64  # nesting of a value in a record or the metadata; deeper (or cyclic) values are refused


def _as_double(value: Any) -> float:
    try:
        number = float(value)
    except (OverflowError, ValueError, TypeError) as exc:
        raise Unwritable(f"{_describe(value)} is not a number a double can hold ({exc})") from None
    if math.isinf(number) and _is_finite_number(value):
        raise Unwritable(f"{_describe(value)} is too large for a double")
    return number


def _is_finite_number(value: Any) -> bool:
    """Whether a number is finite in its own type (``Decimal("1e400")`` is; a double of it is not)."""
    if isinstance(value, decimal.Decimal):
        return value.is_finite()
    if isinstance(value, float) or getattr(getattr(value, "dtype", None), "itemsize", 16) <= 8:
        return False  # a double (or narrower) converts exactly: it was infinite already
    try:
        with warnings.catch_warnings():  # numpy warns on inf - inf
            warnings.simplefilter("ignore")
            return bool(value - value == 0)  # inf - inf and nan - nan are nan
    except Exception:  # noqa: BLE001 - an exotic number type
        return True


def _wide_int(value: int, fallback: Callable[[Any], Any] | None) -> Any:
    """An integer outside 64 bits: the nearest double, which is what every reader makes of it."""
    try:
        return float(value)
    except OverflowError:
        return _unwritable(value, f"{_describe(value)} is too large for a double", fallback)


def _unwritable(value: Any, why: str, fallback: Callable[[Any], Any] | None) -> Any:
    if fallback is None:
        raise Unwritable(why)
    try:
        return fallback(value)
    except Exception:  # noqa: BLE001 - even str() of a hostile object must not break a write
        return f"<unwritable {type(value).__name__}>"


def _describe(value: Any) -> str:
    """A short repr for a message (huge integers: their size; repr itself may refuse them)."""
    if isinstance(value, int) and value.bit_length() > 128:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a message must never fail
        text = f"a {type(value).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."


def _one_item(value: Any) -> Any:
    """``value.item()`` for numpy/MindSpore scalars and 1-element arrays, else a sentinel."""
    size = getattr(value, "size", None)
    if size is None or not hasattr(value, "item"):
        return _NOT_A_NUMBER
    try:
        if callable(size):  # MindSpore Tensor.size is a property; some libraries use a method
            size = size()
        if int(size) != 1:
            return _NOT_A_NUMBER
        return value.item()  # MindSpore's item() works for bfloat16, where asnumpy() gives no Python number
    except Exception:  # noqa: BLE001 - a strange value must never break logging
        return _NOT_A_NUMBER


def _array_items(value: Any) -> Any:
    """A multi-element array as a (nested) list, else a sentinel."""
    try:
        if hasattr(value, "tolist"):
            return value.tolist()
        if hasattr(value, "asnumpy"):
            return value.asnumpy().tolist()
    except Exception:  # noqa: BLE001 - a strange value must never break logging
        return _NOT_A_NUMBER
    return _NOT_A_NUMBER
