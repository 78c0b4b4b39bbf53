"""An event file that is not the one read before is read anew, as a JSONL file is (issue 34, item 5).

Found by a probe under a live dashboard (one RunStore kept): a TensorBoard run deleted and re-run showed
the new steps 1-300 merged with the deleted run's 301-1000; an event file replaced kept its old rows
forever, and a larger replacement read "damaged at byte 90,786".
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from monitor_cb.ingest import RunStore
from tests.importers.tb_helpers import SyncedWriter

pytest.importorskip("tensorboard")
from tensorboardX import SummaryWriter

OLD = 500  # steps of the file replaced
T0 = 1_700_000_000.0  # explicit wall times: nothing depends on the machine's clock or speed


def old_loss(step: int) -> float:
    return 10.0 + step  # the deleted run's values: easy to tell from the new run's


def new_loss(step: int) -> float:
    return 1.0 / step


def write_events(rank_dir: Path, steps: int, loss, suffix: str = "") -> Path:
    """A closed event file of ``steps`` steps (a loss each step), as tensorboardX writes it."""
    writer = SummaryWriter(str(rank_dir), flush_secs=3600, max_queue=100_000, filename_suffix=suffix)
    for step in range(1, steps + 1):
        writer.add_scalar("loss", loss(step), global_step=step, walltime=T0 + step)
    writer.close()
    (path,) = (p for p in rank_dir.iterdir() if p.name.endswith(suffix) and "tfevents" in p.name)
    return path


@pytest.fixture(scope="module")
def new_files(tmp_path_factory: pytest.TempPathFactory) -> dict[int, bytes]:
    """The bytes of the new run's event file of each length, written elsewhere (once)."""
    where = tmp_path_factory.mktemp("elsewhere")
    return {steps: write_events(where / str(steps), steps, new_loss).read_bytes() for steps in (OLD // 3, 3 * OLD)}


def store_for(root: Path, cached: bool) -> RunStore:
    store = RunStore(root, rescan_interval_s=0, cache=cached)
    if cached:
        store.cache.min_bytes = 1  # these files are small: cache them anyway
    return store


def assert_only_new(store: RunStore, steps: int) -> None:
    frame = store.read("tb").frame
    assert frame["step"].tolist() == list(range(1, steps + 1)), "only the new run's steps"
    assert frame["loss"].tolist() == pytest.approx([new_loss(s) for s in range(1, steps + 1)], rel=1e-6)
    assert store.run_info("tb").last_step == steps


@pytest.mark.parametrize("cached", [False, True], ids=["plain", "cached"])
def test_a_run_deleted_and_rerun_shows_only_the_new_run(tmp_path: Path, cached: bool) -> None:
    root = tmp_path / "logs"
    write_events(root / "tb" / "rank_0", 1000, old_loss, suffix=".first")
    store = store_for(root, cached)
    assert store.read("tb").frame["step"].tolist() == list(range(1, 1001))
    if cached:
        assert store.cache.wait()
    shutil.rmtree(root / "tb")
    write_events(root / "tb" / "rank_0", 300, new_loss, suffix=".second")
    assert_only_new(store, 300)
    assert store.run_info("tb").n_records == 300


@pytest.mark.parametrize("steps", [OLD // 3, 3 * OLD], ids=["smaller", "larger"])
@pytest.mark.parametrize("how", ["new_inode", "in_place"])
@pytest.mark.parametrize("cached", [False, True], ids=["plain", "cached"])
def test_a_replaced_event_file_is_read_anew(
    tmp_path: Path, new_files: dict[int, bytes], steps: int, how: str, cached: bool, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "logs"
    path = write_events(root / "tb" / "rank_0", OLD, old_loss)
    store = store_for(root, cached)
    assert len(store.read("tb").frame) == OLD
    if cached:
        assert store.cache.wait()
    data = new_files[steps]
    inode = path.stat().st_ino
    if how == "new_inode":
        spare = path.with_name(".spare")
        spare.write_bytes(data)
        os.replace(spare, path)
    else:
        with open(path, "r+b") as file:  # the same inode, rewritten from its start
            file.truncate(0)
            file.write(data)
    assert (path.stat().st_ino == inode) == (how == "in_place")
    with caplog.at_level(logging.WARNING, logger="monitor_cb"):
        assert_only_new(store, steps)
    assert not [r for r in caplog.records if "damaged" in r.getMessage()], "a replacement is no damaged file"


def test_an_event_file_deleted_under_a_run_takes_its_rows_with_it(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    write_events(root / "tb" / "rank_0", 300, new_loss, suffix=".a")
    second = write_events(root / "tb" / "rank_1", 50, old_loss, suffix=".b")
    store = store_for(root, cached=False)
    assert store.read("tb").frame["rank"].nunique() == 2
    second.unlink()
    frame = store.read("tb").frame
    assert frame["rank"].unique().tolist() == [0], "no rows of a file that is gone"
    assert_only_new(store, 300)


def test_an_unchanged_run_keeps_its_rows_and_a_growing_one_gains_only_new_ones(tmp_path: Path) -> None:
    """The rule does not cost a re-read of a file that only grew (the usual live case)."""
    root = tmp_path / "logs"
    rank_dir = root / "tb" / "rank_0"
    writer = SyncedWriter(rank_dir, max_queue=100_000)

    def add(steps: range) -> None:
        for step in steps:
            writer.writer.add_scalar("loss", new_loss(step), global_step=step, walltime=T0 + step)
            writer.events += 1
        writer.sync()

    add(range(1, 101))
    store = store_for(root, cached=False)
    assert len(store.read("tb").frame) == 100
    reader = store._runs["tb"].tensorboard._reader
    before = reader.n_events
    add(range(101, 151))
    assert_only_new(store, 150)
    assert store._runs["tb"].tensorboard._reader is reader, "the same reader went on"
    assert reader.n_events - before == 50, "only the 50 new events were decoded"
    writer.close()
