"""``LiveMonitor``: a MindSpore callback that streams training metrics to JSONL.

The callback is a thin adapter: each hook calls one helper; parsing lives in
:mod:`~monitor_cb.train.extract` and :mod:`~monitor_cb.train.lr`, interval timing in
:mod:`~monitor_cb.train.timing`, the NaN policy in :mod:`~monitor_cb.train.guard`, and all I/O in
:class:`~monitor_cb.train.writer.MetricsWriter`.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import mindspore as ms
from mindspore.train import Callback

from monitor_cb.train.extract import (
    Metrics,
    check_layout,
    eval_metrics,
    layout_for_cell,
    param_norm_metrics,
    parse_outputs,
    parse_plain,
)
from monitor_cb.train.guard import NanGuard
from monitor_cb.train.lr import find_optimizer, global_step, lr_reader
from monitor_cb.train.model_info import find_model, is_causal_lm, model_seq_length, tokens_per_sample
from monitor_cb.train.run_config import merge_config, mindformers_summary
from monitor_cb.train.system import device_memory_reader, host_memory_reader, rank_info
from monitor_cb.train.timing import IntervalClock
from monitor_cb.train.train_config import train_config
from monitor_cb.train.writer import MetricsWriter, MonitorWarning


class LiveMonitor(Callback):
    """Log training metrics of ``Model.train`` / ``Model.fit`` to a run directory, live.

    Example:
        >>> model.train(epochs, dataset, callbacks=[LiveMonitor("logs/exp001", log_interval=10)])
        >>> LiveMonitor(log_file="logs/exp001/metrics.jsonl", log_interval=20)  # the article's spelling

    Files are opened in ``on_train_begin`` (never in ``__init__``: under ``msrun`` a
    scheduler process also runs the script) and closed at train end with status
    ``finished``, on an exception with ``failed`` (``stopped`` for Ctrl-C), or with
    ``stopped`` and the reason when the NaN guard stopped training. Each rank writes
    its own file (``metrics.rank{R}.jsonl``) unless ``rank_zero_only``.

    Logged metrics (one record every ``log_interval`` steps; keys absent when unknown):
        ``epoch``; ``loss`` and, for dict/named tuple outputs, ``loss_<name>``;
        ``lr`` (the rate used at that step; ``lr_group<i>`` for other parameter groups);
        ``throughput`` (samples/s over the interval) and ``tokens_per_s`` (when a sequence
        length is given or the inputs are 2-D integer token ids); ``samples`` (step x batch size);
        ``step_time`` (seconds per step over the interval, eval time excluded; the first
        interval includes graph compilation); ``data_time`` (seconds per step spent
        between one step's end and the next step's begin); ``grad_norm``, ``loss_scale``,
        ``overflow`` (from the train cell's outputs, see ``layout``); ``mem_device``,
        ``mem_device_peak`` (Ascend/GPU), ``mem_host_rss``; ``grad_norm/<param name>`` per parameter
        from ``grad_norm_model(..., param_norms=...)``, every ``param_norm_interval`` steps.
        After each ``Model.fit`` evaluation: ``eval_<metric>`` at the last train step.
        When the guard stops training: a record with ``event="guard_stop"`` and ``reason``.

    NaN guard: with ``on_nan="warn"`` (the default) the outputs are read on logged steps
    only, since reading a loss makes the host wait for the device (about 1% of a 5 ms
    step); a non-finite loss is then recorded and warned about at the next logged step.
    ``on_nan="stop"`` or ``max_grad_norm`` read every step, so the first bad step is
    recorded (off the interval if need be) and training stops right after it.

    Args:
        log_dir: run directory (``logs/exp001``), created if missing.
        log_file: alternatively the metrics file itself (``logs/exp001/metrics.jsonl``).
        log_interval: log every this many steps.
        batch_size: samples per step per rank; default from the first input's shape.
        seq_length: tokens per sample, for ``tokens_per_s``; default the model config's ``seq_length``
            (MindFormers models), else the width of 2-D integer inputs (less one for a ``...ForCausalLM``,
            which is fed ``seq_length + 1`` tokens).
        rank_zero_only: only rank 0 writes (the guard still runs on every rank).
        config: hyperparameters or a MindFormers config, stored in the run metadata. Captured without
            it: ``Model.train``'s optimizer (class, betas, eps, weight decay...), lr schedule (name and
            arguments), batch size, epochs and dataset size, and under a MindFormers Trainer the sections
            of its YAML config (model, lr schedule, optimizer, runner, parallel, seed; paths and secrets
            masked, see :mod:`monitor_cb.train.run_config`); the keys given here win.
        run_name: display name; default the run directory's name.
        on_nan: ``"warn"`` (record and warn) or ``"stop"`` (also stop training).
        nan_patience: stop after this many consecutive non-finite losses.
        max_grad_norm: a gradient norm above this is a guard event (stop with ``"stop"``).
        layout: the train cell's output layout (``"plain"``, ``"grad_norm"``,
            ``"loss_scale"``, ``"loss_scale_grad_norm"``, ``"mindformers"``); default from the
            train cell's class. For ``grad_norm`` with ``Model.train``, build the model with
            :func:`monitor_cb.grad_norm_model`.
        loss_names: names for a tuple of component losses returned by the network.
        log_memory: log device and host memory.
        telemetry_interval: seconds between hardware samples taken off the training thread
            (host CPU/memory, device memory, NVML GPUs, ``npu-smi``; see :mod:`monitor_cb.train.telemetry`),
            attached to the last logged step; None or 0 turns the sampler off.
        notify: channel settings (a ``notify.toml`` path or a ``NotifyConfig``, see
            ``docs/NOTIFICATIONS.md``): rank 0 sends the guard's stop decision from a background
            thread. Checked here, before training starts.
        upload: also ship every rank's files to object storage for a dashboard elsewhere
            (``"s3://bucket/prefix/exp001"``, or a :class:`monitor_cb.storage.shipper.UploadOptions`):
            closed chunks every few seconds from a background thread; the local files stay
            complete; credentials from the SDK's environment or config files
            (``docs/DEPLOYMENT.md``). Checked here, before training starts.
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str] | None = None,
        *,
        log_file: str | os.PathLike[str] | None = None,
        log_interval: int = 10,
        batch_size: int | None = None,
        seq_length: int | None = None,
        rank_zero_only: bool = False,
        config: Mapping[str, Any] | None = None,
        run_name: str | None = None,
        on_nan: str = "warn",
        nan_patience: int = 1,
        max_grad_norm: float | None = None,
        layout: str | None = None,
        loss_names: Sequence[str] | None = None,
        log_memory: bool = True,
        telemetry_interval: float | None = 1.0,
        notify: Any = None,
        upload: Any = None,
    ) -> None:
        super().__init__()
        if log_dir is None and log_file is None:
            raise ValueError("LiveMonitor needs a run directory (LiveMonitor('logs/exp001')) or log_file=...")
        if log_dir is not None and log_file is not None:
            raise ValueError("give either log_dir or log_file, not both")
        _check_positive_int("log_interval", log_interval)
        _check_positive_int("batch_size", batch_size, optional=True)
        _check_positive_int("seq_length", seq_length, optional=True)
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"config must be a mapping (dict), got {type(config).__name__}")
        self.log_dir, self.log_file = log_dir, log_file
        self.log_interval = int(log_interval)
        self.batch_size, self.seq_length = batch_size, seq_length
        self.rank_zero_only = rank_zero_only
        self.config, self.run_name = dict(config or {}), run_name
        self.guard = NanGuard(on_nan, nan_patience, max_grad_norm)
        self.layout = None if layout is None else check_layout(layout)
        self.loss_names = tuple(loss_names) if loss_names else None
        self.log_memory = log_memory
        if telemetry_interval is not None and telemetry_interval < 0:
            raise ValueError(f"telemetry_interval must be >= 0 seconds or None, got {telemetry_interval!r}")
        self.telemetry_interval = telemetry_interval or None
        self.notify_config = _load_notify_config(notify)
        self.upload = _check_upload(upload)
        self._sampler: Any = None
        self._notifier: Any = None
        self._last_logged_step: int | None = None
        self.writer: MetricsWriter | None = None
        self._warned: set[str] = set()
        self.stop_reason: str | None = None
        self._clock = IntervalClock(self.log_interval, 0, time.perf_counter())

    # ------------------------------------------------------------------ hooks
    def on_train_begin(self, run_context: Any) -> None:
        self._safely("begin", self._begin, run_context.original_args())

    def on_train_step_begin(self, run_context: Any) -> None:
        self._clock.step_begin(time.perf_counter())

    def on_train_step_end(self, run_context: Any) -> None:
        self._safely("step", self._step_end, run_context)

    def on_eval_begin(self, run_context: Any) -> None:
        self._clock.eval_begin(time.perf_counter())

    def on_eval_end(self, run_context: Any) -> None:
        self._safely("eval", self._eval_end, run_context.original_args())

    def on_train_end(self, run_context: Any) -> None:
        self._close("stopped" if self.stop_reason else "finished", self.stop_reason)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # Model enters callbacks once for training and once per evaluation: only an
        # exception ends the run here; a normal end is on_train_end's job.
        if exc_type is not None:
            interrupted = issubclass(exc_type, KeyboardInterrupt)
            self._close("stopped" if interrupted else "failed", f"{exc_type.__name__}: {exc}")

    # ---------------------------------------------------------------- helpers
    def _begin(self, cb: Any) -> None:
        self._close("finished", None)  # a previous train() call's writer, if on_train_end never came
        self.stop_reason = None
        self._last_logged_step = None
        self.guard = NanGuard(self.guard.on_nan, self.guard.patience, self.guard.max_grad_norm)
        self._watch_every_step = self.guard.on_nan == "stop" or self.guard.watches_grad_norm
        network = cb.get("train_network")
        self._layout = self.layout or layout_for_cell(network)
        self._param_names = tuple(getattr(network, "param_norm_names", ()) or ())  # grad_norm_model(param_norms=)
        self._param_index = tuple(getattr(network, "param_norm_index", ()) or ())
        self._param_scale = float(getattr(network, "param_norm_scale", 1.0) or 1.0)
        self._param_every = int(getattr(network, "param_norm_interval", 1) or 1)
        self._param_logged: int | None = None  # step // interval of the last per-parameter record
        self._optimizer = find_optimizer(cb)
        self._read_lr = lr_reader(self._optimizer)
        self._cur_base = int(cb.get("cur_step_num") or 0)
        self._step_base = global_step(self._optimizer) or 0
        self._clock = IntervalClock(self.log_interval, self._step_base, time.perf_counter())
        self._causal_lm = is_causal_lm(network)
        self._batch, self._seq = self.batch_size, self.seq_length or model_seq_length(network)
        self._epoch = None
        self._memory = [device_memory_reader(), host_memory_reader()] if self.log_memory else []
        self._config = self._run_config(cb)
        rank, world_size, device_id = rank_info()
        if self.rank_zero_only and rank != 0:
            return
        self.writer = MetricsWriter(
            self.log_dir,
            log_file=self.log_file,
            rank=rank,
            world_size=world_size,
            config=self._config,
            run_name=self.run_name,
            extra_meta=self._run_meta(cb, network, device_id),
            upload=self.upload,
        )
        self._start_telemetry()
        if self.notify_config is not None and rank == 0:
            from monitor_cb.notify.training import TrainingNotifier, run_id_for

            self._notifier = TrainingNotifier(
                self.notify_config, run=run_id_for(self.writer.path.parent), run_name=self.run_name
            )

    def _run_config(self, cb: Any) -> dict[str, Any]:
        """What the run was trained with: ``Model.train``'s optimizer, lr schedule, batch size and epochs,
        then the MindFormers Trainer's YAML sections, then the user's ``config=``, each winning over the last."""
        try:
            captured = train_config(cb, self._optimizer)
            if "mindformers" in sys.modules:  # only a MindFormers process can have a Trainer config
                from monitor_cb.train.mindformers import trainer_config

                yaml_config = trainer_config()
                if yaml_config is not None:
                    captured.update(mindformers_summary(yaml_config, find_model(cb.get("train_network"))))
            return merge_config(captured, self.config)
        except Exception as exc:  # noqa: BLE001 - a config we cannot read must not stop the run
            self._warn("config", f"LiveMonitor: could not capture the run's config ({exc!r}); only config= is stored")
            return dict(self.config)

    def _start_telemetry(self) -> None:
        if not self.telemetry_interval or self.writer is None:
            return
        from monitor_cb.train.telemetry import TelemetrySampler

        writer = self.writer

        def emit(step: int | None, sample: dict[str, float]) -> None:
            if step is not None:  # nothing logged yet (compiling): a row needs a step
                writer.log_dict(sample, step=step)

        # Samples join the last logged step's row, so they line up with step time without adding rows.
        self._sampler = TelemetrySampler(emit, lambda: self._last_logged_step, interval=self.telemetry_interval)
        self._sampler.start()

    def _run_meta(self, cb: Any, network: Any, device_id: int | None) -> Metrics:
        epochs, per_epoch = cb.get("epoch_num"), _steps_per_epoch(cb)
        meta: Metrics = {
            "mindspore_version": ms.__version__,
            "mindformers_version": _installed_version("mindformers"),
            "device_id": device_id,
            "device_target": ms.get_context("device_target"),
            "epochs": epochs,
            "steps_per_epoch": per_epoch,
            "total_steps": epochs * per_epoch if epochs and per_epoch else None,
            "first_step": self._step_base + 1,
            "log_interval": self.log_interval,
            "dataset_sink_mode": bool(cb.get("dataset_sink_mode")),
            "train_cell": type(network).__name__,
            "output_layout": self._layout,
            "optimizer": type(self._optimizer).__name__ if self._optimizer is not None else None,
            "on_nan": self.guard.on_nan,
        }
        if self._batch:
            meta["batch_size"] = self._batch
        if self._seq:
            meta["seq_length"] = self._seq
        return meta

    def _step_end(self, run_context: Any) -> None:
        cb = run_context.original_args()
        # Sink mode: one callback may cover several steps; cur_step_num jumps.
        step = self._step_base + (cb.get("cur_step_num") or 0) - self._cur_base
        due = self._clock.step_end(step)
        if not (due or self._watch_every_step):
            self._clock.last_end = time.perf_counter()
            return  # reading the outputs would wait for the device: only on logged steps
        metrics = self._parse(cb.get("net_outputs"))
        if due and self._param_names and self._param_logged != step // self._param_every:
            outputs = cb.get("net_outputs")
            metrics.update(param_norm_metrics(outputs, self._param_names, self._param_index, self._param_scale))
            self._param_logged = step // self._param_every
        verdict = self.guard.check(step, metrics.get("loss"), metrics.get("grad_norm"))
        if (due or verdict.record) and self.writer is not None:
            self._log_step(step, metrics, cb)
        if verdict.warning:
            self._warn(f"guard-{verdict.kind}-{verdict.stop}", verdict.warning)
        if verdict.stop:
            self._stop(run_context, step, verdict.reason)
        self._clock.last_end = time.perf_counter()

    def _parse(self, outputs: Any) -> Metrics:
        try:
            metrics = parse_outputs(self._layout, outputs, self.loss_names)
        except Exception as exc:  # noqa: BLE001 - a wrong layout must not stop training
            self._warn("layout", f"cannot read the train cell's outputs as layout {self._layout!r} ({exc!r})")
            try:
                metrics = parse_plain(outputs, self.loss_names)
            except Exception:  # noqa: BLE001 - still log lr, timing and memory
                return {}
        if self.guard.watches_grad_norm and "grad_norm" not in metrics:
            self._warn(
                "no-grad-norm",
                "max_grad_norm is set but the train cell returns no gradient norm; "
                "build the model with monitor_cb.grad_norm_model(net, loss_fn, optimizer) "
                "(or a train cell with a known layout)",
            )
        return metrics

    def _log_step(self, step: int, metrics: Metrics, cb: Any) -> None:
        now = time.perf_counter()
        if self._batch is None:
            self._learn_shapes(cb)
        self._epoch = cb.get("cur_epoch_num")
        record: Metrics = {"epoch": self._epoch, **metrics}
        if "lr" not in record:
            record.update(self._read_lr())
        record.update(self._clock.take(step, now, self._batch, self._seq))
        for read in self._memory:
            record.update(read())
        self.writer.log_dict(record, step=step)
        self._last_logged_step = step

    def _learn_shapes(self, cb: Any) -> None:
        element = cb.get("train_dataset_element")
        first = element[0] if isinstance(element, (list, tuple)) and element else None
        shape = tuple(getattr(first, "shape", ()) or ())
        if shape:
            self._batch = int(shape[0])
        else:
            dataset = cb.get("train_dataset")
            self._batch = int(dataset.get_batch_size()) if dataset is not None else 0
        if self._seq is None and len(shape) == 2 and "int" in str(getattr(first, "dtype", "")).lower():
            self._seq = tokens_per_sample(int(shape[1]), None, self._causal_lm)  # 2-D integer inputs are token ids
        if self.writer is not None:
            self.writer.update_meta(batch_size=self._batch or None, seq_length=self._seq)
            if self._batch and "batch_size" not in self._config:  # an unbatched dataset of ready batches
                self._config = {**self._config, "batch_size": self._batch}
                self.writer.update_meta(config=self._config)

    def _eval_end(self, cb: Any) -> None:
        metrics = eval_metrics(cb.get("eval_results"))
        if metrics and self.writer is not None:
            self.writer.log_dict({"epoch": cb.get("cur_epoch_num", self._epoch), **metrics}, step=self._clock.step)
        self._clock.eval_end(time.perf_counter())

    def _stop(self, run_context: Any, step: int, reason: str | None) -> None:
        self.stop_reason = reason
        if self.writer is not None:
            self.writer.log(step=step, event="guard_stop", reason=reason)
            self.writer.update_meta(reason=reason)
            self.writer.flush()
        if self._notifier is not None:
            self._notifier.guard_stopped(step, reason)
        run_context.request_stop()

    def _close(self, status: str, reason: str | None) -> None:
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            sampler.stop()
        writer, self.writer = self.writer, None
        notifier, self._notifier = self._notifier, None
        if notifier is not None:
            notifier.close(timeout=15)  # bounded: the process may exit right after training
            if writer is not None and notifier.delivered:
                writer.update_meta(notified=sorted(notifier.delivered))  # the watcher won't repeat them
        if writer is not None:
            writer.close(status, reason)

    def _safely(self, key: str, func: Any, *args: Any) -> None:
        try:
            func(*args)
        except Exception as exc:  # noqa: BLE001 - the monitor must never break training
            self._warn(f"error-{key}", f"LiveMonitor: {func.__name__} failed ({exc!r}); training continues")

    def _warn(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, MonitorWarning, stacklevel=3)


def _load_notify_config(notify: Any) -> Any:
    """None, or checked notification settings (a bad file raises before training starts)."""
    if notify is None:
        return None
    from monitor_cb.notify.config import NotifyConfig, load_config

    return notify if isinstance(notify, NotifyConfig) else load_config(notify)


def _check_upload(upload: Any) -> Any:
    """None, or upload options whose URL parses and whose store can be opened (no network needed)."""
    if upload is None:
        return None
    from monitor_cb.storage.objects import ObjectStore
    from monitor_cb.storage.shipper import UploadOptions

    options = UploadOptions.coerce(upload)
    ObjectStore.open(options.url, options.endpoint_url, options.storage_options)  # a missing s3fs fails here
    return options


def _steps_per_epoch(cb: Any) -> int | None:
    """``batch_num``, except where MindSpore's CPU fallback from sink mode left the sink size there.

    On the CPU, ``Model.train(..., dataset_sink_mode=True, sink_size=k)`` trains without
    sinking (``cb_params.dataset_sink_mode`` is False) and runs the whole dataset per epoch,
    but ``batch_num`` says ``k``.
    """
    per_epoch = cb.get("batch_num")
    if not cb.get("dataset_sink_mode") and ms.get_context("device_target") == "CPU":
        with contextlib.suppress(Exception):
            per_epoch = int(cb.get("train_dataset").get_dataset_size())
    return per_epoch


def _check_positive_int(name: str, value: Any, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _installed_version(distribution: str) -> str | None:
    """A package's version without importing it (importing mindformers takes seconds)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


if "mindformers" in sys.modules:  # MindFormers is loaded anyway: let YAML `type: LiveMonitor` find this class too
    with contextlib.suppress(Exception):
        import monitor_cb.train.mindformers  # noqa: F401
