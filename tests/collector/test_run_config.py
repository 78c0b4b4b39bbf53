"""The run's config as stored: MindFormers' YAML summarised, paths and secrets masked, the user's keys winning."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from monitor_cb.compare.configdiff import run_config
from monitor_cb.train.run_config import mask_config, merge_config, mindformers_summary, parallel_layout, to_plain

TINY_LLAMA = Path(__file__).resolve().parents[1] / "mindformers" / "tiny_llama.yaml"


@pytest.fixture
def yaml_config() -> dict[str, Any]:
    return yaml.safe_load(TINY_LLAMA.read_text())


def test_a_mindformers_yaml_gives_the_runs_page_its_columns(yaml_config: dict[str, Any]) -> None:
    flat = run_config({"config": mindformers_summary(yaml_config)})  # as the Runs page flattens it
    assert flat["model.arch"] == "LlamaForCausalLM" and flat["model.config"] == "LlamaConfig"
    assert (flat["model.hidden_size"], flat["model.num_layers"], flat["model.num_heads"]) == (32, 2, 4)
    assert flat["model.seq_length"] == 16
    assert flat["lr_schedule.type"] == "CosineWithWarmUpLR" and flat["lr_schedule.learning_rate"] == 1e-3
    assert flat["optimizer.type"] == "AdamW" and flat["optimizer.betas"] == [0.9, 0.95]
    assert flat["runner_config.batch_size"] == 2 and flat["parallel_config.data_parallel"] == 1
    assert flat["parallel_layout"] == "dp1 mp1 pp1" and flat["seed"] == 0
    assert not any(k.startswith(("callbacks", "train_dataset", "context", "output_dir")) for k in flat), sorted(flat)


def test_a_built_model_fills_the_model_section_the_config_lacks() -> None:
    class LlamaForCausalLM:
        config = SimpleNamespace(to_dict=lambda: {"hidden_size": 4096, "num_layers": 32, "seq_length": 4096})

    summary = mindformers_summary({"model": {"model_config": {}}}, LlamaForCausalLM())
    assert summary["model"]["arch"] == "LlamaForCausalLM" and summary["model"]["hidden_size"] == 4096
    yaml_wins = mindformers_summary({"model": {"model_config": {"hidden_size": 8}}}, LlamaForCausalLM())
    assert yaml_wins["model"] == {"arch": "LlamaForCausalLM", "hidden_size": 8}


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("load_checkpoint", "/home/alice/ckpt/llama2_7b.ckpt", "…/llama2_7b.ckpt"),
        ("dataset_dir", "/data/alice/wiki/", "…/wiki"),
        ("tokenizer_file", "../secret_proj/tokenizer.model", "…/tokenizer.model"),
        ("checkpoint_name_or_path", "llama2_7b", "llama2_7b"),  # a model name, not a path
        ("src_strategy_path_or_dir", "C:\\Users\\bob\\s.ckpt", "…/s.ckpt"),
        ("note", "/", "***"),
        ("hf_token", "hf_abcdefgh", "***"),
        ("api_key", "sk-123456", "***"),
        ("password", "hunter22", "***"),
        ("remote_save_url", "obs://user:pw@bucket/path/run1", "obs://bucket/***"),
        ("webhook", "https://hooks.slack.com/services/T0/B0/xyz", "https://hooks.slack.com/***"),
        ("type", "LlamaForCausalLM", "LlamaForCausalLM"),
        ("bos_token_id", 1, 1),  # numbers under token-ish keys are ids, not secrets
    ],
)
def test_paths_urls_and_secrets_are_masked(key: str, value: Any, shown: Any) -> None:
    assert mask_config({key: value}) == {key: shown}


def test_credential_values_from_the_environment_are_masked_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMIK7MDENG")
    masked = mask_config({"optimizer": {"note": "key wJalrXUtnFEMIK7MDENG in a comment"}})
    assert "wJalrXUtnFEMIK7MDENG" not in json.dumps(masked)


def test_hostile_configs_stay_bounded() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(50):
        node["x"] = {}
        node = node["x"]
    assert "***" in json.dumps(mask_config(to_plain(deep)))
    assert len(to_plain({"ids": list(range(10_000))})["ids"]) == 200
    assert len(mask_config({"note": "y" * 10_000})["note"]) == 500
    loop: dict[str, Any] = {}
    loop["self"] = loop
    assert json.dumps(to_plain(loop))  # a self-referencing config ends at the depth limit


def test_built_objects_become_their_class_and_scalars() -> None:
    class DynamicLossScaleUpdateCell:
        def __init__(self) -> None:
            self.loss_scale_value = 65536
            self.training = True  # every Cell's: noise
            self._private = 1

    class Opaque:
        __slots__ = ()

    assert to_plain({"scale_sense": DynamicLossScaleUpdateCell()}) == {
        "scale_sense": {"type": "DynamicLossScaleUpdateCell", "loss_scale_value": 65536}
    }
    assert to_plain(Opaque()) == "Opaque"
    # MindFormers' TensorBoard setup (utils/tensorboard.py, _handle_runner_wrapper) puts the class itself there
    assert to_plain({"scale_sense": {"type": DynamicLossScaleUpdateCell, "scale_window": 1000}}) == {
        "scale_sense": {"type": "DynamicLossScaleUpdateCell", "scale_window": 1000}
    }
    import numpy as np

    assert to_plain({"lr": np.float32(0.5), "w": np.ones(3)}) == {"lr": 0.5, "w": "ndarray"}


def test_the_users_config_wins_key_by_key() -> None:
    captured = {"optimizer": {"type": "AdamW", "eps": 1e-8}, "batch_size": 2}
    assert merge_config(captured, {"optimizer": {"eps": 1e-6}, "note": "sweep 3"}) == {
        "optimizer": {"type": "AdamW", "eps": 1e-6},
        "batch_size": 2,
        "note": "sweep 3",
    }
    assert merge_config(captured, {"optimizer": "sgd"})["optimizer"] == "sgd"


@pytest.mark.parametrize(
    ("section", "layout"),
    [
        ({"data_parallel": 8, "model_parallel": 4, "pipeline_stage": 2}, "dp8 mp4 pp2"),
        ({"data_parallel": 2, "model_parallel": 1, "pipeline_stage": 1, "context_parallel": 2}, "dp2 mp1 pp1 cp2"),
        ({"data_parallel": 1, "expert_parallel": 4}, "dp1 mp? pp? ep4"),
        ("dp8", None),
    ],
)
def test_parallel_layout(section: Any, layout: str | None) -> None:
    assert parallel_layout(section) == layout


def test_token_strings_that_are_not_secrets_stay() -> None:
    assert mask_config({"bos_token": "<s>", "tokenizer": "LlamaTokenizer"}) == {
        "bos_token": "<s>",
        "tokenizer": "LlamaTokenizer",
    }
