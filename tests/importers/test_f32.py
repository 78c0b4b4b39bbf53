"""float32 values as their shortest round-trip decimal, as numpy prints them (issue 26, item 6)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tensorboardX import SummaryWriter

from monitor_cb.importers.f32 import shortest_f32, shortest_f32_array
from monitor_cb.importers.tensorboard import TensorBoardRun

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def numpy_shortest(values: np.ndarray) -> np.ndarray:
    return np.array([float(str(v)) for v in values.astype(np.float32)])


def test_values_that_need_nine_digits() -> None:
    # float32 needs up to 9 significant digits: these were read with float64 noise (102340.9453125)
    values = np.array([102340.945, 0.1, 1.0000001, 3.4028235e38, 1e-45, 16777217.0, 7.038531e-26], np.float32)
    got = shortest_f32_array(values)
    assert got.tolist() == numpy_shortest(values).tolist()
    assert got[0] == 102340.945 and got[1] == 0.1
    assert shortest_f32(102340.9453125) == 102340.945


def test_same_as_numpy_on_every_kind_of_float32() -> None:
    rng = np.random.default_rng(26)
    values = np.concatenate(
        [
            rng.integers(0, 2**32, 20_000, dtype=np.uint64).astype(np.uint32).view(np.float32),  # any bit pattern
            rng.normal(size=20_000).astype(np.float32),
            np.exp(rng.uniform(-40, 40, 20_000)).astype(np.float32),
            np.round(rng.random(5_000), 3).astype(np.float32),
        ]
    )
    got = shortest_f32_array(values)
    want = numpy_shortest(values)
    finite = np.isfinite(want)
    assert np.array_equal(got[finite], want[finite])
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[np.isinf(want)], want[np.isinf(want)])


def test_tensorboard_values_read_without_noise(tmp_path: Path) -> None:
    writer = SummaryWriter(str(tmp_path / "run"), flush_secs=3600)
    writer.add_scalar("loss", 102340.945, global_step=1)
    writer.add_scalar("loss", 0.1, global_step=2)
    writer.close()
    records = TensorBoardRun(tmp_path / "run").poll()
    assert [r["loss"] for r in records] == [102340.945, 0.1]
    assert repr(records[0]["loss"]) == "102340.945"


def test_tf2_style_tensor_scalars_read_without_noise(tmp_path: Path) -> None:
    # tf.summary.scalar writes a float32 TensorProto, not simple_value (TensorBoard's own writer, real CRCs)
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path / "run"))
    for step, value in ((1, 102340.945), (2, 0.1)):
        tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[value])
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="loss", tensor=tensor)])
        writer.add_event(event_pb2.Event(wall_time=1.7e9 + step, step=step, summary=summary))
    writer.close()
    records = TensorBoardRun(tmp_path / "run").poll()
    assert [r["loss"] for r in records] == [102340.945, 0.1]
