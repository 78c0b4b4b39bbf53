"""MindFormers 1.9's Trainer, for real: a tiny LLaMA from a YAML with ``type: LiveMonitor`` (CPU, ~12 s).

Every LiveMonitor record is checked against MFLossMonitor's line for the same step in
``output/log/rank_0/info.log`` (loss, lr, global norm, loss scale, overflow); then the overflow
variant, the metadata, the ``TrainingArguments`` variant, and the run opened by the dashboard.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest

from monitor_cb.views.kpis import format_value
from tests.app.conftest import DASHBOARD
from tests.app.helpers import assert_ok, run_entry
from tests.mindformers.harness import REPO, TrainedRun

pytestmark = [pytest.mark.mindspore, pytest.mark.slow]

STEPS = 20


def _printed_float(text: str) -> float:
    return float(text.strip().strip("[]"))


def assert_record_matches_line(record: dict, line: dict[str, str]) -> None:
    """One step: LiveMonitor's values equal MFLossMonitor's printed ones (to the printed precision)."""
    step = record["step"]
    assert record["loss"] == pytest.approx(float(line["loss"]), abs=5e-7), step  # printed %5.6f
    assert record["lr"] == pytest.approx(float(line["lr"]), rel=1e-6, abs=1e-12), step  # float32's shortest repr
    assert record["loss_scale"] == pytest.approx(float(line["scale"]), rel=1e-6), step
    assert record["overflow"] is (line["overflow"] == "True"), step
    printed_norm = _printed_float(line["norm"])
    if math.isnan(printed_norm):
        assert math.isnan(record["grad_norm"]), step
    else:
        assert record["grad_norm"] == pytest.approx(printed_norm, rel=1e-6), step
    assert record["epoch"] == int(line["epoch"])


def test_every_record_equals_mflossmonitor_line(yaml_run: TrainedRun) -> None:
    records, printed = yaml_run.records(), yaml_run.printed()
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))
    assert sorted(printed) == list(range(1, STEPS + 1)), "MFLossMonitor prints every step (per_print_times: 1)"
    for record in records:
        assert_record_matches_line(record, printed[record["step"]])
    lrs = [r["lr"] for r in records]
    assert lrs[0] == 0.0 and max(lrs) == pytest.approx(1e-3) and lrs[-1] < lrs[3], "warm-up, then cosine decay"
    assert all(r["overflow"] is False and r["loss_scale"] == 65536.0 for r in records)


def test_overflow_steps_are_recorded_as_mindformers_prints_them(overflow_run: TrainedRun) -> None:
    records, printed = overflow_run.records(), overflow_run.printed()
    for record in records:
        assert_record_matches_line(record, printed[record["step"]])
    flags = [r["overflow"] for r in records]
    first_ok = flags.index(False)
    assert first_ok >= 2 and all(flags[:first_ok]) and not any(flags[first_ok:]), flags
    scales = [r["loss_scale"] for r in records[:first_ok]]
    assert scales[0] == pytest.approx(5e37, rel=1e-6), "1e38 halved by the first overflow"
    assert all(b == pytest.approx(a / 2, rel=1e-6) for a, b in itertools.pairwise(scales))
    assert all(math.isnan(r["grad_norm"]) for r in records[:first_ok]), "MindFormers prints global_norm: [nan]"
    assert all(r["lr"] == 0.0 for r in records[:first_ok]), "skipped steps do not advance the schedule"


def test_metadata_says_finished_layout_and_steps(yaml_run: TrainedRun) -> None:
    meta = yaml_run.meta()
    assert meta["status"] == "finished" and meta["mindformers_version"] == "1.9.0"
    assert meta["output_layout"] == "mindformers" and meta["train_cell"] == "CpuMFTrainOneStepCell"
    assert meta["total_steps"] == STEPS and meta["steps_per_epoch"] == STEPS and meta["epochs"] == 1
    assert meta["optimizer"] == "AdamW" and meta["batch_size"] == 2


def test_tokens_per_second_counts_the_model_seq_length_not_the_shifted_input(yaml_run: TrainedRun) -> None:
    # MindFormers feeds seq_length + 1 = 17 tokens per sample to a causal LM; 16 of them are trained on.
    assert yaml_run.meta()["seq_length"] == 16
    for record in yaml_run.records():
        assert record["tokens_per_s"] == pytest.approx(record["throughput"] * 16, rel=1e-9), record["step"]


def test_trainer_with_training_arguments_and_a_callback_object(args_run: TrainedRun) -> None:
    records, printed = args_run.records(), args_run.printed()
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))
    for record in records:
        assert_record_matches_line(record, printed[record["step"]])
    meta = args_run.meta()
    assert meta["status"] == "finished" and meta["output_layout"] == "mindformers" and meta["total_steps"] == STEPS
    assert meta["seq_length"] == 16, "from the model's config, not the 17-token input"


def test_the_dashboard_opens_the_run(run_root: Path, yaml_run: TrainedRun) -> None:
    at = run_entry(DASHBOARD, {"run": "run"})
    assert_ok(at)
    values = {m.label: m.value for m in at.metric}
    assert values[f"Step of {STEPS}"] == str(STEPS), values
    assert values["Loss"] == format_value(yaml_run.records()[-1]["loss"]), values


# ----------------------------------------------------------------------------- the run's config, from the YAML alone
def test_the_yaml_config_is_captured_masked_and_user_free(yaml_run: TrainedRun) -> None:
    config = yaml_run.meta()["config"]
    model = config["model"]
    assert model["arch"] == "LlamaForCausalLM" and model["config"] == "LlamaConfig"
    assert (model["hidden_size"], model["num_layers"], model["num_heads"], model["seq_length"]) == (32, 2, 4, 16)
    assert config["lr_schedule"]["type"] == "CosineWithWarmUpLR" and config["lr_schedule"]["learning_rate"] == 1e-3
    assert config["lr_schedule"]["total_steps"] == STEPS, "the Trainer's filled-in value, not the YAML's -1"
    assert config["optimizer"]["type"] == "AdamW" and config["optimizer"]["betas"] == [0.9, 0.95]
    assert config["runner_config"]["batch_size"] == 2 and config["runner_config"]["sink_mode"] is False
    assert config["parallel_config"]["data_parallel"] == 1 and config["parallel_layout"] == "dp1 mp1 pp1"
    assert config["seed"] == 0 and config["runner_wrapper"]["type"] == "CpuMFTrainOneStepCell"
    assert config["batch_size"] == 2 and config["epochs"] == 1 and config["dataset_size"] == STEPS  # Model.train's
    text = json.dumps(config)
    assert str(yaml_run.cwd) not in text and "/tmp" not in text, "no path of the machine reaches the metadata"
    assert "callbacks" not in config and "LiveMonitor" not in text


def test_the_runs_page_row_shows_model_schedule_optimizer_batch_and_layout(run_root: Path) -> None:
    at = run_entry(str(REPO / "tests" / "app" / "runs_app.py"))
    assert_ok(at)
    at.toggle(key="runs_all_config").set_value(True).run()
    assert_ok(at)
    row = at.dataframe(key="runs_table").value.set_index("id").loc["run"]
    expected = {
        "model.arch": "LlamaForCausalLM",
        "model.hidden_size": "32",
        "model.num_layers": "2",
        "model.num_heads": "4",
        "model.seq_length": "16",
        "lr_schedule.type": "CosineWithWarmUpLR",
        "lr_schedule.learning_rate": "0.001",
        "optimizer.type": "AdamW",
        "runner_config.batch_size": "2",
        "parallel_layout": "dp1 mp1 pp1",
    }
    assert {key: str(row.get(key)) for key in expected} == expected


def test_the_args_path_captures_the_trainers_config_too(args_run: TrainedRun) -> None:
    config = args_run.meta()["config"]
    assert config["model"]["arch"] == "LlamaForCausalLM" and config["model"]["hidden_size"] == 32
    assert config["optimizer"]["type"] == "AdamW" and config["runner_config"]["batch_size"] == 2
    assert config["lr_schedule"]["learning_rate"] == 1e-3 and config["seed"] == 0
