"""A text value under a numeric metric (``"loss": "oops"``) must not crash Live, Compare or Replay.

The line's bad value is counted as bad, the column stays numeric and the other values are intact.
"""

from __future__ import annotations

import base64
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor_cb.ingest import RunStore
from tests.app.conftest import DASHBOARD
from tests.app.helpers import assert_ok, charts, run_entry, texts

COMPARE_ENTRY = str(Path(__file__).with_name("compare_app.py"))
STEPS = 100
BAD_STEP = 50
HOSTILE = ("oops", "1.2345")  # a plain word, and a Decimal written as a string


def loss_at(step: int) -> float:
    return 3.0 * math.exp(-step / 40) + 0.1


def write_hostile_run(root: Path, name: str, bad_value: str, article: bool = False) -> Path:
    """100 lines; at step 50 the loss is the text ``bad_value``.

    Collector-style lines (``t``, ``rank``, ``seg``, metadata file), or with ``article`` the origin
    article's plain ``json.dumps`` lines (time as ``ts``, a bare ``NaN`` token, no metadata).
    """
    run = root / name
    run.mkdir(parents=True)
    lines = []
    for step in range(1, STEPS + 1):
        loss: Any = bad_value if step == BAD_STEP else loss_at(step)
        if article:
            record = {"step": step, "loss": loss, "lr": math.nan if step == 10 else 1e-3, "ts": 1.7e9 + step}
        else:
            record = {"step": step, "t": 1.7e9 + step, "rank": 0, "seg": 1, "loss": loss, "lr": 1e-3}
        lines.append(json.dumps(record))
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    if article:  # without metadata a run is finished once idle for an hour: make it so, so Replay lists it
        hours_ago = time.time() - 7200
        os.utime(run / "metrics.jsonl", (hours_ago, hours_ago))
    else:
        meta = {"schema": 1, "name": name, "status": "finished", "segment": 1, "end_time": 1.7e9 + STEPS}
        (run / "metrics.meta.json").write_text(json.dumps(meta))
    return run


def good_losses(values: np.ndarray) -> None:
    expected = np.array([loss_at(s) for s in range(1, STEPS + 1) if s != BAD_STEP])
    assert values.dtype == np.float64
    np.testing.assert_allclose(values, expected)


@pytest.fixture(params=[*HOSTILE, "article"])
def hostile(request: pytest.FixtureRequest, log_root: Path) -> Path:
    article = request.param == "article"
    write_hostile_run(log_root, "hostile", "oops" if article else request.param, article=article)
    write_hostile_run(log_root, "other", "NaN")  # a legitimate NaN: a second run to compare against
    return log_root


def test_the_store_keeps_the_column_numeric_and_counts_the_value(hostile: Path) -> None:
    store = RunStore(hostile)
    data = store.read("hostile")
    frame, logged = data.frame, data.logged("loss")
    assert frame["loss"].dtype == np.float64
    assert len(frame) == STEPS and frame["lr"].notna().sum() >= STEPS - 1, "the bad line's other values are kept"
    assert not logged[BAD_STEP - 1] and logged.sum() == STEPS - 1
    good_losses(frame["loss"].to_numpy()[logged])
    info = store.run_info("hostile")
    assert (info.bad_lines, info.partial_lines) == (1, 1), "one line, kept without its loss"
    ((_, bad),) = store.bad_lines("hostile")
    assert "'loss'" in bad.reason


def raw_trace(at: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of the trace called ``name`` (or, on Compare, the raw trace of run id ``name``)."""
    for fig in charts(at):
        for trace in fig["data"]:
            raw_of_run = trace.get("legendgroup") == name and str(trace.get("name", "")).endswith("(raw)")
            if trace.get("name") == name or raw_of_run:
                return decode(trace["x"]), decode(trace["y"])
    raise AssertionError(f"no trace {name!r} drawn")


def decode(values: Any) -> np.ndarray:
    if isinstance(values, dict) and "bdata" in values:
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=np.dtype(values["dtype"])).astype(float)
    return np.asarray([math.nan if v is None else v for v in values], dtype=float)


def assert_good_losses_drawn(at: Any, name: str) -> None:
    """The 99 good losses are drawn at their steps; step 50 has no point (and no NaN marker)."""
    x, y = raw_trace(at, name)
    drawn = np.isfinite(y)
    assert list(x[drawn]) == [s for s in range(1, STEPS + 1) if s != BAD_STEP]
    np.testing.assert_allclose(y[drawn], [loss_at(s) for s in x[drawn]], rtol=1e-6)


def assert_partly_read_said(at: Any) -> None:
    """The line with the bad loss was read (its other values are drawn): the page says so, not "skipped"."""
    shown = texts(at)
    assert "1 line partly read (a bad value dropped)" in shown, shown
    assert "skipped" not in shown, shown


def test_live_page_renders(hostile: Path) -> None:
    at = run_entry(DASHBOARD, {"run": "hostile"})
    assert_ok(at)
    assert_good_losses_drawn(at, "loss (raw)")
    assert_partly_read_said(at)


def test_compare_page_renders(hostile: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONITOR_TEST_PAGE", raising=False)
    at = run_entry(COMPARE_ENTRY, {"runs": ["hostile", "other"], "metric": ["loss"]})
    assert_ok(at)
    assert_good_losses_drawn(at, "hostile")


def test_replay_page_renders_from_the_root(hostile: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_TEST_PAGE", "replay")
    at = run_entry(COMPARE_ENTRY, {"run": "hostile"})
    assert_ok(at)
    assert at.sidebar.selectbox(key="rp_run").value == "hostile"
    assert_good_losses_drawn(at, "loss (raw)")
    assert_partly_read_said(at)


@pytest.mark.parametrize("article", [False, True], ids=["collector", "article"])
def test_replay_page_renders_an_upload(log_root: Path, monkeypatch: pytest.MonkeyPatch, article: bool) -> None:
    monkeypatch.setenv("MONITOR_TEST_PAGE", "replay")
    run = write_hostile_run(log_root.parent / "elsewhere", "up", "oops", article=article)
    at = run_entry(COMPARE_ENTRY)
    at.sidebar.radio(key="rp_source").set_value("upload").run()
    at.sidebar.file_uploader(key="rp_upload").upload("up.jsonl", (run / "metrics.jsonl").read_bytes(), "text/plain")
    at.run()
    assert_ok(at)
    assert_good_losses_drawn(at, "loss (raw)")
    assert_partly_read_said(at)
