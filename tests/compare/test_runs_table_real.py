"""The runs table over the real_runs corpus (79 runs other people recorded), read through the RunStore."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pytest

from monitor_cb.compare.runs_table import build_table, filter_expr, sort_table
from monitor_cb.compare.runstats import StatsCache, store_loader
from monitor_cb.ingest import RunStore
from monitor_cb.views.runs_view import display_table

REAL_RUNS = Path(
    os.environ.get("MONITOR_REAL_RUNS") or Path(__file__).resolve().parents[2] / ".." / "shared" / "real_runs"
)


@pytest.fixture(scope="module")
def corpus() -> Path:
    if not (REAL_RUNS / "labels.json").is_file():
        pytest.skip(f"the real_runs corpus is not at {REAL_RUNS}")
    return REAL_RUNS


def last_logged(path: Path, key: str) -> float | None:
    """The last value of ``key`` in a file, read independently of the store (strings "NaN" decoded)."""
    last = None
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if key in record:
            value = record[key]
            last = float(value) if not isinstance(value, str) else float(value.replace("Infinity", "inf"))
    return last


def test_every_real_run_gets_a_row_and_its_last_loss(corpus: Path) -> None:
    store = RunStore(corpus)
    infos = store.list_runs()
    table = build_table(infos, StatsCache(store_loader(store)).get, time.time())
    runs = sorted(p.parent.name for p in corpus.glob("*/metrics.jsonl"))
    assert sorted(table.ids) == runs
    ended_bad = sorted(
        run
        for run in runs
        if (v := last_logged(corpus / run / "metrics.jsonl", "loss")) is not None and not math.isfinite(v)
    )
    assert ended_bad and "pinn_em_nan" in ended_bad
    assert sorted(filter_expr(table, "loss.last == nan or loss.last == inf").ids) == ended_bad
    shown = display_table(table, time.time()).set_index("id")
    assert shown.loc["pinn_em_nan", "loss.last"] == "NaN"
    assert shown.loc["pinn_em_nan", "loss.best"] not in ("", "NaN")  # it had finite losses before
    by_best = sort_table(table, "loss.best")
    best = [v for v in by_best.frame["loss.best"] if v is not None and math.isfinite(v)]
    assert best == sorted(best)
    evals = [c for c in table.metric_columns if c.startswith("eval_")]
    assert "eval_loss.last" in evals and len(evals) > 2  # real runs log many eval_* metrics
