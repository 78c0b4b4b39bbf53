"""monitor_cb.views.chart_data: the rows behind a live chart, in the zoom, as CSV and Parquet."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from monitor_cb.views.chart_data import chart_rows
from monitor_cb.views.panels import panel_columns


def test_rows_of_the_chart_metrics_in_the_zoom_with_nan_and_not_logged_apart() -> None:
    frame = pd.DataFrame(
        {
            "step": np.arange(1, 11),
            "t": 100.0 + np.arange(10),
            "loss": [1.0, 0.9, np.nan, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2],
            "eval_loss": [np.nan] * 4 + [0.95] + [np.nan] * 5,
            "throughput": np.ones(10),
        }
    )
    masks = {"eval_loss": np.arange(10) == 4}
    cols = panel_columns("eval", frame.columns)
    assert cols == ["loss", "eval_loss"], "the eval chart is drawn against the train loss"
    rows = chart_rows(frame, masks, cols, (2, 6))
    assert list(rows.frame.columns) == ["step", "t", "loss", "eval_loss"]
    assert list(rows.frame["step"]) == [2, 3, 4, 5, 6]
    text = rows.csv().decode().splitlines()
    assert text[0] == "step,t,loss,eval_loss"
    assert text[2] == "3,102.0,NaN," and text[4] == "5,104.0,0.7,0.95"
    table = pq.read_table(io.BytesIO(rows.parquet()))
    assert table.column("eval_loss").null_count == 4 and np.isnan(table.column("loss").to_numpy()[1])
    assert panel_columns("custom", frame.columns, (["throughput"], [])) == ["throughput"]
    assert panel_columns("nope", frame.columns) == []
