"""RankTable: merging by (segment, step), schema drift, resumes, growth and views."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from monitor_cb.ingest.batch import records_to_batch
from monitor_cb.ingest.table import RankTable


def table_of(*chunks: list[dict[str, Any]]) -> RankTable:
    table = RankTable()
    for chunk in chunks:
        table.append(records_to_batch(chunk))
    return table


def test_same_step_different_keys_merge_into_one_row() -> None:
    table = table_of(
        [{"step": 1, "seg": 1, "loss": 2.0}, {"step": 2, "seg": 1, "loss": 1.5}],
        [{"step": 2, "seg": 1, "eval_loss": 1.7}],  # next poll: eval at the same step
    )
    frame = table.frame()
    assert list(frame["step"]) == [1, 2]
    assert frame["loss"].iloc[1] == 1.5 and frame["eval_loss"].iloc[1] == 1.7
    assert list(table.logged("eval_loss")) == [False, True]


def test_schema_drift_adds_a_column_not_logged_before() -> None:
    table = table_of([{"step": s, "loss": 1.0} for s in range(1, 4)], [{"step": 4, "loss": 1.0, "grad_norm": 3.0}])
    frame = table.frame()
    assert list(frame.columns[:4]) == ["step", "t", "rank", "seg"]
    assert np.isnan(frame["grad_norm"].iloc[0]) and frame["grad_norm"].iloc[3] == 3.0
    assert list(table.logged("grad_norm")) == [False, False, False, True]


def test_logged_nan_differs_from_not_logged() -> None:
    table = table_of([{"step": 1, "loss": "NaN"}, {"step": 2}, {"step": 3, "loss": "-Infinity"}])
    frame = table.frame()
    assert math.isnan(frame["loss"].iloc[0]) and math.isnan(frame["loss"].iloc[1])
    assert frame["loss"].iloc[2] == -math.inf
    assert list(table.logged("loss")) == [True, False, True]


def test_resumed_run_latest_segment_wins_older_rows_kept() -> None:
    first = [{"step": s, "seg": 1, "loss": 10.0 + s} for s in range(1, 11)]
    second = [{"step": s, "seg": 2, "loss": 20.0 + s} for s in range(6, 13)]
    table = table_of(first, second)
    frame = table.frame()
    assert list(frame["step"]) == list(range(1, 13))
    assert list(frame["seg"]) == [1] * 5 + [2] * 7
    assert frame.loc[frame["step"] == 8, "loss"].item() == 28.0
    every = table.frame(all_segments=True)
    assert len(every) == 17
    assert sorted(every.loc[every["step"] == 8, "loss"]) == [18.0, 28.0]


def test_one_batch_of_two_segments_in_order_matches_two_batches() -> None:
    first = [{"step": s, "seg": 1, "loss": 10.0 + s} for s in range(1, 11)]
    second = [{"step": s, "seg": 2, "loss": 20.0 + s} for s in range(6, 13)]
    whole, apart = table_of(first + second), table_of(first, second)
    assert whole.frame().equals(apart.frame())
    assert whole.frame(all_segments=True).equals(apart.frame(all_segments=True))
    assert whole.frame()["step"].dtype == np.int64


def test_file_without_segments_starts_one_where_steps_go_back() -> None:
    table = table_of([{"step": s, "loss": 1.0} for s in range(1, 6)], [{"step": s, "loss": 2.0} for s in range(3, 8)])
    frame = table.frame()
    assert list(frame["step"]) == list(range(1, 8))
    assert list(frame["loss"]) == [1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0]
    assert len(table.frame(all_segments=True)) == 10


def test_out_of_order_steps_are_sorted_in() -> None:
    table = table_of([{"step": s, "seg": 1, "x": float(s)} for s in (1, 5, 9)], [{"step": 3, "seg": 1, "x": 3.0}])
    assert list(table.frame()["step"]) == [1, 3, 5, 9]
    assert list(table.frame()["x"]) == [1.0, 3.0, 5.0, 9.0]


def test_growth_keeps_every_row_and_frame_is_a_view() -> None:
    table = RankTable()
    for start in range(0, 5000, 250):
        table.append(records_to_batch([{"step": s + 1, "seg": 1, "loss": float(s)} for s in range(start, start + 250)]))
    frame = table.frame()
    assert len(frame) == 5000 and frame["loss"].iloc[-1] == 4999.0
    assert np.shares_memory(frame["loss"].to_numpy(), table.floats["loss"].values)
    assert table.frame() is frame  # unchanged: the cached frame, nothing rebuilt


def test_frame_handed_out_never_changes_under_its_reader() -> None:
    table = table_of([{"step": s, "seg": 1, "loss": 1.0} for s in range(1, 4)])
    before = table.frame()
    table.append(records_to_batch([{"step": 3, "seg": 1, "loss": 9.0}]))  # rewrites a visible row
    assert before["loss"].iloc[2] == 1.0
    assert table.frame()["loss"].iloc[2] == 9.0


def test_big_first_load_then_appends_and_merges() -> None:
    table = RankTable()
    table.append(records_to_batch([{"step": s, "seg": 1, "loss": float(s), "t": s + 0.5} for s in range(1, 5001)]))
    first = table.frame()
    table.append(records_to_batch([{"step": s, "seg": 1, "loss": float(s)} for s in range(5001, 5011)]))
    table.append(records_to_batch([{"step": 5000, "seg": 1, "eval": 1.0}]))
    frame = table.frame()
    assert len(first) == 5000 and "eval" not in first  # a frame handed out keeps its shape
    assert list(frame["step"]) == list(range(1, 5011))
    assert frame["loss"].iloc[-1] == 5010.0 and frame["t"].iloc[0] == 1.5
    assert list(table.logged("eval").nonzero()[0]) == [4999]


def test_resume_on_another_step_grid_interleaves_and_stays_a_view() -> None:
    table = table_of(
        [{"step": s, "seg": 1, "loss": 1.0} for s in range(10, 101, 10)],
        [{"step": s, "seg": 2, "loss": 2.0, "gn": 0.5} for s in range(55, 126, 10)],
    )
    frame = table.frame()
    assert list(frame["step"]) == sorted({*range(10, 101, 10), *range(55, 126, 10)})
    assert list(frame.loc[frame["step"] > 100, "seg"]) == [2, 2, 2]
    assert list(table.logged("gn")) == [s % 10 == 5 for s in frame["step"]]
    table.append(records_to_batch([{"step": 135, "seg": 2, "loss": 2.0}]))
    assert np.shares_memory(table.frame()["loss"].to_numpy(), table.floats["loss"].values)


def test_all_segments_masks_follow_the_replaced_rows() -> None:
    table = table_of(
        [{"step": s, "seg": 1, "loss": "NaN"} for s in (1, 2, 3)],
        [{"step": s, "seg": 2, "acc": 0.5} for s in (2, 3)],
    )
    every = table.frame(all_segments=True)
    assert list(zip(every["step"], every["seg"], strict=True)) == [(1, 1), (2, 1), (2, 2), (3, 1), (3, 2)]
    assert list(table.logged("loss", all_segments=True)) == [True, True, False, True, False]
    assert list(table.logged("acc", all_segments=True)) == [False, False, True, False, True]
    assert list(table.logged("loss")) == [True, False, False] and table.history_rows == 2
