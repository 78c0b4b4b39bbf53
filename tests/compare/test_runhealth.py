"""Health at a glance: each run's worst finding, diagnosed once per change of the run, in the table's columns."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from monitor_cb.compare.runhealth import Health, HealthCache, health_of
from monitor_cb.compare.runs_table import build_table, filter_expr, sort_table
from monitor_cb.compare.runstats import StatsCache, store_loader
from monitor_cb.diagnosis.findings import Finding
from monitor_cb.diagnosis.settings import DiagnosisSettings
from monitor_cb.ingest import RunStore
from monitor_cb.ingest.viewer_work import Background
from monitor_cb.views.runs_view import RunsQuery, page_table, runs_view
from tests.compare.runs_helpers import write_sweep_run

T0 = 1_700_000_000.0
NOW = T0 + 10_000


def finding(severity: str, step: int, kind: str = "loss_spike") -> Finding:
    return Finding(kind, severity, step, "message")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("findings", "expected"),
    [
        ([], Health()),
        ([finding("info", 5, "plateau")], Health()),  # a note is not a problem
        ([finding("warning", 30), finding("warning", 10)], Health("warning", 2, 10, "loss_spike")),
        (
            [finding("warning", 5), finding("error", 218, "nan"), finding("error", 300, "nan")],
            Health("error", 2, 218, "nan"),
        ),
    ],
)
def test_health_of(findings: list[Finding], expected: Health) -> None:
    assert health_of(findings) == expected


def test_text() -> None:
    assert Health().text() == "ok"
    assert Health("error", 2, 218, "nan").text() == "error ×2 from step 218 (nan)"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    write_sweep_run(root, "healthy", lr=1e-3, seed=0, t0=T0)
    write_sweep_run(root, "diverged", lr=1e-3, seed=1, nan_from=60, status="failed", t0=T0)
    return root


def infos_of(store: RunStore) -> dict[str, Any]:
    return {info.name: info for info in store.list_runs()}


def counting_loader(store: RunStore, calls: list[str]) -> Any:
    load = store_loader(store)

    def counted(info: Any) -> Any:
        calls.append(info.id)
        return load(info)

    return counted


def test_real_runs_inline_once_per_change(root: Path) -> None:
    store = RunStore(root)
    calls: list[str] = []
    cache = HealthCache(counting_loader(store, calls), clock=lambda: NOW)
    runs = infos_of(store)
    assert cache.get(runs["healthy"]) == Health()
    bad = cache.get(runs["diverged"])
    assert bad is not None and bad.level == "error" and bad.first_step == 60 and bad.kind == "nan"
    for _ in range(3):  # the same state: nothing diagnosed again
        cache.get(runs["healthy"])
        cache.get(runs["diverged"])
    assert len(calls) == 2
    # another status (the run was marked failed later): diagnosed again
    cache.get(replace(runs["healthy"], status="failed", reason="x"))
    assert len(calls) == 3
    # other thresholds: diagnosed again
    cache.settings = DiagnosisSettings(spike_z=99.0)
    cache.get(runs["healthy"])
    assert len(calls) == 4


def test_a_growing_run_is_diagnosed_again_at_most_every_interval(root: Path) -> None:
    store = RunStore(root)
    calls: list[str] = []
    clock = [NOW]
    cache = HealthCache(counting_loader(store, calls), clock=lambda: clock[0])
    info = infos_of(store)["healthy"]
    cache.get(info)
    grown = replace(info, n_records=info.n_records + 5, last_step=(info.last_step or 0) + 5)
    cache.get(grown)
    assert len(calls) == 1, "only new records, seconds later: the last health stands"
    clock[0] += 60
    cache.get(grown)
    assert len(calls) == 2


def test_background_never_waits_and_fills_in(root: Path) -> None:
    store = RunStore(root)
    background = Background()
    cache = HealthCache(store_loader(store), background=background, clock=lambda: NOW)
    runs = list(store.list_runs())
    assert [cache.get(info) for info in runs] == [None, None], "first ask: pending, nothing computed here"
    assert cache.pending(runs) == 2
    assert background.wait_idle(0), "nothing handed to the worker before the page is drawn"
    assert cache.submit_pending() == 2 and cache.submit_pending() == 0
    assert background.wait_idle(60)
    assert cache.pending(runs) == 0 and cache.computed == 2
    levels = {info.name: cache.get(info).level for info in runs}  # type: ignore[union-attr]
    assert levels == {"healthy": "ok", "diverged": "error"}


def test_table_columns_sort_worst_first_and_filter(root: Path) -> None:
    write_sweep_run(root, "pending-one", lr=2e-3, seed=2, t0=T0)
    store = RunStore(root)
    cache = HealthCache(store_loader(store), clock=lambda: NOW)
    stats = StatsCache(store_loader(store))
    infos = list(store.list_runs())

    def columns(info: Any) -> dict[str, Any]:
        return (
            cache.columns(info)
            if info.name != "pending-one"
            else dict.fromkeys(("health", "health.count", "health.step"))
        )

    table = build_table(infos, stats.get, NOW, health_of=columns)
    assert {"health", "health.count", "health.step"} <= set(table.frame.columns)
    worst = sort_table(table, "health", descending=True)
    assert list(worst.frame["name"]) == ["diverged", "healthy", "pending-one"], "errors first, pending last"
    assert list(sort_table(table, "health").frame["name"])[:2] == ["healthy", "diverged"]
    assert list(filter_expr(table, 'health == "error"').frame["name"]) == ["diverged"]
    assert list(filter_expr(table, "health.step >= 50").frame["name"]) == ["diverged"]
    assert set(filter_expr(table, 'health != "error"').frame["name"]) >= {"healthy"}


def test_runs_view_shows_health_after_status(root: Path) -> None:
    store = RunStore(root)
    cache = HealthCache(store_loader(store), clock=lambda: NOW)
    view = runs_view(list(store.list_runs()), StatsCache(store_loader(store)), NOW, RunsQuery(), health=cache)
    shown = page_table(view, NOW)
    columns = list(shown.columns)
    assert columns.index("health") == columns.index("status") + 1
    row = shown[shown["id"].str.contains("diverged")].iloc[0]
    assert (row["health"], row["health.count"], row["health.step"]) == ("error", "1", "60")
    plain = runs_view(list(store.list_runs()), StatsCache(store_loader(store)), NOW, RunsQuery())
    assert "health" not in plain.table.frame.columns, "without a cache, no health columns"
