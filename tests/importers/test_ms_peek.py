"""A long summary file listed from its ends: the same steps, times and row count a full read gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from monitor_cb.importers.ms_peek import peek_summary
from monitor_cb.importers.ms_proto import encode_event
from monitor_cb.importers.ms_summary import SummaryRun
from monitor_cb.importers.tfrecord import encode
from monitor_cb.ingest.store import RunStore

NAME = "events.out.events.summary.1700000000.0.host_MS"
MIN = 1 << 20


def write(path: Path, steps: range, repeat_last: bool = False, tail: bytes = b"") -> bytes:
    records = [encode(encode_event(1.7e9, 0, version="MindSpore.Event:1"))]
    records += [encode(encode_event(1.7e9 + s * 0.5, s, [("loss/auto", 1.0 / s)])) for s in steps]
    if repeat_last:  # SummaryCollector records the last step again at the end of training
        records.append(encode(encode_event(1.7e9 + steps[-1], steps[-1], [("loss/auto", 1.0 / steps[-1])])))
    data = b"".join(records) + tail
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


@pytest.mark.parametrize("repeat_last", [False, True])
def test_the_ends_say_what_a_full_read_says(tmp_path: Path, repeat_last: bool) -> None:
    path = tmp_path / NAME
    write(path, range(2, 2 * 40_000 + 1, 2), repeat_last)
    peek = peek_summary(str(path), tmp_path, MIN)
    assert peek is not None
    (batch,) = SummaryRun(tmp_path).poll_batches().values()
    assert (peek.rows, peek.first_step, peek.last_step) == (len(batch), int(batch.step[0]), int(batch.step[-1]))
    assert peek.first_wall == batch.t[0] and peek.last_wall == batch.t[-1]


def test_no_peek_for_short_files_torn_ends_or_uneven_steps(tmp_path: Path) -> None:
    write(tmp_path / "a" / NAME, range(1, 200))
    assert peek_summary(str(tmp_path / "a" / NAME), tmp_path, MIN) is None  # short: read at once
    data = write(tmp_path / "b" / NAME, range(1, 40_000))
    (tmp_path / "b" / NAME).write_bytes(data + data[20:40])  # a torn last record
    assert peek_summary(str(tmp_path / "b" / NAME), tmp_path, MIN) is None
    write(tmp_path / "c" / NAME, [*range(1, 20_000), *range(20_005, 40_000, 3)])  # two strides
    assert peek_summary(str(tmp_path / "c" / NAME), tmp_path, MIN) is None


def test_the_store_lists_from_the_ends_and_reads_when_rows_are_asked_for(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    path = root / "run" / NAME
    write(path, range(1, 40_001))
    store = RunStore(root, cache=False, peek_min_bytes=MIN)
    (info,) = store.list_runs()
    (source,) = store._runs["run"].sources.values()
    assert source.table.n == 0  # listed, not read
    assert (info.n_records, info.first_step, info.last_step) == (40_000, 1, 40_000)
    frame = store.read("run").frame
    assert len(frame) == 40_000 and np.float32(frame["loss/auto"].iloc[-1]) == np.float32(1 / 40_000)
    assert store.run_info("run").n_records == 40_000 and source.table.n == 40_000
    with open(path, "ab") as out:  # the run goes on: new records are read
        out.write(encode(encode_event(1.8e9, 40_001, [("loss/auto", 0.5)])))
    assert store.read("run").frame["step"].iloc[-1] == 40_001
