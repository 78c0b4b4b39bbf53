"""MindFormers' own training log (``output/log/rank_N/info.log``, ``output/msrun_log/worker_N.log``) as our records.

``MFLossMonitor`` (MindFormers 1.x) writes one line per logged step and a progress line after it
(MindFormers 1.9, ``core/callback/callback.py``, ``print_output_info``)::

    [INFO] 2026-12-05 09:22:03,997 [mindformers/core/callback/callback.py:747] print_output_info: { Epoch:[  1/  1],
    step:[    2/   20], loss:[4.148911/4.159635], per_step_time: 25ms, lr: 0.0005, overflow cond: False,
    loss_scale: 65536.0, global_norm: [1.3723053], train_throughput_per_npu: 0.000T
    [INFO] 2026-12-05 09:22:03,998 [...] print_output_info:   10.0% |█████     | 79.17815 samples/s/p  0:00:00 }

(one line each in the file, the 2.x one below too; the stdout handler's prefix, the one msrun's
``worker_N.log`` holds, is ``2026-12-05 09:22:03,997 - mindformers[...] - INFO -``, sometimes after leftover
progress-spinner characters). MindFormers 2.x (``pynative/callback/loss_callback.py``, ``_print_log``) writes::

    { step:[    1/  100], loss:   2.345678, per_step_time:   1234ms, lr: 1.000000e-04,
    grad_norm:   1.234567, throughput:  12.34T }

with a global step and no epoch; ``loss: N/A (non-last PP stage, ...)`` on pipeline stages that hold
no loss (not logged, not a NaN) and ``grad_norm: NaN`` when no norm is computed (not logged; a real
NaN prints as ``nan``). What varies, by version and setting, and is read here field by field, in any order:

* sink mode: ``loss: 4.148911,`` (no epoch mean); older versions print ``%5.3f``;
* no lr when MFLossMonitor cannot compute it (a schedule on CPU without the train cell's lr);
* ``loss_scale: unavailable``; ``global_norm: None`` without ``use_clip_grad``, ``[nan]`` on overflow,
  absent before MindFormers 1.1; ``, train_throughput_per_npu: 0.000T`` only when model FLOPs are known
  (2.x: ``throughput: 12.34T``, the same TFLOPS per device);
* ``print_separate_loss`` (MoE / MTP models): ``lm_loss:``, ``load_balancing_loss:`` (``aux_loss:`` in
  1.3–1.5), ``mtp_loss:`` (2.x: ``mtp_1_loss:``, ``mtp_2_loss:`` ...), ``indexer_loss:`` after the loss;
* ``step:[ s/ n]`` counts within the epoch in 1.x: the global step is ``(epoch - 1) * n + s``.

TrainingStateMonitor's per-parameter lines (``... step:[ 3/ 20] local_norm/<param>: 0.12``) become
columns named by their tag (:mod:`monitor_cb.importers.mindformers_state`).

The whole chunk is parsed with polars (``str.extract`` per field over the step lines), so a log of
a million lines opens like one of our JSONL files. A line that has a step line's mark (``Epoch:[``,
``{ step:[``) but no step, or a step out of range (epoch or step 0, negative, a global step of
:data:`~monitor_cb.record.STEP_LIMIT` or more, a number past int64), is counted as unparsed and
never lands on another step; every other line (warnings, compile messages) is not a metric line and
is skipped silently. The timestamps are the training host's local time, read as this machine's local time.
"""

from __future__ import annotations

import calendar
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from monitor_cb.importers.mindformers_2x import NOT_COMPUTED, STEP2_MARK, split_2x
from monitor_cb.importers.mindformers_layout import (  # noqa: F401  (where the logs are: re-exported)
    LOG_NAME,
    MAX_ROTATED,
    is_mindformers_log_dir,
    rank_dirs,
    rank_logs,
    rank_of,
    rotated_logs,
    run_name,
)
from monitor_cb.ingest.batch import MISSING_INT, Batch, concat_batches
from monitor_cb.record import STEP_LIMIT

SOURCE_FORMAT = "mindformers_log"
SLICE_LINES = 100_000
STEP_MARK = "Epoch:["  # MFLossMonitor's (1.x) step line
STEP_LOSS = "], loss"  # what follows the step in a step line of either generation (not a per-parameter line)
PROGRESS_MARK = "samples/s/p"
FINISHED_MARK = "Training Over"

_CORE = r"Epoch:\[\s*(-?\d+)\s*/\s*(-?\d+)\s*\],\s*step:\[\s*(-?\d+)\s*/\s*(-?\d+)\s*\]"
_CORE2 = r"\{ step:\[\s*(-?\d+)\s*/\s*(-?\d+)\s*\]"
_MARKS = r"step:\[|Epoch:\["  # every step line's (TrainingStateMonitor's included) or STEP_MARK
_STEP_MARKS = r"Epoch:\[|\{ step:\["  # STEP_MARK or STEP2_MARK
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
    "grad_norm": (r"\b(?:global_norm|grad_norm):\s*\[?\s*" + _NUM, 1.0),
    "tflops_per_npu": (r"\b(?:train_throughput_per_npu|throughput):\s*" + _NUM + r"\s*T", 1.0),
}
USUAL_FIELDS = ("loss", "step_time", "lr", "loss_scale", "grad_norm", "tflops_per_npu")
MAX_MTP_DEPTH = 16  # 2.x's mtp_1_loss ... (one per multi-token-prediction depth)
_OLD_TIME = r"\btime:\s*" + _NUM + r"\s*ms"  # before per_step_time (MindFormers 0.x)
_OVERFLOW = r"overflow cond:\s*\[?\s*(True|False)"
_THROUGHPUT = _NUM + r"\s+samples/s/p"
_STAMP = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[,.](\d{3})"  # the first one in a line's head: either prefix
_STAMP_HEAD = 96  # characters searched for it (a prefix after leftover spinner characters)
_PROGRESS, _STEP, _STATE, _OTHER = 0, 1, 2, 3  # kinds of marked lines


@dataclass
class LogState:
    """What one rank's log has said so far (carried from chunk to chunk)."""

    epochs: int | None = None
    steps_per_epoch: int | None = None
    last_step: int | None = None  # the global step of the last step line: a progress line's step
    finished: bool = False
    unparsed: int = 0
    first_t: float | None = None  # the first and last time stamps of the lines read (any line)
    last_t: float | None = None
    stepped: bool = False  # a step line was read: the job is training, not starting

    def meta(self) -> dict[str, Any]:
        """What the run list shows for a run with no metadata file of ours."""
        meta: dict[str, Any] = {"source_format": SOURCE_FORMAT}
        if self.epochs and self.steps_per_epoch and self.epochs * self.steps_per_epoch < STEP_LIMIT:
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
    """The step, progress and per-parameter lines of ``text`` (complete lines) as a :class:`Batch`.

    ``state`` carries the epoch size and the last step across chunks (a progress line may come in
    the next chunk) and is updated. Step lines in MindFormers 1.9's usual form are read by one
    split (:func:`_usual_form`); any other (a variant above) field by field; a slice of
    :data:`SLICE_LINES` lines at a time.
    """

    data = text.encode("utf-8", errors="replace") if isinstance(text, str) else text
    return parse_lines(read_lines(data), state, rank)


def parse_lines(lines: Any, state: LogState, rank: int = 0) -> ParsedLog:
    """:func:`parse_log` of lines already read (a polars string column; None: no line)."""
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
    """Whole lines (a polars string column): which are step, per-parameter and progress lines, then each kind."""
    import polars as pl

    if bool(lines.str.contains(FINISHED_MARK, literal=True).any()):
        state.finished = True
    _note_times(lines, state)
    marked = lines.str.contains(_MARKS)  # (one pass: a regex of literals is a substring search)
    is_progress = lines.str.contains(PROGRESS_MARK, literal=True)
    frame = pl.DataFrame({"line": lines}).with_row_index("row").filter(marked | is_progress)
    if frame.height == 0:
        return ParsedLog(Batch.empty())
    kind = _kinds(frame["line"])
    step_lines = frame["line"].filter(pl.Series(kind == _STEP))
    fields, core = _step_fields(step_lines) if len(step_lines) else ({}, _no_core())
    steps, ok = global_steps(*core)
    rows = frame["row"].to_numpy()
    bad = rows[kind == _STEP][~ok].tolist()
    state_rows = _state_rows(frame["line"].filter(pl.Series(kind == _STATE)), rows[kind == _STATE], bad)
    bad.sort()
    state.unparsed += len(bad)
    if bool(ok.any()):
        state.stepped = True
        _remember(state, core, ok)
    return _assemble(frame, kind, (fields, core, steps, ok), state_rows, state, rank, bad)


def _kinds(line: Any) -> np.ndarray:
    """Each marked line's kind: a step line (1.x or 2.x), a per-parameter line, a progress line, other.

    A step line of either generation has ``"], loss"`` right after its step; only the lines without
    it go through the per-parameter pattern (a regex over every line would cost more than the rest).
    """
    import polars as pl

    from monitor_cb.importers.mindformers_state import STATE_LINE

    has_loss = line.str.contains(STEP_LOSS, literal=True).to_numpy()
    is_step = line.str.contains(_STEP_MARKS).to_numpy()
    is_progress = line.str.contains(PROGRESS_MARK, literal=True).to_numpy()
    is_state = np.zeros(len(line), bool)
    others = np.flatnonzero(~has_loss & ~is_progress)
    if len(others):
        is_state[others] = line.gather(pl.Series(others)).str.contains(STATE_LINE).to_numpy()
    kind = np.full(len(line), _OTHER, np.int8)
    kind[is_progress] = _PROGRESS
    kind[is_step & ~is_state] = _STEP
    kind[is_state] = _STATE
    return kind


def global_steps(epoch: Any, epochs: Any, step_in: Any, per_epoch: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(epoch - 1) * per_epoch + step_in`` of each line (int64) and whether it is a step at all.

    A 2.x line has no epoch (null): its step is global. Out of range, and so not a step: epoch or
    step below 1, an epoch of no step, a global step of :data:`STEP_LIMIT` or more (computed in
    float first, so no int64 product wraps round to a small, valid-looking step).
    """
    no_epoch = epoch.is_null().to_numpy()
    e = epoch.fill_null(1).to_numpy().astype(np.int64)
    s = step_in.fill_null(0).to_numpy().astype(np.int64)
    n = per_epoch.fill_null(0).to_numpy().astype(np.int64)
    readable = step_in.is_not_null().to_numpy() & per_epoch.is_not_null().to_numpy()
    readable &= epochs.is_not_null().to_numpy() | no_epoch
    wide = (e.astype(np.float64) - 1.0) * n.astype(np.float64) + s.astype(np.float64)
    ok = readable & (e >= 1) & (s >= 1) & (no_epoch | (n >= 1)) & (wide < STEP_LIMIT)
    steps = np.where(ok, (np.where(ok, e, 1) - 1) * np.where(ok, n, 0) + np.where(ok, s, 0), -1)
    return steps.astype(np.int64), ok


def _no_core() -> tuple[Any, Any, Any, Any]:
    import polars as pl

    empty = pl.Series([], dtype=pl.Int64)
    return empty, empty, empty, empty


@dataclass
class _StateRows:
    """Per-parameter lines grouped into one row per step: where each row goes and its columns."""

    rows: np.ndarray  # the chunk row of each group's first line
    steps: np.ndarray
    columns: dict[str, tuple[np.ndarray, np.ndarray]]


def _state_rows(line: Any, rows: np.ndarray, bad: list[int]) -> _StateRows:
    from monitor_cb.importers.mindformers_state import pivot_by_step, split_state_lines

    if not len(line):
        return _StateRows(np.empty(0, np.int64), np.empty(0, np.int64), {})
    parts = split_state_lines(line)
    steps, ok = global_steps(parts.epoch, parts.epochs, parts.step, parts.per_epoch)
    ok &= parts.tag != ""
    bad.extend(rows[~ok].tolist())
    use = ok & parts.scalar
    starts, columns = pivot_by_step(steps[use], parts.tag[use], parts.value[use])
    return _StateRows(rows[use][starts], steps[use][starts], columns)


def _assemble(
    frame: Any,
    kind: np.ndarray,
    step_parts: tuple[dict[str, tuple[np.ndarray, np.ndarray]], Any, np.ndarray, np.ndarray],
    state_rows: _StateRows,
    state: LogState,
    rank: int,
    bad: list[int],
) -> ParsedLog:
    """The batch of a chunk's good step rows and per-parameter rows, in line order.

    A progress line belongs to the step line just before it: its samples/s go on that step's row
    (one row per step, so the table takes the batch in order), or, for a step line of the last
    chunk, on a row of its own with that step; after an unreadable step line, or with none before
    it, it is dropped rather than put on another step.
    """
    fields, _, steps, ok = step_parts
    rows = frame["row"].to_numpy()
    step_rows = rows[kind == _STEP]
    progress_rows = rows[kind == _PROGRESS]
    before = np.searchsorted(step_rows, progress_rows) - 1  # the step line before each progress line
    carried = state.last_step if state.last_step is not None else -1
    joins = before >= 0
    if joins.any():
        joins[joins] = ok[before[joins]]  # (after a bad step line: dropped)
    own_row = (before < 0) & (carried >= 0)  # the last chunk's step: a row of its own
    if len(step_rows):
        state.last_step = int(steps[-1]) if ok[-1] else None
    kept_rows = np.concatenate([step_rows[ok], state_rows.rows, progress_rows[own_row]])
    kept_steps = np.concatenate([steps[ok], state_rows.steps, np.full(int(own_row.sum()), carried, np.int64)])
    kept_kind = np.concatenate(
        [
            np.full(int(ok.sum()), _STEP, np.int8),
            np.full(len(state_rows.rows), _STATE, np.int8),
            np.full(int(own_row.sum()), _PROGRESS, np.int8),
        ]
    )
    if not len(kept_rows):
        return ParsedLog(Batch.empty(), bad)
    order = np.argsort(kept_rows, kind="stable")
    kept_rows, kept_steps, kept_kind = kept_rows[order], kept_steps[order], kept_kind[order]
    n = len(kept_rows)
    keep = np.zeros(len(rows), bool)
    keep[np.searchsorted(rows, kept_rows)] = True  # (rows and kept_rows sorted: the kept lines in order)
    batch = Batch(
        step=kept_steps.astype(np.int64),
        seg=np.full(n, MISSING_INT, np.int64),
        rank=np.full(n, rank, np.int64),
        t=_times(frame["line"].filter(pl_series(keep))),
    )
    at_step = np.flatnonzero(kept_kind == _STEP)
    for name, (values, logged) in fields.items():
        _put(batch, name, _spread(values[ok], n, at_step), _spread(logged[ok], n, at_step))
    at_state = np.flatnonzero(kept_kind == _STATE)
    for name, (values, logged) in state_rows.columns.items():
        if name not in batch.floats:  # (a tag never takes the name of one of MFLossMonitor's fields)
            _put(batch, name, _spread(values, n, at_state), _spread(logged, n, at_state))
    if len(progress_rows):
        throughput = _throughputs(frame["line"].filter(pl_series(kind == _PROGRESS)))
        at = np.full(len(progress_rows), -1, np.int64)
        at[joins] = np.searchsorted(kept_rows, step_rows[before[joins]])
        at[own_row] = np.searchsorted(kept_rows, progress_rows[own_row])
        use = at >= 0
        _put(batch, "throughput", _spread(throughput[use], n, at[use]), _spread(~np.isnan(throughput[use]), n, at[use]))
    return ParsedLog(batch, bad)


def pl_series(mask: np.ndarray) -> Any:
    import polars as pl

    return pl.Series(mask)


def read_lines(data: Any) -> Any:
    """The lines of ``data`` as a polars string column, read by polars' CSV reader (no Python string
    per line): invalid UTF-8 replaced, a line cut at an ASCII unit separator (no log line has one);
    None when there is no line."""

    if not len(data) or (len(data) < 4096 and not bytes(data).strip()):  # (no copy of a large chunk)
        return None
    return _csv_lines(data)


def read_file_lines(path: str, mapped: Any, size: int) -> Any:
    """The lines of a file's first ``size`` bytes (complete lines, ``mapped``), polars reading the
    file itself (no copy of its bytes into Python); lines written after ``size`` are left out (as
    many lines as newlines, a blank line included: polars keeps it). None when the file is shorter
    than that now (the caller reads ``mapped`` instead)."""
    view = np.frombuffer(mapped, np.uint8, count=size)
    newlines = sum(int(np.count_nonzero(view[i : i + (16 << 20)] == 10)) for i in range(0, size, 16 << 20))
    del view
    lines = _csv_lines(path)
    return lines.head(newlines) if lines.len() >= newlines else None


def _csv_lines(data: Any) -> Any:
    import polars as pl

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
    """Each field's values and "was logged" flags over the step lines, and the epoch and step columns
    (null epoch: a 2.x line, whose step is global)."""
    import polars as pl

    is_2x = line.str.contains(STEP2_MARK, literal=True)
    if bool(is_2x.all()):  # 2.x lines: split at their commas, each part by its label
        split = split_2x(line)
        if split is not None:
            return split
    elif not bool(is_2x.any()):
        usual = _usual_form(line)
        if usual is not None:  # the usual case: every line split at its commas, each part in its place
            return _usual_fields(usual)
    fields: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    groups = line.str.extract_groups(_CORE)
    core = [groups.struct.field(str(i)).cast(pl.Int64, strict=False) for i in range(1, 5)]
    if bool(is_2x.any()):
        groups2 = line.str.extract_groups(_CORE2)
        v2 = core[2].is_null() & groups2.struct.field("1").is_not_null()
        step, total = (groups2.struct.field(str(i)).cast(pl.Int64, strict=False) for i in (1, 2))
        core = [
            core[0],
            core[1].zip_with(~v2, pl.repeat(1, len(line), dtype=pl.Int64, eager=True)),
            core[2].zip_with(~v2, step),
            core[3].zip_with(~v2, total),
        ]
    for name, (pattern, scale) in FIELDS.items():
        text = line.str.extract(pattern, 1)
        if name == "grad_norm":
            text = text.zip_with(text != NOT_COMPUTED, pl.repeat(None, len(line), dtype=pl.String, eager=True))
        values, logged = _numbers(text)
        fields[name] = (values * scale, logged)
    if not fields["step_time"][1].any():
        values, logged = _numbers(line.str.extract(_OLD_TIME, 1))
        fields["step_time"] = (values * 1e-3, logged)
    for depth in range(1, MAX_MTP_DEPTH + 1):
        label = f"mtp_{depth}_loss:"
        if not bool(line.str.contains(label, literal=True).any()):
            break
        fields[f"loss_mtp_{depth}"] = _numbers(line.str.extract(r"\b" + label + r"\s*" + _NUM, 1))
    flag = line.str.extract(_OVERFLOW, 1)
    return _with_epoch_and_overflow(fields, tuple(core), flag)  # type: ignore[arg-type]


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


def _remember(state: LogState, core: tuple[Any, Any, Any, Any], ok: np.ndarray) -> None:
    """The epoch count and size of the last good step line (the run's total steps)."""
    last = int(np.flatnonzero(ok)[-1])
    epochs, per_epoch = core[1][last], core[3][last]
    state.epochs = int(epochs) if epochs is not None else None
    state.steps_per_epoch = int(per_epoch) if per_epoch is not None else None


def _note_times(lines: Any, state: LogState) -> None:
    """The first and last time stamps of a slice (of its first and last stamped lines), for the run's Elapsed."""
    n = lines.len()
    heads = lines.head(min(n, 64))
    tails = lines.tail(min(n, 64))
    first = _times(heads)
    last = _times(tails)
    first, last = first[np.isfinite(first)], last[np.isfinite(last)]
    if len(first) and state.first_t is None:
        state.first_t = float(first[0])
    if len(last):
        state.last_t = float(last[-1])


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

    # the file handler's "[INFO] 2026-12-05 09:22:03,997 ..." and stdout's (msrun's worker logs)
    # "2026-12-05 09:22:03,997 - ..." by position; anything else by regex
    starts = (7, 0) if line.len() and str(line[0]).startswith("[") else (0, 7)  # the first line's prefix first
    stamp = line.str.slice(starts[0], 23).str.to_datetime("%Y-%m-%d %H:%M:%S,%3f", strict=False)
    if stamp.null_count():
        stamp = stamp.fill_null(line.str.slice(starts[1], 23).str.to_datetime("%Y-%m-%d %H:%M:%S,%3f", strict=False))
    if stamp.null_count():
        groups = line.str.slice(0, _STAMP_HEAD).str.extract_groups(_STAMP)
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
