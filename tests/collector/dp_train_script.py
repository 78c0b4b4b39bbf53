"""Data-parallel MindSpore training with LiveMonitor, launched by ``msrun`` in test_distributed.py."""

import sys

import mindspore as ms
import mindspore.dataset as ds
import numpy as np
from mindspore import nn
from mindspore.communication import get_rank, init

from monitor_cb import LiveMonitor

STEPS_PER_EPOCH = 20
ms.set_context(mode=ms.GRAPH_MODE)
init()
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
rank = get_rank()


def batches():
    rng = np.random.default_rng(rank)
    for _ in range(STEPS_PER_EPOCH * 4):
        yield rng.standard_normal(8).astype(np.float32), rng.standard_normal(1).astype(np.float32)


data = ds.GeneratorDataset(batches, ["x", "y"], shuffle=False).batch(4)
net = nn.Dense(8, 1)
model = ms.Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), 0.01))
model.train(2, data, callbacks=[LiveMonitor(sys.argv[1], log_interval=5)], dataset_sink_mode=False)
