"""Run colours that a person can tell apart, and that stay with a run while the view changes.

:data:`RUN_PALETTE` holds 24 colours, every pair at least 13 CIEDE2000 apart (the first 12 at
least 17; :mod:`monitor_cb.testing.colordiff` measures it, the tests check it), none near the red
kept for NaN markers and thresholds, all dark enough to read on white. It starts with D3's
category colours (red left out) and continues with the colours of well-known palettes (Tableau,
ColorBrewer, Okabe-Ito, Kelly) that are farthest from those already chosen.

:func:`run_colors` hands them out: the first run takes the first colour, the second the second,
and so on, so a view of a few runs gets the most distinct ones. Passing the mapping a view used
before (``previous``) keeps every run's colour when a run is added or removed; without it, runs
are placed in sorted id order, so the same set of runs always gets the same colours (the compare
page and its HTML report included).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

RUN_PALETTE = (
    "#1f77b4",  # blue
    "#ff7f0e",  # orange
    "#2ca02c",  # green
    "#9467bd",  # purple
    "#8c564b",  # brown
    "#e377c2",  # pink
    "#7f7f7f",  # grey
    "#bcbd22",  # olive
    "#17becf",  # cyan
    "#ff9896",  # salmon
    "#008080",  # teal
    "#8c6d31",  # ochre
    "#00429d",  # navy
    "#93003a",  # crimson
    "#9c9ede",  # periwinkle
    "#7b4173",  # plum
    "#bab0ac",  # warm grey
    "#637939",  # moss
    "#e6ab02",  # mustard
    "#654522",  # dark brown
    "#1b9e77",  # jade
    "#c2b280",  # buff
    "#e7298a",  # magenta
    "#56b4e9",  # sky blue
)


def run_colors(run_ids: Sequence[str], previous: Mapping[str, str] | None = None) -> dict[str, str]:
    """A colour per run id, as distinct as the palette allows and sticky across calls.

    Args:
        run_ids: the runs in the view (order does not matter; duplicates are ignored).
        previous: colours given earlier in this view (may name runs no longer shown); a run keeps
            its colour when the colour is still in the palette and no other kept run has it.

    Returns:
        run id -> ``#rrggbb``, for every id of ``run_ids``. New runs take, in sorted id order, the
        first palette colour no run of the view has; past 24 runs colours repeat, least used first.
    """
    ids = sorted(set(run_ids))
    chosen: dict[str, str] = {}
    for run_id in ids:  # sticky colours first; sorted, so a clash is settled the same way every time
        color = str((previous or {}).get(run_id) or "").lower()
        if color in RUN_PALETTE and color not in chosen.values():
            chosen[run_id] = color
    used = Counter(chosen.values())
    for run_id in ids:
        if run_id not in chosen:
            color = min(RUN_PALETTE, key=lambda c: (used[c], RUN_PALETTE.index(c)))
            chosen[run_id] = color
            used[color] += 1
    return {run_id: chosen[run_id] for run_id in dict.fromkeys(run_ids)}


def view_colors(run_ids: Sequence[str], history: Mapping[str, str] | None = None) -> dict[str, str]:
    """Colours for the runs in a view that remembers every run it showed (``history``: id -> colour).

    While the palette has a colour for every run in view and every remembered one, a run seen
    before keeps its colour and a new run takes a colour no remembered run has, so a run that comes
    back finds its colour free. Past that, only the runs in view count (:func:`run_colors` with
    ``previous``), so the runs shown together stay as distinct as the palette allows.
    """
    history = history or {}
    shown = list(dict.fromkeys(run_ids))
    everyone = list(dict.fromkeys([*shown, *history]))
    if len(everyone) <= len(RUN_PALETTE):
        given = run_colors(everyone, previous=history)
        return {run_id: given[run_id] for run_id in shown}
    return run_colors(shown, previous=history)
