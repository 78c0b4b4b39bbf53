"""MindFormers 1.9's own TensorBoard output, read by us as TensorBoard's own loader reads it.

The session's YAML and overflow trainings run with ``tensorboard: {tensorboard_dir: ...}`` (loss scale
and timers on), so MFLossMonitor writes event files through tensorboardX into ``tensorboard/rank_0``.
TensorBoard's ``EventAccumulator`` (size guidance 0: nothing sampled away) is the reference: every
scalar of every tag, step by step, equals what ``RunStore`` reads (float32 bit for bit, NaN for NaN),
the ``vs samples`` series give ``samples``, the config text summaries the metadata's ``config``; the
run lists as ended with no status recorded (nobody saw it grow) and LiveMonitor's JSONL of the same
job has the same values. The tag table below is the test's own, not the importer's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from monitor_cb.cli import main
from monitor_cb.config_masking import mask_config_texts
from monitor_cb.ingest.store import RunStore
from tests.mindformers.harness import TrainedRun

pytestmark = [pytest.mark.mindspore, pytest.mark.slow]
# the reference loader, and the Event proto our reader needs (an optional dependency)
event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")

TB_RUN = "tensorboard"  # the run's id under the job's working directory
STEPS = 20
BATCH = 2
# MindFormers' scalar tag -> (our column, what our value is multiplied by to be the tag's)
SCALARS = {
    "loss": ("loss", 1.0),
    "learning-rate": ("lr", 1.0),
    "grad-norm": ("grad_norm", 1.0),
    "loss-scale": ("loss_scale", 1.0),
    "batch-size": ("batch_size", 1.0),
    "iteration-time": ("step_time", 1000.0),  # MindFormers writes int(ms); we keep seconds
    "throughput": ("throughput", 1.0),
    "model-flops-throughput-per-npu": ("tflops_per_npu", 1.0),
    "B-samples-per-day": ("b_samples_per_day", 1.0),
}
VS_SAMPLES = "_vs_samples"  # tensorboardX's spelling of MindFormers' "loss vs samples"


def accumulator(run: TrainedRun) -> Any:
    """TensorBoard's own loader on the rank directory, keeping every event."""
    loaded = event_accumulator.EventAccumulator(
        str(run.tensorboard_dir / "rank_0"), size_guidance={event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0}
    )
    loaded.Reload()
    return loaded


def f32(value: float) -> np.float32:
    return np.float32(value)


def same_f32(ours: float, theirs: float) -> bool:
    """The same float32 (NaN equals NaN): TensorBoard's simple_value is a float32."""
    if math.isnan(theirs):
        return math.isnan(ours)
    return f32(ours) == f32(theirs)


@dataclass(frozen=True)
class Job:
    """One session training's event directory, as TensorBoard loads it and as we read it."""

    run: TrainedRun
    tb: Any  # EventAccumulator
    frame: Any  # RunStore's pandas frame


@pytest.fixture(scope="module", params=["yaml_run", "overflow_run"])
def job(request: pytest.FixtureRequest) -> Job:
    run: TrainedRun = request.getfixturevalue(request.param)
    return Job(run, accumulator(run), RunStore(run.cwd, cache=False).read(TB_RUN).frame)


def test_every_scalar_tensorboard_loads_is_read_step_by_step_float32_exact(job: Job) -> None:
    tb, frame = job.tb, job.frame
    tags = tb.Tags()["scalars"]
    base_tags = [tag for tag in tags if not tag.endswith(VS_SAMPLES)]
    assert sorted(base_tags) == sorted(SCALARS), "every tag MindFormers wrote is one we expect (none unmapped)"
    assert sorted(tag for tag in tags if tag.endswith(VS_SAMPLES)) == sorted(
        f"{tag}{VS_SAMPLES}" for tag in SCALARS if tag not in ("model-flops-throughput-per-npu", "B-samples-per-day")
    )
    assert frame["step"].tolist() == list(range(1, STEPS + 1)) and set(frame["rank"]) == {0}
    assert set(frame.columns) == {"step", "t", "rank", "seg", "samples"} | {column for column, _ in SCALARS.values()}
    compared = 0
    for tag in base_tags:
        column, scale = SCALARS[tag]
        events = tb.Scalars(tag)
        assert [e.step for e in events] == frame["step"].tolist(), tag
        for event, ours in zip(events, frame[column], strict=True):
            assert same_f32(ours * scale, event.value), (tag, event.step, ours, event.value)
            compared += 1
    assert compared == len(SCALARS) * STEPS
    # t: the wall time of the step's first event, as TensorBoard stored it (a double, not rounded)
    first_wall = {}
    for tag in base_tags:
        for event in tb.Scalars(tag):
            first_wall[event.step] = min(first_wall.get(event.step, math.inf), event.wall_time)
    assert frame["t"].tolist() == [first_wall[step] for step in frame["step"]]


def test_the_vs_samples_series_lose_nothing(job: Job) -> None:
    """Each ``X_vs_samples`` event is (samples, X): our ``samples`` column and X's column hold both."""
    tb, frame = job.tb, job.frame
    assert frame["samples"].tolist() == [step * BATCH for step in range(1, STEPS + 1)]
    for tag in tb.Tags()["scalars"]:
        if tag.endswith(VS_SAMPLES):
            column, scale = SCALARS[tag.removesuffix(VS_SAMPLES)]
            events = tb.Scalars(tag)
            assert [e.step for e in events] == frame["samples"].tolist(), tag
            assert all(same_f32(v * scale, e.value) for e, v in zip(events, frame[column], strict=True)), tag


def test_the_overflow_steps_are_nan_grad_norms_and_halved_scales_in_both_readers(overflow_run: TrainedRun) -> None:
    frame = RunStore(overflow_run.cwd, cache=False).read(TB_RUN).frame
    tb = accumulator(overflow_run)
    tb_norms = [e.value for e in tb.Scalars("grad-norm")]
    overflowed = [math.isnan(v) for v in tb_norms]
    assert overflowed[:2] == [True, True] and not all(overflowed), "the test's premise: early steps overflow"
    assert [math.isnan(v) for v in frame["grad_norm"]] == overflowed
    assert frame["loss_scale"].iloc[0] == pytest.approx(5e37, rel=1e-6), "1e38 halved by the first overflow"


def test_the_config_text_summaries_are_the_runs_config(yaml_run: TrainedRun) -> None:
    tb = accumulator(yaml_run)
    texts = {}
    for tag in tb.Tags()["tensors"]:
        (event,) = tb.Tensors(tag)  # MindFormers writes each section once, at step 1
        texts[tag.removesuffix("/text_summary")] = b"".join(event.tensor_proto.string_val).decode()
    info = {i.id: i for i in RunStore(yaml_run.cwd, cache=False).list_runs()}[TB_RUN]
    assert {"model", "runner_config", "lr_schedule", "optimizer"} <= set(texts)
    # shown as MindFormers wrote them, with places and credentials masked as LiveMonitor masks its own config
    assert info.meta["config"] == mask_config_texts(texts)
    assert "'hidden_size': 32" in info.meta["config"]["model"]
    paths = {tag for tag, text in texts.items() if "'/" in text}
    assert paths, "MindFormers' config texts name places (a strategy checkpoint file under the job's folder)"
    assert not any("'/" in info.meta["config"][tag] for tag in paths), "no absolute path is shown"


def test_livemonitors_records_of_the_same_job_equal_tensorboards(job: Job) -> None:
    records = {r["step"]: r for r in job.run.records()}
    assert sorted(records) == list(range(1, STEPS + 1))
    for tag in ("loss", "learning-rate", "grad-norm", "loss-scale"):
        key = SCALARS[tag][0]
        for event in job.tb.Scalars(tag):
            assert same_f32(float(records[event.step][key]), event.value), (tag, event.step)


def test_the_run_lists_as_ended_with_no_status_recorded(yaml_run: TrainedRun) -> None:
    store = RunStore(yaml_run.cwd, cache=False)
    for look in ("first", "after a refresh"):  # a dashboard's first look, then a later one: nothing grew
        info = {i.id: i for i in store.list_runs()}[TB_RUN]
        assert (info.status, info.reason) == ("ended", "no status recorded"), look
        assert info.ranks == (0,) and (info.first_step, info.last_step, info.n_records) == (1, STEPS, STEPS)
        assert info.bad_lines == 0 and info.meta["source_format"] == "tensorboard"
        store.refresh(force=True)


@pytest.mark.parametrize("fixture", ["yaml_run", "overflow_run"])
def test_summary_and_diagnose_take_the_status_as_it_is(
    fixture: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    run: TrainedRun = request.getfixturevalue(fixture)
    assert main(["summary", TB_RUN, "--logdir", str(run.cwd)]) == 0
    out = capsys.readouterr().out
    assert "ended (no status recorded)" in out and "steps 1 .. 20" in out
    assert main(["diagnose", str(run.tensorboard_dir)]) == 0
    out = capsys.readouterr().out
    assert "ended, last step 20 - 0 errors, 0 warnings" in out, out
    for word in ("stalled", "running", "crashed"):
        assert word not in out, out
    if fixture == "overflow_run":
        assert "steps with a non-finite grad norm and a finite loss" in out, "the overflow steps, as from our JSONL"


def test_livemonitors_config_still_names_the_loss_scale_cell(yaml_run: TrainedRun) -> None:
    """MindFormers' TensorBoard setup swaps the built scale_sense cell for a dict holding its class."""
    scale_sense = yaml_run.meta()["config"]["runner_wrapper"]["scale_sense"]
    assert scale_sense == {
        "type": "DynamicLossScaleUpdateCell",
        "loss_scale_value": 65536,
        "scale_factor": 2.0,
        "scale_window": 1000,
    }
