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

from monitor_cb.ingest.batch import MISSING_INT, Batch, concat_batches

LOG_NAME = "info.log"
MAX_ROTATED = 20  # info.log.1 ... (MindFormers keeps 5 by default)
SOURCE_FORMAT = "mindformers_log"
SLICE_LINES = 100_000
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
USUAL_FIELDS = ("loss", "step_time", "lr", "loss_scale", "grad_norm", "tflops_per_npu")
_OLD_TIME = r"\btime:\s*" + _NUM + r"\s*ms"  # before per_step_time (MindFormers 0.x)
_OVERFLOW = r"overflow cond:\s*\[?\s*(True|False)"
_THROUGHPUT = _NUM + r"\s+samples/s/p"
_STAMP = r"^(?:\[\w+\] )?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[,.](\d{3})"  # file and stdout prefixes


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


def parse_log(text: bytes | str, state: LogState, rank: int = 0) -> ParsedLog:
    """MFLossMonitor's step and progress lines of ``text`` (complete lines) as a :class:`Batch`.

    ``state`` carries the epoch size and the last step across chunks (a progress line may come in
    the next chunk) and is updated. A step line in MindFormers 1.9's usual form is read by one
    split (:func:`_usual_form`); any other (a variant above) field by field; a slice of
    :data:`SLICE_LINES` lines at a time.
    """

    data = text.encode("utf-8", errors="replace") if isinstance(text, str) else text
    lines = read_lines(data)
    if lines is None:
        return ParsedLog(Batch.empty())
    parts: list[ParsedLog] = []
    for i in range(0, lines.len(), SLICE_LINES):
        parsed = _parse_slice(lines.slice(i, SLICE_LINES), state, rank)
        parts.append(ParsedLog(parsed.batch, [row + i for row in parsed.unparsed_offsets]))
    if len(parts) == 1:
        return parts[0]
    rows = [row for part in parts for row in part.unparsed_offsets]
    return ParsedLog(concat_batches([p.batch for p in parts if len(p.batch)]), rows)


def _parse_slice(lines: Any, state: LogState, rank: int) -> ParsedLog:
    """The general path: whole lines (a polars string column), each field by its own pattern."""
    import polars as pl

    if bool(lines.str.contains(FINISHED_MARK, literal=True).any()):
        state.finished = True
    is_step = lines.str.contains(STEP_MARK, literal=True)
    is_progress = lines.str.contains(PROGRESS_MARK, literal=True)
    frame = pl.DataFrame({"line": lines, "is_step": is_step}).with_row_index("row").filter(is_step | is_progress)
    if frame.height == 0:
        return ParsedLog(Batch.empty())
    fields, core = _step_fields(frame.filter(frame["is_step"])["line"])
    return _assemble(frame, fields, core, lambda kept: _times(kept["line"]), "line", state, rank)


def _assemble(
    frame: Any,
    fields: dict[str, tuple[np.ndarray, np.ndarray]],
    core: tuple[Any, Any, Any, Any],
    times: Any,
    progress_column: str,
    state: LogState,
    rank: int,
) -> ParsedLog:
    """The batch of a chunk's step and progress rows (``frame``: ``row``, ``is_step``, the progress
    text in ``progress_column``), given the step rows' fields and epoch/step columns; ``times(kept)``
    gives the kept rows' Unix times."""
    import polars as pl

    is_step_row = frame["is_step"]
    epoch, epochs, step_in, per_epoch = core
    unparsed = step_in.is_null() | epoch.is_null() | (per_epoch.fill_null(0) <= 0)
    bad_rows = frame["row"].filter(is_step_row).filter(unparsed).to_list()
    state.unparsed += len(bad_rows)
    good = ~unparsed
    global_step = (epoch - 1) * per_epoch + step_in
    if bad_rows:
        global_step = global_step.set(unparsed, None)
    # every row of the frame: a step row's own step, a progress row's the step line's before it
    own = pl.Series("s", [None], dtype=pl.Int64).extend_constant(None, frame.height - 1)
    own = own.scatter(is_step_row.arg_true(), global_step)
    owner = own.forward_fill()
    if state.last_step is not None:
        owner = owner.fill_null(state.last_step)
    is_good_step = is_step_row.clone().scatter(is_step_row.arg_true(), good)
    keep = (is_good_step | (~is_step_row & owner.is_not_null())).fill_null(False)
    if not bool(keep.any()):
        return ParsedLog(Batch.empty(), bad_rows)
    _remember(state, epochs.filter(good), per_epoch.filter(good), global_step.filter(good))
    kept = frame.filter(keep)
    n = kept.height
    stepped = is_good_step.filter(keep).to_numpy()
    batch = Batch(
        step=owner.filter(keep).to_numpy().astype(np.int64),
        seg=np.full(n, MISSING_INT, np.int64),
        rank=np.full(n, rank, np.int64),
        t=times(kept),
    )
    step_positions = np.flatnonzero(stepped)
    good_np = good.to_numpy()
    for name, (values, logged) in fields.items():
        _put(batch, name, _spread(values[good_np], n, step_positions), _spread(logged[good_np], n, step_positions))
    progress = kept[progress_column].filter(~kept["is_step"])
    throughput = _throughputs(progress)
    progress_positions = np.flatnonzero(~stepped)
    _put(
        batch,
        "throughput",
        _spread(throughput, n, progress_positions),
        _spread(~np.isnan(throughput), n, progress_positions),
    )
    return ParsedLog(batch, bad_rows)


def read_lines(data: Any) -> Any:
    """The lines of ``data`` as a polars string column, read by polars' CSV reader (no Python string
    per line): invalid UTF-8 replaced, a line cut at an ASCII unit separator (no log line has one);
    None when there is no line."""
    import polars as pl

    if not len(data) or (len(data) < 4096 and not bytes(data).strip()):  # (no copy of a large chunk)
        return None
    frame = pl.read_csv(
        data,
        has_header=False,
        separator="\x1f",
        quote_char=None,
        encoding="utf8-lossy",
        truncate_ragged_lines=True,
        schema={"line": pl.String},
    )
    return frame["line"].fill_null("")


def _step_fields(line: Any) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], tuple[Any, Any, Any, Any]]:
    """Each field's values and "was logged" flags over the step lines, and the epoch and step columns."""
    import polars as pl

    usual = _usual_form(line)
    if usual is not None:  # the usual case: every line split at its commas, each part in its place
        return _usual_fields(usual)
    fields: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    groups = line.str.extract_groups(_CORE)
    core = tuple(groups.struct.field(str(i)).cast(pl.Int64, strict=False) for i in range(1, 5))
    for name, (pattern, scale) in FIELDS.items():
        values, logged = _numbers(line.str.extract(pattern, 1))
        fields[name] = (values * scale, logged)
    if not fields["step_time"][1].any():
        values, logged = _numbers(line.str.extract(_OLD_TIME, 1))
        fields["step_time"] = (values * 1e-3, logged)
    flag = line.str.extract(_OVERFLOW, 1)
    return _with_epoch_and_overflow(fields, core, flag)  # type: ignore[arg-type]


def _usual_fields(usual: Any) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], tuple[Any, Any, Any, Any]]:
    """:func:`_step_fields` of a frame of the usual form's texts (:func:`_usual_form`, :func:`_usual_columns`)."""
    import polars as pl

    core = tuple(usual[k].cast(pl.Int64, strict=False) for k in ("epoch", "epochs", "step", "per"))
    fields = {name: _numbers(usual[name]) for name in USUAL_FIELDS}
    fields["step_time"] = (fields["step_time"][0] * 1e-3, fields["step_time"][1])
    return _with_epoch_and_overflow(fields, core, usual["overflow"])  # type: ignore[arg-type]


def _with_epoch_and_overflow(
    fields: dict[str, tuple[np.ndarray, np.ndarray]], core: tuple[Any, Any, Any, Any], flag: Any
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], tuple[Any, Any, Any, Any]]:
    import polars as pl

    fields["epoch"] = (core[0].cast(pl.Float64).fill_null(float("nan")).to_numpy(), core[0].is_not_null().to_numpy())
    fields["overflow"] = (np.where(flag.to_numpy() == "True", 1.0, 0.0), flag.is_not_null().to_numpy())
    return fields, core


def _usual_form(line: Any) -> Any:
    """The fields of step lines in MindFormers 1.9's usual form, as a frame of texts; None when any
    line is in another form. Splitting at ", " and taking each part by position is several times
    faster than a regex with captures, which the polars regex engine runs slowly."""
    import polars as pl

    names = [f"p{i}" for i in range(9)]
    parts = (
        pl.DataFrame({"line": line})
        .lazy()
        .select(pl.col("line").str.splitn(", ", 9).struct.rename_fields(names))
        .unnest("line")
    )

    def pair(column: pl.Expr, index: int) -> pl.Expr:  # "  1/ 10" -> "1" (0) or "10" (1)
        return column.str.split_exact("/", 1).struct.field(f"field_{index}").str.strip_chars()

    epoch = pl.col("p0").str.split_exact("Epoch:[", 1).struct.field("field_1").str.strip_suffix("]")
    step = pl.col("p1").str.strip_prefix("step:[").str.strip_suffix("]")
    last = pl.col("p8")
    labels = (
        ("p1", "step:["),
        ("p2", "loss:["),
        ("p3", "per_step_time: "),
        ("p4", "lr: "),
        ("p5", "overflow cond: "),
        ("p6", "loss_scale: "),
        ("p7", "global_norm: "),
    )
    ok = pl.col("p0").str.contains("Epoch:[", literal=True).fill_null(False)
    for column, label in labels:
        ok = ok & pl.col(column).str.starts_with(label).fill_null(False)
    tail_ok = last.str.starts_with("train_throughput_per_npu: ") & ~last.str.contains(", ", literal=True)
    ok = ok & (last.is_null() | tail_ok.fill_null(False))  # and nothing after the last field
    frame = parts.select(
        epoch=pair(epoch, 0),
        epochs=pair(epoch, 1),
        step=pair(step, 0),
        per=pair(step, 1),
        loss=pair(pl.col("p2").str.strip_prefix("loss:["), 0),
        step_time=pl.col("p3").str.strip_prefix("per_step_time: ").str.strip_suffix("ms"),
        lr=pl.col("p4").str.strip_prefix("lr: ").str.strip_chars("[] "),
        overflow=pl.col("p5").str.strip_prefix("overflow cond: "),
        loss_scale=pl.col("p6").str.strip_prefix("loss_scale: "),
        grad_norm=pl.col("p7").str.strip_prefix("global_norm: ").str.strip_chars("[] "),
        tflops_per_npu=last.str.strip_prefix("train_throughput_per_npu: ").str.strip_suffix("T"),
        ok=ok,
    ).collect()
    return frame if bool(frame["ok"].all()) else None


def _throughputs(progress: Any) -> np.ndarray:
    """samples/s/p of progress lines (``... |█████   | 79.17815 samples/s/p  0:00:00 }``): the text after
    the bar's last ``| ``, else (another form) by regex."""
    fast = _numbers(progress.str.split("| ").list.last().str.split(" ").list.first())
    if bool(fast[1].all()):
        return fast[0]
    return _numbers(progress.str.extract(_THROUGHPUT, 1))[0]


def _spread(values: np.ndarray, n: int, positions: np.ndarray) -> np.ndarray:
    """``values`` placed at ``positions`` of an ``n``-row column (NaN / False elsewhere)."""
    out = np.zeros(n, bool) if values.dtype == bool else np.full(n, np.nan)
    out[positions] = values
    return out


def _remember(state: LogState, epochs: Any, per_epoch: Any, steps: Any) -> None:
    if len(steps):
        state.epochs = int(epochs[-1])
        state.steps_per_epoch = int(per_epoch[-1])
        state.last_step = int(steps[-1])


def _numbers(texts: Any) -> tuple[np.ndarray, np.ndarray]:
    """Extracted texts as float64 values and "was logged" flags: a number, ``nan`` and ``inf`` included
    (polars reads them); absent, ``unavailable`` or ``None`` is not logged."""
    import polars as pl

    numbers = texts.cast(pl.Float64, strict=False)
    return numbers.fill_null(float("nan")).to_numpy(), numbers.is_not_null().to_numpy()


def _put(batch: Batch, name: str, values: np.ndarray, logged: np.ndarray) -> None:
    if bool(logged.any()):
        batch.floats[name] = (np.where(logged, values, np.nan).astype(np.float64), logged.astype(bool))


def _times(line: Any) -> np.ndarray:
    """Unix seconds of each line's timestamp, read as local time; NaN without one."""
    import polars as pl

    # the file handler's "[INFO] 2026-12-05 09:22:03,997 ..." by position; anything else by regex
    stamp = line.str.slice(7, 23).str.to_datetime("%Y-%m-%d %H:%M:%S,%3f", strict=False)
    if stamp.null_count():
        groups = line.str.extract_groups(_STAMP)
        text = groups.struct.field("1") + "," + groups.struct.field("2")
        stamp = stamp.fill_null(text.str.to_datetime("%Y-%m-%d %H:%M:%S,%3f", strict=False))
    naive = stamp.dt.epoch("ms").cast(pl.Float64).to_numpy() / 1000.0  # as if UTC
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
