"""AppTests of the runs page: the table's columns, filters (text and expression), sort, group-by, the
sweep views, picking rows and opening them in Compare, and hostile names, expressions and configs."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from streamlit.testing.v1 import AppTest

from monitor_cb.train.writer import MetricsWriter
from tests.app.helpers import assert_ok, charts, run_entry

ENTRY = str(Path(__file__).with_name("runs_app.py"))
HOSTILE = "**bold** [link](http://x) <b>tag</b> `code`"


def write(
    root: Path,
    name: str,
    config: dict[str, Any],
    *,
    steps: int = 60,
    nan_at: int | None = None,
    close: str = "finished",
    reason: str | None = None,
    run_name: str | None = None,
) -> None:
    """A run with ``config`` (hyperparameters) and a loss falling with the config's lr."""
    writer = MetricsWriter(root / name, rank=0, world_size=1, fsync_interval=0, config=config, run_name=run_name)
    lr = float(config.get("lr", 1e-3)) if isinstance(config.get("lr"), (int, float)) else 1e-3
    t0 = 1_700_000_000.0
    for step in range(1, steps + 1):
        loss = math.nan if nan_at is not None and step >= nan_at else 2.0 * math.exp(-step * lr * 20) + 0.1
        writer.log_at(t0 + step, step=step, loss=loss, lr=lr)
        if step % 20 == 0:
            writer.log_at(t0 + step + 0.5, step=step, eval_loss=loss * 1.1)
    writer.flush()
    writer.close(close, reason) if reason else writer.close(close)


@pytest.fixture
def sweep(log_root: Path) -> Path:
    for lr in (1e-4, 3e-4, 1e-3, 3e-3):
        for seed in (0, 1):
            write(log_root, f"lr{lr:g}-s{seed}", {"lr": lr, "seed": seed, "optimizer": "adam"})
    write(
        log_root,
        "diverged",
        {"lr": 1e-2, "seed": 0, "optimizer": "adam"},
        nan_at=30,
        close="failed",
        reason="loss is NaN at step 30",
    )
    return log_root


def run_app(query: dict[str, Any] | None = None) -> AppTest:
    return run_entry(ENTRY, query)


def table(at: AppTest) -> Any:
    return at.dataframe(key="runs_table").value


def test_the_table_has_status_steps_duration_metrics_and_differing_config(sweep: Path) -> None:
    at = run_app()
    assert_ok(at)
    frame = table(at)
    assert len(frame) == 9
    for column in ("id", "status", "steps", "duration_s", "loss.last", "loss.best", "eval_loss.last", "lr", "seed"):
        assert column in frame.columns, (column, list(frame.columns))
    assert "optimizer" not in frame.columns, "equal in every run: shown only on demand"
    row = frame.set_index("id").loc["diverged"]
    assert row["status"] == "failed" and row["loss.last"] == "NaN" and row["loss.best"] not in ("", "NaN")
    assert row["reason"] == "loss is NaN at step 30"
    assert frame.set_index("id").loc["lr0.001-s0", "steps"] == "60"
    at.toggle(key="runs_all_config").set_value(True).run()
    assert_ok(at)
    assert "optimizer" in table(at).columns


def test_text_and_expression_filters(sweep: Path) -> None:
    at = run_app()
    at.text_input(key="runs_expr").set_value('lr < 1e-3 and status == "finished"').run()
    assert_ok(at)
    assert sorted(table(at)["id"]) == ["lr0.0001-s0", "lr0.0001-s1", "lr0.0003-s0", "lr0.0003-s1"]
    at.text_input(key="runs_filter").set_value("s1").run()
    assert sorted(table(at)["id"]) == ["lr0.0001-s1", "lr0.0003-s1"]
    assert any("2 of 9 runs" in str(c.value) for c in at.caption)


def test_a_bad_expression_is_an_escaped_error_and_loses_no_rows(sweep: Path) -> None:
    at = run_app()
    at.text_input(key="runs_expr").set_value("__import__('os').system('x') or **bold** [a](http://e)").run()
    assert_ok(at)
    errors = [str(e.value) for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("Filter expression:"), errors
    assert "[a](http" not in errors[0] and "**bold**" not in errors[0], "shown escaped, never as Markdown"
    assert len(table(at)) == 9, "the table stays, unfiltered by the bad expression"
    at.text_input(key="runs_expr").set_value("lrr < 1").run()
    assert "did you mean lr" in str(at.error[0].value)


def test_sort_by_a_metric_descending(sweep: Path) -> None:
    at = run_app()
    at.selectbox(key="runs_sort").set_value("loss.best").run()
    at.toggle(key="runs_desc").set_value(True).run()
    assert_ok(at)
    ids = list(table(at)["id"])
    best = [float(v) for v in table(at)["loss.best"]]
    assert best == sorted(best, reverse=True), ids
    assert ids[-1] == "diverged" or best[-1] <= best[0]


def test_group_by_a_config_key(sweep: Path) -> None:
    at = run_app()
    at.selectbox(key="runs_group").set_value("lr").run()
    assert_ok(at)
    groups = at.dataframe[1].value  # (a non-selectable table has no key for AppTest)
    sizes = dict(zip(groups["lr"], groups["runs"], strict=True))
    assert sizes == {"0.0001": "2", "0.0003": "2", "0.001": "2", "0.003": "2", "0.01": "1"}
    assert "loss.last mean" in groups.columns and groups.set_index("lr").loc["0.01", "loss.last mean"] == "NaN"


def test_sweep_views_over_the_filtered_runs(sweep: Path) -> None:
    at = run_app()
    at.text_input(key="runs_expr").set_value('status == "finished"').run()
    assert_ok(at)
    figs = {f["data"][0]["type"]: f for f in charts(at)}
    parcoords = figs["parcoords"]["data"][0]
    assert [d["label"] for d in parcoords["dimensions"]][-1].startswith("loss.last")
    assert len(parcoords["dimensions"][0]["values"]) == 8, "one line per filtered run"
    points = [t for t in charts(at)[1]["data"] if t["type"] == "scatter" and t.get("showlegend", True) is not False]
    assert len(points) == 8 and all(len(t["x"]) == 1 for t in points), "one point (and legend entry) per run"
    assert len({t["marker"]["color"] for t in points}) == 8, "a distinct colour per run"
    assert charts(at)[1]["layout"]["showlegend"] is True
    assert {t["name"] for t in points} == {f"lr{lr:g}-s{seed}" for lr in (1e-4, 3e-4, 1e-3, 3e-3) for seed in (0, 1)}


def test_sweeps_start_with_the_keys_that_vary(log_root: Path) -> None:
    for i, lr in enumerate((1e-4, 3e-4, 1e-3, 3e-3)):
        for seed in (0, 1):
            config = {"classes": 10, "d_model": 64 if i < 2 else 128, "lr": lr, "seed": seed, "act": "gelu"}
            write(log_root, f"r{i}-s{seed}", config)
    at = run_app()
    assert_ok(at)
    assert at.multiselect(key="runs_sweep_keys").value == ["lr", "d_model", "seed"], "not classes, d_model..."
    assert at.selectbox(key="runs_sweep_x").value == "lr"


def compare_link(at: AppTest) -> Any:
    links = at.get("page_link")
    assert len(links) == 1
    return links[0].proto


def follow(link: Any) -> AppTest:
    """Open the link's page with its query, as the browser does (AppTest cannot click a link)."""
    assert link.page.endswith("compare")
    query = parse_qs(link.query_string)
    from tests.app.test_compare_page import ENTRY as COMPARE_ENTRY

    return run_entry(COMPARE_ENTRY, {k: v if len(v) > 1 or k == "runs" else v[0] for k, v in query.items()})


def test_select_rows_and_open_them_in_compare(sweep: Path) -> None:
    at = run_app()
    assert compare_link(at).disabled
    at.session_state["runs_table"] = {"selection": {"rows": [0, 2], "columns": [], "cells": []}}
    at.run()
    assert_ok(at)
    ids = list(table(at)["id"])
    picked = [ids[0], ids[2]]
    link = compare_link(at)
    assert not link.disabled and link.label == "Open 2 selected in Compare"
    assert parse_qs(link.query_string) == {"runs": picked}
    compare = follow(link)
    assert_ok(compare)
    assert compare.sidebar.multiselect(key="cmp_runs").value == picked, "the compare page shows the picked runs"
    assert charts(compare), "and draws them"


def test_open_in_compare_grouped(sweep: Path) -> None:
    at = run_app()
    at.selectbox(key="runs_group").set_value("lr").run()
    at.session_state["runs_table"] = {"selection": {"rows": [0, 1, 2, 3], "columns": [], "cells": []}}
    at.run()
    link = compare_link(at)
    assert parse_qs(link.query_string)["group"] == ["lr"]
    compare = follow(link)
    assert_ok(compare)
    assert compare.selectbox(key="cmp_group").value == "lr"
    names = [t.get("name", "") for f in charts(compare) for t in f["data"] if t.get("name")]
    assert any(n.startswith("lr=") and "runs)" in n for n in names), names


def test_hostile_run_name_and_reason_are_plain_text(log_root: Path) -> None:
    write(log_root, "evil", {"lr": 1e-3}, close="failed", reason=HOSTILE, run_name=HOSTILE)
    write(log_root, "good", {"lr": 1e-4})
    at = run_app()
    assert_ok(at)
    frame = table(at).set_index("id")
    assert frame.loc["evil", "name"] == HOSTILE and frame.loc["evil", "reason"] == HOSTILE, "cells are text"
    at.session_state["runs_table"] = {"selection": {"rows": list(range(2)), "columns": [], "cells": []}}
    at.run()
    shown = "\n".join(str(m.value) for m in at.markdown)
    assert "\\*\\*bold\\*\\*" in shown and "[link](http" not in shown and "<b>" not in shown, shown
    columns = json.loads(at.dataframe(key="runs_table").proto.columns)
    widths = {k: v.get("width") for k, v in columns.items()}
    assert widths["reason"] >= 8 * len(HOSTILE), "the reason is as wide as its text"


def test_config_values_that_are_lists_dicts_and_nan(log_root: Path) -> None:
    write(log_root, "a", {"layers": [64, 64], "opt": {"name": "adam", "betas": [0.9, 0.99]}, "wd": math.nan})
    write(log_root, "b", {"layers": [128], "opt": {"name": "sgd"}, "wd": 0.1})
    at = run_app()
    assert_ok(at)
    frame = table(at).set_index("id")
    assert frame.loc["a", "layers"] == "[64, 64]" and frame.loc["a", "opt.betas"] == "[0.9, 0.99]"
    assert frame.loc["a", "wd"] == "NaN" and frame.loc["b", "wd"] == "0.1"
    at.text_input(key="runs_expr").set_value("layers == [128]").run()
    assert list(table(at)["id"]) == ["b"]
    at.text_input(key="runs_expr").set_value("wd == nan").run()
    assert list(table(at)["id"]) == ["a"], "a NaN config value (stored as the text NaN) is NaN"
    at.text_input(key="runs_expr").set_value("").run()
    assert_ok(at)
    assert any(f["data"][0]["type"] == "parcoords" for f in charts(at)), "list values are categorical axes"


def test_grouped_table_shows_a_dash_for_not_logged_and_nan_only_for_a_logged_nan(sweep: Path) -> None:
    writer = MetricsWriter(sweep / "no-eval", rank=0, world_size=1, fsync_interval=0, config={"lr": 0.05})
    for step in range(1, 31):
        writer.log_at(1_700_000_000.0 + step, step=step, loss=1.0 / step, lr=0.05)
    writer.close("finished")
    at = run_app()
    at.selectbox(key="runs_group").set_value("lr").run()
    assert_ok(at)
    groups = at.dataframe[1].value.set_index("lr")
    assert groups.loc["0.05", "eval_loss.last mean"] == "–", "no run of the group logged eval_loss"
    assert groups.loc["0.05", "loss.last mean"] not in ("–", "NaN")
    assert groups.loc["0.01", "loss.last mean"] == "NaN", "its only run logged a NaN loss last"
    assert "NaN" not in set(groups.loc["0.001"]), "a healthy group has no NaN anywhere"


def test_duration_is_titled_as_it_is_shown(sweep: Path) -> None:
    at = run_app()
    assert_ok(at)
    table = at.dataframe[0].value
    assert table["duration_s"].iloc[0].count(":") == 2, "shown as h:mm:ss"
    columns = json.loads(at.dataframe[0].proto.columns)
    assert columns["duration_s"]["label"] == "duration", "so not titled as seconds"
    assert "h:mm:ss" in columns["duration_s"]["help"]


def test_the_url_keeps_filter_sort_and_grouping(sweep: Path) -> None:
    at = run_app()
    at.text_input(key="runs_filter").set_value("lr").run()
    at.text_input(key="runs_expr").set_value('status == "finished"').run()
    at.selectbox(key="runs_sort").set_value("loss.best").run()
    at.toggle(key="runs_desc").set_value(True).run()
    at.selectbox(key="runs_group").set_value("lr").run()
    assert_ok(at)
    link = {k: at.query_params[k] for k in at.query_params}
    one = {k: (v[0] if isinstance(v, list) and len(v) == 1 else v) for k, v in link.items()}
    assert one == {"q": "lr", "expr": 'status == "finished"', "sort": "loss.best", "desc": "1", "group": "lr"}
    fresh = run_app(link)  # a new tab on the copied link
    assert_ok(fresh)
    assert fresh.text_input(key="runs_filter").value == "lr"
    assert fresh.text_input(key="runs_expr").value == 'status == "finished"'
    assert fresh.selectbox(key="runs_sort").value == "loss.best" and fresh.toggle(key="runs_desc").value is True
    assert fresh.selectbox(key="runs_group").value == "lr"
    shown = fresh.dataframe[0].value
    best = [float(v) for v in shown["loss.best"]]
    assert best == sorted(best, reverse=True) and len(best) == 8, "sorted as the link says; diverged filtered out"
    bad = run_app({"sort": "nope", "group": "<b>", "stats": ["evil"], "q": "x" * 10_000})
    assert_ok(bad)
    assert bad.selectbox(key="runs_sort").value == "(newest first)" and bad.text_input(key="runs_filter").value == ""


def test_a_huge_integer_in_a_config_and_arithmetic_on_it_is_a_message_not_a_crash(log_root: Path) -> None:
    """A 2,150-digit integer in a run's config; ``(big*big*big) in status`` once raised Python's int->str
    limit (ValueError) out of the page. Now: integers past a double's range are infinity in arithmetic."""
    big = int("9" * 2150)
    write(log_root, "huge", {"lr": 1e-3})
    write(log_root, "small", {"lr": 1e-4, "big": 3})
    meta_path = log_root / "huge" / "metrics.meta.json"
    meta = json.loads(meta_path.read_text())
    meta["config"]["big"] = big  # a JSON integer, as json.dumps writes it (the writer would store text)
    meta_path.write_text(json.dumps(meta))
    at = run_app()
    assert_ok(at)
    assert len(table(at)) == 2
    for expression in ("(big*big*big) in status", "big*big*big*big > 1", "status in (big*big,)", "-(big*big) < 0"):
        at.text_input(key="runs_expr").set_value(expression).run()
        assert_ok(at)
    at.text_input(key="runs_expr").set_value("(big*big*big) in status").run()
    assert list(table(at)["id"]) == [], "a number is never a substring of a status"
    assert len(at.dataframe(key="runs_table").value) == 0 and not at.error
    at.text_input(key="runs_expr").set_value("big*big > 1e300").run()
    assert list(table(at)["id"]) == ["huge"], "huge products compare as infinity"
    at.text_input(key="runs_expr").set_value("big > 5").run()
    assert list(table(at)["id"]) == ["huge"]


def test_a_config_key_holding_markdown_or_a_url_is_text_in_the_group_heading(log_root: Path) -> None:
    key = "[click](http://127.0.0.1:1/x)"
    write(log_root, "a", {key: 1, "lr": 1e-3})
    write(log_root, "b", {key: 2, "lr": 1e-4})
    at = run_app()
    at.selectbox(key="runs_group").set_value(key).run()
    assert_ok(at)
    (heading,) = [h.value for h in at.subheader if "Groups by" in h.value]
    assert not re.search(r"(?<!\\)\]\(", heading) and "http\\:\u2060//" in heading, heading


def test_health_column_fills_in_sorts_worst_first_and_filters(sweep: Path) -> None:
    """The worst finding of each run, diagnosed in the background: empty while pending, then error / ok."""
    import time

    deadline = time.monotonic() + 60
    at = run_app()
    assert_ok(at)
    assert "health" in table(at).columns
    while (table(at)["health"] == "").any() and time.monotonic() < deadline:
        at.run()  # the worker diagnoses the runs meanwhile; the page never waits for it
    frame = table(at).set_index("id")
    assert frame.loc["diverged", "health"] == "error"
    assert frame.loc["diverged", "health.step"] == "30"
    assert set(frame.drop(index="diverged")["health"]) == {"ok"}
    at.text_input(key="runs_expr").set_value('health == "error"').run()
    assert_ok(at)
    assert list(table(at)["id"]) == ["diverged"]


@pytest.mark.parametrize("wall", [1e300, 1e12, -1e300])
def test_an_implausible_event_time_is_refused_with_a_note(log_root: Path, wall: float) -> None:
    """As found (#34 item 11): one TensorBoard event with wall time 1e300 made the duration 300 digits long.
    The time is refused (the run lasts what its other events say) and a note names the run."""
    from monitor_cb.testing.event_writer import Scalar, write_scalars

    t0 = 1_760_000_000.0
    scalars = [Scalar("loss", step, t0 + 0.5 * step, 1.0 / step) for step in range(1, 201)]
    scalars.insert(100, Scalar("loss", 101, wall, 0.5))
    write_scalars(log_root / "tb-bad", scalars)
    at = run_app()
    assert_ok(at)
    row = table(at).set_index("id").loc["tb-bad"]
    assert row["duration_s"] == "0:01:40", row["duration_s"]  # steps 1..200 at 0.5 s
    notes = [c.value.replace("\\", "") for c in at.caption if "plausible date" in c.value]  # Markdown-escaped
    assert len(notes) == 1 and "tb-bad: 1 record time" in notes[0] and f"(such as {wall:.6g})" in notes[0], notes
