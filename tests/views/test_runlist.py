"""monitor_cb.views.runlist: the sidebar's run list: ages, durations, filter, labels."""

from __future__ import annotations

import math

import pytest

from monitor_cb.views.runlist import (
    filter_runs,
    format_age,
    format_clock,
    format_duration,
    pick_run,
    resolve_wanted,
    run_label,
)
from tests.views.helpers import FakeRun


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "–"), (math.nan, "–"), (-3, "0 s"), (4.2, "4 s"), (600, "10 min"), (3 * 3600, "3.0 h"), (5 * 86400, "5 d")],
)
def test_format_age(seconds: float | None, text: str) -> None:
    assert format_age(seconds) == text


def test_format_duration() -> None:
    assert format_duration(3723) == "1:02:03"
    assert format_duration(None) == "–"


def test_filter_and_pick_runs() -> None:
    runs = [FakeRun("bert/exp2", "exp2", "failed"), FakeRun("exp1", "exp1", "finished")]
    assert [r.id for r in filter_runs(runs, "")] == ["bert/exp2", "exp1"]
    assert [r.id for r in filter_runs(runs, "BERT fail")] == ["bert/exp2"]
    assert filter_runs(runs, "nothing") == []
    ids = [r.id for r in runs]
    assert pick_run(ids, "exp1") == "exp1"
    assert pick_run(ids, "gone") == "bert/exp2"  # newest first
    assert pick_run([], "x") is None


def test_run_labels_are_plain_text_that_does_not_go_stale() -> None:
    """A select box's labels are drawn once per page run: no age that goes stale, no emoji."""
    t = 1_700_000_000.0
    ended = FakeRun("bert/exp2", "exp2", "failed", last_write=t)
    clock = format_clock(t, t + 60)
    assert run_label(ended, now=t + 10) == run_label(ended, now=t + 50) == f"bert/exp2 · failed · {clock}"
    assert len(clock) == 5 and clock[2] == ":"  # the same day: the time of day
    assert format_clock(t, t + 40 * 86400).count(" ") == 2  # another day this year: "Dec 02 14:05"
    assert format_clock(t, t + 400 * 86400)[:4].isdigit()  # another year: the date in full
    assert run_label(FakeRun("live", "live", "running", last_write=t), now=t + 500) == "live · running"
    assert all(ord(c) < 0x2000 or c in "·–" for c in run_label(ended, now=t))


def test_a_url_run_may_name_a_folder_or_a_run_name() -> None:
    runs = [FakeRun("llama/output/log", "llama"), FakeRun("bert/a", "a"), FakeRun("bert/b", "b"), FakeRun("x/y", "b")]
    assert resolve_wanted(runs, "bert/a") == "bert/a"
    assert resolve_wanted(runs, "llama") == "llama/output/log", "the one run below that folder"
    assert resolve_wanted(runs, "llama/") == "llama/output/log"
    assert resolve_wanted(runs, "bert") is None, "two runs below it: no guess"
    assert resolve_wanted(runs, "a") == "bert/a" and resolve_wanted(runs, "b") is None
    assert resolve_wanted(runs, "gone") is None and resolve_wanted(runs, None) is None
