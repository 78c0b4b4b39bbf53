"""What the trained model says about its inputs: the sequence length tokens/s is counted with.

A MindFormers causal LM is fed ``seq_length + 1`` tokens per sample (inputs and labels are the
same row shifted by one), so the input's width overstates the tokens a step trains on by one.
The model's own config knows the real length; without one, a ``...ForCausalLM`` class name says
the input carries that extra token. Pure attribute reading: no MindSpore import.
"""

from __future__ import annotations

from typing import Any

_WRAPPER_ATTRS = ("network", "_network", "backbone", "_backbone", "model")
_MAX_DEPTH = 8


def find_model(network: Any) -> Any:
    """The innermost cell with a model ``config`` under the train/loss/pipeline wrappers, or None."""
    cell, seen = network, set()
    for _ in range(_MAX_DEPTH):
        if cell is None or id(cell) in seen:
            return None
        seen.add(id(cell))
        if _config_seq_length(_attr(cell, "config")) is not None:
            return cell
        cell = _inner(cell)
    return None


def model_seq_length(network: Any) -> int | None:
    """The ``seq_length`` of the model config under ``network`` (MindFormers' ``LlamaConfig`` and kin)."""
    model = find_model(network)
    return None if model is None else _config_seq_length(model.config)


def is_causal_lm(network: Any) -> bool:
    """Whether a cell under ``network`` is a causal LM by its class name (``LlamaForCausalLM``, ``GPT2LMHeadModel``)."""
    cell, seen = network, set()
    for _ in range(_MAX_DEPTH):
        if cell is None or id(cell) in seen:
            return False
        seen.add(id(cell))
        name = type(cell).__name__
        if name.endswith("ForCausalLM") or name.endswith("LMHeadModel"):
            return True
        cell = _inner(cell)
    return False


def tokens_per_sample(input_length: int, config_seq_length: int | None, causal_lm: bool) -> int:
    """Tokens one sample trains on: the model config's ``seq_length``, else the input's width (less the
    shifted-label token of a causal LM)."""
    if config_seq_length:
        return config_seq_length
    return input_length - 1 if causal_lm and input_length > 1 else input_length


def _config_seq_length(config: Any) -> int | None:
    value = config.get("seq_length") if isinstance(config, dict) else getattr(config, "seq_length", None)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def _inner(cell: Any) -> Any:
    """The cell a wrapper wraps, or None."""
    return next((inner for inner in (_attr(cell, a) for a in _WRAPPER_ATTRS) if inner is not None), None)


def _attr(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name, None)
    except Exception:  # noqa: BLE001 - a cell's __getattr__ may raise anything for an unknown name
        return None
