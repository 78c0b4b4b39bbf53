"""Records the writer accepted and never wrote, as every page and command says it.

The writer counts them in each metrics file's metadata (``dropped_records``, and by cause in
``drop_causes``: docs/FORMAT.md). A reader that shows a run's records without this count would
present a run with holes as complete; the note is the one sentence for it, plain text (no Markdown,
no HTML) built only from numbers and fixed words. Metadata comes from disk and may hold anything: a
count that is not a non-negative integer is ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_COUNT_LIMIT = 1 << 63
# The writer's causes (monitor_cb.train.run_meta.DROP_CAUSES) in the words a reader sees.
CAUSE_TEXT = {
    "queue_full_producer": "queue full: logged faster than the writer thread could write",
    "queue_full_disk": "queue full: the disk was slow or hung",
    "disk_error": "disk errors",
    "unwritten_at_close": "not written at close: the disk hung",
    "unencodable": "values that could not be encoded",
    "after_close": "logged after close",
    "file_deleted": "written to a file deleted while training",
}


@dataclass(frozen=True)
class WriterDrops:
    """Records dropped by the writers of a run: the total and ``(cause, count)`` for each known cause."""

    total: int = 0
    causes: tuple[tuple[str, int], ...] = ()

    def __bool__(self) -> bool:
        return self.total > 0


def writer_drops(metas: Iterable[Mapping[str, Any]]) -> WriterDrops:
    """The drops of every metadata file of a run (one per rank and writer), summed."""
    total = 0
    causes = dict.fromkeys(CAUSE_TEXT, 0)
    for meta in metas:
        dropped = _count(meta.get("dropped_records"))
        if not dropped:
            continue
        total += dropped
        given = meta.get("drop_causes")
        if isinstance(given, Mapping):
            for cause in CAUSE_TEXT:
                causes[cause] += _count(given.get(cause))
    return WriterDrops(total, tuple((c, n) for c, n in causes.items() if n))


def drop_note(drops: WriterDrops) -> str | None:
    """``"1,234 records were dropped by the writer (queue full: the disk was slow or hung: 1,000; disk errors: 234)"``;
    None when none were."""
    if not drops.total:
        return None
    parts = [f"{CAUSE_TEXT[c]}: {n:,}" for c, n in drops.causes if c in CAUSE_TEXT]
    told = sum(n for _, n in drops.causes)
    if told < drops.total:
        parts.append(f"cause not recorded: {drops.total - told:,}" if parts else "queue full or disk errors")
    noun = "record was" if drops.total == 1 else "records were"
    return f"{drops.total:,} {noun} dropped by the writer ({'; '.join(parts)})"


def _count(value: Any) -> int:
    return value if type(value) is int and 0 <= value < _COUNT_LIMIT else 0
