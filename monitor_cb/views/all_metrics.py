"""The All metrics page's logic: every metric of a run, grouped by prefix, filtered, paged and pinned.

What TensorBoard's time series gives: a run's metrics grouped by the prefix of their names (``train/loss``
and ``train.loss`` in ``train``; ``eval_loss`` in ``eval`` when another ``eval_*`` exists), a regular
expression on the names and one on the runs, a few charts pinned on top. The page draws only the charts
in sight (a group's page of :data:`PAGE_SIZE`, in open groups), so a run of 5,000 metrics costs the
charts shown, not the metrics listed. No Streamlit here; ``pages/all_metrics_page.py`` draws.
"""

from __future__ import annotations

import functools
import hashlib
import io
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from monitor_cb.names import name_group

try:  # the parser ``re`` itself uses, to see a pattern's structure before running it
    from re import _constants as _re_constants  # type: ignore[attr-defined]
    from re import _parser as _re_parser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _re_constants  # type: ignore[no-redef]
    import sre_parse as _re_parser  # type: ignore[no-redef]

PAGE_SIZE = 12  # charts per page of a group (two columns of six)
MAX_PATTERN = 200  # characters of a regular expression
MAX_MATCHED = 1000  # characters of a name a pattern is matched against (a 10 kB name is matched by its head)
MAX_PINS = 24
MAX_RUNS = 10  # runs a runs pattern adds to the picked one
NO_PREFIX = ""  # the group of names with no prefix (``loss``, ``lr``): listed first
# a formula in a spreadsheet: a cell starting with one of these is run by Excel / LibreOffice when opened
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class MetricGroup:
    """One group of metrics: its prefix (``""`` for names without one) and its names, sorted."""

    prefix: str
    metrics: tuple[str, ...]

    @property
    def label(self) -> str:
        """The group's title (plain text: escape it before Markdown)."""
        return self.prefix if self.prefix != NO_PREFIX else "(no prefix)"

    @property
    def key(self) -> str:
        """A short stable id for widget keys (the prefix is user text of any length)."""
        return hashlib.sha1(self.prefix.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def prefix_of(name: str, shared: frozenset[str] = frozenset()) -> str:
    """The group of ``name``: the part before its first ``/`` or ``.`` (:func:`monitor_cb.names.name_group`);
    else before its first ``_`` when that prefix is in ``shared`` (the ``_``-prefixes more than one name has);
    else the name itself when it is such a prefix (``loss`` beside ``loss_scale``); else :data:`NO_PREFIX`."""
    group = name_group(name)
    if group:
        return group
    head = name.split("_", 1)[0] if "_" in name else name
    return head if head and head in shared else NO_PREFIX


def numeric_metrics(frame: pd.DataFrame) -> list[str]:
    """The frame's metric columns (:func:`monitor_cb.analysis.series.metric_columns`) from its dtypes at once:
    5,000 columns in milliseconds, not the 0.7 s a Series per column takes."""
    from monitor_cb.analysis.series import INDEX_COLUMNS

    return [c for c, dtype in frame.dtypes.items() if c not in INDEX_COLUMNS and _numeric(dtype)]


def _numeric(dtype: Any) -> bool:
    if isinstance(dtype, np.dtype):
        return dtype.kind in "biufc"
    return bool(pd.api.types.is_numeric_dtype(dtype))


def group_metrics(names: Iterable[str]) -> list[MetricGroup]:
    """The names grouped by prefix: names without a prefix first, then the groups by prefix, each sorted
    (remembered for the last few lists: every rerun of the page asks again)."""
    return list(_grouped(tuple(dict.fromkeys(names))))


@functools.lru_cache(maxsize=8)
def _grouped(names: tuple[str, ...]) -> tuple[MetricGroup, ...]:
    heads: dict[str, int] = {}
    for name in names:
        if not name_group(name):
            head = name.split("_", 1)[0]
            heads[head] = heads.get(head, 0) + 1
    shared = frozenset(h for h, n in heads.items() if n > 1 and h)
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(prefix_of(name, shared), []).append(name)
    order = sorted(groups, key=lambda p: (p != NO_PREFIX, p.lower(), p))
    return tuple(MetricGroup(p, tuple(sorted(groups[p], key=_natural))) for p in order)


def _natural(name: str) -> tuple[Any, ...]:
    """``layer2`` before ``layer10``; case-insensitive first, then exact (names differing only in case both stay)."""
    parts = re.split(r"(\d+)", name.lower())
    return (tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts if p), name)


@dataclass(frozen=True)
class NameFilter:
    """A compiled filter, or the reason there is none (``error``: a sentence for the user)."""

    pattern: re.Pattern[str] | None = None
    error: str | None = None

    def matches(self, text: str) -> bool:
        return self.pattern is None or self.pattern.search(text[:MAX_MATCHED]) is not None

    def keep(self, names: Iterable[str]) -> list[str]:
        """The names the filter keeps (all of them without a pattern, and none with an error)."""
        if self.error is not None:
            return []
        return [n for n in names if self.matches(n)]


def compile_filter(text: str | None) -> NameFilter:
    """A case-insensitive regular expression searched in each name; empty text keeps everything.

    A pattern that could take exponential time on a long name (a repeat inside a repeat, ``(a+)+``; a back
    reference) is refused with a message rather than run: the names come from a shared log root.
    """
    text = (text or "").strip()
    if not text:
        return NameFilter()
    if len(text) > MAX_PATTERN:
        return NameFilter(error=f"The pattern is {len(text):,} characters long; at most {MAX_PATTERN} are allowed.")
    try:
        pattern = re.compile(text, re.IGNORECASE)
    except re.error as exc:
        return NameFilter(error=f"Not a regular expression: {exc.msg} at position {exc.pos}.")
    risky = _risky(text)
    if risky:
        return NameFilter(error=f"This pattern is refused: {risky}. Write it without that.")
    return NameFilter(pattern)


def _risky(text: str) -> str | None:
    """Why ``text`` could backtrack for ever (nested repeats, alternatives in a repeat, back references), None
    when it cannot. (A single-character alternative, ``(a|b)*``, is a set, ``[ab]*``, and passes.)"""
    try:
        tree = _re_parser.parse(text, re.IGNORECASE)
    except re.error:  # pragma: no cover - compiled above
        return "it does not parse"
    return _walk(list(tree), inside_repeat=False)


_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}


def _walk(items: list[Any], inside_repeat: bool) -> str | None:
    for op, arg in items:
        name = str(op)
        if name in ("GROUPREF", "GROUPREF_EXISTS"):
            return "a back reference"
        if name in _REPEATS:
            _low, high, body = arg
            unbounded = high > 1 and (high == _re_constants.MAXREPEAT or high > 100)
            if inside_repeat and unbounded:
                return "a repeat inside a repeat"
            found = _walk(list(body), inside_repeat or unbounded)
        elif name == "SUBPATTERN":
            found = _walk(list(arg[-1]), inside_repeat)
        elif name == "BRANCH":
            if inside_repeat:
                return "alternatives inside a repeat"
            found = next((r for r in (_walk(list(b), inside_repeat) for b in arg[1]) if r), None)
        elif name in ("ASSERT", "ASSERT_NOT"):
            found = _walk(list(arg[1]), inside_repeat)
        else:
            found = None
        if found:
            return found
    return None


def page_count(n: int, size: int = PAGE_SIZE) -> int:
    """How many pages ``n`` charts take (at least one)."""
    return max(1, -(-n // size))


def page_of(metrics: Sequence[str], page: int, size: int = PAGE_SIZE) -> tuple[str, ...]:
    """The metrics on page ``page`` (1-based, clamped to the pages there are)."""
    page = min(max(1, int(page)), page_count(len(metrics), size))
    return tuple(metrics[(page - 1) * size : page * size])


def pins_from(values: Iterable[str], available: Iterable[str]) -> tuple[str, ...]:
    """The pinned names (``?pin=`` values) that the drawn runs have, in order, each once, at most :data:`MAX_PINS`."""
    have = set(available)
    return tuple(v for v in dict.fromkeys(values) if v in have)[:MAX_PINS]


def toggled(pins: Sequence[str], metric: str) -> tuple[str, ...]:
    """``pins`` with ``metric`` added at the end, or removed when it was there."""
    if metric in pins:
        return tuple(p for p in pins if p != metric)
    return (*pins, metric)[:MAX_PINS]


def runs_matching(runs: Sequence[Any], flt: NameFilter, picked: Any) -> tuple[list[Any], int]:
    """The picked run, then the runs whose name or id the pattern finds (at most :data:`MAX_RUNS` of them);
    and how many matched in all. No pattern: the picked run alone."""
    if flt.pattern is None or flt.error is not None:
        return ([picked] if picked is not None else []), 0
    matched = [r for r in runs if flt.matches(str(r.name)) or flt.matches(str(r.id))]
    others = [r for r in matched if picked is None or r.id != picked.id]
    head = [picked] if picked is not None else []
    return head + others[:MAX_RUNS], len(matched)


def union_metrics(columns: Iterable[Iterable[str]]) -> list[str]:
    """Every metric any of the runs has, in first-seen order."""
    seen: dict[str, None] = {}
    for names in columns:
        seen.update(dict.fromkeys(names))
    return list(seen)


def safe_cell(text: str) -> str:
    """A CSV cell a spreadsheet shows as text: one starting with ``=``, ``+``, ``-``, ``@`` gets a leading ``'``."""
    return "'" + text if text.startswith(_FORMULA_START) else text


def chart_csv(parts: Sequence[tuple[str, pd.DataFrame, Any]], metric: str) -> bytes:
    """The rows behind one chart as CSV: per run (``run`` column when several) its step, time and value where
    the metric was logged (``NaN`` for a logged NaN). ``parts``: (run label, frame, masks) each. Names and run
    labels are user text: cells that would be a formula in a spreadsheet are quoted as text."""
    from monitor_cb.views.chart_data import chart_rows

    frames = []
    for label, frame, masks in parts:
        rows = chart_rows(frame, masks, [metric]).frame
        if len(parts) > 1:
            rows.insert(0, "run", safe_cell(str(label)))
        frames.append(rows)
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    table.columns = [safe_cell(str(c)) for c in table.columns]
    buffer = io.StringIO()
    table.to_csv(buffer, index=False, na_rep="NaN")
    return buffer.getvalue().encode("utf-8")


class FigureCache:
    """The figures drawn lately, keyed on the runs' data versions, the metric and the chart options: opening a
    group or a page reruns the script, and the charts already drawn are not built again. (Also the metric
    names per data version: the dtypes of a 5,000-column frame take tens of milliseconds.)"""

    def __init__(self, size: int = 512) -> None:
        self._size = size
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any, build: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = build()
        with self._lock:
            self._items[key] = value
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return value


__all__ = [
    "MAX_PINS",
    "MAX_RUNS",
    "PAGE_SIZE",
    "FigureCache",
    "MetricGroup",
    "NameFilter",
    "chart_csv",
    "compile_filter",
    "group_metrics",
    "numeric_metrics",
    "page_count",
    "page_of",
    "pins_from",
    "prefix_of",
    "runs_matching",
    "safe_cell",
    "toggled",
    "union_metrics",
]
