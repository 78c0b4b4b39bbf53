"""An event file listed from its two ends gives the numbers a full decode gives, or None (decode it)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from monitor_cb.importers.event_peek import EDGE_BYTES, EventPeek, masked_crc32c, peek_events
from monitor_cb.importers.tensorboard import TensorBoardRun
from tests.importers.tb_helpers import mindformers_step, record_ends

pytest.importorskip("tensorboard")
from tensorboardX import SummaryWriter

STEPS = 200  # MindFormers' 16 scalars a step: ~180 kB, past the two 64 kB ends


def write_file(rank_dir: Path, steps: range, *, text_at_end: bool = False, every: int = 1) -> Path:
    """One finished event file as MindFormers writes it (config text first), steps ``steps``."""
    writer = SummaryWriter(str(rank_dir), max_queue=100_000, flush_secs=3600)
    writer.add_text("runner_config", "{'batch_size': 8}", global_step=1)
    for step in steps:
        if step % every == 0:
            mindformers_step(writer, step, 2.0 - step / 1000)
    if text_at_end:
        writer.add_text("note", "resumed", global_step=steps[-1])
    path = Path(writer.file_writer.event_writer._ev_writer._file_name)
    writer.close()
    return path


def decoded(path: Path) -> tuple[TensorBoardRun, object]:
    """The file decoded in full, as the store does: (reader, the rank's batch)."""
    reader = TensorBoardRun(path.parent)
    (batch,) = reader.poll_batches().values()
    return reader, batch


def assert_same_as_decode(peek: EventPeek | None, path: Path) -> None:
    assert peek is not None, "listed from its ends"
    reader, batch = decoded(path)
    assert peek.rows == len(batch.step)
    assert (peek.first_step, peek.last_step) == (int(batch.step[0]), int(batch.step[-1]))
    assert (peek.first_wall, peek.last_wall) == (reader.first_wall_time, reader.last_wall_time)
    assert list(peek.times) == batch.t[-len(peek.times) :].tolist() and len(peek.times) == 64
    assert peek.texts == reader.texts


@pytest.fixture(scope="module")
def mf_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_file(tmp_path_factory.mktemp("mf") / "rank_0", range(1, STEPS + 1))


def test_a_mindformers_file_is_listed_as_its_decode(mf_file: Path) -> None:
    assert mf_file.stat().st_size > 2 * EDGE_BYTES + 32 * 1024, "bytes between the ends that the peek never reads"
    peek = peek_events(mf_file, mf_file.parent.parent, min_bytes=0)
    assert_same_as_decode(peek, mf_file)
    assert peek is not None and peek.rows == STEPS and peek.texts == {"runner_config": "{'batch_size': 8}"}


def test_steps_logged_every_kth_step(tmp_path: Path) -> None:
    path = write_file(tmp_path / "rank_0", range(1, 3 * STEPS + 1), every=3)
    peek = peek_events(path, min_bytes=0)
    assert_same_as_decode(peek, path)
    assert peek is not None and (peek.first_step, peek.rows) == (3, STEPS)


def test_wide_rows_read_a_longer_tail(tmp_path: Path) -> None:
    """60 scalars a step (3 kB rows): 64 kB hold too few rows for the interval, so the tail grows to hold them."""
    writer = SummaryWriter(str(tmp_path / "rank_0"), max_queue=100_000, flush_secs=3600)
    for step in range(1, 201):
        for k in range(60):
            writer.add_scalar(f"layer{k:02d}/grad-norm", 0.1 * k + step, global_step=step)
    path = Path(writer.file_writer.event_writer._ev_writer._file_name)
    writer.close()
    assert_same_as_decode(peek_events(path, min_bytes=0), path)


def test_a_file_smaller_than_the_threshold_is_decoded(mf_file: Path) -> None:
    assert peek_events(mf_file, min_bytes=mf_file.stat().st_size + 1) is None
    assert peek_events(mf_file, min_bytes=mf_file.stat().st_size) is not None


@pytest.mark.parametrize("cut", [1, 5, 11, 12, 30])
def test_a_torn_last_record_is_left_for_later(tmp_path: Path, mf_file: Path, cut: int) -> None:
    """A writer caught mid-record (the last one cut ``cut`` bytes into it): listed as the complete records."""
    data = mf_file.read_bytes()
    last_start = record_ends(data)[-2]
    torn = tmp_path / "rank_0" / mf_file.name
    torn.parent.mkdir()
    torn.write_bytes(data[: last_start + cut])
    peek = peek_events(torn, min_bytes=0)
    assert_same_as_decode(peek, torn)


def test_bytes_that_are_no_record_at_the_end_are_decoded(tmp_path: Path, mf_file: Path) -> None:
    odd = tmp_path / "rank_0" / mf_file.name
    odd.parent.mkdir()
    odd.write_bytes(mf_file.read_bytes() + np.random.default_rng(1).bytes(300))
    assert peek_events(odd, min_bytes=0) is None


@pytest.mark.parametrize(
    "case",
    ["text at the end", "stride change", "gap", "steps start again", "histogram at the start"],
)
def test_files_the_ends_cannot_place_are_decoded(tmp_path: Path, case: str) -> None:
    rank_dir = tmp_path / "rank_0"
    if case == "text at the end":
        path = write_file(rank_dir, range(1, STEPS + 1), text_at_end=True)
    else:
        writer = SummaryWriter(str(rank_dir), max_queue=100_000, flush_secs=3600)
        if case == "stride change":
            steps = [*range(1, STEPS + 1), *range(STEPS + 2, 2 * STEPS, 2)]
        elif case == "gap":  # the ends agree on a stride, the size says a tenth of the steps is missing
            steps = [s for s in range(1, STEPS + 1) if not 100 <= s < 130]
        elif case == "steps start again":  # a second launch appended to the same file: steps 1..150 twice
            steps = [*range(1, STEPS // 2 + 1), *range(1, STEPS // 2 + 1)]
        else:  # a record the head cannot count (a decode skips it; the peek does not guess)
            writer.add_histogram("weights", np.linspace(0, 1, 100), global_step=1)
            steps = list(range(1, STEPS + 1))
        for step in steps:
            mindformers_step(writer, step, 1.0)
        path = Path(writer.file_writer.event_writer._ev_writer._file_name)
        writer.close()
    assert path.stat().st_size > 2 * EDGE_BYTES
    assert peek_events(path, min_bytes=0) is None


def test_a_fifo_never_hangs_and_a_link_out_is_not_followed(tmp_path: Path, mf_file: Path) -> None:
    root = tmp_path / "root"
    (root / "rank_0").mkdir(parents=True)
    fifo = root / "rank_0" / "events.out.tfevents.1.fifo"
    os.mkfifo(fifo)
    link = root / "rank_0" / "events.out.tfevents.2.link"
    link.symlink_to(mf_file)
    found: list[object] = []
    thread = threading.Thread(target=lambda: found.extend([peek_events(fifo, root, 0), peek_events(link, root, 0)]))
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "a FIFO hung the peek"
    assert found == [None, None]


def test_the_checksum_is_tfrecords(mf_file: Path) -> None:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as theirs

    data = mf_file.read_bytes()
    assert masked_crc32c(data[:8]) == int.from_bytes(data[8:12], "little")
    for sample in (b"", b"12345678", data[:500]):
        assert masked_crc32c(sample) == theirs(sample)


REAL_RUNS = Path(__file__).resolve().parents[2] / ".." / "shared" / "real_runs"


# evenly spaced steps (listed from the ends) and, last, steps that are not (eval records, uneven gaps)
PEEKED = ("lstm_bade03", "capgemini_ts", "ddpg_pilot", "ratos_nan", "t5_finetune_log")


@pytest.mark.parametrize("name", [*PEEKED, "gaze_correction"])
def test_real_curves_are_listed_as_decoded_or_decoded(tmp_path: Path, name: str) -> None:
    """Real runs' steps and values (other people's logs, first 2,000 records) as event files: the peek
    gives a decode's numbers (evenly spaced steps) or None (steps that are not), never other numbers."""
    import json

    source = REAL_RUNS / name / "metrics.jsonl"
    if not source.is_file():
        pytest.skip(f"the real_runs corpus is not at {REAL_RUNS}")
    writer = SummaryWriter(str(tmp_path / "rank_0"), max_queue=100_000, flush_secs=3600)
    with source.open() as lines:
        for _, line in zip(range(2000), lines, strict=False):
            record = json.loads(line)
            t = record.get("t")
            wall = float(t) if isinstance(t, (int, float)) and t > 1e9 else None
            for key, value in record.items():
                if key not in ("step", "t") and (isinstance(value, (int, float)) or value == "NaN"):
                    writer.add_scalar(key, float(value), global_step=int(record["step"]), walltime=wall)
    path = Path(writer.file_writer.event_writer._ev_writer._file_name)
    writer.close()
    assert path.stat().st_size > 2 * EDGE_BYTES
    peek = peek_events(path, min_bytes=0)
    if name in PEEKED:
        assert_same_as_decode(peek, path)
    else:
        assert peek is None
