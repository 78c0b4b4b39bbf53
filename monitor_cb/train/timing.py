"""Logging-interval bookkeeping, framework-free: which steps to log, and the timing over an interval.

``IntervalClock`` is driven by the callback's hooks with explicit timestamps
(``time.perf_counter()`` in real use, plain numbers in tests):

* ``step_begin(now)``: the time since the previous step ended was spent waiting
  for data (``data_time``);
* ``step_end(step)``: is this step due for a record? (Sink mode: ``step`` may jump
  by several steps; a record is due whenever a multiple of the interval is reached
  or passed);
* ``eval_begin(now)`` / ``eval_end(now)``: evaluation inside ``Model.fit`` counts
  neither as step time nor as data time;
* ``take(step, now, batch_size, seq_length)``: the interval's metrics, then a new
  interval starts.
"""

from __future__ import annotations

from monitor_cb.train.extract import Metrics


class IntervalClock:
    """Timing over the steps between two records.

    Args:
        interval: log every this many steps.
        first_step: the step count before the first step of this run (the
            optimizer's ``global_step`` at train begin; 0 for a fresh run).
        now: the current time.
    """

    def __init__(self, interval: int, first_step: int, now: float) -> None:
        self.interval = interval
        self.step = self._interval_step = first_step
        self.next_log = (first_step // interval + 1) * interval
        self._t0 = self.last_end = now
        self._data_wait = self._eval_time = 0.0
        self._eval_start: float | None = None

    def step_begin(self, now: float) -> None:
        self._data_wait += now - self.last_end

    def step_end(self, step: int) -> bool:
        """Record ``step`` as done; True when it is due for a record."""
        self.step = step
        if step < self.next_log:
            return False
        self.next_log = (step // self.interval + 1) * self.interval
        return True

    def eval_begin(self, now: float) -> None:
        self._eval_start = now

    def eval_end(self, now: float) -> None:
        if self._eval_start is not None:
            self._eval_time += now - self._eval_start
            self._eval_start = None
        self.last_end = now  # the wait after an evaluation is not data loading

    def take(self, step: int, now: float, batch_size: int | None = None, seq_length: int | None = None) -> Metrics:
        """``step_time``, ``data_time`` and, with a batch size, ``throughput``, ``samples``, ``tokens_per_s``."""
        steps = max(step - self._interval_step, 1)
        elapsed = max(now - self._t0 - self._eval_time, 1e-9)
        out: Metrics = {"step_time": elapsed / steps, "data_time": self._data_wait / steps}
        if batch_size:
            out["throughput"] = batch_size * steps / elapsed
            out["samples"] = batch_size * step  # steps count from the optimizer's first, across resumes
            if seq_length:
                out["tokens_per_s"] = out["throughput"] * seq_length
        self._interval_step, self._t0 = step, now
        self._data_wait = self._eval_time = 0.0
        return out
