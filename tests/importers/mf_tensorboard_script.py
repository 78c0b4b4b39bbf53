"""Run MindFormers' own ``MFLossMonitor.print_output_info`` to write TensorBoard events (a subprocess).

Usage: ``python mf_tensorboard_script.py TENSORBOARD_DIR``. Writes ranks 0 and 1, five steps each, with
timers and loss scale on, a NaN loss at step 3, and per-step time 250 + step milliseconds. Runs in its
own process: MindSpore must import before anything else loads protobuf (its generated modules need the
pure-Python backend it selects), and MindFormers keeps its writer in a module global.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import mindspore  # noqa: F401 - first, see above
import numpy as np
from mindformers.core.callback.callback import MFLossMonitor
from mindformers.utils import tensorboard as mf_tensorboard

GBS = 8


def write_rank(root: str, rank: int) -> None:
    # What BaseTrainer does for `tensorboard: {tensorboard_dir: root, log_timers_to_tensorboard: True, ...}`.
    mf_tensorboard._set_tensorboard_writer(SimpleNamespace(tensorboard_dir=f"{root}/rank_{rank}"))
    mf_tensorboard._GLOBAL_TENSORBOARD_WRITER_ARGS.update(
        log_timers_to_tensorboard=True, log_loss_scale_to_tensorboard=True
    )
    monitor = MFLossMonitor(learning_rate=1e-3, origin_epochs=1, dataset_size=10, global_batch_size=GBS)
    cb_params = SimpleNamespace(dataset_sink_mode=True)
    none = np.array([0.0])
    for step in range(1, 6):
        loss = float("nan") if step == 3 else 2.0 - 0.1 * step + rank
        per_step_ms = 250.0 + step  # MindFormers calls it per_step_seconds but it holds milliseconds
        throughput = GBS / monitor.device_num / (per_step_ms / 1000)
        monitor.print_output_info(
            cb_params, 1, 1, throughput, step, 10, loss, per_step_ms, False, 1024.0, 10.0, 10.0 * step,
            0.5 + step, none, none, none, none,
        )  # fmt: skip
    mf_tensorboard._unset_tensorboard_writer()


if __name__ == "__main__":
    for rank in (0, 1):
        write_rank(sys.argv[1], rank)
    print("wrote")
