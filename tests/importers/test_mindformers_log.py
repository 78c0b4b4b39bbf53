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


# ----------------------------------------------------------------------------- MindFormers 2.x
def print_log_2x(log_info: dict) -> str:
    """The body of a 2.x step line, built with the format strings of MindFormers 2.0.0's own
    ``mindformers/pynative/callback/loss_callback.py`` (``_print_log``), copied here word for word:
    2.x cannot be installed from PyPI (it needs ``hyper-parallel`` and MindSpore 2.10), so these
    lines stand for the ones it writes."""
    cur_step = log_info.get("cur_step", 0)
    max_steps = log_info.get("max_steps", 0)
    loss_val = log_info.get("loss")
    if loss_val is None:
        log_parts = [
            f"step:[{cur_step:5d}/{max_steps:5d}]",
            "loss: N/A (non-last PP stage, refer to last stage for real loss)",
            f"per_step_time: {log_info.get('step_time'):6d}ms",
        ]
    else:
        log_parts = [
            f"step:[{cur_step:5d}/{max_steps:5d}]",
            f"loss: {loss_val:10.6f}",
            f"per_step_time: {log_info.get('step_time'):6d}ms",
        ]
    load_balancing_loss = log_info.get("load_balancing_loss")
    if load_balancing_loss is not None:
        log_parts.append(f"load_balancing_loss: {load_balancing_loss:10.6f}")
    indexer_loss = log_info.get("indexer_loss")
    if indexer_loss is not None:
        log_parts.append(f"indexer_loss: {indexer_loss:10.6f}")
    mtp_loss = log_info.get("mtp_loss")
    if mtp_loss is not None:
        log_parts.append(mtp_loss)
    lr = log_info.get("learning_rate")
    if lr is not None:
        log_parts.append(f"lr: {lr:10.6e}")
    grad_norm = log_info.get("grad_norm")
    if grad_norm is not None:
        log_parts.append(f"grad_norm: {grad_norm:10.6f}")
    else:
        log_parts.append("grad_norm: NaN")
    throughput = log_info.get("throughput")
    if throughput is not None:
        log_parts.append(f"throughput: {throughput:6.2f}T")
    return f"{{ {', '.join(log_parts)} }}"


def mtp_2x(values: list[float]) -> str:
    """2.x's ``mtp_loss`` text (``loss_callback.py``, ``on_step_end``)."""
    return ", ".join(f"mtp_{str(ind + 1)}_loss: {val:10.6f}" for ind, val in enumerate(values))  # noqa: RUF010


STDOUT_2X = "2026-12-05 09:22:03,{ms:03d} - mindformers[mindformers/pynative/callback/loss_callback.py:310] - INFO - "


@pytest.mark.parametrize("path", ["split", "field by field"])
def test_mindformers_2x_lines_made_by_its_own_format(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import monitor_cb.importers.mindformers_log as module

    if path == "split":
        monkeypatch.setattr(module, "FIELDS", None)  # the field-by-field path would fail on it
    else:
        monkeypatch.setattr(module, "split_2x", lambda line: None)
    full = {
        "loss": 2.345678,
        "load_balancing_loss": 0.0123,
        "indexer_loss": 0.5,
        "grad_norm": 1.234567,
        "cur_step": 7,
        "max_steps": 100,
        "step_time": 1234,
        "throughput": 12.3456,
        "learning_rate": 1e-4,
        "mtp_loss": mtp_2x([0.25, 0.125]),
    }
    pipeline_stage = {"loss": None, "cur_step": 8, "max_steps": 100, "step_time": 1200}
    no_norm = {"loss": 2.0, "cur_step": 9, "max_steps": 100, "step_time": 1100, "grad_norm": None}
    nan_norm = {"loss": 2.0, "cur_step": 10, "max_steps": 100, "step_time": 1100, "grad_norm": math.nan}
    text = "\n".join(line(print_log_2x(info), STDOUT_2X) for info in (full, pipeline_stage, no_norm, nan_norm))
    state = LogState()
    got = rows(text, state)
    assert set(got) == {7, 8, 9, 10}, "the 2.x step is global"
    assert got[7] == {
        "loss": pytest.approx(2.345678),
        "loss_load_balancing": pytest.approx(0.0123),
        "loss_indexer": pytest.approx(0.5),
        "loss_mtp_1": pytest.approx(0.25),
        "loss_mtp_2": pytest.approx(0.125),
        "step_time": pytest.approx(1.234),
        "lr": pytest.approx(1e-4),
        "grad_norm": pytest.approx(1.234567),
        "tflops_per_npu": pytest.approx(12.35, abs=0.006),
    }
    assert got[8] == {"step_time": pytest.approx(1.2)}, "loss N/A on a pipeline stage: not logged, not a NaN"
    assert "grad_norm" not in got[9], "'grad_norm: NaN' means none was computed"
    assert math.isnan(got[10]["grad_norm"]), "a NaN norm prints as 'nan': a logged NaN"
    assert "epoch" not in got[7] and state.meta()["total_steps"] == 100 and state.unparsed == 0


def test_leftover_spinner_characters_before_the_time_stamp() -> None:
    text = (
        "\r-\\|/"
        + line(V19, STDOUT, ms=250)
        + "\n"
        + "...."
        + line(print_log_2x({"loss": 1.0, "cur_step": 3, "max_steps": 9, "step_time": 5}), STDOUT_2X, ms=500)
    )
    batch = parse_log(text, LogState()).batch
    assert list(batch.step) == [2, 3]
    assert batch.t[0] % 60 == pytest.approx(3.25) and batch.t[1] % 60 == pytest.approx(3.5)


# ----------------------------------------------------------------------------- steps out of range
@pytest.mark.parametrize(
    "core",
    [
        "Epoch:[  0/  2], step:[    5/   20]",  # epoch 0
        "Epoch:[  1/  2], step:[    0/   20]",  # step 0
        "Epoch:[ -1/  2], step:[    5/   20]",  # negative
        "Epoch:[  1/  2], step:[   -5/   20]",
        f"Epoch:[  2/  2], step:[    5/{2**40}]",  # 2^40 steps per epoch: past any step
        f"Epoch:[{2**62}/  2], step:[    5/{2**3}]",  # (epoch - 1) * n wraps round int64
        f"Epoch:[  1/  2], step:[{2**64 + 5}/   20]",  # past int64
    ],
)
def test_a_step_out_of_range_is_a_bad_line_and_lands_on_no_step(core: str) -> None:
    good = line(V19.replace("Epoch:[  1/  2], step:[    2/   20]", "Epoch:[  1/  2], step:[    5/   20]"))
    bad = line(V19.replace("Epoch:[  1/  2], step:[    2/   20]", core).replace("4.148911", "777"))
    state = LogState()
    parsed = parse_log("\n".join([good, bad, line(PROGRESS)]) + "\n", state)
    got = rows("\n".join([good, bad, line(PROGRESS)]) + "\n")
    assert list(parsed.batch.step) == [5] and parsed.unparsed_offsets == [1] and state.unparsed == 1
    assert got[5]["loss"] == pytest.approx(4.148911), "the bad line's 777 never lands on step 5"
    assert "throughput" not in got[5], "the progress line after a bad step line is not step 5's"


def test_a_2x_step_out_of_range_is_a_bad_line() -> None:
    lines = [print_log_2x({"loss": 1.0, "cur_step": s, "max_steps": 9, "step_time": 5}) for s in (0, -3, 2**41, 4)]
    parsed = parse_log("\n".join(line(body, STDOUT_2X) for body in lines), LogState())
    assert list(parsed.batch.step) == [4] and parsed.unparsed_offsets == [0, 1, 2]


# ----------------------------------------------------------------------------- TrainingStateMonitor
def to_log(step: int, tag: str, data: object, epochs: int = 2, per_epoch: int = 20) -> str:
    """A line as TrainingStateMonitor's ``_to_log`` writes it (MindFormers 1.9 ``core/callback/callback.py``:
    ``"Epoch:[%3d/%3d], step:[%5d/%5d] %s: %s"``, with its epoch and in-epoch step)."""
    epoch, in_epoch = (step - 1) // per_epoch + 1, (step - 1) % per_epoch + 1
    return line("Epoch:[%3d/%3d], step:[%5d/%5d] %s: %s" % (epoch, epochs, in_epoch, per_epoch, tag, data))  # noqa: UP031


def test_per_parameter_lines_keep_their_names() -> None:
    wq = "local_norm/model.layers.0.attention.wq.weight"
    text = "\n".join(
        [
            line(V19),  # step 2
            to_log(2, wq, np.float32(0.5)),
            to_log(2, "local_norm/model.layers.1.feed_forward.w1.weight", np.array([0.25], np.float32)),
            to_log(2, "micro_local_lm_loss", 4.0),  # one per micro-batch: averaged
            to_log(2, "micro_local_lm_loss", 5.0),
            to_log(2, "max_attention_logit/model.layers.0.attention", [1.0, 2.0]),  # a list: no scalar
            to_log(22, wq, float("nan")),  # epoch 2, step 2
            line("step:[    3/  100] max_attention_logit/max: 12.5", STDOUT_2X),  # 2.x's form, no epoch
            line(PROGRESS),
        ]
    )
    state = LogState()
    got = rows(text, state)
    assert got[2][wq] == pytest.approx(0.5) and got[2]["local_norm/model.layers.1.feed_forward.w1.weight"] == 0.25
    assert got[2]["micro_local_lm_loss"] == pytest.approx(4.5) and got[2]["loss"] == pytest.approx(4.148911)
    assert not any(name.startswith("max_attention_logit/model") for row in got.values() for name in row)
    assert math.isnan(got[22][wq]) and got[3] == {"max_attention_logit/max": 12.5}
    assert state.unparsed == 0 and state.last_step == 2, "per-parameter lines are not step lines"


def test_per_parameter_lines_keep_the_usual_form_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    import monitor_cb.importers.mindformers_log as module

    monkeypatch.setattr(module, "FIELDS", None)  # the field-by-field path would fail on it
    got = rows("\n".join([line(V19), to_log(2, "local_norm/a.b", 0.5)]))
    assert got[2]["loss"] == pytest.approx(4.148911) and got[2]["local_norm/a.b"] == 0.5


def test_first_and_last_time_stamps_and_the_first_step_line() -> None:
    state = LogState()
    parse_log(line("loading the checkpoint", ms=1) + "\n" + line("compiling", ms=9) + "\n", state)
    assert not state.stepped and state.last_t - state.first_t == pytest.approx(0.008, abs=1e-4)
    parse_log(line(V19, ms=20) + "\n", state)
    assert state.stepped and state.last_t - state.first_t == pytest.approx(0.019, abs=1e-4)


def test_a_2x_line_with_a_part_of_a_later_version_goes_field_by_field() -> None:
    body = print_log_2x({"loss": 1.5, "cur_step": 3, "max_steps": 9, "step_time": 5, "grad_norm": 0.5})
    got = rows(line(body.replace(" }", ", mfu:   0.41 }"), STDOUT_2X) + "\n" + line(body, STDOUT_2X))
    assert got == {3: {"loss": 1.5, "step_time": pytest.approx(0.005), "grad_norm": 0.5}}
