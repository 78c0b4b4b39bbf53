"""MetricsWriter: every numeric scalar a user logs is written as a number; a value that cannot be drops its key only."""

from __future__ import annotations

import decimal
import fractions
import json
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from monitor_cb.ingest.parse import ChunkParser
from monitor_cb.ingest.table import RankTable
from monitor_cb.train.writer import MetricsWriter, MonitorWarning


def lines(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def read_back(run: Path, bulk: bool) -> tuple[Any, dict[str, np.ndarray]]:
    """The frame the reading side makes of the file, through the polars path or the line path."""
    parser = ChunkParser(bulk_min_bytes=0 if bulk else 1 << 40)
    batch, bad = parser.parse((run / "metrics.jsonl").read_bytes(), 0)
    assert bad == []
    table = RankTable()
    table.append(batch)
    _, frame, masks = table.frame_and_masks()
    return frame, masks


def monitor_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, MonitorWarning)]


NUMPY_SCALARS: dict[str, tuple[Any, Any]] = {
    "float64": (np.float64(0.5), 0.5),
    "float32": (np.float32(0.25), 0.25),
    "float16": (np.float16(0.5), 0.5),
    "longdouble": (np.longdouble(1.5), 1.5),
    "int8": (np.int8(-3), -3),
    "int16": (np.int16(300), 300),
    "int32": (np.int32(-70_000), -70_000),
    "int64": (np.int64(2**40), 2**40),
    "uint8": (np.uint8(200), 200),
    "uint64_max": (np.uint64(2**64 - 1), 2**64 - 1),
    "bool_": (np.bool_(True), True),
    "zero_d_float": (np.array(2.5), 2.5),
    "zero_d_int": (np.array(7, dtype=np.int16), 7),
    "one_element": (np.array([3.5], dtype=np.float32), 3.5),
    "decimal": (decimal.Decimal("1.25"), 1.25),
    "fraction": (fractions.Fraction(1, 4), 0.25),
}


@pytest.mark.parametrize("name", list(NUMPY_SCALARS))
def test_numeric_scalars_are_numbers_and_the_record_is_kept(tmp_path: Path, name: str) -> None:
    value, expected = NUMPY_SCALARS[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with MetricsWriter(tmp_path / "run") as writer:
            writer.log(step=1, loss=1.0, x=value)
    assert monitor_warnings(caught) == []
    (record,) = lines(tmp_path / "run")
    assert record["loss"] == 1.0 and record["x"] == expected
    assert type(record["x"]) is type(expected)


def test_every_logging_entry_point_takes_numpy(tmp_path: Path) -> None:
    """log, log_dict, log_at and update_meta, with numpy values where plain ones usually are."""
    with MetricsWriter(tmp_path / "run") as writer:
        writer.log(step=np.int64(1), loss=np.float64(2.5))
        writer.log_dict({"loss": np.float32(2.0), np.str_("eval_acc"): np.float64(0.75)}, step=np.uint32(2))
        writer.log_at(np.float64(1.7e9), step=3, loss=decimal.Decimal("1.5"))
        writer.update_meta(total_steps=np.int64(3), lr_peak=np.float64(1e-3))
    records = lines(tmp_path / "run")
    assert [(r["step"], r["loss"]) for r in records] == [(1, 2.5), (2, 2.0), (3, 1.5)]
    assert records[1]["eval_acc"] == 0.75 and records[2]["t"] == 1.7e9
    meta = json.loads((tmp_path / "run" / "metrics.meta.json").read_text())
    assert meta["total_steps"] == 3 and meta["lr_peak"] == 1e-3


@pytest.mark.mindspore
def test_mindspore_tensor_scalars_are_numbers(tmp_path: Path) -> None:
    import mindspore as ms

    values = {
        "f32": (ms.Tensor(0.5, ms.float32), 0.5),
        "f16": (ms.Tensor(0.5, ms.float16), 0.5),
        "bf16": (ms.Tensor(0.5, ms.bfloat16), 0.5),
        "i64": (ms.Tensor(7, ms.int64), 7),
        "one_element": (ms.Tensor([1.5], ms.float32), 1.5),
        "flag": (ms.Tensor(True, ms.bool_), True),
    }
    with MetricsWriter(tmp_path / "run", config={"lr": ms.Tensor(1e-3, ms.float32)}) as writer:
        writer.log(step=ms.Tensor(4, ms.int32), **{k: v for k, (v, _) in values.items()})
    (record,) = lines(tmp_path / "run")
    assert record["step"] == 4
    for key, (_, expected) in values.items():
        assert record[key] == expected and type(record[key]) is type(expected), key
    meta = json.loads((tmp_path / "run" / "metrics.meta.json").read_text())
    assert meta["config"]["lr"] == pytest.approx(1e-3)


@pytest.mark.parametrize("bulk", [False, True], ids=["line-path", "polars-path"])
def test_ints_of_any_size_are_written_as_numbers_and_read_back(tmp_path: Path, bulk: bool) -> None:
    """Within 64 bits exactly; beyond, as the nearest double (what every reader makes of it)."""
    values = {
        "above_2_53": 2**53 + 1,
        "int64_max": 2**63 - 1,
        "int64_min": -(2**63),
        "above_int64": 2**63,
        "uint64_max": 2**64 - 1,
        "above_uint64": 2**64,
        "below_int64": -(2**63) - 1,
        "huge": 2**1000,
    }
    with MetricsWriter(tmp_path / "run") as writer:
        writer.log(step=1, **values)
        writer.log(step=2, loss=1.0)
    raw = (tmp_path / "run" / "metrics.jsonl").read_bytes().splitlines()[0]
    record = orjson.loads(raw)
    for key in ("above_2_53", "int64_max", "int64_min", "above_int64", "uint64_max"):
        assert record[key] == values[key], key  # exact in the file
    for key in ("above_uint64", "below_int64", "huge"):
        assert record[key] == float(values[key]) and isinstance(record[key], float), key
    frame, _ = read_back(tmp_path / "run", bulk)
    for key, value in values.items():
        assert frame[key].dtype == np.float64 and frame[key].iloc[0] == float(value), key


def test_a_value_no_double_can_hold_drops_only_its_key_warned_once_per_key(tmp_path: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with MetricsWriter(tmp_path / "run") as writer:
            for step in range(1, 6):
                writer.log(
                    step=step,
                    loss=float(step),
                    big=10**400,
                    dec=decimal.Decimal("1e400"),
                    ld=np.longdouble("1e400"),
                    z=1 + 2j,
                )
    records = lines(tmp_path / "run")
    assert [r["loss"] for r in records] == [1.0, 2.0, 3.0, 4.0, 5.0], "every record kept"
    assert all(set(r) == {"step", "t", "rank", "seg", "loss"} for r in records)
    messages = monitor_warnings(caught)
    for key in ("big", "dec", "ld", "z"):
        assert len([m for m in messages if f"{key!r}" in m]) == 1, (key, messages)
    assert len(messages) == 4


def test_nested_and_cyclic_values_never_lose_the_record(tmp_path: Path) -> None:
    cyclic: dict[str, Any] = {"a": 1}
    cyclic["self"] = cyclic
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with MetricsWriter(tmp_path / "run") as writer:
            writer.log(step=1, loss=1.0, cyc=cyclic, arr=np.arange(3, dtype=np.int8), bad_list=[1.0, 10**400])
    (record,) = lines(tmp_path / "run")
    assert record["loss"] == 1.0 and record["arr"] == [0, 1, 2]
    assert "cyc" not in record and "bad_list" not in record
    assert len(monitor_warnings(caught)) == 2


def test_config_and_metadata_take_numpy_and_unwritable_values_as_text(tmp_path: Path) -> None:
    cyclic: dict[str, Any] = {}
    cyclic["me"] = cyclic
    config = {
        "lr": np.float64(1e-3),
        "layers": np.array([2, 4]),
        "wd": decimal.Decimal("0.01"),
        "seed": np.int64(7),
        "nan": np.float32("nan"),
        "huge": 10**400,
        "cyc": cyclic,
        (1, 2): "tuple key",
    }
    writer = MetricsWriter(tmp_path / "run", config=config, extra_meta={"batch": np.int32(8)})
    writer.close()
    meta = json.loads((tmp_path / "run" / "metrics.meta.json").read_text())
    got = meta["config"]
    assert got["lr"] == 1e-3 and got["layers"] == [2, 4] and got["wd"] == 0.01 and got["seed"] == 7
    assert got["nan"] == "NaN" and got["huge"].startswith("1000") and got["(1, 2)"] == "tuple key"
    assert isinstance(json.dumps(got["cyc"]), str)
    assert meta["batch"] == 8


# ----------------------------------------------------------------------------- steps
@pytest.mark.parametrize("step", [7.5, -5, True, "7", math.inf, math.nan, 2**62, 2**40, [1]])
def test_a_step_out_of_range_is_a_value_error_naming_it(tmp_path: Path, step: Any) -> None:
    with MetricsWriter(tmp_path / "run") as writer:
        for call in (
            lambda: writer.log(step=step, loss=1.0),
            lambda: writer.log_dict({"loss": 1.0}, step=step),
            lambda: writer.log_at(1.7e9, step=step, loss=1.0),
        ):
            with pytest.raises(ValueError, match="step must be an integer from 0 to"):
                call()
        writer.log(step=1, loss=2.0)
    assert [r["step"] for r in lines(tmp_path / "run")] == [1], "nothing of the refused calls was written"


def test_integral_steps_of_other_types_are_ints(tmp_path: Path) -> None:
    with MetricsWriter(tmp_path / "run") as writer:
        writer.log(step=np.int64(3), loss=1.0)
        writer.log(step=4.0, loss=1.0)
        writer.log(step=np.array(5), loss=1.0)
        writer.log(step=0, loss=1.0)
        writer.log(step=2**40 - 1, loss=1.0)
        writer.log(loss=1.0)  # no step: a record between steps
    steps = [r.get("step") for r in lines(tmp_path / "run")]
    assert steps == [3, 4, 5, 0, 2**40 - 1, None]
    assert all(type(s) is int for s in steps[:-1])


def test_log_dict_with_a_reserved_key_is_the_documented_value_error(tmp_path: Path) -> None:
    with MetricsWriter(tmp_path / "run") as writer:
        for reserved in ("step", "t", "rank", "seg"):
            with pytest.raises(ValueError, match="reserved"):
                writer.log_dict({reserved: 1, "loss": 1.0})
        with pytest.raises(ValueError, match="mapping"):
            writer.log_dict([("loss", 1.0)])  # type: ignore[arg-type]
    assert not (tmp_path / "run" / "metrics.jsonl").read_text()


@pytest.mark.parametrize("t", ["abc", math.nan, math.inf, None, True])
def test_log_at_refuses_a_time_that_is_not_a_number(tmp_path: Path, t: Any) -> None:
    with MetricsWriter(tmp_path / "run") as writer, pytest.raises(ValueError, match="Unix seconds"):
        writer.log_at(t, step=1, loss=1.0)
