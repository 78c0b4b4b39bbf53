"""Write real MindSpore 2.9 summary files, and what MindSpore itself reads back from them (a subprocess).

Usage: ``python ms_summary_script.py OUT_DIR``. Writes:

* ``OUT_DIR/collector``: ``SummaryCollector(collect_freq=2)`` in a tiny ``Model.train`` on CPU (2 epochs
  of 5 batches), with the collection README.md tells users to pass (default collection fails under
  protobuf 7 in its dataset-graph step);
* ``OUT_DIR/record``: ``SummaryRecord`` in a custom loop: scalars ``loss`` = 1/step and ``acc`` =
  step/10, and histogram ``w`` of ``arange(10) * step`` (with a NaN and an inf at step 3), steps 1..5;

then ``OUT_DIR/expected.json``: every event of every file as MindSpore's own generated protos
(``summary_pb2``, ``lineage_pb2``) parse it. Runs in its own process: MindSpore's ``summary_pb2``
aborts a process that imported TensorBoard's protos first (the test process may have).
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import mindspore as ms  # first: its generated modules need the protobuf backend it selects
import numpy as np
from mindspore import Model, nn
from mindspore.train import SummaryCollector, lineage_pb2, summary_pb2
from mindspore.train.summary import SummaryRecord

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.collector.ms_helpers import Net, ce, dataset

COLLECT = {"collect_dataset_graph": False, "collect_graph": False}


def train_with_collector(out: Path) -> None:
    net = Net()
    model = Model(net, ce(), nn.Momentum(net.trainable_params(), 0.01, 0.9))
    collector = SummaryCollector(str(out), collect_freq=2, collect_specified_data=COLLECT)
    model.train(2, dataset(5), callbacks=[collector], dataset_sink_mode=False)


def custom_loop(out: Path) -> None:
    with SummaryRecord(str(out)) as record:
        for step in range(1, 6):
            record.add_value("scalar", "loss", ms.Tensor(np.float32(1.0 / step)))
            record.add_value("scalar", "acc", ms.Tensor(np.float32(step / 10)))
            w = np.arange(10, dtype=np.float32) * step
            if step == 3:
                w[0], w[1] = np.nan, np.inf
            record.add_value("histogram", "w", ms.Tensor(w))
            record.record(step)


def events(path: Path) -> list[dict]:
    """Every record of a file as MindSpore's generated protos read it."""
    data, pos, out = path.read_bytes(), 0, []
    lineage = path.name.endswith("_lineage")
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        payload = data[pos + 12 : pos + 12 + length]
        pos += 16 + length
        if lineage:
            event = lineage_pb2.LineageEvent()
            event.ParseFromString(payload)
            hp = event.train_lineage.hyper_parameters
            out.append(
                {
                    "optimizer": hp.optimizer,
                    "learning_rate": hp.learning_rate,
                    "epoch": hp.epoch,
                    "batch_size": hp.batch_size,
                    "loss_function": hp.loss_function,
                }
            )
            continue
        event = summary_pb2.Event()
        event.ParseFromString(payload)
        values = []
        for value in event.summary.value:
            item = {"tag": value.tag}
            if value.HasField("scalar_value"):
                item["scalar"] = value.scalar_value
            if value.HasField("histogram"):
                h = value.histogram
                item["histogram"] = {
                    "lefts": [b.left for b in h.buckets],
                    "widths": [b.width for b in h.buckets],
                    "counts": [b.count for b in h.buckets],
                    "min": h.min,
                    "max": h.max,
                    "sum": h.sum,
                    "count": h.count,
                    "nan_count": h.nan_count,
                    "pos_inf_count": h.pos_inf_count,
                    "neg_inf_count": h.neg_inf_count,
                }
            values.append(item)
        out.append({"wall_time": event.wall_time, "step": event.step, "version": event.version, "values": values})
    return out


def main(out: Path) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    train_with_collector(out / "collector")
    custom_loop(out / "record")
    expected = {str(p.relative_to(out)): events(p) for p in sorted(out.glob("*/events.out.events.summary.*"))}
    (out / "expected.json").write_text(json.dumps(expected))
    print("wrote", len(expected), "files")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
