"""Notes a chart shows about what it lacks: a missing series says why it is missing and how to get it.

``grad_norm_note`` is the text (plain, pure: the run's columns and metadata in, lines out);
``add_note`` writes it onto a figure as an annotation, escaped, one line per ``\\n``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import plotly.graph_objects as go

from monitor_cb.charts.style import escape_html

NOTE_COLOR = "#666666"
_GRAD_NORM_MODEL = "model = monitor_cb.grad_norm_model(net, loss_fn, optimizer)  # instead of Model(...)"
_CUSTOM_LOOP = "writer.log(..., grad_norm=monitor_cb.global_grad_norm(grads))"
_MINDFORMERS = "runner_wrapper: use_clip_grad: True  (in the YAML; max_grad_norm sets the clip)"


def grad_norm_note(columns: Iterable[str], meta: Mapping[str, Any] | None) -> str | None:
    """Why a run has no gradient norm and the one line that logs it; None when it has one.

    The reason follows what the collector recorded about the train cell (``meta["train_cell"]``,
    ``meta["output_layout"]``): MindFormers' cell (norm only with clipping on), a ``Model`` train cell
    that returns the loss only, or no train cell at all (a custom loop, an imported log).
    """
    if "grad_norm" in set(columns):
        return None
    meta = meta or {}
    cell = str(meta.get("train_cell") or "")
    if _from_mindformers(meta, cell):
        return (
            "No gradient norm in this run: MindFormers reports it only while gradient clipping is on.\n"
            f"To log it: {_MINDFORMERS}"
        )
    if cell:
        return (
            f"No gradient norm in this run: its train cell ({cell}) returns the loss only.\n"
            f"To log it with Model.train: {_GRAD_NORM_MODEL}"
        )
    return f"No gradient norm in this run.\nWith Model.train: {_GRAD_NORM_MODEL}\nIn a custom loop: {_CUSTOM_LOOP}"


def _from_mindformers(meta: Mapping[str, Any], cell: str) -> bool:
    """MindFormers' train cell, MindFormers' TensorBoard events (read directly or imported) or its own log."""
    config = meta.get("config")
    imported = isinstance(config, Mapping) and config.get("source_format") == "tensorboard"
    return (
        meta.get("output_layout") == "mindformers"
        or cell.startswith("MF")
        or meta.get("source_format") in ("tensorboard", "mindformers_log")
        or imported
    )


def add_note(fig: go.Figure, text: str) -> go.Figure:
    """``text`` as a grey note at the bottom of the plot area (user text escaped; ``\\n`` breaks lines).

    A :class:`~monitor_cb.charts.prepared.PreparedFigure` just built (not yet shown to anyone) gets it
    in its dict."""
    from monitor_cb.charts.prepared import PreparedFigure

    note = note_annotation(text)
    if isinstance(fig, PreparedFigure):
        layout = fig.to_dict()["layout"]
        layout["annotations"] = [*(layout.get("annotations") or ()), note]
        return fig
    fig.add_annotation(**note)
    return fig


def note_annotation(text: str) -> dict[str, Any]:
    """The note's annotation dict (see :func:`add_note`)."""
    lines = "<br>".join(escape_html(line) for line in text.split("\n"))
    return {
        "text": lines,
        "xref": "paper",
        "yref": "paper",
        "x": 0.5,
        "y": 0.02,
        "xanchor": "center",
        "yanchor": "bottom",
        "showarrow": False,
        "align": "left",
        "font": {"size": 11, "color": NOTE_COLOR},
        "bgcolor": "rgba(255,255,255,0.85)",
        "name": "monitor_note",
    }
