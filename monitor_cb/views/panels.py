"""The live page's chart panels: which exist, which metrics each draws, which a run can fill.

The charts ask for roles, not names (:mod:`monitor_cb.analysis.roles`): "Loss and learning rate" draws
the metrics that play the training loss and the learning rate in this run, whatever their names
(``loss``, ``train/loss``, YOLO's three component losses together).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from monitor_cb.analysis.roles import Casting, automatic


@dataclass(frozen=True)
class Panel:
    """One chart of the live page: a title, the roles on its left and right axes, the columns it needs."""

    key: str
    title: str
    needs: tuple[str, ...]  # shown when the frame has any of these columns (or a metric playing one of ``roles``)
    left: tuple[str, ...] = ()  # roles drawn on the left axis
    right: tuple[str, ...] = ()  # roles drawn on the right axis
    roles: tuple[str, ...] = ()  # shown when a metric plays one of these roles


PANELS: tuple[Panel, ...] = (
    Panel("loss_lr", "Loss and learning rate", (), ("loss",), ("lr",), ("loss", "lr")),
    Panel(
        "speed_grad",
        "Throughput and gradient norm",
        (),
        ("throughput",),
        ("grad_norm",),
        ("throughput", "grad_norm"),
    ),
    Panel("eval", "Eval metrics against train loss", (), roles=("eval_loss", "eval_metric")),
    Panel("components", "Component losses", ("loss_*",)),
    Panel("timing", "Data and step time", ("data_time",), roles=("step_time",)),
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


def panels_for(columns: Iterable[str], casting: Casting | None = None) -> list[Panel]:
    """The panels this run can fill (the custom panel always); ``casting``: the run's roles (default by name)."""
    cols = [str(c) for c in columns]
    casting = casting if casting is not None else automatic(cols)
    parts = [c for c in cols if c != "loss_scale"]  # loss_scale is not a loss component
    # the components chart is the total with its parts: without a total, the parts are the loss chart
    has_total = "loss" in casting.of("loss")
    shown = []
    for p in PANELS:
        if p.key == "components" and not has_total:
            continue
        if not (p.needs or p.roles) or any(casting.of(r) for r in p.roles) or any(_has(parts, n) for n in p.needs):
            shown.append(p)
    return shown


def panel_metrics(panel: Panel, casting: Casting) -> tuple[list[str], list[str]]:
    """The metrics ``panel`` draws on its left and right axes in a run cast as ``casting``."""
    left = [m for role in panel.left for m in casting.of(role)]
    right = [m for role in panel.right for m in casting.of(role)]
    return left, right


def panel_columns(
    key: str,
    columns: Iterable[str],
    custom: tuple[Iterable[str], Iterable[str]] = ((), ()),
    casting: Casting | None = None,
) -> list[str]:
    """The metric columns chart ``key`` draws from a frame with ``columns``, in the frame's order
    (for "download the data behind this chart"); ``custom``: the custom chart's left and right metrics."""
    cols = [c for c in columns if c not in ("step", "t", "rank", "seg")]
    casting = casting if casting is not None else automatic(cols)
    if key == "custom":
        wanted = {*custom[0], *custom[1]}
        return [c for c in cols if c in wanted]
    panel = next((p for p in PANELS if p.key == key), None)
    if panel is None:
        return []
    roles = (*panel.roles, "loss") if key == "eval" else panel.roles  # eval metrics are drawn against loss
    by_role = {m for role in roles for m in casting.of(role)}
    patterns = (*panel.needs, "loss") if key == "components" else panel.needs
    picked = [c for c in cols if c in by_role or any(_has([c], n) for n in patterns)]
    return [c for c in picked if not (key == "components" and c == "loss_scale")]
