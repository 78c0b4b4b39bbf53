"""Config masking shared by both sides: LiveMonitor's captured config and other tools' config texts."""

from __future__ import annotations

from monitor_cb.config_masking import mask_config, mask_config_texts


def test_mindformers_config_texts_keep_their_shape_with_places_and_secrets_masked() -> None:
    texts = {
        "parallel": "{'strategy_ckpt_save_file': '/tmp/job42/ckpt_strategy_rank_0.ckpt', 'full_batch': True}",
        "model": "{'model_config': {'hidden_size': 32, 'checkpoint_name_or_path': '/home/alice/llama.ckpt'}}",
        "runner_config": "{'epochs': 1, 'batch_size': 2}",
        "hub": "{'hf_token': 'hf_abcdefghijklmnop', 'endpoint': 'https://user:pw@hub.example.com/x'}",
        "note": "LlamaConfig(path='/data/private/run7/vocab.model', seq_length=16)",  # not a literal
        "api_key": "sk-123",
    }
    got = mask_config_texts(texts)
    assert got["parallel"] == "{'strategy_ckpt_save_file': '…/ckpt_strategy_rank_0.ckpt', 'full_batch': True}"
    assert got["model"] == "{'model_config': {'hidden_size': 32, 'checkpoint_name_or_path': '…/llama.ckpt'}}"
    assert got["runner_config"] == texts["runner_config"], "nothing to mask: unchanged"
    assert "hf_abcdefghijklmnop" not in got["hub"] and "pw@" not in got["hub"] and "hub.example.com" in got["hub"]
    assert got["note"] == "LlamaConfig(path='…/vocab.model', seq_length=16)"
    assert got["api_key"] == "***"
    long = "LlamaConfig(" + "a=1, " * 200 + "url='https://bob:pw@x.example.com/y')"  # not a literal, 1 kB
    masked = mask_config_texts({"long": long})["long"]
    assert "pw@" not in masked and masked.startswith("LlamaConfig(a=1, ") and masked.endswith("/y')"), "kept whole"
    assert mask_config_texts({"ckpt": "/data/alice/run.ckpt"}) == {"ckpt": "…/run.ckpt"}


def test_hostile_texts_are_data_never_code_and_stay_bounded() -> None:
    texts = {
        "a": "__import__('os').system('touch /tmp/owned')",  # not a literal: never evaluated
        "b": "[" * 100_000,  # too deep for the parser
        "c": "{'x': '" + "y" * 300_000 + "'}",  # longer than a config text may be
    }
    got = mask_config_texts(texts)
    assert got["a"].startswith("__import__(")
    assert got["b"].startswith("[[[")
    assert len(got["c"]) <= 100_000


def test_mask_config_is_the_same_function_livemonitor_uses() -> None:
    from monitor_cb.train import run_config

    assert run_config.mask_config is mask_config
