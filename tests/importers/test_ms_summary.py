"""MindSpore summary directories read as runs: real MindSpore 2.9 files, compared with MindSpore's own reading.

The files come from a real ``Model.train`` with ``SummaryCollector`` and a custom loop with
``SummaryRecord`` (``ms_summary_script.py``, in a subprocess); every value our reader returns is
compared with what MindSpore's generated protos read from the same bytes, and with what was logged.
"""

from __future__ import annotations

import math
import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from monitor_cb.importers.ms_proto import Histogram, encode_event
from monitor_cb.importers.ms_summary import (
    SummaryRun,
    is_ms_summary_dir,
    is_summary_file,
    rank_of,
    read_histograms,
)
from monitor_cb.importers.tfrecord import encode
from monitor_cb.ingest.batch import Batch
from tests.importers.ms_summary_files import only, write_real_summaries

NAME = "events.out.events.summary.1700000000.{rank}.host_MS"


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("ms") / "summaries"
    out.mkdir()
    return out, write_real_summaries(out)


def f32(value: float) -> np.float32:
    return np.float32(value)


def rows(batch: Batch, name: str) -> dict[int, float]:
    values, logged = batch.floats[name]
    return {int(s): float(v) for s, v, ok in zip(batch.step, values, logged, strict=True) if ok}


# ---------------------------------------------------------------------- names
def test_file_names_and_ranks() -> None:
    assert is_summary_file("events.out.events.summary.1796612684.3.vm-a.b_MS")
    assert not is_summary_file("events.out.events.summary.1796612684.0.vm_lineage")
    assert not is_summary_file("events.out.tfevents.1700000000.host")
    assert not is_summary_file(".events.out.events.summary.1.0.h_MS")
    assert rank_of("events.out.events.summary.1796612684.3.host.with.dots_MS") == 3
    assert rank_of("custom.out.events.summary.1796612684.12.h_MS") == 12


# ---------------------------------------------------------------------- real files
def test_collector_loss_and_histograms_are_mindsporess_own_reading(real: tuple[Path, dict]) -> None:
    out, expected = real
    _, events = only(expected, "collector")
    run = SummaryRun(out / "collector")
    (batch,) = run.poll_batches().values()
    losses: dict[int, float] = {}
    first_wall: dict[int, float] = {}
    for event in events:
        for value in event["values"]:
            if "scalar" in value:
                assert value["tag"] == "loss/auto"
                losses[event["step"]] = value["scalar"]
                first_wall.setdefault(event["step"], event["wall_time"])
    assert sorted(losses) == [1, 2, 4, 6, 8, 10]  # collect_freq=2, and the last step again at the end
    got = rows(batch, "loss/auto")  # the tag as written
    assert sorted(got) == sorted(losses)
    for step, value in losses.items():
        assert f32(got[step]) == f32(value), step
    t = dict(zip(batch.step.tolist(), batch.t.tolist(), strict=True))
    assert all(t[s] == pytest.approx(w, abs=1e-6) for s, w in first_wall.items())

    histograms = run.histograms(0)
    assert set(histograms) == {"hidden.weight/auto", "hidden.bias/auto", "out.weight/auto", "out.bias/auto"}
    for tag, series in histograms.items():
        theirs = {e["step"]: v["histogram"] for e in events for v in e["values"] if v["tag"] == tag}
        assert series.steps.tolist() == sorted(theirs)
        for i, step in enumerate(series.steps.tolist()):
            h = theirs[step]
            assert series.counts[i].tolist() == h["counts"]
            edges = [*h["lefts"], h["lefts"][-1] + h["widths"][-1]]
            assert np.allclose(series.edges[i], edges, rtol=0, atol=1e-12)
            assert (series.min[i], series.max[i], series.count[i]) == (h["min"], h["max"], h["count"])


def test_lineage_hyperparameters_become_the_masked_config(real: tuple[Path, dict]) -> None:
    out, expected = real
    _, (lineage,) = only(expected, "collector", "_lineage")
    config = SummaryRun(out / "collector").meta()["config"]
    assert config["optimizer"] == lineage["optimizer"] == "Momentum"
    assert config["learning_rate"] == 0.01 and f32(config["learning_rate"]) == f32(lineage["learning_rate"])
    assert config["epochs"] == lineage["epoch"] == 2
    assert config["batch_size"] == lineage["batch_size"]
    assert config["loss_function"] == lineage["loss_function"] == "SoftmaxCrossEntropyWithLogits"


def test_custom_loop_scalars_and_histograms_are_what_was_logged(real: tuple[Path, dict]) -> None:
    out, _ = real
    run = SummaryRun(out / "record")
    (batch,) = run.poll_batches().values()
    assert rows(batch, "loss") == {s: float(str(f32(1.0 / s))) for s in range(1, 6)}
    assert rows(batch, "acc") == {s: float(str(f32(s / 10))) for s in range(1, 6)}  # shortest decimal: 0.1
    series = run.histograms()["w"]
    assert series.steps.tolist() == [1, 2, 3, 4, 5]
    for i, step in enumerate(range(1, 6)):
        bad = 2 if step == 3 else 0
        assert series.count[i] == 10 and series.counts[i].sum() == 10 - bad
        assert series.nan_count[i] == (1 if step == 3 else 0) and series.pos_inf_count[i] == (1 if step == 3 else 0)
        assert series.max[i] == 9.0 * step and series.min[i] == (2.0 * step if step == 3 else 0.0)
    assert read_histograms(out / "record")["w"].steps.tolist() == [1, 2, 3, 4, 5]
    meta = run.meta()
    assert meta["config"] == {} and meta["bad_records"] == 0 and meta["source_format"] == "ms_summary"


def test_a_torn_last_record_waits_for_its_end(real: tuple[Path, dict], tmp_path: Path) -> None:
    """The real file copied a few bytes at a time: each poll returns only what is new, never half a record."""
    out, _ = real
    (source,) = (out / "record").glob("*_MS")
    data = source.read_bytes()
    target = tmp_path / source.name
    target.write_bytes(b"")
    run = SummaryRun(tmp_path)
    seen: dict[int, float] = {}
    for cut in [*range(0, len(data), 37), len(data)]:
        target.write_bytes(data[:cut])
        for batch in run.poll_batches().values():
            new = rows(batch, "loss")
            assert not set(new) & set(seen), "a step came back twice"
            seen.update(new)
        (state,) = run.files.values()
        assert state.offset <= cut and state.pending == cut - state.offset and state.damaged is None
    assert seen == rows(SummaryRun(out / "record").poll_batches()[0], "loss")
    assert run.poll_batches() == {}


# ---------------------------------------------------------------------- hostile files
def _scalar_file(path: Path, steps: range, start: float = 1.7e9) -> list[bytes]:
    records = [encode(encode_event(start, 0, version="MindSpore.Event:1"))]
    records += [encode(encode_event(start + s, s, [("loss", 1.0 / s)])) for s in steps]
    path.write_bytes(b"".join(records))
    return records


def test_a_record_with_a_bad_checksum_is_skipped_and_counted(tmp_path: Path) -> None:
    records = _scalar_file(tmp_path / NAME.format(rank=0), range(1, 6))
    data = bytearray(b"".join(records))
    third = sum(len(r) for r in records[:3])  # the record of step 3
    data[third + 20] ^= 0xFF  # a byte of its payload (its value)
    (tmp_path / NAME.format(rank=0)).write_bytes(bytes(data))
    run = SummaryRun(tmp_path)
    assert sorted(rows(run.poll_batches()[0], "loss")) == [1, 2, 4, 5]
    assert run.bad_counts() == {0: 1} and run.meta()["damaged"] == []


def test_a_length_that_fails_its_checksum_ends_the_file_with_a_note(tmp_path: Path) -> None:
    records = _scalar_file(tmp_path / NAME.format(rank=0), range(1, 6))
    data = bytearray(b"".join(records))
    third = sum(len(r) for r in records[:3])
    data[third] ^= 0x01  # the length of step 3's record
    (tmp_path / NAME.format(rank=0)).write_bytes(bytes(data))
    run = SummaryRun(tmp_path)
    assert sorted(rows(run.poll_batches()[0], "loss")) == [1, 2]
    (damaged,) = run.meta()["damaged"]
    assert f"byte {third:,}" in damaged and "checksum" in damaged
    assert run.poll_batches() == {} and run.bad_counts() == {0: 1}


def test_garbage_named_like_a_summary_file_gives_no_rows(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    (tmp_path / NAME.format(rank=0)).write_bytes(rng.integers(0, 256, 100_000, dtype=np.uint8).tobytes())
    run = SummaryRun(tmp_path)
    assert run.poll_batches() == {}
    assert len(run.meta()["damaged"]) == 1


def test_a_huge_length_field_is_never_allocated(tmp_path: Path) -> None:
    """A length with a valid checksum that claims 2**62 bytes: refused at once; one just under the cap on a
    short file waits (a torn record), reading no more than the file holds."""
    from monitor_cb.importers.crc32c import crc32c, masked

    for length, waits in ((1 << 62, False), ((64 << 20) - 1, True)):
        head = struct.pack("<Q", length)
        path = tmp_path / str(length) / NAME.format(rank=0)
        path.parent.mkdir()
        good = _scalar_file(path, range(1, 3))
        path.write_bytes(b"".join(good) + head + struct.pack("<I", masked(crc32c(head))) + b"\x09" * 100)
        run = SummaryRun(path.parent)
        assert sorted(rows(run.poll_batches()[0], "loss")) == [1, 2]
        (state,) = run.files.values()
        assert (state.damaged is None) == waits
        assert state.pending == (112 if waits else 0)


def test_negative_steps_and_undecodable_payloads_are_bad_records(tmp_path: Path) -> None:
    records = _scalar_file(tmp_path / NAME.format(rank=0), range(1, 3))
    records.append(encode(encode_event(1.7e9, -5, [("loss", 9.0)])))
    records.append(encode(b"\x09" + b"\x00" * 8 + b"\x2a\x7f"))  # summary longer than the payload
    records.append(encode(encode_event(1.7e9 + 3, 3, [("loss", 3.0)])))
    (tmp_path / NAME.format(rank=0)).write_bytes(b"".join(records))
    run = SummaryRun(tmp_path)
    assert rows(run.poll_batches()[0], "loss") == {1: 1.0, 2: 0.5, 3: 3.0}
    assert run.bad_counts() == {0: 2}


def test_graph_images_and_tensors_are_left_out_and_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = b"\x09" + struct.pack("<d", 1.7e9) + b"\x22\x03abc"  # Event.graph_def
    image = b"\x0a\x03img\x22\x02\x08\x01"  # Value{tag, image}
    image_event = b"\x09" + struct.pack("<d", 1.7e9) + b"\x10\x01\x2a" + bytes([len(image) + 2, 0x0A, len(image)])
    records = _scalar_file(tmp_path / NAME.format(rank=0), range(1, 3))
    records += [encode(graph), encode(image_event + image)]
    (tmp_path / NAME.format(rank=0)).write_bytes(b"".join(records))
    run = SummaryRun(tmp_path)
    assert sorted(rows(run.poll_batches()[0], "loss")) == [1, 2]
    assert run.meta()["not_read"] == {"graph": 1, "image": 1} and run.bad_counts() == {0: 0}
    from monitor_cb.cli import main

    assert main(["summary", str(tmp_path), "--logdir", str(tmp_path)]) == 0
    assert "not read   1 graph, 1 image (only scalars and histograms" in capsys.readouterr().out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_and_a_link_out_of_the_root_are_refused_and_the_rest_is_read(tmp_path: Path) -> None:
    root = tmp_path / "root"
    run_dir = root / "run"
    run_dir.mkdir(parents=True)
    _scalar_file(run_dir / NAME.format(rank=0), range(1, 4))
    os.mkfifo(run_dir / NAME.format(rank=1))
    outside = tmp_path / "secret"
    outside.mkdir()
    _scalar_file(outside / NAME.format(rank=2), range(1, 9))
    os.symlink(outside / NAME.format(rank=2), run_dir / NAME.format(rank=2))
    run = SummaryRun(run_dir, root)
    batches = run.poll_batches()
    assert list(batches) == [0] and sorted(rows(batches[0], "loss")) == [1, 2, 3]
    refused = {Path(f.path).name: f.refused for f in run.files.values() if f.refused}
    assert set(refused) == {NAME.format(rank=1), NAME.format(rank=2)}
    assert "FIFO" in refused[NAME.format(rank=1)] or "fifo" in refused[NAME.format(rank=1)].lower()
    assert "outside" in refused[NAME.format(rank=2)]
    assert run.ranks == [0] and is_ms_summary_dir(run_dir)


def test_a_link_to_a_summary_file_inside_the_root_is_not_read_twice(tmp_path: Path) -> None:
    _scalar_file(tmp_path / NAME.format(rank=0), range(1, 4))
    os.symlink(tmp_path / NAME.format(rank=0), tmp_path / "events.out.events.summary.1700000001.0.host_MS")
    run = SummaryRun(tmp_path)
    (batch,) = run.poll_batches().values()
    assert batch.step.tolist() == [1, 2, 3] and batch.seg.tolist() == [1, 1, 1] and len(run.files) == 1


def test_ranks_come_from_the_file_names_and_later_files_are_segments(tmp_path: Path) -> None:
    _scalar_file(tmp_path / NAME.format(rank=0), range(1, 4))
    _scalar_file(tmp_path / NAME.format(rank=3), range(1, 3))
    _scalar_file(tmp_path / "events.out.events.summary.1700000900.0.host_MS", range(1, 3), start=1.8e9)
    batches = SummaryRun(tmp_path).poll_batches()
    assert sorted(batches) == [0, 3]
    assert batches[0].seg.tolist() == [1, 1, 1, 2, 2] and batches[3].seg.tolist() == [1, 1]


def test_many_histograms_are_thinned_evenly(tmp_path: Path) -> None:
    from monitor_cb.importers import ms_summary

    hist = Histogram((0.0,), (1.0,), (3,), count=3, max=1.0)
    records = [encode(encode_event(1.7e9 + s, s, histograms=[("h", hist)])) for s in range(1, 5001)]
    (tmp_path / NAME.format(rank=0)).write_bytes(b"".join(records))
    series = read_histograms(tmp_path)["h"]
    assert len(series.steps) <= ms_summary.MAX_HISTOGRAMS and series.steps[0] == 1
    assert len(set(np.diff(series.steps).tolist())) == 1  # evenly spaced
    assert math.isclose(series.edges[0][-1], 1.0)


def test_a_file_replaced_by_a_shorter_one_is_read_again_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / NAME.format(rank=0)
    _scalar_file(path, range(1, 6))
    run = SummaryRun(tmp_path)
    run.poll_batches()
    shutil.copy(path, tmp_path / "copy")
    _scalar_file(path, range(7, 9))
    assert sorted(rows(run.poll_batches()[0], "loss")) == [7, 8]


def test_the_encoder_lays_out_events_byte_for_byte_as_mindspore(real: tuple[Path, dict]) -> None:
    """What the benchmark and the hostile-input tests write is what MindSpore writes (same bytes)."""
    from monitor_cb.importers.tfrecord import frame

    out, expected = real
    for part in ("record", "collector"):
        name, events = only(expected, part)
        data = (out / name).read_bytes()
        found = frame(np.frombuffer(data, np.uint8))
        assert found.n == len(events) and found.crc_ok.all()
        for start, length, event in zip(found.starts.tolist(), found.lengths.tolist(), events, strict=True):
            scalars = [(v["tag"], v["scalar"]) for v in event["values"] if "scalar" in v]
            histograms = [
                (v["tag"], Histogram(**{k: tuple(x) if isinstance(x, list) else x for k, x in v["histogram"].items()}))
                for v in event["values"]
                if "histogram" in v
            ]
            if scalars and histograms:  # MindSpore writes the values in the order they were added
                assert [v["tag"] for v in event["values"]] == [t for t, _ in scalars] + [t for t, _ in histograms]
            mine = encode_event(event["wall_time"], event["step"], scalars, histograms, event["version"] or None)
            assert mine == data[start : start + length], (part, event["step"])


RANK3 = """
import sys
import mindspore as ms
import numpy as np
from mindspore.train.summary import SummaryRecord
ms.set_context(device_id=3)
with SummaryRecord(sys.argv[1]) as record:
    for step in (1, 2):
        record.add_value("scalar", "loss", ms.Tensor(np.float32(step)))
        record.record(step)
"""


def test_the_rank_is_the_one_mindspore_put_in_the_file_name(tmp_path: Path) -> None:
    """Without a launcher MindSpore names the file after the context's device id (3 here): that is the rank."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("mindspore") is None:
        pytest.skip("mindspore is not installed")
    done = subprocess.run([sys.executable, "-c", RANK3, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = tmp_path.glob("*_MS")
    assert ".3." in path.name
    batches = SummaryRun(tmp_path).poll_batches()
    assert list(batches) == [3] and rows(batches[3], "loss") == {1: 1.0, 2: 2.0}
