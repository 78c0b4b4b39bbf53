"""The compare page's run filter: words (every one must match, as on the live page) or a glob pattern."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Any

_GLOB = set("*?[")


def filter_runs(runs: Iterable[Any], text: str) -> list[Any]:
    """Runs matching ``text``: with ``*``, ``?`` or ``[`` a case-insensitive glob on the id or the name
    (``run0*``, ``*lr1e-3*``), else runs whose id, name or status contains every word."""
    from monitor_cb.views.runlist import filter_runs as by_words

    text = text.strip()
    if not text or not (_GLOB & set(text)):
        return by_words(runs, text)
    pattern = text.lower()
    return [
        r
        for r in runs
        if fnmatch.fnmatchcase(r.id.lower(), pattern) or fnmatch.fnmatchcase(str(r.name).lower(), pattern)
    ]
