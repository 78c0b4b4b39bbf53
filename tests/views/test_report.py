"""The HTML report: one self-contained file (plotly.js inlined, nothing fetched) with every user text escaped."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from monitor_cb.compare.rundata import RunData
from monitor_cb.views.compare_session import CompareSettings, report_html
from monitor_cb.views.report import build_report, table_html

HOSTILE = '</script><script>alert("x")</script><img src=x onerror=alert(1)>'


def run(run_id: str, name: str, lr: float) -> RunData:
    steps = np.arange(1, 101)
    frame = pd.DataFrame(
        {"step": steps, "t": 1000.0 + steps, "rank": 0, "seg": 1, "loss": np.linspace(2, 1, 100), "lr": lr}
    )
    frame.loc[90, "loss"] = np.nan
    meta = {"config": {"lr": lr, HOSTILE: f"<b>{lr}</b>", "opt": {"name": "adam"}}}
    return RunData(run_id, name, frame, {}, meta, "finished")


@pytest.fixture(scope="module")
def report() -> str:
    runs = [run("a", HOSTILE, 1e-3), run("b", "plain", 3e-4)]
    return report_html(runs, CompareSettings(metrics=("loss", "lr")))


def test_report_is_self_contained(report: str) -> None:
    assert report.startswith("<!DOCTYPE html>")
    assert not re.search(r"<script[^>]+src=", report), "no script is loaded from anywhere"
    assert not re.search(r"<link[^>]+href=", report)
    # plotly.js itself names map-tile and logo URLs (maps are never drawn): look outside the scripts
    markup = re.sub(r"<script[^>]*>.*?</script>", "", report, flags=re.S)
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", markup), "no element fetches anything"
    assert not re.search(r"https?://", markup)
    assert "Plotly.newPlot" in report and len(report) > 1_000_000, "plotly.js is inlined"
    assert report.count("Plotly.newPlot") == 2, "one chart per metric"


def test_report_escapes_hostile_names_everywhere(report: str) -> None:
    assert HOSTILE not in report
    assert "<img src=x" not in report and 'alert("x")</script>' not in report
    assert "&lt;/script&gt;&lt;script&gt;alert(&quot;x&quot;)" in report, "the summary and config cells are escaped"
    assert "&lt;b&gt;0.001&lt;/b&gt;" in report, "a config value that differs, escaped"


def test_report_has_summary_and_config_diff(report: str) -> None:
    assert "<h2>Summary</h2>" in report and "<h2>Config differences</h2>" in report
    summary = report.split("<h2>Summary</h2>")[1].split("<h2>")[0]
    assert "first non-finite step" in summary and "<td>91</td>" in summary and "<td>100</td>" in summary, (
        "the NaN at step 91 is reported"
    )
    config = report.split("<h2>Config differences</h2>")[1].split("<h2>")[0]
    assert '<th class="key">lr</th>' in config and "opt.name" not in config, "only keys that differ"


def test_report_summary_never_says_nan_for_what_was_not_logged(report: str) -> None:
    summary = report.split("<h2>Summary</h2>")[1].split("<h2>")[0]
    assert "<td>NaN</td>" not in summary, "no throughput, grad norm or eval logged, and the last loss is finite"
    assert summary.count("<td>–</td>") >= 2 * 4, "best eval value, mean throughput, max grad norm... per run"


def test_table_html_cells() -> None:
    table = pd.DataFrame({"a": [1.5, float("nan"), float("inf")], "b": pd.Series(["<x>", None, "y"], dtype=object)})
    html = table_html(table)
    assert "<td>1.5</td>" in html and "<td>NaN</td>" in html and "<td>inf</td>" in html
    assert "&lt;x&gt;" in html and "<x>" not in html
    assert '<td class="text">–</td>' in html or "<td>–</td>" in html, "a missing cell reads as not logged"


def test_build_report_title_and_notes_escaped() -> None:
    html = build_report(HOSTILE, [], pd.DataFrame({"run": ["r"]}), None, notes=[HOSTILE])
    assert HOSTILE not in html
    assert html.count("&lt;/script&gt;") >= 3
