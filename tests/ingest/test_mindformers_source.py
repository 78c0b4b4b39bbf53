"""One rank's MindFormers log as a source: hostile files in a shared root cost a counted bad line, nothing more."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from monitor_cb.ingest.mindformers_source import MindFormersLogGroup, MindFormersLogSource
from monitor_cb.ingest.store import RunStore

LINE = (
    "[INFO] 2026-12-05 09:22:03,997 [mindformers/core/callback/callback.py:747] print_output_info: "
    "{{ Epoch:[  1/  1], step:[{step:5d}/   20], loss:[4.148911/4.159635], per_step_time: 25ms, lr: 0.0005, "
    "overflow cond: False, loss_scale: 65536.0, global_norm: [1.3723053]\n"
)


def write(path: Path, steps: range) -> None:
    with path.open("a") as out:
        out.write("".join(LINE.format(step=s) for s in steps))


def test_an_overlong_unfinished_line_is_skipped_and_counted_not_buffered(tmp_path: Path) -> None:
    rank = tmp_path / "rank_0"
    rank.mkdir()
    write(rank / "info.log", range(1, 3))
    with (rank / "info.log").open("a") as out:
        out.write("x" * 5000)  # no newline yet, longer than the cap
    source = MindFormersLogSource(rank, 0, tmp_path, line_cap=1024)
    source.poll()
    assert list(source.frame()["step"]) == [1, 2] and source.bad_count == 1
    with (rank / "info.log").open("a") as out:
        out.write("y\n")
    write(rank / "info.log", range(3, 5))
    source.poll()
    assert list(source.frame()["step"]) == [1, 2, 3, 4] and source.bad_count == 1


def test_a_log_that_grows_is_read_once_and_a_new_rank_joins(tmp_path: Path) -> None:
    log = tmp_path / "log"
    (log / "rank_0").mkdir(parents=True)
    write(log / "rank_0" / "info.log", range(1, 4))
    group = MindFormersLogGroup(log, tmp_path)
    assert group.poll() == 3 and group.poll() == 0
    write(log / "rank_0" / "info.log", range(4, 6))
    (log / "rank_1").mkdir()
    write(log / "rank_1" / "info.log", range(1, 6))
    assert group.poll() == 2 + 5 and sorted(group.sources) == [0, 1]
    assert group.meta["total_steps"] == 20 and group.meta["name"] == "log" and "status" not in group.meta
    assert group.meta is group.meta, "the same dict while nothing changes (the store caches on it)"


def rotate(log: Path, keep: int = 5) -> None:
    """What Python's RotatingFileHandler does: info.log.4 -> .5, ..., info.log -> info.log.1."""
    for i in range(keep - 1, 0, -1):
        older = log.with_name(f"{log.name}.{i}")
        if older.exists():
            older.rename(log.with_name(f"{log.name}.{i + 1}"))
    log.rename(log.with_name(f"{log.name}.1"))


def test_two_rotations_between_two_polls_lose_no_line(tmp_path: Path) -> None:
    rank = tmp_path / "rank_0"
    rank.mkdir()
    log = rank / "info.log"
    write(log, range(1, 161))
    source = MindFormersLogSource(log, 0, tmp_path)
    source.poll()
    write(log, range(161, 171))  # not read yet
    rotate(log)
    write(log, range(171, 181))  # a whole file written and rotated between two polls
    rotate(log)
    write(log, range(181, 191))
    source.poll()
    assert list(source.frame()["step"]) == list(range(1, 191)) and source.bad_count == 0


def test_a_step_out_of_range_never_overwrites_another_step(tmp_path: Path) -> None:
    rank = tmp_path / "rank_0"
    rank.mkdir()
    write(rank / "info.log", range(1, 6))
    with (rank / "info.log").open("a") as out:
        for core in ("  0/  1], step:[    5", f"  2/  1], step:[    5/{2**40}] x", f"{2**62}/  1], step:[    5"):
            out.write(LINE.format(step=5).replace("  1/  1], step:[    5", core).replace("4.148911", "777"))
    source = MindFormersLogSource(rank, 0, tmp_path)
    source.poll()
    frame = source.frame()
    assert list(frame["step"]) == [1, 2, 3, 4, 5] and frame["loss"].iloc[-1] == 4.148911
    assert source.bad_count == 3


def test_sparse_and_oversized_rotated_files_are_refused_by_name_without_reading(tmp_path: Path) -> None:
    root = tmp_path / "root"
    rank = root / "job" / "output" / "log" / "rank_0"
    rank.mkdir(parents=True)
    write(rank / "info.log", range(1, 3))
    for i in range(1, 6):
        with (rank / f"info.log.{i}").open("wb") as out:
            out.truncate(1 << 30)  # 1 GiB of hole: no block on disk
    store = RunStore(root, cache=False)
    info = {i.id: i for i in store.list_runs()}["job/output/log"]
    assert info.last_step == 2 and info.bad_lines == 0
    notes = store.skipped_files()
    assert len(notes) == 5 and all("is sparse" in note for note in notes), notes


def test_a_rotated_file_linked_out_of_the_root_is_a_skipped_file(tmp_path: Path) -> None:
    root = tmp_path / "root"
    rank = root / "job" / "output" / "log" / "rank_0"
    rank.mkdir(parents=True)
    write(tmp_path / "elsewhere.log", range(1, 10))
    (rank / "info.log.1").symlink_to(tmp_path / "elsewhere.log")
    write(rank / "info.log", range(10, 12))
    store = RunStore(root, cache=False)
    info = {i.id: i for i in store.list_runs()}["job/output/log"]
    assert info.first_step == 10 and info.bad_lines == 0, "not '1 corrupt line skipped'"
    (note,) = store.skipped_files()
    assert note.startswith(f"skipped {rank / 'info.log.1'}: ") and "outside the log root" in note


def stamped(text: str, second: int) -> str:
    """A MindFormers file-handler line of 2024-03-01 10:00:<second> (a replayed old log)."""
    return f"[INFO] 2024-03-01 10:00:{second:02d},000 [mindformers/trainer/base_trainer.py:1] train: {text}\n"


def test_a_log_growing_before_its_first_step_is_starting_then_running_and_lasts_its_own_span(tmp_path: Path) -> None:
    from monitor_cb.views.kpis import compute_kpis

    rank = tmp_path / "job" / "output" / "log" / "rank_0"
    rank.mkdir(parents=True)
    log = rank / "info.log"
    log.write_text(stamped("build context", 0))
    now = [1_800_000_000.0]  # 2027: the replay is years after the log's own time stamps
    store = RunStore(tmp_path, cache=False, clock=lambda: now[0], rescan_interval_s=0.0)

    def info():
        now[0] += 1.0
        store.refresh(force=True)
        return {i.id: i for i in store.list_runs()}["job/output/log"]

    assert info().status == "ended", "nobody saw it grow"
    with log.open("a") as out:
        out.write(stamped("compiling the graph", 30))
    starting = info()
    assert starting.status == "starting" and starting.last_step is None and "no step line" in starting.reason
    with log.open("a") as out:
        out.write(stamped("{ Epoch:[  1/  1], step:[    1/   20], loss:[4.1/4.1], per_step_time: 25ms", 45))
    running = info()
    assert running.status == "running" and running.last_step == 1
    kpis = compute_kpis(store.read("job/output/log").frame, running, now[0])
    assert kpis.elapsed_s == pytest.approx(45.0), "the log's own span, not now minus its first line"


def test_a_worker_log_linked_out_of_the_root_is_a_skipped_file_and_the_other_ranks_read(tmp_path: Path) -> None:
    root = tmp_path / "root"
    msrun = root / "job" / "output" / "msrun_log"
    msrun.mkdir(parents=True)
    write(tmp_path / "secret.log", range(1, 5))
    (msrun / "worker_1.log").symlink_to(tmp_path / "secret.log")
    os.mkfifo(msrun / "worker_2.log")  # not a log: never opened (a FIFO would hang a reader)
    write(msrun / "worker_0.log", range(1, 4))
    store = RunStore(root, cache=False)
    info = {i.id: i for i in store.list_runs()}["job/output/msrun_log"]
    assert info.last_step == 3 and info.n_records == 3
    (note,) = store.skipped_files()
    assert note.startswith(f"skipped {msrun / 'worker_1.log'}: ") and "outside the log root" in note


def test_per_parameter_lines_of_a_log_run_are_one_family(tmp_path: Path) -> None:
    """TrainingStateMonitor's ``local_norm/<param>`` lines, read through the store, are the family the
    per-parameter heatmap draws (:mod:`monitor_cb.analysis.families`)."""
    from monitor_cb.analysis.families import find_families
    from tests.importers.test_mindformers_log import to_log

    log = tmp_path / "job" / "output" / "log" / "rank_0" / "info.log"
    log.parent.mkdir(parents=True)
    write(log, range(1, 3))
    with log.open("a") as out:
        for step in (1, 2):
            for n in range(3):
                out.write(to_log(step, f"local_norm/model.layers.{n}.attention.wq.weight", n) + "\n")
    frame = RunStore(tmp_path, cache=False).read("job/output/log").frame
    (family,) = find_families(frame.columns)
    assert family.name == "local_norm" and len(family) == 3
    assert list(frame["local_norm/model.layers.2.attention.wq.weight"]) == [2.0, 2.0]


def test_rotated_files_are_read_a_slice_at_a_time_and_one_over_the_cap_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import monitor_cb.ingest.mindformers_source as module

    monkeypatch.setattr(module, "ROTATED_SLICE", 300)  # lines of about 200 bytes cross every slice's end
    monkeypatch.setattr(module, "ROTATED_CAP", 20_000)
    rank = tmp_path / "rank_0"
    rank.mkdir()
    write(rank / "info.log.3", range(1, 200))  # over the cap: not read, named
    write(rank / "info.log.2", range(200, 230))
    with (rank / "info.log.2").open("a") as out:
        out.write("z" * 700 + "\n")  # longer than a slice: skipped as one bad line
    write(rank / "info.log.2", range(230, 240))
    write(rank / "info.log.1", range(240, 260))
    write(rank / "info.log", range(260, 262))
    source = MindFormersLogSource(rank / "info.log", 0, tmp_path)
    source.poll()
    assert list(source.frame()["step"]) == list(range(200, 262)) and source.bad_count == 1
    assert (
        list(source.skipped) == [str(rank / "info.log.3")]
        and "over the 20,000-byte cap" in source.skipped[str(rank / "info.log.3")]
    )


def test_a_large_first_read_takes_the_lines_that_were_there_when_mapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """polars reads the file itself; lines appended after it was mapped (a torn one too) wait for the tail."""
    import mmap

    import monitor_cb.ingest.mindformers_source as module
    from monitor_cb.importers.mindformers_log import read_file_lines

    log = tmp_path / "info.log"
    write(log, range(1, 4))
    with log.open("a") as out:
        out.write("\n")  # a blank line is a line too
    size = log.stat().st_size
    with log.open("rb") as handle, mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ) as mapped:
        write(log, range(4, 6))
        with log.open("a") as out:
            out.write("[INFO] 2026-12-05 09:22:04,000 [x] { Epoch:[  1/  1], step:[    6/  ")  # torn
        lines = read_file_lines(str(log), mapped, size)
    assert lines.len() == 4 and "step:[    3/" in lines[2] and lines[3] == ""
    monkeypatch.setattr(module, "WHOLE_MIN_BYTES", 1)
    source = MindFormersLogSource(log, 0, tmp_path)
    source.poll()
    assert list(source.frame()["step"]) == [1, 2, 3, 4, 5] and source.bad_count == 0
    with log.open("a") as out:
        out.write("20], loss:[4.1/4.1], per_step_time: 25ms\n")
    source.poll()
    assert list(source.frame()["step"]) == [1, 2, 3, 4, 5, 6] and source.bad_count == 0
