"""The chart note that says why a run has no gradient norm and how to log it."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from monitor_cb.charts.notes import add_note, grad_norm_note


def test_no_note_when_the_norm_was_logged() -> None:
    assert grad_norm_note(["step", "loss", "grad_norm"], {"train_cell": "TrainOneStepCell"}) is None


@pytest.mark.parametrize(
    ("meta", "says"),
    [
        ({"train_cell": "TrainOneStepCell", "output_layout": "plain"}, "its train cell (TrainOneStepCell)"),
        ({"train_cell": "TrainOneStepWithLossScaleCell", "output_layout": "loss_scale"}, "grad_norm_model"),
        ({"train_cell": "MFTrainOneStepCell", "output_layout": "mindformers"}, "use_clip_grad: True"),
        ({"source_format": "tensorboard"}, "use_clip_grad: True"),  # MindFormers' event files
        ({"config": {"source_format": "tensorboard"}}, "use_clip_grad: True"),  # ... imported with import-tb
        ({"source_format": "mindformers_log"}, "use_clip_grad: True"),  # MindFormers' own log (info.log, worker_N.log)
        ({}, "global_grad_norm(grads)"),  # no train cell known: a custom loop or another tool's log
        (None, "grad_norm_model"),
    ],
)
def test_the_reason_follows_the_recorded_train_cell(meta: dict | None, says: str) -> None:
    note = grad_norm_note(["step", "loss", "throughput"], meta)
    assert note is not None and says in note
    assert note.startswith("No gradient norm in this run")


def test_model_users_are_not_sent_to_mindformers_just_because_it_is_installed() -> None:
    note = grad_norm_note(["loss"], {"train_cell": "TrainOneStepCell", "mindformers_version": "1.9.0"})
    assert note is not None and "grad_norm_model" in note and "use_clip_grad" not in note


def test_add_note_escapes_the_text_and_breaks_lines() -> None:
    fig = add_note(go.Figure(), "cell <b>X</b>\nsecond line")
    (annotation,) = fig.layout.annotations
    assert annotation.text == "cell &lt;b&gt;X&lt;/b&gt;<br>second line"
    assert annotation.xref == "paper" and annotation.showarrow is False
