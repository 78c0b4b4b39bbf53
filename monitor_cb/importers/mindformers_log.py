"""MindFormers' own training log (``output/log/rank_N/info.log``) as our records.

``MFLossMonitor`` writes one line per logged step and a progress line after it (MindFormers 1.9,
``core/callback/callback.py``, ``print_output_info``)::

    [INFO] 2026-12-05 09:22:03,997 [mindformers/core/callback/callback.py:747] print_output_info: { Epoch:[  1/  1],
    step:[    2/   20], loss:[4.148911/4.159635], per_step_time: 25ms, lr: 0.0005, overflow cond: False,
    loss_scale: 65536.0, global_norm: [1.3723053], train_throughput_per_npu: 0.000T
    [INFO] 2026-12-05 09:22:03,998 [...] print_output_info:   10.0% |█████     | 79.17815 samples/s/p  0:00:00 }

(one line each in the file; the stdout handler's prefix is ``2026-12-05 09:22:03,997 - mindformers[...] - INFO -``).
What varies, by version and setting, and is read here field by field, in any order:

* sink mode: ``loss: 4.148911,`` (no epoch mean); older versions print ``%5.3f``;
* no lr when MFLossMonitor cannot compute it (a schedule on CPU without the train cell's lr);
* ``loss_scale: unavailable``; ``global_norm: None`` without ``use_clip_grad``, ``[nan]`` on overflow,
  absent before MindFormers 1.1; ``, train_throughput_per_npu: 0.000T`` only when model FLOPs are known;
* ``print_separate_loss`` (MoE / MTP models): ``lm_loss:``, ``load_balancing_loss:`` (``aux_loss:`` in
  1.3–1.5), ``mtp_loss:``, ``indexer_loss:`` after the loss;
* ``step:[ s/ n]`` counts within the epoch: the global step is ``(epoch - 1) * n + s``.

The whole chunk is parsed with polars (``str.extract`` per field over the step lines), so a log of
a million lines opens like one of our JSONL files. A line that has MFLossMonitor's ``Epoch:[`` mark
but not its epoch and step is counted as unparsed; every other line (warnings, compile messages) is
not a metric line and is skipped silently. The timestamps are the training host's local time,
read as this machine's local time.
"""

from __future__ import annotations

import calendar
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from monitor_cb.ingest.batch import MISSING_INT, Batch

LOG_NAME = "info.log"
MAX_ROTATED = 20  # info.log.1 ... (MindFormers keeps 5 by default)
SOURCE_FORMAT = "mindformers_log"
STEP_MARK = "Epoch:["
PROGRESS_MARK = "samples/s/p"
FINISHED_MARK = "Training Over"
_RANK_DIR = re.compile(r"^rank_(\d{1,6})$")

_CORE = r"Epoch:\[\s*(\d+)\s*/\s*(\d+)\s*\],\s*step:\[\s*(\d+)\s*/\s*(\d+)\s*\]"
_NUM = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf|NaN|Inf|-inf))"
# name -> (regex with one group over a step line, scale)
FIELDS: dict[str, tuple[str, float]] = {
    "loss": (r"step:\[[^\]]*\],\s*loss:\s*\[?\s*" + _NUM, 1.0),
    "loss_lm": (r"\blm_loss:\s*\[?\s*" + _NUM, 1.0),
    "loss_load_balancing": (r"\bload_balancing_loss:\s*\[?\s*" + _NUM, 1.0),
    "loss_aux": (r"\baux_loss:\s*\[?\s*" + _NUM, 1.0),
    "loss_mtp": (r"\bmtp_loss:\s*\[?\s*" + _NUM, 1.0),
    "loss_indexer": (r"\bindexer_loss:\s*\[?\s*" + _NUM, 1.0),
    "step_time": (r"per_step_time:\s*" + _NUM + r"\s*ms", 1e-3),
    "lr": (r"\blr:\s*\[?\s*" + _NUM, 1.0),
    "loss_scale": (r"\bloss_scale:\s*\[?\s*" + _NUM, 1.0),
    "grad_norm": (r"\bglobal_norm:\s*\[?\s*" + _NUM, 1.0),
    "tflops_per_npu": (r"train_throughput_per_npu:\s*" + _NUM + r"\s*T", 1.0),
}
_OLD_TIME = r"\btime:\s*" + _NUM + r"\s*ms"  # before per_step_time (MindFormers 0.x)
_OVERFLOW = r"overflow cond:\s*\[?\s*(True|False)"
_THROUGHPUT = _NUM + r"\s+samples/s/p"
_STAMP = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[,.](\d{3})"


@dataclass
class LogState:
    """What one rank's log has said so far (carried from chunk to chunk)."""

    epochs: int | None = None
    steps_per_epoch: int | None = None
    last_step: int | None = None  # the global step of the last step line: a progress line's step
    finished: bool = False
    unparsed: int = 0

    def meta(self) -> dict[str, Any]:
        """What the run list shows for a run with no metadata file of ours."""
        meta: dict[str, Any] = {"source_format": SOURCE_FORMAT}
        if self.epochs and self.steps_per_epoch:
            meta.update(epochs=self.epochs, steps_per_epoch=self.steps_per_epoch)
            meta["total_steps"] = self.epochs * self.steps_per_epoch
        if self.finished:
            meta["status"] = "finished"
            meta["reason"] = "MindFormers logged 'Training Over'"
        return meta


@dataclass
class ParsedLog:
    """One chunk's records and what could not be read."""

    batch: Batch
    unparsed_offsets: list[int] = field(default_factory=list)  # line numbers in the chunk


def parse_log(text: str, state: LogState, rank: int = 0) -> ParsedLog:
    """MFLossMonitor's step and progress lines of ``text`` (complete lines) as a :class:`Batch`.

    ``state`` carries the epoch size and the last step across chunks (a progress line may come in
    the next chunk) and is updated.
    """
    import polars as pl

    lines = pl.Series("line", text.split("\n"), dtype=pl.String)
    if text.find(FINISHED_MARK) >= 0:
        state.finished = True
    is_step = lines.str.contains(STEP_MARK, literal=True)
    is_progress = lines.str.contains(PROGRESS_MARK, literal=True)
    frame = pl.DataFrame({"line": lines, "is_step": is_step}).with_row_index("row").filter(is_step | is_progress)
    if frame.height == 0:
        return ParsedLog(Batch.empty())
    core = frame["line"].str.extract_groups(_CORE)
    epoch = core.struct.field("1").cast(pl.Int64, strict=False)
    epochs = core.struct.field("2").cast(pl.Int64, strict=False)
    step_in = core.struct.field("3").cast(pl.Int64, strict=False)
    per_epoch = core.struct.field("4").cast(pl.Int64, strict=False)
    is_step_row = frame["is_step"]
    unparsed = is_step_row & (step_in.is_null() | epoch.is_null() | (per_epoch.fill_null(0) <= 0))
    bad_rows = frame["row"].filter(unparsed).to_list()
    state.unparsed += len(bad_rows)
    good_step = is_step_row & ~unparsed
    global_step = pl.when(good_step).then((epoch - 1) * per_epoch + step_in).otherwise(None)
    global_step = pl.select(global_step.alias("s")).to_series()
    # a progress line belongs to the step line before it (or to the last step of an earlier chunk)
    owner = global_step.forward_fill()
    if state.last_step is not None:
        owner = owner.fill_null(state.last_step)
    keep = (good_step | (~is_step_row & owner.is_not_null())).fill_null(False)
    if not bool(keep.any()):
        return ParsedLog(Batch.empty(), bad_rows)
    _remember(state, epochs.filter(good_step), per_epoch.filter(good_step), global_step.filter(good_step))
    kept = frame.filter(keep)
    line = kept["line"]
    steps = owner.filter(keep).to_numpy().astype(np.int64)
    stepped = good_step.filter(keep).to_numpy()
    n = kept.height
    batch = Batch(
        step=steps,
        seg=np.full(n, MISSING_INT, np.int64),
        rank=np.full(n, rank, np.int64),
        t=_times(line),
    )
    _put(batch, "epoch", epoch.filter(keep).cast(pl.Float64).to_numpy(), stepped)
    for name, (pattern, scale) in FIELDS.items():
        values = _numbers(line.str.extract(pattern, 1)) * scale
        _put(batch, name, values, stepped & ~np.isnan(values) | stepped & _is_nan_text(line, pattern))
    if "step_time" not in batch.floats:
        values = _numbers(line.str.extract(_OLD_TIME, 1)) * 1e-3
        _put(batch, "step_time", values, stepped & ~np.isnan(values))
    flag = line.str.extract(_OVERFLOW, 1)
    overflow = np.where(flag.to_numpy() == "True", 1.0, 0.0)
    _put(batch, "overflow", overflow, stepped & flag.is_not_null().to_numpy())
    throughput = _numbers(line.str.extract(_THROUGHPUT, 1))
    _put(batch, "throughput", throughput, ~stepped & ~np.isnan(throughput))
    return ParsedLog(batch, bad_rows)


def _remember(state: LogState, epochs: Any, per_epoch: Any, steps: Any) -> None:
    if len(steps):
        state.epochs = int(epochs[-1])
        state.steps_per_epoch = int(per_epoch[-1])
        state.last_step = int(steps[-1])


def _numbers(texts: Any) -> np.ndarray:
    """Extracted texts as float64; NaN where absent or not a number (``unavailable``, ``None``)."""
    import polars as pl

    return texts.str.to_lowercase().cast(pl.Float64, strict=False).fill_null(float("nan")).to_numpy()


def _is_nan_text(line: Any, pattern: str) -> np.ndarray:
    """Where the field says ``nan`` itself (a logged NaN, unlike an absent field)."""
    extracted = line.str.extract(pattern, 1).str.to_lowercase()
    return (extracted.is_in(["nan", "-nan"])).fill_null(False).to_numpy()


def _put(batch: Batch, name: str, values: np.ndarray, logged: np.ndarray) -> None:
    if bool(logged.any()):
        batch.floats[name] = (np.where(logged, values, np.nan).astype(np.float64), logged.astype(bool))


def _times(line: Any) -> np.ndarray:
    """Unix seconds of each line's timestamp, read as local time; NaN without one."""
    import polars as pl

    stamp = line.str.extract_groups(_STAMP)
    base = stamp.struct.field("1").str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False)
    millis = stamp.struct.field("2").cast(pl.Float64, strict=False)
    naive = (base.dt.epoch("ms").cast(pl.Float64) + millis).to_numpy() / 1000.0  # as if UTC
    out = naive - _utc_offset(naive)
    return np.where(np.isfinite(out), out, np.nan)


def _utc_offset(naive: np.ndarray) -> float:
    """This machine's UTC offset (seconds) at the first timestamp (one offset per chunk)."""
    finite = naive[np.isfinite(naive)]
    if not len(finite):
        return 0.0
    utc = float(finite[0])
    local = time.localtime(utc)
    return float(calendar.timegm(local) - int(utc)) if local.tm_isdst < 0 else float(local.tm_gmtoff)


# ---------------------------------------------------------------------------- where the logs are
def rank_of(directory: Path) -> int:
    """``rank_3`` -> 3; any other directory name -> 0."""
    match = _RANK_DIR.match(directory.name)
    return int(match.group(1)) if match else 0


def rank_dirs(directory: str | os.PathLike[str]) -> dict[int, Path]:
    """The rank directories of a MindFormers log directory: ``rank_N/`` holding ``info.log`` (each
    rank), else the directory itself when it holds ``info.log`` (one rank, from its name)."""
    path = Path(directory)
    found: dict[int, Path] = {}
    try:
        with os.scandir(path) as entries:
            names = [(e.name, e.is_dir(follow_symlinks=False), e.is_file()) for e in entries]
    except OSError:
        return found
    for name, is_dir, _ in names:
        match = _RANK_DIR.match(name)
        if match and is_dir and _has_log(path / name):
            found[int(match.group(1))] = path / name
    if not found and any(name == LOG_NAME and is_file for name, _, is_file in names):
        found[rank_of(path)] = path
    return found


def is_mindformers_log_dir(directory: str | os.PathLike[str]) -> bool:
    """Whether ``directory`` holds MindFormers' log: ``info.log`` in it or in ``rank_N/`` below it."""
    return bool(rank_dirs(directory))


def rotated_logs(rank_dir: Path) -> list[Path]:
    """``info.log.N`` ... ``info.log.1`` that exist, oldest first (Python's RotatingFileHandler names)."""
    return [p for i in range(MAX_ROTATED, 0, -1) if (p := rank_dir / f"{LOG_NAME}.{i}").is_file()]


def run_name(directory: Path) -> str:
    """``/jobs/llama_sft/output/log`` -> ``llama_sft``: the job's directory, not MindFormers' ``log``."""
    parts = directory.resolve().parts
    if len(parts) >= 3 and parts[-1] == "log" and parts[-2] == "output":
        return parts[-3]
    return directory.name


def _has_log(directory: Path) -> bool:
    try:
        return (directory / LOG_NAME).is_file()
    except OSError:
        return False
