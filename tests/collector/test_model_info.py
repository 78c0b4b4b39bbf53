"""The sequence length tokens/s counts: the model config's, else the input's width (less one for a causal LM)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from monitor_cb.train.model_info import find_model, is_causal_lm, model_seq_length, tokens_per_sample


class LlamaForCausalLM:
    def __init__(self, seq_length: Any = 16) -> None:
        self.config = SimpleNamespace(seq_length=seq_length, hidden_size=32)


class Classifier:
    config = None


class MFTrainOneStepCell:
    def __init__(self, network: Any) -> None:
        self.network = network


class PipelineCell:
    def __init__(self, network: Any) -> None:
        self.network = network


class Raising:
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError(f"no {name}")  # a cell whose lookup of an unknown name fails oddly


def loop() -> Any:
    a = MFTrainOneStepCell(None)
    a.network = a
    return a


@pytest.mark.parametrize(
    ("network", "seq", "causal"),
    [
        (MFTrainOneStepCell(LlamaForCausalLM()), 16, True),
        (MFTrainOneStepCell(PipelineCell(LlamaForCausalLM(4096))), 4096, True),
        (LlamaForCausalLM(), 16, True),
        (MFTrainOneStepCell(LlamaForCausalLM(seq_length=None)), None, True),
        (MFTrainOneStepCell(LlamaForCausalLM(seq_length=True)), None, True),
        (MFTrainOneStepCell(SimpleNamespace(config={"seq_length": 128})), 128, False),
        (MFTrainOneStepCell(Classifier()), None, False),
        (Raising(), None, False),
        (loop(), None, False),
        (None, None, False),
    ],
)
def test_model_seq_length_and_causal_lm_through_wrappers(network: Any, seq: int | None, causal: bool) -> None:
    assert model_seq_length(network) == seq
    assert is_causal_lm(network) is causal


def test_find_model_returns_the_cell_holding_the_config() -> None:
    model = LlamaForCausalLM()
    assert find_model(MFTrainOneStepCell(PipelineCell(model))) is model


@pytest.mark.parametrize(
    ("width", "config_seq", "causal", "tokens"),
    [
        (17, 16, True, 16),  # MindFormers feeds seq_length + 1 tokens: the config wins
        (17, None, True, 16),  # no config: a causal LM's input carries the shifted label
        (17, None, False, 17),  # any other 2-D token input counts as it is
        (1, None, True, 1),
        (512, 4096, False, 4096),
    ],
)
def test_tokens_per_sample(width: int, config_seq: int | None, causal: bool, tokens: int) -> None:
    assert tokens_per_sample(width, config_seq, causal) == tokens
