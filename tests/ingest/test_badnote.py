"""Bad lines are told apart: skipped (nothing kept) or partly read (kept without a bad value).

"N corrupt line(s) skipped" once covered both, which said a line kept without its bad value was lost.
The counts survive the columnar cache and the summary index (a fresh server), and reach uploads and
``summary``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor_cb.cli import main
from monitor_cb.compare.browser_upload import parse_upload
from monitor_cb.ingest import RunStore
from monitor_cb.ingest.badnote import bad_lines_note
from monitor_cb.ingest.colcache import Place
from monitor_cb.ingest.source import MetricsSource


@pytest.mark.parametrize(
    ("bad", "partial", "note"),
    [
        (0, 0, None),
        (1, 0, "1 corrupt line skipped"),
        (3, 0, "3 corrupt lines skipped"),
        (1, 1, "1 line partly read (a bad value dropped)"),
        (2, 2, "2 lines partly read (bad values dropped)"),
        (5, 2, "3 corrupt lines skipped, 2 lines partly read (bad values dropped)"),
        (1_234_567, 1, "1,234,566 corrupt lines skipped, 1 line partly read (a bad value dropped)"),
        (2, 5, "2 lines partly read (bad values dropped)"),  # never more partly read than bad
    ],
)
def test_the_note(bad: int, partial: int, note: str | None) -> None:
    assert bad_lines_note(bad, partial) == note


def write_damaged(root: Path) -> bytes:
    """20 steps; 3 lines skipped (bad JSON, a bad step, not an object) and 2 partly read (text losses)."""
    lines = []
    for step in range(1, 21):
        loss: object = "oops" if step in (5, 9) else 1.0 / step
        lines.append(json.dumps({"step": step, "loss": loss, "lr": 1e-3}))
    lines[3:3] = ['{"step": 4, "loss": ', json.dumps({"step": 7.5, "loss": 1.0}), "[1, 2]"]
    data = ("\n".join(lines) + "\n").encode()
    (root / "r").mkdir(parents=True)
    (root / "r" / "metrics.jsonl").write_bytes(data)
    return data


def counts(store: RunStore) -> tuple[int, int]:
    info = store.run_info("r")
    return info.bad_lines, info.partial_lines


def test_a_runs_skipped_and_partly_read_lines_are_counted_apart(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    write_damaged(root)
    cache = [Place(root / ".monitor" / "cache", root)]
    first = RunStore(root, cache=cache, rescan_interval_s=0)
    assert counts(first) == (5, 2)
    assert len(first.read("r").frame) == 20, "the partly read lines are rows"
    first.index.flush(force=True)

    listed = RunStore(root, cache=cache, rescan_interval_s=0)  # a fresh server: listed from the index
    assert counts(listed) == (5, 2)
    reopened = RunStore(root, cache=cache, rescan_interval_s=0)
    reopened.cache.min_bytes = 1  # a file this small gets no cache file unless told
    reopened.read("r")
    assert reopened.cache.wait()
    assert counts(reopened) == (5, 2)
    from_cache = MetricsSource(root / "r" / "metrics.jsonl", cache=reopened.cache)  # its rows from that cache file
    from_cache.poll()
    assert from_cache.cache_hit and (from_cache.bad_count, from_cache.partial_count) == (5, 2)
    assert counts(RunStore(root)) == (5, 2)  # no cache at all


def test_an_upload_counts_them_apart(tmp_path: Path) -> None:
    parsed = parse_upload("r.jsonl", write_damaged(tmp_path), cap=1 << 20)
    assert (parsed.bad_lines, parsed.partial_lines, parsed.records) == (5, 2, 20)


def test_summary_says_which_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_damaged(tmp_path)
    assert main(["summary", "r", "--root", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["bad_lines"], out["partial_lines"]) == (5, 2)
    assert main(["summary", "r", "--root", str(tmp_path)]) == 0
    said = capsys.readouterr().out
    assert "bad lines  5 (3 corrupt lines skipped, 2 lines partly read (bad values dropped))" in said, said
