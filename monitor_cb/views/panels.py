"""The live page's chart panels: which exist, which the columns of a run can fill."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Panel:
    """One chart of the live page: a title, the builder preset and the columns it needs."""

    key: str
    title: str
    needs: tuple[str, ...]  # shown when the frame has any of these columns
    left: tuple[str, ...] = ()
    right: tuple[str, ...] = ()


PANELS: tuple[Panel, ...] = (
    Panel("loss_lr", "Loss and learning rate", ("loss", "lr"), ("loss",), ("lr",)),
    Panel("speed_grad", "Throughput and gradient norm", ("throughput", "grad_norm"), ("throughput",), ("grad_norm",)),
    Panel("eval", "Eval metrics against train loss", ("eval_*",)),
    Panel("components", "Component losses", ("loss_*",)),
    Panel("timing", "Data and step time", ("step_time", "data_time")),
    Panel("memory", "Memory", ("mem_device", "mem_device_peak", "mem_host_rss")),
    Panel("custom", "Custom: choose the metric on each axis", ()),
)


PANEL_KEYS = tuple(p.key for p in PANELS)
DEFAULT_PANELS = ("loss_lr", "speed_grad", "eval")


def _has(columns: Iterable[str], pattern: str) -> bool:
    if pattern.endswith("*"):
        prefix = pattern[:-1]
        return any(c.startswith(prefix) and c != prefix.rstrip("_") for c in columns)
    return pattern in columns


def panels_for(columns: Iterable[str]) -> list[Panel]:
    """The panels this run can fill (the custom panel always)."""
    cols = list(columns)
    cols = [c for c in cols if c != "loss_scale"]  # loss_scale is not a loss component
    return [p for p in PANELS if not p.needs or any(_has(cols, n) for n in p.needs)]


def panel_columns(
    key: str, columns: Iterable[str], custom: tuple[Iterable[str], Iterable[str]] = ((), ())
) -> list[str]:
    """The metric columns chart ``key`` draws from a frame with ``columns``, in the frame's order
    (for "download the data behind this chart"); ``custom``: the custom chart's left and right metrics."""
    cols = [c for c in columns if c not in ("step", "t", "rank", "seg")]
    if key == "custom":
        wanted = {*custom[0], *custom[1]}
        return [c for c in cols if c in wanted]
    panel = next((p for p in PANELS if p.key == key), None)
    if panel is None:
        return []
    patterns = (*panel.needs, "loss") if key == "eval" else panel.needs  # eval metrics are drawn against loss
    picked = [c for c in cols if any(_has([c], n) for n in patterns)]
    return [c for c in picked if not (key == "components" and c == "loss_scale")]
