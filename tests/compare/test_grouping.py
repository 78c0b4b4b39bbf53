"""Grouping compared runs by a config key: values as shown, missing keys, lists, dicts and NaN."""

from __future__ import annotations

import pandas as pd

from monitor_cb.compare.grouping import group_keys, group_label, group_runs
from monitor_cb.compare.rundata import RunData

FRAME = pd.DataFrame({"step": [1], "loss": [1.0]})


def runs(*configs: dict | None) -> list[RunData]:
    return [RunData(f"r{i}", f"r{i}", FRAME, meta={} if c is None else {"config": c}) for i, c in enumerate(configs)]


def test_keys_that_differ_including_missing_ones() -> None:
    found = group_keys(runs({"lr": 1, "opt": "adam"}, {"lr": 2, "opt": "adam"}, {"lr": 2}))
    assert found == ["lr", "opt"]


def test_groups_by_shown_value_with_lists_dicts_nan_and_missing() -> None:
    data = runs(
        {"layers": [64, 64], "opt": {"b": [0.9]}, "wd": "NaN"},
        {"layers": [64, 64], "opt": {"b": [0.9]}, "wd": 0.1},
        {"layers": [128]},
        None,
    )
    assert group_runs(data, "layers") == {"[64, 64]": ("r0", "r1"), "[128]": ("r2",), "—": ("r3",)}
    assert group_runs(data, "opt.b") == {"[0.9]": ("r0", "r1"), "—": ("r2", "r3")}
    assert group_runs(data, "wd") == {"NaN": ("r0",), "0.1": ("r1",), "—": ("r2", "r3")}


def test_label() -> None:
    assert group_label("lr", "0.001", 1) == "lr=0.001 (1 run)"
    assert group_label("lr", "0.001", 3) == "lr=0.001 (3 runs)"
