"""The one sentence every page and command uses for a run's bad lines.

A bad line is either skipped (bad JSON, a bad step: nothing of it is kept) or partly read (a text
value under a numeric key: the line is kept without that value). "3 corrupt line(s) were skipped"
said the second kind was lost too; the note tells them apart.
"""

from __future__ import annotations


def bad_lines_note(bad: int, partial: int = 0) -> str | None:
    """``"3 corrupt lines skipped, 2 lines partly read (bad values dropped)"``; None when all lines were read.

    Args:
        bad: every line with a problem (skipped or partly read), as ``RunInfo.bad_lines`` counts them.
        partial: how many of those were partly read.
    """
    bad, partial = max(int(bad or 0), 0), max(int(partial or 0), 0)
    partial = min(partial, bad)
    skipped = bad - partial
    parts = []
    if skipped:
        parts.append(f"{skipped:,} corrupt line{'s' if skipped != 1 else ''} skipped")
    if partial:
        dropped = "bad values dropped" if partial != 1 else "a bad value dropped"
        parts.append(f"{partial:,} line{'s' if partial != 1 else ''} partly read ({dropped})")
    return ", ".join(parts) or None
