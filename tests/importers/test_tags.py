import pytest

from monitor_cb.importers.tags import convert, metric_name, samples_base, sanitize, subdir_metric_name


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
        ("local_norm/layer.0.weight", "local_norm_layer_0_weight"),
        ("Eval Accuracy", "eval_accuracy"),
        ("step", "tb_step"),
        ("t", "tb_t"),
        ("samples", "tb_samples"),
        ("1st", "tb_1st"),
        ("///", "tb_"),
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
        "max_attention_logit_layer_0_head_3"
    )
    assert subdir_metric_name("extra", "loss") == "extra_loss"
    assert sanitize("Grad Norm") == "grad_norm"
