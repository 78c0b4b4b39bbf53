"""The All metrics page's logic: grouping by prefix, the regex filters (and the patterns refused), pages, pins, CSV."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from monitor_cb.views.all_metrics import (
    MAX_PINS,
    MAX_RUNS,
    FigureCache,
    MetricGroup,
    chart_csv,
    compile_filter,
    group_metrics,
    page_count,
    page_of,
    pins_from,
    prefix_of,
    runs_matching,
    safe_cell,
    toggled,
    union_metrics,
)


def as_dict(groups: list[MetricGroup]) -> dict[str, tuple[str, ...]]:
    return {g.prefix: g.metrics for g in groups}


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        # HF Trainer / Lightning names as written, ours, MindFormers' sanitised ones
        (
            ["train/loss", "train/learning_rate", "eval/loss", "loss", "lr"],
            {"": ("loss", "lr"), "eval": ("eval/loss",), "train": ("train/learning_rate", "train/loss")},
        ),
        (["a.b.c", "a.d", "b.x"], {"a": ("a.b.c", "a.d"), "b": ("b.x",)}),
        # "_" groups only a prefix more than one name has; a bare name joins its own group
        (
            ["eval_loss", "eval_accuracy", "grad_norm", "loss", "loss_scale", "step_time"],
            {"": ("grad_norm", "step_time"), "eval": ("eval_accuracy", "eval_loss"), "loss": ("loss", "loss_scale")},
        ),
        # a leading separator is no prefix; "/" and "." whichever comes first
        (["/x", ".y", "_z", "p.q/r", "p/q.r"], {"": (".y", "/x", "_z"), "p": ("p.q/r", "p/q.r")}),
        # names as written by other frameworks
        (
            ["Losses/Policy Loss", "Policy/Learning Rate", "lr-Adam"],
            {"": ("lr-Adam",), "Losses": ("Losses/Policy Loss",), "Policy": ("Policy/Learning Rate",)},
        ),
        ([], {}),
    ],
)
def test_group_metrics(names: list[str], expected: dict[str, tuple[str, ...]]) -> None:
    groups = group_metrics(names)
    assert as_dict(groups) == expected
    assert sum(len(g.metrics) for g in groups) == len(set(names)), "every name in exactly one group"
    if "" in expected:
        assert groups[0].prefix == "" and groups[0].label == "(no prefix)"


def test_natural_order_and_names_differing_only_in_case() -> None:
    groups = group_metrics(["layer/10", "layer/2", "layer/1", "Loss", "loss"])
    assert as_dict(groups)["layer"] == ("layer/1", "layer/2", "layer/10")
    assert set(as_dict(groups)[""]) == {"Loss", "loss"}


def test_ten_thousand_names_group_fast_and_keys_are_short() -> None:
    names = [f"g{i % 100}/m{i}" for i in range(10_000)] + ["x" * 10_000, "a\nb/c"]
    start = time.process_time()
    groups = group_metrics(names)
    assert time.process_time() - start < 5.0  # generous: about 50 ms on a laptop
    assert len(groups) == 102
    assert all(len(g.key) == 12 for g in groups)
    assert len({g.key for g in groups}) == len(groups)
    assert prefix_of("a\nb/c") == "a\nb"


@pytest.mark.parametrize("text", ["", "  ", None])
def test_empty_filter_keeps_everything(text: str | None) -> None:
    flt = compile_filter(text)
    assert flt.error is None and flt.pattern is None
    assert flt.keep(["a", "b"]) == ["a", "b"]


def test_filter_is_a_case_insensitive_search() -> None:
    flt = compile_filter("^train/|LR$")
    assert flt.keep(["train/loss", "eval/loss", "lr", "my_lr", "Train/x"]) == ["train/loss", "lr", "my_lr", "Train/x"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[", "Not a regular expression"),
        ("(a+)+$", "a repeat inside a repeat"),
        ("(x*)*y", "a repeat inside a repeat"),
        ("(?:ab+){2,}", "a repeat inside a repeat"),
        ("(a|aa)*b", "alternatives inside a repeat"),
        (r"(\w+)\1", "a back reference"),
        ("a" * 201, "at most 200"),
    ],
)
def test_bad_or_dangerous_patterns_say_why(text: str, says: str) -> None:
    flt = compile_filter(text)
    assert flt.pattern is None and flt.error is not None and says in flt.error
    assert flt.keep(["a"]) == []


@pytest.mark.parametrize("text", ["(a|b)*c", "a{1,5}", "(loss|lr)", "train/(loss|lr).*", "[a-z]+_\\d+"])
def test_ordinary_patterns_pass(text: str) -> None:
    assert compile_filter(text).error is None


def test_a_long_name_is_matched_by_its_head_in_bounded_time() -> None:
    flt = compile_filter("a.*b.*c.*d")
    start = time.process_time()
    assert flt.keep(["a" * 10_000 + "bcd"]) == []  # the tail is past MAX_MATCHED
    assert time.process_time() - start < 2.0


def test_pages() -> None:
    names = [f"m{i}" for i in range(25)]
    assert page_count(0) == 1 and page_count(25, 12) == 3
    assert page_of(names, 1, 12) == tuple(names[:12])
    assert page_of(names, 3, 12) == ("m24",)
    assert page_of(names, 99, 12) == ("m24",) and page_of(names, -5, 12) == tuple(names[:12])


def test_pins() -> None:
    assert pins_from(["b", "zz", "a", "b"], ["a", "b"]) == ("b", "a")
    many = [f"m{i}" for i in range(100)]
    assert len(pins_from(many, many)) == MAX_PINS
    assert toggled(("a", "b"), "a") == ("b",)
    assert toggled(("a",), "c") == ("a", "c")


def run(name: str) -> SimpleNamespace:
    return SimpleNamespace(id=f"root/{name}", name=name)


def test_runs_matching() -> None:
    runs = [run("b"), run("a-seed1"), run("a-seed2")] + [run(f"z{i}-seed") for i in range(20)]
    picked = runs[0]
    alone, n = runs_matching(runs, compile_filter(""), picked)
    assert alone == [picked] and n == 0
    chosen, n = runs_matching(runs, compile_filter("seed[12]$"), picked)
    assert [r.name for r in chosen] == ["b", "a-seed1", "a-seed2"] and n == 2
    chosen, n = runs_matching(runs, compile_filter("seed"), picked)
    assert len(chosen) == 1 + MAX_RUNS and n == 22
    chosen, _ = runs_matching(runs, compile_filter("(a+)+"), picked)
    assert chosen == [picked], "a refused pattern adds nothing"


def test_union_metrics_keeps_first_seen_order() -> None:
    assert union_metrics([["loss", "lr"], ["acc", "loss"]]) == ["loss", "lr", "acc"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("=1+1", "'=1+1"), ("+x", "'+x"), ("-x", "'-x"), ("@SUM(A1)", "'@SUM(A1)"), ("loss", "loss")],
)
def test_safe_cell(text: str, expected: str) -> None:
    assert safe_cell(text) == expected


def test_chart_csv_one_run_and_several() -> None:
    frame = pd.DataFrame({"step": [1, 2, 3], "t": [10.0, 11.0, 12.0], "=cmd|' /C calc'!A0": [1.0, np.nan, 3.0]})
    masks = {"=cmd|' /C calc'!A0": np.array([True, False, True])}
    one = chart_csv([("run", frame, masks)], "=cmd|' /C calc'!A0").decode()
    lines = one.splitlines()
    assert lines[0].split(",")[-1].startswith("\"'=cmd") or lines[0].split(",")[-1].startswith("'=cmd")
    assert len(lines) == 3, "the row where it was not logged is left out"
    both = chart_csv([("=evil", frame, masks), ("b", frame, masks)], "=cmd|' /C calc'!A0").decode().splitlines()
    assert both[0].startswith("run,") and both[1].startswith("'=evil,") and len(both) == 5


def test_figure_cache_builds_once_and_is_bounded() -> None:
    cache = FigureCache(size=2)
    calls: list[int] = []

    def build(i: int) -> int:
        calls.append(i)
        return i

    assert cache.get("a", lambda: build(1)) == 1
    assert cache.get("a", lambda: build(2)) == 1
    cache.get("b", lambda: build(3))
    cache.get("c", lambda: build(4))
    assert cache.get("a", lambda: build(5)) == 5
    assert calls == [1, 3, 4, 5]


def test_numeric_metrics_is_metric_columns() -> None:
    from monitor_cb.analysis.series import metric_columns
    from monitor_cb.views.all_metrics import numeric_metrics

    frame = pd.DataFrame(
        {"step": [1], "t": [1.0], "rank": [0], "loss": [1.0], "event": ["x"], "n": [3], "flag": [True], "x/y": [2.0]}
    )
    assert numeric_metrics(frame) == metric_columns(frame)
