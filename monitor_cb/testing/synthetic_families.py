"""Labelled synthetic runs with a per-parameter family: healthy, or one parameter blowing up first.

A healthy run of :mod:`monitor_cb.testing.synthetic` gets a family ``<prefix>/<param>`` (default
``grad_norm``, as our callback writes it; ``local_norm`` is MindFormers') of ``params`` members named
as a Llama model names them, each on its own scale and following the global gradient norm's ups and
downs (a global bump shows in every layer, so it is not a layer's own departure). A blow-up makes
one member grow geometrically from ``onset`` to ``factor`` x over ``lead`` logged points, then the
global gradient norm and the loss explode and turn NaN: the story the ``layer_origin`` finding tells.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from monitor_cb.testing.synthetic import healthy_run

_PARTS = ("attention.wq.weight", "attention.wk.weight", "attention.wv.weight", "attention.wo.weight")


@dataclass(frozen=True)
class FamilyRun:
    """A run with a family and what was injected (``culprit`` None for a healthy run)."""

    frame: pd.DataFrame
    prefix: str
    members: tuple[str, ...]
    culprit: str | None
    rise_step: int | None  # the step where the culprit starts to grow
    onset_step: int | None  # the step where the culprit first reaches 5x its level (before its noise)
    blowup_step: int | None  # the step where the global grad norm explodes


def param_names(count: int) -> tuple[str, ...]:
    """``count`` parameter names as a Llama model spells them, layer by layer."""
    return tuple(f"model.layers.{i // len(_PARTS)}.{_PARTS[i % len(_PARTS)]}" for i in range(count))


def family_run(
    seed: int,
    n_points: int = 2_000,
    params: int = 24,
    *,
    blowup: bool = False,
    prefix: str = "grad_norm",
    lead: int = 4,
    factor: float = 30.0,
    every: int = 1,
) -> FamilyRun:
    """A healthy run with a family of ``params`` members, or with one member blowing up first.

    ``every``: the family is logged every this many rows (NaN = not logged in between).
    """
    frame = healthy_run(seed, n_points).copy()
    rng = np.random.default_rng(seed + 104_729)
    members = param_names(params)
    grad = frame["grad_norm"].to_numpy(np.float64)
    shape = np.sqrt(grad / np.nanmedian(grad))  # a global bump is seen, damped, by every layer
    n = len(frame)
    values = {}
    for member in members:
        scale = 10.0 ** rng.uniform(-3, 1)
        values[member] = scale * shape * np.exp(rng.normal(0, 0.08, n))
    culprit = rise_step = onset_step = blowup_step = None
    if blowup:
        at = int(rng.integers(int(n * 0.4), int(n * 0.8)))
        at -= at % every
        culprit = members[int(rng.integers(len(members)))]
        logged_rows = np.arange(at, n, every)
        rise = factor ** (np.arange(1, lead * 2 + 2) / lead)  # reaches factor x at ``lead`` logged points on
        hit = logged_rows[: rise.size]
        values[culprit][hit] *= rise[: hit.size]
        onset = hit[int(np.argmax(rise[: hit.size] >= 5.0))]
        boom = int(hit[min(lead, hit.size - 1)])
        frame.loc[boom:, "grad_norm"] = grad[boom:] * np.geomspace(50, 1e4, n - boom)
        frame.loc[boom + 2 :, "loss"] = frame["loss"].to_numpy()[boom + 2 :] * np.linspace(2, 8, max(n - boom - 2, 0))
        for member in members:
            if member != culprit:
                values[member][boom:] *= np.geomspace(1.5, 20, n - boom)  # the rest follow, later
        end = min(n, boom + 6)
        frame.loc[end - 1, ["loss", "grad_norm"]] = [np.nan, np.inf]
        frame = frame.iloc[:end].copy()
        values = {m: v[:end] for m, v in values.items()}
        rise_step, onset_step = int(frame["step"].iloc[hit[0]]), int(frame["step"].iloc[onset])
        blowup_step = int(frame["step"].iloc[boom])
    keep = np.arange(len(frame)) % every == 0
    family = pd.DataFrame({f"{prefix}/{m}": np.where(keep, v, np.nan) for m, v in values.items()}, index=frame.index)
    frame = pd.concat([frame, family], axis=1)
    return FamilyRun(frame, prefix, members, culprit, rise_step, onset_step, blowup_step)
