"""Train the tiny LLaMA of ``tiny_llama.yaml`` with MindFormers 1.9's Trainer on the CPU (run as a script).

``python train_job.py yaml OUT_DIR [--loss-scale V] [--tensorboard DIR] [--args-api]`` trains in the current working
directory (MindFormers writes ``./output/log/rank_0/info.log`` there; its context and registry are
process-global, so the test runs this in a subprocess with its own cwd) and writes the LiveMonitor
run to ``OUT_DIR/run``. The default path is ``run_mindformer.py``'s: ``MindFormerConfig`` ->
``build_context(config)`` -> ``Trainer(config).train()``, with ``type: LiveMonitor`` in the YAML's
callbacks. ``--args-api`` instead passes ``Trainer(args=TrainingArguments(...), model=...,
train_dataset=..., callbacks=[LiveMonitor(...)])``. ``--tensorboard DIR`` turns on MindFormers' own
TensorBoard output (``tensorboard: {tensorboard_dir: DIR}`` with loss scale and timers): event
files in ``DIR/rank_0``, written by MFLossMonitor through tensorboardX.

CPU workarounds (each found by trying; they belong to this test harness, not to the product):

* ``CpuMFTrainOneStepCell`` (below): ``MFTrainOneStepCell.get_overflow_status`` reads the float
  status with ``NPUGetFloatStatusV2``, an Ascend-only kernel. The subclass checks the gradients with
  ``isfinite`` instead (the GPU path of ``TrainOneStepWithLossScaleCell``), so the cell keeps
  MindFormers' outputs ``(loss, overflow, scaling_sens, learning_rate, global_norm)`` and its loss
  scale updates, clipping and in-graph lr unchanged.
* ``build_context(config)`` before the Trainer: otherwise MindFormers' context singleton is built
  later with its defaults and switches to PyNative silently (~2 s a step instead of ~20 ms).
* The YAML's model and runner settings (``use_rope_slice``, ``fused_rms_norm``, float32,
  ``sink_mode: False``) are explained in ``tiny_llama.yaml``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

SAMPLES = 40  # batch 2 -> 20 steps


def write_dataset(path: Path, seq_length: int, vocab: int) -> Path:
    """A MindRecord file of ``SAMPLES`` token rows, ``seq_length + 1`` tokens each (a causal LM's input)."""
    from mindspore.mindrecord import FileWriter

    rng = np.random.default_rng(0)
    writer = FileWriter(str(path), shard_num=1, overwrite=True)
    writer.add_schema({"input_ids": {"type": "int32", "shape": [-1]}}, "tokens")
    rows = [{"input_ids": rng.integers(3, vocab, size=seq_length + 1).astype(np.int32)} for _ in range(SAMPLES)]
    writer.write_raw_data(rows)
    writer.commit()
    return path


def register_cpu_cell() -> None:
    """Register ``CpuMFTrainOneStepCell`` as a MindFormers wrapper (YAML ``runner_wrapper.type``)."""
    from mindformers.tools.register import MindFormerModuleType, MindFormerRegister
    from mindformers.wrapper.wrapper import MFTrainOneStepCell
    from mindspore.nn.wrap.loss_scale import _ascend_grad_overflow

    class CpuMFTrainOneStepCell(MFTrainOneStepCell):
        """``MFTrainOneStepCell`` whose overflow check runs on the CPU (``isfinite`` on each gradient)."""

        def get_overflow_status(self, status, compute_output):
            return self._get_distributed_overflow_status_on_infnan_mode(_ascend_grad_overflow, compute_output)

    MindFormerRegister.register_cls(CpuMFTrainOneStepCell, module_type=MindFormerModuleType.WRAPPER)


def train_from_yaml(yaml_path: Path, out: Path, loss_scale: float | None, tensorboard: Path | None) -> None:
    """``run_mindformer.py``'s path: the YAML, ``build_context``, ``Trainer(config).train()``."""
    from mindformers import Trainer
    from mindformers.core.context import build_context
    from mindformers.tools.register import MindFormerConfig

    config = MindFormerConfig(str(yaml_path))
    config.train_dataset.data_loader.dataset_dir = str(out / "data.mindrecord")
    config.callbacks[1]["log_dir"] = str(out / "run")
    if loss_scale is not None:
        config.runner_wrapper.scale_sense.loss_scale_value = loss_scale
    if tensorboard is not None:  # as a user turns it on: every scalar MFLossMonitor can write
        config.tensorboard = MindFormerConfig(
            tensorboard_dir=str(tensorboard), log_loss_scale_to_tensorboard=True, log_timers_to_tensorboard=True
        )
    build_context(config)
    Trainer(config).train()


def train_from_args(yaml_path: Path, out: Path) -> None:
    """``Trainer(args=TrainingArguments(...), model=..., train_dataset=..., callbacks=[LiveMonitor(...)])``."""
    import mindspore as ms
    from mindformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments
    from mindformers.core.context import build_context
    from mindformers.tools.register import MindFormerConfig

    from monitor_cb import LiveMonitor

    yaml = MindFormerConfig(str(yaml_path))
    build_context(yaml)  # the context and parallel sections only: without it, PyNative (~100x slower steps)
    model = LlamaForCausalLM(LlamaConfig(**{k: v for k, v in yaml.model.model_config.items() if k != "type"}))
    dataset = ms.dataset.MindDataset(str(out / "data.mindrecord"), columns_list=["input_ids"], shuffle=False)
    dataset = dataset.batch(2, drop_remainder=True)
    args = TrainingArguments(
        output_dir="./output",
        num_train_epochs=1,
        per_device_train_batch_size=2,
        learning_rate=1e-3,
        lr_scheduler_type="cosine",
        warmup_ratio=0.1,
        optim="AdamW",
        sink_mode=False,
        wrapper_type="CpuMFTrainOneStepCell",
        use_clip_grad=True,
        seed=0,
        mode=0,
        device_target="CPU",
    )
    monitor = LiveMonitor(out / "run", log_interval=1)
    Trainer(args=args, model=model, train_dataset=dataset, callbacks=[monitor]).train()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("yaml", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--loss-scale", type=float, default=None)
    parser.add_argument("--tensorboard", type=Path, default=None)
    parser.add_argument("--args-api", action="store_true")
    opts = parser.parse_args()
    opts.out.mkdir(parents=True, exist_ok=True)
    write_dataset(opts.out / "data.mindrecord", seq_length=16, vocab=64)
    register_cpu_cell()
    import monitor_cb.mindformers  # noqa: F401  (registers LiveMonitor for the YAML's `type: LiveMonitor`)

    if opts.args_api:
        train_from_args(opts.yaml, opts.out)
    else:
        train_from_yaml(opts.yaml, opts.out, opts.loss_scale, opts.tensorboard)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
    sys.exit(main())
