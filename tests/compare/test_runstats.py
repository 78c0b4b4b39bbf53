"""Per-run statistics for the runs table: the NaN rules, best = min or max by metric, the cache."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from monitor_cb.compare.runstats import StatsCache, key_metrics, metric_stats, run_stats, store_loader
from monitor_cb.ingest import RunStore
from tests.compare.runs_helpers import write_sweep_run


def frame(loss: list[float], **columns: list[float]) -> pd.DataFrame:
    n = len(loss)
    return pd.DataFrame({"step": np.arange(1, n + 1) * 10, "t": np.arange(n) + 100.0, "loss": loss, **columns})


def test_key_metrics_are_loss_eval_loss_then_other_evals() -> None:
    assert key_metrics(["lr", "eval_f1", "loss", "eval_accuracy", "eval_loss", "loss_cls"]) == [
        "loss",
        "eval_loss",
        "eval_accuracy",
        "eval_f1",
    ]


def test_best_is_min_for_losses_and_max_for_accuracy() -> None:
    df = frame([3.0, 1.0, 2.0], eval_accuracy=[0.2, 0.9, 0.5], eval_perplexity=[9.0, 4.0, 6.0])
    loss = metric_stats(df, "loss")
    assert (loss.last, loss.best, loss.best_step, loss.min, loss.max) == (2.0, 1.0, 20, 1.0, 3.0)
    acc = metric_stats(df, "eval_accuracy")
    assert (acc.best, acc.best_step, acc.min) == (0.9, 20, 0.2)
    assert metric_stats(df, "eval_perplexity").best == 4.0


def test_nan_is_the_last_value_but_never_the_best() -> None:
    df = frame([3.0, 1.0, math.nan, math.inf])
    stats = metric_stats(df, "loss")
    assert math.isinf(stats.last) and stats.best == 1.0 and stats.first_nonfinite_step == 30
    assert stats.count == 4
    all_nan = metric_stats(frame([math.nan, math.nan]), "loss")
    assert math.isnan(all_nan.last) and math.isnan(all_nan.best) and all_nan.best_step is None


def test_only_logged_rows_count() -> None:
    df = frame([3.0, 2.0, 1.0], eval_loss=[math.nan, 5.0, math.nan])
    logged = {"eval_loss": np.array([False, True, False])}  # the NaNs are rows where eval was not logged
    stats = metric_stats(df, "eval_loss", logged)
    assert (stats.last, stats.best, stats.count, stats.first_nonfinite_step) == (5.0, 5.0, 1, None)
    assert metric_stats(df, "missing").count == 0


def test_run_stats_from_a_real_store(tmp_path: Path) -> None:
    write_sweep_run(tmp_path, "a", lr=1e-3, seed=0, steps=100, nan_from=90)
    store = RunStore(tmp_path)
    (info,) = store.list_runs()
    loaded = store_loader(store)(info)
    assert loaded is not None
    stats = run_stats(*loaded, meta=info.meta)
    assert set(stats.metrics) == {"loss", "eval_loss", "eval_accuracy"}
    assert math.isnan(stats.metrics["loss"].last) and stats.metrics["loss"].first_nonfinite_step == 90
    assert stats.metrics["eval_loss"].count == 4  # steps 25, 50, 75, 100: the masks keep gaps apart from NaN
    assert stats.metrics["eval_accuracy"].best == pytest.approx(stats.metrics["eval_accuracy"].max)
    assert stats.config["lr"] == 1e-3 and stats.config["optim.name"] == "adam"
    assert stats.t_last - stats.t_first == pytest.approx(99.5)


def test_cache_recomputes_only_runs_that_changed(tmp_path: Path) -> None:
    write_sweep_run(tmp_path, "done", lr=1e-3, seed=0, steps=50)
    live = write_sweep_run(tmp_path, "live", lr=1e-3, seed=1, steps=50, status=None)
    try:
        store = RunStore(tmp_path, rescan_interval_s=0)
        cache = StatsCache(store_loader(store))
        first = {i.id: cache.get(i) for i in store.list_runs()}
        assert cache.computed == 2
        again = {i.id: cache.get(i) for i in store.list_runs()}
        assert cache.computed == 2 and again["done"] is first["done"]
        live.log_at(1_700_000_060.0, step=60, loss=0.01)
        live.flush()
        latest = {i.id: cache.get(i) for i in store.list_runs()}
        assert cache.computed == 3 and latest["done"] is first["done"]
        assert latest["live"].metrics["loss"].last == 0.01
    finally:
        live.close()
    cache.prune(["done"])
    assert cache.computed == 3


def test_a_vanished_run_gives_empty_stats(tmp_path: Path) -> None:
    write_sweep_run(tmp_path, "gone", lr=1e-3, seed=0, steps=10)
    store = RunStore(tmp_path)
    (info,) = store.list_runs()
    cache = StatsCache(lambda info: None)
    stats = cache.get(info)
    assert stats.metrics == {} and stats.config["lr"] == 1e-3


def test_fill_spends_a_time_budget_and_the_rest_waits(tmp_path: Path) -> None:
    for i in range(5):
        write_sweep_run(tmp_path, f"r{i}", lr=1e-3, seed=i, steps=10)
    store = RunStore(tmp_path)
    infos = sorted(store.list_runs(), key=lambda i: i.id)
    cache = StatsCache(store_loader(store))
    ticks = iter(range(100))
    left = cache.fill(infos, budget_s=3, clock=lambda: float(next(ticks)))  # ticks 1 and 2 fit, 3 does not
    assert left == 3 and cache.computed == 2
    assert cache.is_fresh(infos[0]) and not cache.is_fresh(infos[4])
    assert cache.cached(infos[4]).metrics == {} and cache.cached(infos[4]).config["seed"] == 4  # config already
    assert cache.cached(infos[0]).metrics["loss"].count == 10
    assert cache.fill(infos, budget_s=60) == 0 and cache.computed == 5
    assert cache.fill(infos, budget_s=0) == 0  # nothing stale: nothing to do


def test_implausible_record_times_are_refused_and_counted() -> None:
    frame = pd.DataFrame({"step": [1, 2, 3, 4], "t": [1.76e9, 1e300, 1.76e9 + 10, -1e301], "loss": [1.0] * 4})
    stats = run_stats(frame)
    assert (stats.t_first, stats.t_last) == (1.76e9, 1.76e9 + 10)
    assert stats.refused_times == 2 and stats.refused_example == -1e301
    assert run_stats(frame.iloc[[0, 2]]).refused_times == 0
