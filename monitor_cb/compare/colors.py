"""Stable run colours: the same run keeps its colour on every chart of a page and across reloads."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

# Distinct, colour-blind-friendlier hues; no pure red (kept for NaN markers and thresholds).
RUN_PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
    "#393b79",
    "#637939",
    "#8c6d31",
    "#843c39",
    "#7b4173",
    "#3182bd",
    "#e6550d",
    "#31a354",
    "#756bb1",
)


def run_color(run_id: str) -> str:
    """The preferred colour of a run: a hash of its id into :data:`RUN_PALETTE`."""
    return RUN_PALETTE[zlib.crc32(run_id.encode("utf-8")) % len(RUN_PALETTE)]


def run_colors(run_ids: Sequence[str]) -> dict[str, str]:
    """A colour per run: its hashed colour unless another run of the set took it first (then the next
    free one). Runs are placed in sorted id order, so the mapping does not depend on the order picked."""
    chosen: dict[str, str] = {}
    taken: set[str] = set()
    for run_id in sorted(set(run_ids)):
        start = zlib.crc32(run_id.encode("utf-8")) % len(RUN_PALETTE)
        for k in range(len(RUN_PALETTE)):
            color = RUN_PALETTE[(start + k) % len(RUN_PALETTE)]
            if color not in taken or len(taken) >= len(RUN_PALETTE):
                break
        chosen[run_id] = color
        taken.add(color)
    return chosen
