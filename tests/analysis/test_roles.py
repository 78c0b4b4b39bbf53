"""The roles table: each framework's real metric names -> the roles the pages and detectors ask for."""

from __future__ import annotations

import pytest

from monitor_cb.analysis.roles import MAX_PLAYERS, ROLES, automatic, cast, parse_choices, role_of

# Each framework's names as its TensorBoard (or JSON) logging writes them.
FRAMEWORKS: dict[str, tuple[list[str], dict[str, tuple[str, ...]]]] = {
    "ours": (
        [
            "step",
            "t",
            "rank",
            "seg",
            "epoch",
            "loss",
            "loss_cls",
            "loss_box",
            "lr",
            "lr_group1",
            "throughput",
            "tokens_per_s",
            "step_time",
            "data_time",
            "grad_norm",
            "loss_scale",
            "eval_loss",
            "eval_accuracy",
        ],
        {
            "loss": ("loss",),
            "eval_loss": ("eval_loss",),
            "eval_metric": ("eval_accuracy",),
            "lr": ("lr", "lr_group1"),
            "grad_norm": ("grad_norm",),
            "throughput": ("throughput",),
            "step_time": ("step_time",),
            "loss_scale": ("loss_scale",),
        },
    ),
    "mindformers_tb": (  # after TAG_MAP: loss, lr, grad_norm, ...; the rest as written
        [
            "loss",
            "lr",
            "grad_norm",
            "batch_size",
            "loss_scale",
            "step_time",
            "throughput",
            "tflops_per_npu",
            "loss_lm",
            "loss_mtp",
            "local_norm/layer.0.weight",
            "samples",
        ],
        {
            "loss": ("loss",),
            "lr": ("lr",),
            "grad_norm": ("grad_norm",),
            "loss_scale": ("loss_scale",),
            "step_time": ("step_time",),
            "throughput": ("throughput",),
        },
    ),
    "summary_collector": (["loss/auto"], {"loss": ("loss/auto",)}),
    "hf_trainer": (
        [
            "train/loss",
            "train/grad_norm",
            "train/learning_rate",
            "train/epoch",
            "eval/loss",
            "eval/accuracy",
            "eval/runtime",
            "eval/samples_per_second",
            "eval/steps_per_second",
            "train/train_runtime",
            "train/train_samples_per_second",
            "train/train_steps_per_second",
            "train/total_flos",
            "train/train_loss",
        ],
        {
            "loss": ("train/loss",),
            "eval_loss": ("eval/loss",),
            "eval_metric": ("eval/accuracy",),
            "lr": ("train/learning_rate",),
            "grad_norm": ("train/grad_norm",),
        },
    ),
    "hf_trainer_json": (  # trainer_state.json's log_history keys
        [
            "loss",
            "grad_norm",
            "learning_rate",
            "epoch",
            "eval_loss",
            "eval_f1",
            "eval_runtime",
            "eval_samples_per_second",
            "eval_steps_per_second",
        ],
        {
            "loss": ("loss",),
            "eval_loss": ("eval_loss",),
            "eval_metric": ("eval_f1",),
            "lr": ("learning_rate",),
            "grad_norm": ("grad_norm",),
        },
    ),
    "lightning": (
        ["train_loss_step", "train_loss_epoch", "val_loss", "val_acc", "lr-AdamW", "epoch"],
        {"loss": ("train_loss_step",), "eval_loss": ("val_loss",), "eval_metric": ("val_acc",), "lr": ("lr-AdamW",)},
    ),
    "lightning_epoch_only": (
        ["train_loss", "val_loss", "lr-SGD/pg1", "lr-SGD/pg2"],
        {"loss": ("train_loss",), "eval_loss": ("val_loss",), "lr": ("lr-SGD/pg1", "lr-SGD/pg2")},
    ),
    "keras": (
        ["epoch_loss", "epoch_accuracy", "epoch_learning_rate", "evaluation_loss_vs_iterations"],
        {"loss": ("epoch_loss",), "lr": ("epoch_learning_rate",), "eval_loss": ("evaluation_loss_vs_iterations",)},
    ),
    "keras_history": (
        ["loss", "accuracy", "val_loss", "val_accuracy", "lr"],
        {"loss": ("loss",), "eval_loss": ("val_loss",), "eval_metric": ("val_accuracy",), "lr": ("lr",)},
    ),
    "yolov5": (
        [
            "train/box_loss",
            "train/obj_loss",
            "train/cls_loss",
            "metrics/precision",
            "metrics/recall",
            "metrics/mAP_0.5",
            "metrics/mAP_0.5:0.95",
            "val/box_loss",
            "val/obj_loss",
            "val/cls_loss",
            "x/lr0",
            "x/lr1",
            "x/lr2",
        ],
        {
            "loss": ("train/box_loss", "train/obj_loss", "train/cls_loss"),
            "eval_loss": ("val/box_loss", "val/obj_loss", "val/cls_loss"),
            "eval_metric": ("metrics/precision", "metrics/recall", "metrics/mAP_0.5", "metrics/mAP_0.5:0.95"),
            "lr": ("x/lr0", "x/lr1", "x/lr2"),
        },
    ),
    "ultralytics": (
        [
            "train/box_loss",
            "train/cls_loss",
            "train/dfl_loss",
            "lr/pg0",
            "lr/pg1",
            "lr/pg2",
            "metrics/mAP50(B)",
            "val/box_loss",
            "val/cls_loss",
            "val/dfl_loss",
        ],
        {
            "loss": ("train/box_loss", "train/cls_loss", "train/dfl_loss"),
            "eval_loss": ("val/box_loss", "val/cls_loss", "val/dfl_loss"),
            "eval_metric": ("metrics/mAP50(B)",),
            "lr": ("lr/pg0", "lr/pg1", "lr/pg2"),
        },
    ),
    "ml_agents": (
        [
            "Environment/Cumulative Reward",
            "Environment/Episode Length",
            "Policy/Entropy",
            "Policy/Extrinsic Reward",
            "Policy/Extrinsic Value Estimate",
            "Policy/Learning Rate",
            "Policy/Epsilon",
            "Policy/Beta",
            "Losses/Policy Loss",
            "Losses/Value Loss",
            "Is Training",
        ],
        {
            "loss": ("Losses/Policy Loss", "Losses/Value Loss"),
            "eval_metric": ("Environment/Cumulative Reward",),
            "lr": ("Policy/Learning Rate",),
        },
    ),
}


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_each_frameworks_names_play_their_roles(framework: str) -> None:
    columns, want = FRAMEWORKS[framework]
    got = automatic(columns)
    assert dict(got.metrics) == want
    assert set(got.why) == set(want)


def test_the_reason_names_the_framework() -> None:
    got = automatic(["train/loss", "train/learning_rate"])
    assert got.lines() == [
        "loss: train/loss (HF Trainer's name)",
        "learning rate: train/learning_rate (HF Trainer's name)",
    ]
    assert "Lightning" in automatic(["train_loss"]).why["loss"]
    assert "ML-Agents" in automatic(["Losses/Value Loss"]).why["loss"]


def test_a_name_plays_one_role_at_most() -> None:
    got = automatic(list(dict.fromkeys(n for columns, _ in FRAMEWORKS.values() for n in columns)))
    seen = [n for role in ROLES for n in got.of(role)]
    assert len(seen) == len(set(seen))


def test_a_name_that_is_another_frameworks_role_keeps_the_first_rule() -> None:
    """A Lightning run that also logs ``loss`` (its progress bar) and an HF-style ``train/loss``: the format's
    ``loss`` wins, the reason says so, and no name is lost: the others are still columns to pick by hand."""
    got = automatic(["train_loss", "loss", "train/loss"])
    assert got.of("loss") == ("loss",)
    assert "format" in got.why["loss"]
    chosen = cast(["train_loss", "loss", "train/loss"], {"loss": ["train_loss"]}, "set in the URL")
    assert chosen.of("loss") == ("train_loss",) and chosen.why["loss"] == "set in the URL"


def test_loss_scale_and_eval_timing_play_no_loss_or_metric_role() -> None:
    got = automatic(["loss_scale", "eval_runtime", "eval/samples_per_second", "val_loss"])
    assert got.of("loss") == () and got.of("loss_scale") == ("loss_scale",)
    assert got.of("eval_metric") == () and got.of("throughput") == ()


def test_a_choice_replaces_the_role_and_moves_the_metric() -> None:
    columns = ["train/loss", "train/total", "train/learning_rate"]
    got = cast(columns, {"loss": ["train/total", "train/loss"]}, "set in the URL")
    assert got.of("loss") == ("train/total", "train/loss") and got.why["loss"] == "set in the URL"
    moved = cast(columns, {"lr": ["train/loss"]}, "set in Settings")
    assert moved.of("lr") == ("train/loss",) and "loss" not in moved.metrics


def test_a_choice_the_run_lacks_keeps_the_automatic_metric_and_says_so() -> None:
    got = cast(["train/loss"], {"loss": ["nope"], "bogus": ["x"]}, "set in the URL")
    assert got.of("loss") == ("train/loss",)
    assert got.lines()[-1] == "loss: nope was chosen, but this run has no such metric"


def test_an_empty_choice_means_no_metric_plays_the_role() -> None:
    assert cast(["loss", "lr"], {"lr": []}).of("lr") == ()


def test_names_differing_only_in_case_both_play_the_role() -> None:
    assert automatic(["Loss", "loss"]).of("loss") == ("loss",)
    assert automatic(["Train/Loss", "train/LOSS"]).of("loss") == ("Train/Loss", "train/LOSS")


def test_hostile_names() -> None:
    """A newline, a 10 kB name, 10,000 names: a clear result, quickly, and the shown text is safe."""
    nl = automatic(["train/\nloss", "x" * 10_000 + "_loss"])
    assert nl.of("loss") == ("train/\nloss",)  # a training loss by its name, before any loss by its name
    line = nl.lines()[0]
    assert "\n" not in line and len(line) < 300
    many = [f"layer.{i}/weight" for i in range(10_000)] + ["train/loss"]
    assert automatic(many).of("loss") == ("train/loss",)


def test_role_of_and_url_choices() -> None:
    assert role_of("train/learning_rate") == "lr" and role_of("layer.0/weight") is None
    assert parse_choices([("role.loss", ["train/total"]), ("run", ["x"]), ("role.nope", ["y"])]) == {
        "loss": ("train/total",)
    }


def test_a_family_of_many_names_plays_no_role() -> None:
    """10,000 per-layer grad norms are a family (the layers view), not the run's grad norm."""
    names = [f"layer.{i}/grad_norm" for i in range(10_000)]
    assert automatic(names).of("grad_norm") == ()
    assert automatic([*names, "grad_norm"]).of("grad_norm") == ("grad_norm",)
    evals = [f"eval_metric{i}" for i in range(40)]
    assert len(automatic(evals).of("eval_metric")) == MAX_PLAYERS
