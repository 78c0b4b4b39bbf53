"""MFLossMonitor's lines in every documented variant, read by the vectorised parser (no MindFormers needed).

The real lines of a real MindFormers 1.9 run are tested in ``tests/mindformers/test_log_import.py``; the
variants here follow ``print_output_info`` in MindFormers' ``core/callback/callback.py`` (1.9) and
its earlier forms (no ``global_norm``, ``aux_loss`` for the MoE loss, ``%5.3f`` losses, sink mode).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np
import pytest

from monitor_cb.importers.mindformers_log import (
    LogState,
    is_mindformers_log_dir,
    parse_log,
    rank_dirs,
    rotated_logs,
    run_name,
)

FILE = "[INFO] 2026-12-05 09:22:03,{ms:03d} [mindformers/core/callback/callback.py:747] print_output_info: "
STDOUT = "2026-12-05 09:22:03,{ms:03d} - mindformers/output/log[mindformers/core/callback/callback.py:747] - INFO - "
PROGRESS = "  10.0% |█████                                             | 79.17815 samples/s/p  0:00:00 }"


def rows(text: str, state: LogState | None = None) -> dict[int, dict[str, float]]:
    """{step: {metric: value}} of what was logged, progress lines merged into their step."""
    batch = parse_log(text, state or LogState()).batch
    out: dict[int, dict[str, float]] = {}
    for i, step in enumerate(batch.step):
        row = out.setdefault(int(step), {})
        for name, (values, logged) in batch.floats.items():
            if logged[i]:
                row[name] = float(values[i])
    return out


def line(body: str, prefix: str = FILE, ms: int = 0) -> str:
    return prefix.format(ms=ms) + body


V19 = (
    "{ Epoch:[  1/  2], step:[    2/   20], loss:[4.148911/4.159635], per_step_time: 25ms, lr: 0.0005, "
    "overflow cond: False, loss_scale: 65536.0, global_norm: [1.3723053], train_throughput_per_npu: 0.120T"
)


def test_mindformers_19_line_and_its_progress_line() -> None:
    got = rows(line(V19) + "\n" + line(PROGRESS, ms=1) + "\n")
    assert got == {
        2: {
            "epoch": 1.0,
            "loss": pytest.approx(4.148911),
            "step_time": pytest.approx(0.025),
            "lr": pytest.approx(0.0005),
            "overflow": 0.0,
            "loss_scale": 65536.0,
            "grad_norm": pytest.approx(1.3723053),
            "tflops_per_npu": pytest.approx(0.12),
            "throughput": pytest.approx(79.17815),
        }
    }


def test_the_stdout_prefix_and_the_epoch_make_the_global_step() -> None:
    text = line(V19.replace("Epoch:[  1/  2]", "Epoch:[  2/  2]"), STDOUT, ms=500)
    state = LogState()
    batch = parse_log(text, state).batch
    assert list(batch.step) == [22], "(epoch - 1) x 20 + 2"
    assert state.meta()["total_steps"] == 40 and state.epochs == 2 and state.steps_per_epoch == 20
    assert batch.t[0] % 60 == pytest.approx(3.5)  # 09:22:03,500 local time


@pytest.mark.parametrize(
    ("body", "expected", "absent"),
    [
        (  # sink mode: the loss alone, %5.6f
            "{ Epoch:[  1/  1], step:[    3/   20], loss: 2.500000, per_step_time: 9ms, lr: 1e-05, "
            "overflow cond: True, loss_scale: 1024.0, global_norm: [nan]",
            {"loss": 2.5, "lr": 1e-05, "overflow": 1.0, "loss_scale": 1024.0, "grad_norm": math.nan},
            (),
        ),
        (  # no lr (a schedule MFLossMonitor cannot evaluate), no loss scale, no clipping
            "{ Epoch:[  1/  1], step:[    3/   20], loss:[2.500/2.600], per_step_time: 9ms, "
            "overflow cond: False, loss_scale: unavailable, global_norm: None",
            {"loss": 2.5, "overflow": 0.0},
            ("lr", "loss_scale", "grad_norm"),
        ),
        (  # before global_norm existed (MindFormers 1.0)
            "{ Epoch:[  1/  1], step:[    3/   20], loss:[ 2.500/ 2.600], per_step_time: 9ms, lr: 0.001, "
            "overflow cond: False, loss_scale: 1.0",
            {"loss": 2.5, "lr": 0.001, "loss_scale": 1.0},
            ("grad_norm",),
        ),
        (  # print_separate_loss, MindFormers 1.9: MoE and MTP models
            "{ Epoch:[  1/  1], step:[    3/   20], loss:[2.500000/2.600000], lm_loss: 2.400000, "
            "load_balancing_loss: 0.050000, mtp_loss: 0.050000, indexer_loss: 0.010000, per_step_time: 9ms, "
            "lr: 0.001, overflow cond: False, loss_scale: 1.0, global_norm: [0.5]",
            {"loss": 2.5, "loss_lm": 2.4, "loss_load_balancing": 0.05, "loss_mtp": 0.05, "loss_indexer": 0.01},
            (),
        ),
        (  # print_separate_loss before 1.6: aux_loss, %5.3f
            "{ Epoch:[  1/  1], step:[    3/   20], loss:[2.500/2.600], aux_loss: 0.050, mtp_loss: 0.020, "
            "per_step_time: 9ms, lr: 0.001, overflow cond: False, loss_scale: 1.0, global_norm: 0.5",
            {"loss": 2.5, "loss_aux": 0.05, "loss_mtp": 0.02, "grad_norm": 0.5},
            ("loss_lm",),
        ),
        (  # a 1-element lr array (np.array2string of a schedule's value on Ascend)
            "{ Epoch:[  1/  1], step:[    3/   20], loss:[2.5/2.6], per_step_time: 9ms, lr: [2.5e-05], "
            "overflow cond: False, loss_scale: 1.0, global_norm: [0.5]",
            {"lr": 2.5e-05},
            (),
        ),
    ],
)
def test_documented_variants(body: str, expected: dict[str, float], absent: tuple[str, ...]) -> None:
    got = rows(line(body))[3]
    for name, value in expected.items():
        assert math.isnan(got[name]) if math.isnan(value) else got[name] == pytest.approx(value), (name, got)
    assert not set(absent) & set(got), got


def test_other_lines_are_skipped_and_broken_step_lines_counted() -> None:
    text = "\n".join(
        [
            line("Full model flops is 12, Shard model flops is 12."),
            line("{ Epoch:[  1/  1], step:[    1/   20], loss:[4.1/4.1], per_step_time: 5ms"),
            line("{ Epoch:[  1/  1], step:[ garbage ], loss:[4.1/4.1]"),  # MFLossMonitor's mark, no step
            line("{ Epoch:[  1/  1], step:[    2/    0], loss:[4.1/4.1]"),  # an epoch of 0 steps
            "\x00\x01 binary \xff",
            line(".........Training Over!............."),
            "",
        ]
    )
    state = LogState()
    parsed = parse_log(text, state)
    assert list(parsed.batch.step) == [1]
    assert len(parsed.unparsed_offsets) == 2 and state.unparsed == 2
    assert state.meta()["status"] == "finished"


def test_a_progress_line_in_the_next_chunk_joins_the_last_step() -> None:
    state = LogState()
    first = rows(line(V19) + "\n", state)
    second = rows(line(PROGRESS) + "\n", state)
    assert set(first) == {2} and second == {2: {"throughput": pytest.approx(79.17815)}}
    assert rows(line(PROGRESS) + "\n") == {}, "a progress line with no step before it is dropped"


def test_many_lines_parse_in_one_pass() -> None:
    lines = [line(V19.replace("step:[    2/   20]", f"step:[{i:5d}/99999]")) for i in range(1, 2001)]
    batch = parse_log("\n".join(lines), LogState()).batch
    assert list(batch.step[:3]) == [1, 2, 3] and len(batch) == 2000
    assert np.all(batch.floats["loss"][1])


# ----------------------------------------------------------------------------- where the logs are
def test_rank_directories_rotation_names_and_run_names(tmp_path: Path) -> None:
    log = tmp_path / "llama_sft" / "output" / "log"
    for rank in (0, 1, 10):
        (log / f"rank_{rank}").mkdir(parents=True)
        (log / f"rank_{rank}" / "info.log").write_text(line(V19) + "\n")
    (log / "rank_2").mkdir()  # no info.log yet: not a rank
    (log / "rank_0" / "info.log.1").write_text("x\n")
    (log / "rank_0" / "info.log.3").write_text("x\n")
    assert sorted(rank_dirs(log)) == [0, 1, 10] and is_mindformers_log_dir(log)
    assert rank_dirs(log / "rank_1") == {1: log / "rank_1"}, "one rank's directory is a run of that rank"
    assert [p.name for p in rotated_logs(log / "rank_0")] == ["info.log.3", "info.log.1"], "oldest first"
    assert run_name(log) == "llama_sft" and run_name(log / "rank_1") == "rank_1"
    assert not is_mindformers_log_dir(tmp_path) and not is_mindformers_log_dir(tmp_path / "missing")


def test_a_fifo_or_a_directory_named_info_log_is_no_log(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    os.mkfifo(tmp_path / "a" / "info.log")
    (tmp_path / "b" / "info.log").mkdir(parents=True)
    assert not is_mindformers_log_dir(tmp_path / "a") and not is_mindformers_log_dir(tmp_path / "b")


def test_timestamps_of_both_prefixes_are_local_time() -> None:
    file_t = parse_log(line(V19, FILE, ms=250), LogState()).batch.t[0]
    stdout_t = parse_log(line(V19, STDOUT, ms=250), LogState()).batch.t[0]
    assert file_t == stdout_t
    assert time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(file_t)) == "2026-12-05 09:22:03"
    assert file_t % 1 == pytest.approx(0.25)
    assert math.isnan(parse_log(V19, LogState()).batch.t[0]), "a line with no timestamp has no time"


def test_a_usual_line_with_a_field_of_a_later_version_goes_field_by_field() -> None:
    got = rows(line(V19 + ", mfu: 0.41") + "\n" + line(V19.replace("step:[    2/", "step:[    3/")))
    assert got[2]["tflops_per_npu"] == pytest.approx(0.12) and got[3]["loss"] == pytest.approx(4.148911)


def test_usual_lines_take_the_split_path(monkeypatch: pytest.MonkeyPatch) -> None:
    import monitor_cb.importers.mindformers_log as module

    monkeypatch.setattr(module, "FIELDS", None)  # the field-by-field path would fail on it
    text = "\n".join(line(V19.replace("step:[    2/", f"step:[{s:5d}/"), ms=s) + "\n" + line(PROGRESS) for s in (1, 2))
    assert rows(text) == {
        s: {
            "epoch": 1.0,
            "loss": pytest.approx(4.148911),
            "step_time": pytest.approx(0.025),
            "lr": pytest.approx(0.0005),
            "overflow": 0.0,
            "loss_scale": 65536.0,
            "grad_norm": pytest.approx(1.3723053),
            "tflops_per_npu": pytest.approx(0.12),
            "throughput": pytest.approx(79.17815),
        }
        for s in (1, 2)
    }
