"""Metric families: series that share a prefix and differ by a parameter or layer name (pure, no I/O).

MindFormers' TrainingStateMonitor writes one series per parameter (``local_norm/<param>``,
``adam_m_norm/<param>``, ``max_attention_logit/<param>``), our callback ``grad_norm/<param>``, and
MindSpore's SummaryCollector per-parameter histograms ``<param>/auto``. A model has hundreds to
thousands of them; shown as one heatmap they answer "which layer" at a glance, so they are grouped
here and ordered as the model names its layers (natural order: ``layers.2`` before ``layers.10``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

_DIGITS = re.compile(r"(\d+)")
MIN_MEMBERS = 2  # a prefix shared by one name only is not a family
# a family whose prefix is a shared suffix (``<param>/auto``) is named ``*/auto``
SUFFIX_MARK = "*/"


@dataclass(frozen=True)
class Family:
    """One family: its name, its members (parameter names) and their frame columns, in model order.

    Attributes:
        name: the shared prefix (``"local_norm"``), or ``"*/auto"`` for a shared suffix.
        members: the part that differs (``"model.layers.0.attention.wq.weight"``), natural order.
        columns: the frame column of each member, same order.
    """

    name: str
    members: tuple[str, ...]
    columns: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.members)

    def column_of(self, member: str) -> str:
        """The frame column of ``member`` (KeyError when it is not in this family)."""
        try:
            return self.columns[self.members.index(member)]
        except ValueError:
            raise KeyError(f"{member!r} is not a member of family {self.name!r}") from None


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key reading runs of digits as numbers: ``layers.2`` < ``layers.10``."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in _DIGITS.split(name) if part)


def find_families(columns: Iterable[str], min_members: int = MIN_MEMBERS) -> list[Family]:
    """The families among ``columns``, largest first (then by name).

    A column ``prefix/member`` joins the family of its first path part; columns left in a family of
    fewer than ``min_members`` are grouped by their last part instead (``<param>/auto``). Columns
    without ``/`` belong to no family. Each column is in at most one family.
    """
    by_prefix: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for column in dict.fromkeys(columns):
        prefix, sep, member = column.partition("/")
        if sep and prefix and member:
            by_prefix[prefix].append((member, column))
    families = [_family(prefix, rows) for prefix, rows in by_prefix.items() if len(rows) >= min_members]
    by_suffix: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for rows in (rows for rows in by_prefix.values() if len(rows) < min_members):
        for _, column in rows:
            member, _, suffix = column.rpartition("/")
            by_suffix[suffix].append((member, column))
    families += [_family(SUFFIX_MARK + s, rows) for s, rows in by_suffix.items() if len(rows) >= min_members]
    return sorted(families, key=lambda f: (-len(f), f.name))


# a parameter as a model names it: a dotted path (``model.layers.0.attention.wq.weight``, ``conv1.weight``)
_PARAMETER = re.compile(r"[A-Za-z_][\w-]*(?:\.[\w-]+)+")


def looks_like_parameters(family: Family) -> bool:
    """Whether most members are parameter paths: a family of layers, not a prefix that groups a run's
    own metrics (HF's ``train/loss``, ``train/epoch``; ``eval/runtime``; YOLO's ``metrics/recall``)."""
    named = sum(1 for member in family.members if _PARAMETER.fullmatch(member))
    return named * 2 > len(family)


def parameter_families(columns: Iterable[str], exclude: Iterable[str] = ()) -> list[Family]:
    """The families among ``columns`` whose members are mostly parameters, leaving out ``exclude`` (the
    columns that play a role of the run, such as its loss: a run's loss is never a layer of itself)."""
    excluded = set(exclude)
    return [f for f in find_families(c for c in columns if c not in excluded) if looks_like_parameters(f)]


def family_named(columns: Iterable[str], name: str) -> Family | None:
    """The family called ``name`` among ``columns``, None when there is none."""
    return next((f for f in find_families(columns) if f.name == name), None)


def _family(name: str, rows: list[tuple[str, str]]) -> Family:
    rows = sorted(rows, key=lambda row: (natural_key(row[0]), row[1]))
    return Family(name, tuple(m for m, _ in rows), tuple(c for _, c in rows))
