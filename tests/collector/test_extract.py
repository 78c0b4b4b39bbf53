"""Pure output parsing: one named function per layout, table-driven; loss shapes; eval results."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monitor_cb.train.extract import (
    LAYOUTS,
    eval_metrics,
    layout_for_cell,
    loss_metrics,
    parse_outputs,
    to_float,
)


class FakeTensor:
    """Quacks like a MindSpore Tensor: only ``asnumpy()``."""

    def __init__(self, value: object) -> None:
        self.value = np.asarray(value, dtype=np.float32)

    def asnumpy(self) -> np.ndarray:
        return self.value


T = FakeTensor
# (layout, outputs, expected metrics)
LAYOUT_CASES = [
    ("plain", T(2.5), {"loss": 2.5}),
    ("plain", (T(2.5), "ignored"), {"loss": 2.5}),
    ("plain", {"loss": T(3.0), "cls": T(1.0), "box": T(2.0)}, {"loss": 3.0, "loss_cls": 1.0, "loss_box": 2.0}),
    ("grad_norm", (T(1.5), T(0.25)), {"loss": 1.5, "grad_norm": 0.25}),
    ("loss_scale", (T(1.5), T(False), T(1024.0)), {"loss": 1.5, "overflow": False, "loss_scale": 1024.0}),
    ("loss_scale", (T(1.5), np.bool_(True), 512.0), {"loss": 1.5, "overflow": True, "loss_scale": 512.0}),
    (
        "loss_scale_grad_norm",
        (T(1.5), T(True), T(1024.0), T(float("inf"))),
        {"loss": 1.5, "overflow": True, "loss_scale": 1024.0, "grad_norm": math.inf},
    ),
    (
        "mindformers",
        (T(1.5), T(False), T(4096.0), T(1e-4), T(0.75)),
        {"loss": 1.5, "overflow": False, "loss_scale": 4096.0, "lr": 1e-4, "grad_norm": 0.75},
    ),
    (  # clipping off: global_norm is None
        "mindformers",
        (T(1.5), T(True), T(4096.0), T(1e-4), None),
        {"loss": 1.5, "overflow": True, "loss_scale": 4096.0, "lr": 1e-4},
    ),
    (  # the 7-element form with local norms
        "mindformers",
        (T(1.5), T(False), T(1.0), T(2e-5), T(3.0), T([1.0, 2.0]), T([4, 4])),
        {"loss": 1.5, "overflow": False, "loss_scale": 1.0, "lr": 2e-5, "grad_norm": 3.0},
    ),
]


@pytest.mark.parametrize(("layout", "outputs", "expected"), LAYOUT_CASES)
def test_each_layout_parses_its_outputs(layout: str, outputs: object, expected: dict) -> None:
    got = parse_outputs(layout, outputs)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-6) if isinstance(value, float) else got[key] is value


def test_every_layout_has_a_case() -> None:
    assert {case[0] for case in LAYOUT_CASES} == set(LAYOUTS)


def test_same_tuple_length_means_different_things_per_layout() -> None:
    five = (T(1.0), T(0.0), T(8.0), T(0.1), T(2.0))
    assert parse_outputs("plain", five) == {"loss": 1.0}
    assert parse_outputs("mindformers", five)["grad_norm"] == 2.0
    assert parse_outputs("plain", five, names=["loss", "a", "b", "c", "d"])["loss_d"] == 2.0


def test_unknown_layout_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="grad_norm"):
        parse_outputs("yolo", T(1.0))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (2.0, {"loss": 2.0}),
        (np.float32(2.0), {"loss": 2.0}),
        (np.array(2.0), {"loss": 2.0}),
        (np.array([2.0]), {"loss": 2.0}),
        (T(float("nan")), {"loss": math.nan}),
        ([T(2.0), T(9.0)], {"loss": 2.0}),
        ({"cls": 1.0, "loss_box": 2.0, "iou": 0.5}, {"loss_cls": 1.0, "loss_box": 2.0, "loss_iou": 0.5, "loss": 3.5}),
        ({"total_loss": 4.0, "cls": 1.0}, {"loss": 4.0, "loss_cls": 1.0}),
    ],
)
def test_loss_from_every_container(value: object, expected: dict) -> None:
    got = loss_metrics(value)
    assert got.keys() == expected.keys()
    for key, want in expected.items():
        assert got[key] == pytest.approx(want, nan_ok=True)


def test_named_tuple_components_sum_to_the_total() -> None:
    got = loss_metrics((T(1.0), T(2.0), T(0.5)), names=("cls", "box", "iou"))
    assert got == {"loss_cls": 1.0, "loss_box": 2.0, "loss_iou": 0.5, "loss": 3.5}


def test_to_float_refuses_arrays() -> None:
    with pytest.raises(TypeError, match="3 elements"):
        to_float(np.zeros(3))


class TrainOneStepWithLossScaleCell:  # stands in for MindSpore's class by name
    pass


class MFTrainOneStepCell(TrainOneStepWithLossScaleCell):
    pass


class MyMFLikeCell(MFTrainOneStepCell):
    pass


class TrainOneStepWithLossScaleAndGradNorm(TrainOneStepWithLossScaleCell):
    pass


class Declared:
    output_layout = "grad_norm"


def test_layout_for_cell_by_declaration_then_most_specific_class_name() -> None:
    assert layout_for_cell(Declared()) == "grad_norm"
    assert layout_for_cell(MyMFLikeCell()) == "mindformers"
    assert layout_for_cell(MFTrainOneStepCell) == "mindformers"
    assert layout_for_cell(TrainOneStepWithLossScaleCell()) == "loss_scale"
    assert layout_for_cell(TrainOneStepWithLossScaleAndGradNorm()) == "loss_scale_grad_norm"
    assert layout_for_cell(object()) == "plain"
    assert layout_for_cell(None) == "plain"


def test_eval_metrics_prefix_and_prefer_the_mean_loss_metric() -> None:
    results = {"eval_loss": 9.0, "loss": 1.25, "acc": np.float64(0.5), "confusion": np.zeros((2, 2))}
    assert eval_metrics(results) == {"eval_loss": 1.25, "eval_acc": 0.5}
    assert eval_metrics(None) == {}
    assert eval_metrics({"eval_loss": 2.0}) == {"eval_loss": 2.0}


def test_eval_metrics_keep_every_number_and_skip_what_is_not_one() -> None:
    import decimal

    results = {"acc": np.float64(0.5), "dec": decimal.Decimal("0.25"), "big": 10**400, "vec": np.ones(3)}
    assert eval_metrics(results) == {"eval_acc": 0.5, "eval_dec": 0.25}


def test_a_non_scalar_component_is_skipped_when_the_total_is_known() -> None:
    out = loss_metrics({"loss": np.float32(3.0), "cls": np.float64(1.0), "per_sample": np.ones(4)})
    assert out == {"loss": 3.0, "loss_cls": 1.0}
    with pytest.raises(TypeError, match="per_sample"):  # without the total, the sum of the rest would lie
        loss_metrics({"cls": 1.0, "per_sample": np.ones(4)})
