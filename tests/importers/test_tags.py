import pytest

from monitor_cb.importers.tags import convert, metric_name, samples_base, subdir_metric_name, tag_key


@pytest.mark.parametrize(
    ("tag", "name"),
    [
        ("loss", "loss"),
        ("learning-rate", "lr"),
        ("grad-norm", "grad_norm"),
        ("batch-size", "batch_size"),
        ("loss-scale", "loss_scale"),
        ("iteration-time", "step_time"),
        ("throughput", "throughput"),
        ("model-flops-throughput-per-npu", "tflops_per_npu"),
        ("B-samples-per-day", "b_samples_per_day"),
        ("lm-loss", "loss_lm"),
        ("mtp-loss", "loss_mtp"),
        ("load-balancing-loss", "loss_load_balancing"),
        ("indexer-loss", "loss_indexer"),
        ("local_norm/layer.0.weight", "local_norm/layer.0.weight"),  # as written: `/` and `.` group
        ("Eval Accuracy", "Eval Accuracy"),
        ("train/loss", "train/loss"),  # HF Trainer
        ("Losses/Policy Loss", "Losses/Policy Loss"),  # ML-Agents
        ("Loss", "Loss"),  # case kept: another metric than `loss`
        ("step", "tb_step"),  # keys the reader fills itself stay protected
        ("t", "tb_t"),
        ("rank", "tb_rank"),
        ("seg", "tb_seg"),
        ("event", "tb_event"),
        ("samples", "tb_samples"),
        ("", "tb_"),
        ("1st", "1st"),
        ("///", "///"),
        ("a\nb", "a\nb"),  # a newline is kept; pages show it escaped (monitor_cb.names.shown_name)
    ],
)
def test_metric_name(tag: str, name: str) -> None:
    assert metric_name(tag) == name


@pytest.mark.parametrize(
    ("tag", "base"),
    [
        ("loss vs samples", "loss"),  # as MindFormers calls add_scalar
        ("loss_vs_samples", "loss"),  # as tensorboardX stores it
        ("learning-rate_vs_samples", "learning-rate"),
        ("loss", None),
        ("vs samples", None),
    ],
)
def test_samples_base(tag: str, base: str | None) -> None:
    assert samples_base(tag) == base


def test_convert_units() -> None:
    assert convert("iteration-time", 250) == 0.25  # milliseconds -> seconds
    assert convert("batch-size", 8.0) == 8 and isinstance(convert("batch-size", 8.0), int)
    assert convert("loss", 2.5) == 2.5
    assert convert("iteration-time", float("inf")) == float("inf")


def test_subdir_metric_name() -> None:
    assert subdir_metric_name("max_attention_logit/layer.0/head_3", "max_attention_logit/layer.0") == (
        "max_attention_logit/layer.0/head_3"
    )
    assert subdir_metric_name("extra", "loss") == "extra/loss"
    assert tag_key("Grad Norm") == "Grad Norm"


def test_names_differing_only_in_case_stay_distinct() -> None:
    names = {metric_name(tag) for tag in ("val/Loss", "val/loss", "VAL/LOSS")}
    assert len(names) == 3


def test_a_10_kB_tag_is_kept_whole() -> None:
    tag = "x" * 10_000
    assert metric_name(tag) == tag
