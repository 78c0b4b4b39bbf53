"""monitor_cb.ingest.run_export: CSV cells a spreadsheet would run as formulas are neutralised, numbers stay numbers.

As found: a run named ``=2+5*cmd`` with a metric ``@SUM(A1)`` and a text value ``=cmd|' /C calc'!A0``,
planted in the log root, came out verbatim from ``export``, Compare's "CSV (all points)" and the Live
chart's download. All three write through ``write_csv``; each is driven here as the page or command does.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from monitor_cb.cli import main
from monitor_cb.compare.downloads import csv_bytes, parquet_bytes
from monitor_cb.ingest.run_export import csv_safe_text
from monitor_cb.ingest.store import RunStore
from monitor_cb.views.chart_data import chart_rows
from monitor_cb.views.compare_session import load_run

RUN = "=2+5*cmd"
METRIC = "@SUM(A1)"
PAYLOAD = "=cmd|' /C calc'!A0"


@pytest.mark.parametrize(
    ("given", "written"),
    [
        ("=2+5*cmd", "'=2+5*cmd"),
        (PAYLOAD, "'" + PAYLOAD),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("+x", "'+x"),
        ("-x", "'-x"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("-3", "-3"),  # a number written as text stays a number
        ("-0.5e-3", "-0.5e-3"),
        ("+7", "+7"),
        ("loss", "loss"),
        ("a=b", "a=b"),
        ("", ""),
        (-2.5, -2.5),
        (None, None),
    ],
)
def test_csv_safe_text(given: object, written: object) -> None:
    assert csv_safe_text(given) == written


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The planted run: hostile run name, metric name and text cells, and negative numbers."""
    run = tmp_path / RUN
    run.mkdir()
    texts = [PAYLOAD, "@SUM(A1)", "-3", "+x", "ok"]
    with open(run / "metrics.jsonl", "w") as out:
        for step in range(1, 6):
            record = {"step": step, "t": 1_700_000_000.0 + step, "loss": -0.5 * step, METRIC: float(step)}
            out.write(json.dumps({**record, "note": texts[step - 1]}) + "\n")
    return tmp_path


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def _check(rows: list[list[str]], run_column: bool) -> None:
    header = rows[0]
    assert "'" + METRIC in header and METRIC not in header
    cells = [dict(zip(header, row, strict=True)) for row in rows[1:]]
    assert [c["note"] for c in cells] == ["'" + PAYLOAD, "'@SUM(A1)", "-3", "'+x", "ok"]
    assert [float(c["loss"]) for c in cells] == [-0.5, -1.0, -1.5, -2.0, -2.5]  # negative numbers stay numbers
    assert [float(c["'" + METRIC]) for c in cells] == [1.0, 2.0, 3.0, 4.0, 5.0]
    if run_column:
        assert {c["run"] for c in cells} == {"'" + RUN}
    for row in rows:
        for cell in row:
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
            assert not cell.startswith("-") or float(cell) < 0, cell


def test_export_command_neutralises_formulas(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", RUN, "--logdir", str(root), "--format", "csv"]) == 0
    _check(_rows(capsys.readouterr().out), run_column=False)


def test_export_parquet_keeps_text_as_it_is(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.parquet"
    assert main(["export", RUN, "--logdir", str(root), "--format", "parquet", "-o", str(out)]) == 0
    table = pq.read_table(out)
    assert METRIC in table.column_names and table.column("note").to_pylist()[0] == PAYLOAD


def test_compare_csv_of_all_points_neutralises_formulas(root: Path) -> None:
    store = RunStore(root, rescan_interval_s=0)
    (info,) = store.list_runs()
    run = load_run(store, info)
    assert run is not None and run.id == RUN
    _check(_rows(csv_bytes([run]).decode()), run_column=True)
    table = pq.read_table(io.BytesIO(parquet_bytes([run])))
    assert table.column("run").to_pylist()[0] == RUN and METRIC in table.column_names


def test_live_chart_download_neutralises_formulas(root: Path) -> None:
    data = RunStore(root, rescan_interval_s=0).read(RUN)
    rows = chart_rows(data.frame, data.masks, ["loss", METRIC, "note"])
    _check(_rows(rows.csv().decode()), run_column=False)
    assert pq.read_table(io.BytesIO(rows.parquet())).column("note").to_pylist()[0] == PAYLOAD
