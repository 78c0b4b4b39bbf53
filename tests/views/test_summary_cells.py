"""The compare summary as text: NaN reads NaN, a value never logged reads "–", numbers keep 4 significant digits."""

from __future__ import annotations

import math

import pandas as pd

from monitor_cb.compare.rundata import RunData
from monitor_cb.compare.summary_table import summary_table
from monitor_cb.views.runs_view import text_width
from monitor_cb.views.summary_cells import summary_display


def test_nan_is_nan_and_not_logged_is_a_dash() -> None:
    frame = pd.DataFrame({"step": [1, 2], "t": [1.0, 2.0], "loss": [0.00325123, math.nan]})
    table = summary_display(summary_table([RunData("run01-lr0.0003-bs32-seed0", "run01-lr0.0003-bs32-seed0", frame)]))
    row = table.iloc[0]
    assert row["final loss"] == "NaN" and row["min loss"] == "0.003251"
    assert row["first non-finite step"] == "2" and row["best eval step"] == "–"
    for column in ("best eval value", "mean throughput", "max grad norm"):
        assert row[column] == "–", f"{column}: never logged, so not NaN"
    timeless = summary_display(summary_table([RunData("r", "r", frame.drop(columns="t"))])).iloc[0]
    assert timeless["duration"] == "–", "no times logged: no duration, not NaN"
    assert row["run"] == "run01-lr0.0003-bs32-seed0", "the whole name"
    assert row["steps"] == "2"


def test_text_width() -> None:
    assert text_width(["a"], "run") == 60
    assert text_width(["x" * 40], "run") == 8 * 40 + 24
    assert text_width(["x" * 400], "run") == 640
