"""The run's configuration as stored in the metadata: captured, summarised, masked, merged.

A MindFormers Trainer is built from a YAML config of a hundred-odd keys; the sections that explain a
run (model, lr schedule, optimizer, runner, parallel layout, seed, train cell) are kept, as nested
dicts the Runs page flattens to dotted columns (``model.hidden_size``, ``lr_schedule.type``). A log
root is shared, so values that name places or credentials never reach the metadata: paths keep
only their last part (``…/llama2_7b.ckpt``), URLs their scheme and host, secret-looking keys and
credential values from the environment become ``***``. Pure: no MindSpore import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from monitor_cb.config_masking import MAX_DEPTH, MAX_ITEMS, mask_config
from monitor_cb.train.train_config import CELL_NOISE

# The YAML sections that describe a MindFormers run, kept whole (masked); ``model`` is summarised.
MINDFORMERS_SECTIONS = (
    "lr_schedule",
    "optimizer",
    "runner_config",
    "parallel_config",
    "parallel",
    "runner_wrapper",
    "trainer",
)
MINDFORMERS_SCALARS = ("seed", "use_parallel", "micro_batch_interleave_num", "run_mode", "resume_training")
# Nested parts of a model config that repeat other sections or only matter for inference.
_MODEL_SKIP = {"parallel_config", "moe_config", "quant_config", "pipeline_stage", "type"}


def mindformers_summary(config: Mapping[str, Any], model: Any = None) -> dict[str, Any]:
    """The parts of a MindFormers config (``MindFormerConfig`` or dict) that describe the run, masked.

    ``model`` in the result holds the architecture's class (``arch``), the config class (``config``)
    and the model config's own values (hidden size, layers, heads, seq length, dtypes, ...). Where the
    Trainer got a built model (``Trainer(model=LlamaForCausalLM(...))``) its config has no model
    section: the ``model`` object given here (the cell holding the model ``config``) fills it.
    """
    plain = to_plain(config)
    if not isinstance(plain, dict):
        return {}
    out: dict[str, Any] = {}
    yaml_model = plain.get("model")
    summary = _model_summary(yaml_model) if isinstance(yaml_model, dict) else {}
    if model is not None:
        built = _model_summary({"arch": {"type": type(model).__name__}, "model_config": _built_config(model)})
        summary = {**built, **summary} if "hidden_size" not in summary else {"arch": built["arch"], **summary}
    if summary:
        out["model"] = summary
    for key in MINDFORMERS_SECTIONS:
        if isinstance(plain.get(key), dict) and plain[key]:
            out[key] = plain[key]
    moe = plain.get("moe_config")
    if isinstance(moe, dict) and isinstance(moe.get("expert_num"), int) and moe["expert_num"] > 1:
        out["moe_config"] = moe  # only an MoE model's: a dense model's carries ~40 defaults
    if isinstance(out.get("optimizer"), dict):  # the built optimizer's groups and lr cell, not settings
        out["optimizer"] = {k: v for k, v in out["optimizer"].items() if k != "params" and not isinstance(v, dict)}
    layout = parallel_layout(out.get("parallel_config"))
    if layout:
        out["parallel_layout"] = layout
    for key in MINDFORMERS_SCALARS:
        if plain.get(key) is not None:
            out[key] = plain[key]
    return mask_config(out)


def parallel_layout(parallel_config: Any) -> str | None:
    """``"dp8 mp4 pp2"`` (``cp``, ``ep`` when above 1) from a ``parallel_config`` section: one column to compare."""
    if not isinstance(parallel_config, dict):
        return None
    parts = []
    for short, key in (("dp", "data_parallel"), ("mp", "model_parallel"), ("pp", "pipeline_stage")):
        value = parallel_config.get(key)
        parts.append(f"{short}{value if isinstance(value, int) and not isinstance(value, bool) else '?'}")
    for short, key in (("cp", "context_parallel"), ("ep", "expert_parallel")):
        value = parallel_config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 1:
            parts.append(f"{short}{value}")
    return " ".join(parts)


def _built_config(model: Any) -> dict[str, Any]:
    config = getattr(model, "config", None)
    plain = to_plain(config) if config is not None else {}
    if isinstance(plain, dict):
        plain.setdefault("type", type(config).__name__)
        return plain
    return {}


def _model_summary(model: dict[str, Any]) -> dict[str, Any]:
    arch = model.get("arch")
    model_config = model.get("model_config")
    summary: dict[str, Any] = {}
    if isinstance(arch, dict) and arch.get("type"):
        summary["arch"] = arch["type"]
    if isinstance(model_config, dict):
        if model_config.get("type"):
            summary["config"] = model_config["type"]
        for key, value in model_config.items():
            if key not in _MODEL_SKIP and value is not None and value != "" and not isinstance(value, dict):
                summary[key] = value
    return summary


def to_plain(value: Any, depth: int = 0) -> Any:
    """Mappings, config objects (``to_dict()``) and sequences as plain dicts, lists and scalars.

    Anything else becomes its class name; a class itself, its own name (MindFormers' TensorBoard setup
    replaces a built ``scale_sense`` cell by ``{"type": DynamicLossScaleUpdateCell, ...}``, the class);
    a non-finite float stays a float (the writer encodes it).
    """
    if depth > MAX_DEPTH:
        return None
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, Mapping):
        return {str(k): to_plain(v, depth + 1) for k, v in list(value.items())[:MAX_ITEMS]}
    if isinstance(value, (list, tuple)):
        return [to_plain(v, depth + 1) for v in value[:MAX_ITEMS]]
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        try:
            return to_plain(to_dict(), depth + 1)
        except Exception:  # noqa: BLE001 - a config object's to_dict may fail; its name still says something
            pass
    return _object_summary(value, depth)


def _object_summary(value: Any, depth: int) -> Any:
    """A built object (a Tensor, a loss-scale cell): a one-element tensor's value, else its class and
    public scalar attributes (``{"type": "DynamicLossScaleUpdateCell", "scale_window": 1000}``)."""
    name = type(value).__name__
    for reader in ("asnumpy", "__array__"):
        read = getattr(value, reader, None)
        if callable(read):
            try:
                array = read()
                return to_plain(array.reshape(-1)[0].item(), depth + 1) if array.size == 1 else name
            except Exception:  # noqa: BLE001 - a device tensor may not copy
                return name
    try:
        attrs = vars(value)
    except TypeError:
        return name
    scalars = {
        k: v
        for k, v in list(attrs.items())[:MAX_ITEMS]
        if not k.startswith("_") and k not in CELL_NOISE and isinstance(v, (bool, int, float, str))
    }
    return {"type": name, **scalars} if scalars else name


def merge_config(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` updated with ``override``, nested dicts merged key by key: the override wins."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_config(out[key], value)
        else:
            out[key] = value
    return out
