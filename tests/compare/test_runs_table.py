"""The runs table over runs written with the real writer and read through the real RunStore."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pandas as pd
import pytest

from monitor_cb.compare.runexpr import ExprError
from monitor_cb.compare.runs_table import (
    BASE_COLUMNS,
    RunsTable,
    TableOptions,
    build_table,
    config_keys,
    filter_expr,
    filter_text,
    group_table,
    groups,
    sort_table,
)
from monitor_cb.compare.runstats import StatsCache, config_stats, store_loader
from monitor_cb.ingest import RunStore
from monitor_cb.views.runs_view import display_table, format_value
from tests.compare.runs_helpers import write_sweep_run

NOW = time.time() + 3600.0  # after every test run's last record


@pytest.fixture
def sweep(tmp_path: Path) -> RunStore:
    """Six runs: lr x seed, one failed with a NaN loss, one stopped, one with an extra config key."""
    write_sweep_run(tmp_path, "lr1e-4-s0", lr=1e-4, seed=0)
    write_sweep_run(tmp_path, "lr1e-4-s1", lr=1e-4, seed=1)
    write_sweep_run(tmp_path, "lr1e-3-s0", lr=1e-3, seed=0)
    write_sweep_run(tmp_path, "lr1e-3-s1", lr=1e-3, seed=1, status="stopped", reason="stopped by the user")
    write_sweep_run(tmp_path, "lr1e-2-s0", lr=1e-2, seed=0, nan_from=60, status="failed", reason="loss is NaN")
    write_sweep_run(tmp_path, "lr1e-2-s1", lr=1e-2, seed=1, optimizer="sgd", extra_config={"status": "clash"})
    return RunStore(tmp_path)


def table_of(store: RunStore, options: TableOptions | None = None) -> RunsTable:
    infos = sorted(store.list_runs(), key=lambda i: i.id)
    return build_table(infos, StatsCache(store_loader(store)).get, NOW, options)


def row(table: RunsTable, run_id: str) -> dict:
    return table.frame.set_index("id").loc[run_id].to_dict()


def test_one_row_per_run_with_status_steps_duration_and_metrics(sweep: RunStore) -> None:
    table = table_of(sweep)
    assert table.ids == sorted(table.ids) and len(table.ids) == 6
    assert list(table.frame.columns[: len(BASE_COLUMNS)]) == list(BASE_COLUMNS)
    assert table.metric_columns == (
        "loss.last",
        "loss.best",
        "eval_loss.last",
        "eval_loss.best",
        "eval_accuracy.last",
        "eval_accuracy.best",
    )
    failed = row(table, "lr1e-2-s0")
    assert failed["status"] == "failed" and failed["reason"] == "loss is NaN" and failed["steps"] == 100
    assert math.isnan(failed["loss.last"]) and failed["loss.best"] < 1.0
    assert failed["duration_s"] == pytest.approx(101.0, abs=1.0)  # writer start to the end_time given at close
    ok = row(table, "lr1e-4-s0")
    assert ok["eval_accuracy.best"] == pytest.approx(max(ok["eval_accuracy.last"], ok["eval_accuracy.best"]))
    assert ok["loss.best"] <= ok["loss.last"]


def test_config_columns_are_the_keys_that_differ(sweep: RunStore) -> None:
    table = table_of(sweep)
    assert table.config_columns == ("lr", "optim.name", "seed", "config.status")  # betas are equal everywhere
    assert row(table, "lr1e-2-s1")["config.status"] == "clash"  # renamed: "status" is the run's status column
    assert row(table, "lr1e-4-s0")["config.status"] is None
    everything = table_of(sweep, TableOptions(all_config=True))
    assert "optim.betas" in everything.config_columns and "meta.world_size" in everything.config_columns


def test_config_keys_rule() -> None:
    configs = [{"a": 1, "b": [1, 2]}, {"a": 1, "b": [1, 2], "c": None}, {"a": 1.0, "b": [1, 2]}]
    configs = [config_stats({"config": c}).config_text for c in configs]
    assert config_keys(configs) == ["a", "c"]  # 1 and 1.0 are shown differently; c is missing in two
    assert config_keys(configs[:1]) == [] and config_keys(configs[:1], all_keys=True) == ["a", "b"]


def test_filter_by_expression_from_the_issue(sweep: RunStore) -> None:
    table = table_of(sweep)
    picked = filter_expr(table, 'lr < 1e-3 and status == "finished"')
    assert picked.ids == ["lr1e-4-s0", "lr1e-4-s1"]
    assert filter_expr(table, 'optim.name == "sgd"').ids == ["lr1e-2-s1"]
    assert filter_expr(table, "loss.last == nan").ids == ["lr1e-2-s0"]
    assert filter_expr(table, "eval_accuracy.best > 0.9 and seed == 0").ids == ["lr1e-2-s0", "lr1e-3-s0"]
    assert filter_expr(table, "config.status == 'clash'").ids == ["lr1e-2-s1"]
    assert filter_expr(table, "optim.betas == optim.betas").ids == table.ids  # shown or not, every key can be used
    with pytest.raises(ExprError, match="unknown column 'learning_rate'"):
        filter_expr(table, "learning_rate < 1")


def test_filter_by_text_and_glob(sweep: RunStore) -> None:
    table = table_of(sweep)
    assert filter_text(table, "s1 LR1E-4").ids == ["lr1e-4-s1"]
    assert filter_text(table, "sgd").ids == ["lr1e-2-s1"]  # a shown config value
    assert filter_text(table, "nan").ids == ["lr1e-2-s0"]  # the reason
    assert filter_text(table, "lr1e-3-*").ids == ["lr1e-3-s0", "lr1e-3-s1"]
    assert filter_text(table, "  ").ids == table.ids
    narrowed = filter_expr(filter_text(table, "s0"), "lr >= 1e-3")
    assert narrowed.ids == ["lr1e-2-s0", "lr1e-3-s0"] and len(narrowed.rows) == len(narrowed.frame) == 2


def test_sort_puts_missing_and_nan_last_both_ways(sweep: RunStore) -> None:
    table = table_of(sweep)
    up = sort_table(table, "loss.last")
    down = sort_table(table, "loss.last", descending=True)
    assert up.ids[-1] == down.ids[-1] == "lr1e-2-s0"  # the NaN
    assert up.ids[:5] == list(reversed(down.ids[:5]))
    assert sort_table(table, "config.status").ids[0] == "lr1e-2-s1"  # the only run with a value
    assert sort_table(table, "name", descending=True).ids[0] == "lr1e-4-s1"
    with pytest.raises(KeyError, match="no column 'nope'"):
        sort_table(table, "nope")


def test_group_by_a_config_key(sweep: RunStore) -> None:
    table = table_of(sweep)
    assert [(g.value, g.run_ids) for g in groups(table, "lr")] == [
        ("0.01", ("lr1e-2-s0", "lr1e-2-s1")),
        ("0.001", ("lr1e-3-s0", "lr1e-3-s1")),
        ("0.0001", ("lr1e-4-s0", "lr1e-4-s1")),
    ]
    summary = group_table(table, "lr").set_index("lr")
    pair = [row(table, r)["loss.best"] for r in ("lr1e-3-s0", "lr1e-3-s1")]
    assert summary.loc["0.001", "runs"] == 2
    assert summary.loc["0.001", "loss.best mean"] == pytest.approx(sum(pair) / 2)
    assert summary.loc["0.001", "loss.best min"] == min(pair) and summary.loc["0.001", "loss.best max"] == max(pair)
    assert summary.loc["0.01", "loss.last mean"] == row(table, "lr1e-2-s1")["loss.last"]  # the NaN left out
    assert [g.value for g in groups(table, "config.status")] == ["—", "clash"]
    with pytest.raises(KeyError, match="no column or config key"):
        groups(table, "batch")


def test_display_shows_nan_as_nan_and_missing_as_blank(sweep: RunStore) -> None:
    write_sweep_run(sweep.root, "no-eval", lr=1e-4, seed=5, eval_every=10**6)
    sweep.refresh(force=True)
    table = table_of(sweep)
    shown = display_table(table, NOW).set_index("id")
    assert shown.loc["lr1e-2-s0", "loss.last"] == "NaN"
    assert shown.loc["no-eval", "eval_loss.last"] == ""  # never logged: blank, not NaN, not "None"
    assert shown.loc["lr1e-4-s0", "steps"] == "100"
    assert shown.loc["lr1e-4-s0", "duration_s"] == "0:01:41"
    assert shown.loc["lr1e-4-s0", "lr"] == "0.0001"
    assert "None" not in shown.to_string()


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (math.nan, "NaN"),
        (math.inf, "inf"),
        (-math.inf, "-inf"),
        (None, ""),
        (pd.NA, ""),
        (12345, "12,345"),
        (0.000123456, "0.0001235"),
        (True, "true"),
        ([1, 2], "[1, 2]"),
        ("run<b>", "run<b>"),  # text stays text (st.dataframe never renders HTML)
    ],
)
def test_format_value(value: object, text: str) -> None:
    assert format_value(value) == text


def test_no_runs_and_one_run(tmp_path: Path) -> None:
    empty = build_table([], lambda info: None, NOW)  # type: ignore[arg-type, return-value]
    assert empty.ids == [] and list(empty.frame.columns) == list(BASE_COLUMNS)
    assert filter_expr(empty, "lr < 1").ids == [] and display_table(empty, NOW).empty
    write_sweep_run(tmp_path, "only", lr=1e-3, seed=0, steps=10)
    single = table_of(RunStore(tmp_path))
    assert single.config_columns == () and filter_expr(single, "lr == 0.001").ids == ["only"]


def test_unknown_statistic_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown statistics"):
        TableOptions(stats=("last", "median"))


def test_a_config_integer_no_double_holds_is_text_not_a_crash(sweep: RunStore, tmp_path: Path) -> None:
    """Metadata is read from disk: a 401-digit JSON integer (float() raises on it) sorts and groups as text."""
    meta_path = tmp_path / "lr1e-2-s1" / "metrics.meta.json"
    meta_path.write_text(meta_path.read_text().replace('"lr": 0.01', '"lr": 1' + "0" * 400))
    table = table_of(RunStore(tmp_path))
    assert sort_table(table, "lr").ids[-1] == "lr1e-2-s1" and len(sort_table(table, "lr").ids) == 6  # as text
    assert len(groups(table, "lr")) == 4 and not display_table(table, NOW).empty
    start_time = meta_path.read_text().replace('"start_time": ', '"start_time": 1' + "0" * 400 + ', "x": ')
    meta_path.write_text(start_time)
    assert "lr1e-2-s1" in table_of(RunStore(tmp_path)).ids
