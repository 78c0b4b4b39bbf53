"""One rank's MindFormers log as a source: hostile files in a shared root cost a counted bad line, nothing more."""

from __future__ import annotations

from pathlib import Path

from monitor_cb.ingest.mindformers_source import MindFormersLogGroup, MindFormersLogSource

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


def test_a_rotated_file_linked_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    rank = root / "output" / "log" / "rank_0"
    rank.mkdir(parents=True)
    secret = tmp_path / "elsewhere.log"
    write(secret, range(1, 10))
    (rank / "info.log.1").symlink_to(secret)
    write(rank / "info.log", range(10, 12))
    group = MindFormersLogGroup(root / "output" / "log", root)
    group.poll()
    source = group.sources[0]
    assert list(source.frame()["step"]) == [10, 11]
    assert source.bad_count == 1 and "outside the log root" in source.bad_lines[0].reason


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
