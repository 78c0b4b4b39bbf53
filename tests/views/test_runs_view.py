"""One render of the runs page without Streamlit: budgeted statistics, filters, sort, the shown columns."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from monitor_cb.compare.runstats import StatsCache, store_loader
from monitor_cb.ingest import RunStore
from monitor_cb.views.runs_view import (
    MAX_COMPARE,
    RunsQuery,
    column_widths,
    compare_query,
    default_sweep_keys,
    page_table,
    picked_ids,
    runs_view,
)
from tests.compare.runs_helpers import write_sweep_run


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    for i, (lr, seed) in enumerate(itertools.product((1e-4, 1e-3, 1e-2), (0, 1))):
        write_sweep_run(tmp_path, f"r{i}", lr=lr, seed=seed, steps=50, nan_from=40 if lr == 1e-2 else None)
    return RunStore(tmp_path)


def ticking(step: float):  # a clock that advances ``step`` seconds per call
    counter = itertools.count()
    return lambda: next(counter) * step


def test_statistics_fill_within_the_budget_and_the_next_render_continues(store: RunStore) -> None:
    infos = store.list_runs()
    cache = StatsCache(store_loader(store))
    first = runs_view(infos, cache, time.time(), RunsQuery(), budget_s=2.5, clock=ticking(1.0))
    assert 0 < first.left < len(infos), "some runs computed, the rest left for the next render"
    assert len(first.shown.frame) == len(infos), "every run has a row meanwhile (config only)"
    missing = sum(v is None for v in first.shown.frame["loss.last"])  # (a NaN loss is a value)
    assert missing == first.left
    while True:
        again = runs_view(infos, cache, time.time(), RunsQuery(), budget_s=2.5, clock=ticking(1.0))
        if again.left == 0:
            break
        assert again.left < first.left
    assert not any(v is None for v in again.shown.frame["loss.last"])


def test_filters_then_sort(store: RunStore) -> None:
    infos = store.list_runs()
    query = RunsQuery(text="r", expression="lr <= 1e-3", sort="loss.best", descending=False)
    out = runs_view(infos, StatsCache(store_loader(store)), time.time(), query)
    assert out.error is None
    best = list(out.shown.frame["loss.best"])
    assert len(best) == 4 and best == sorted(best)


def test_a_bad_expression_keeps_the_text_filtered_rows_and_says_why(store: RunStore) -> None:
    infos = store.list_runs()
    out = runs_view(infos, StatsCache(store_loader(store)), time.time(), RunsQuery(text="r1", expression="lr <"))
    assert out.error and "cannot read the expression" in out.error
    assert list(out.shown.frame["id"]) == ["r1"]
    unknown = runs_view(infos, StatsCache(store_loader(store)), time.time(), RunsQuery(sort="no-such-column"))
    assert len(unknown.shown.frame) == 6, "an unknown sort column keeps the order"


def test_page_table_hides_name_when_it_is_the_id_and_widths_fit_the_text(store: RunStore) -> None:
    infos = store.list_runs()
    out = runs_view(infos, StatsCache(store_loader(store)), time.time(), RunsQuery())
    frame = page_table(out, time.time())
    assert "name" not in frame.columns and "updated" not in frame.columns
    columns = list(frame.columns)
    assert columns[:4] == ["id", "status", "steps", "duration_s"] and columns[-1] == "bad_lines"
    assert columns.index("lr") < columns.index("loss.last"), "the differing config before the statistics"
    assert "reason" not in columns, "no run's reason says anything: no column of blanks"
    assert columns.index("lr") < columns.index("ranks"), "config before the bookkeeping"
    widths = column_widths(pd.DataFrame({"reason": ["x" * 30, "y"], "s": ["1", "2"]}))
    assert widths["reason"] >= 8 * 30 and widths["s"] == 60
    assert column_widths(pd.DataFrame({"reason": ["x" * 5000]}))["reason"] == 640, "capped; details show the rest"


def test_picked_ids_and_the_compare_query() -> None:
    view = SimpleNamespace(shown=SimpleNamespace(ids=["a", "b", "c"]))  # a RunsView's shape
    assert picked_ids(view, [2, 0, 7, -1, 2]) == ["c", "a"]  # type: ignore[arg-type]
    assert compare_query(["a", "b", "a"]) == {"runs": ["a", "b"]}
    assert compare_query(["a"], "lr") == {"runs": ["a"], "group": "lr"}
    many = compare_query([f"r{i}" for i in range(100)])
    assert len(many["runs"]) == MAX_COMPARE


def test_default_sweep_keys_prefer_numeric_config(store: RunStore) -> None:
    infos = store.list_runs()
    out = runs_view(infos, StatsCache(store_loader(store)), time.time(), RunsQuery(all_config=True))
    keys = default_sweep_keys(out.shown)
    assert "lr" in keys and "seed" in keys and "optim.name" not in keys
