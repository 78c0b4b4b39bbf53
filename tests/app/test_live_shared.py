"""AppTests of the live page's shared work: two browser sessions on one run compute its figures and findings
once, a refresh with no new data computes nothing, and a long first read shows its progress."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from monitor_cb.ingest import RunStore
from monitor_cb.ingest import store as store_module
from tests.app.conftest import DASHBOARD, write_run
from tests.app.helpers import assert_ok, charts

TIMEOUT = 60


def session(run_id: str) -> AppTest:
    at = AppTest.from_file(DASHBOARD, default_timeout=TIMEOUT)
    at.query_params["run"] = run_id
    return at.run()


def shared_of(root: Path) -> Any:
    from pages import _shared

    return _shared.live_shared(str(root))


def test_two_sessions_on_one_run_compute_once(log_root: Path) -> None:
    write_run(log_root, "exp-a", steps=300, close=None)
    first, second = session("exp-a"), session("exp-a")
    assert_ok(first)
    assert_ok(second)
    shared = shared_of(log_root)
    assert shared.figures.computed == 1, "the second session reused the first one's figures"
    assert shared.series.computed == 1
    assert shared.background.computed == 1, "the run was diagnosed once for both"
    assert charts(first) == charts(second) and len(charts(first)) == 3


def test_a_refresh_with_no_new_data_computes_nothing(log_root: Path) -> None:
    writer = write_run(log_root, "exp-a", steps=300, close=None)
    at = session("exp-a")
    shared = shared_of(log_root)
    assert (shared.figures.computed, shared.series.computed) == (1, 1)
    at.run()
    at.run()
    assert_ok(at)
    assert (shared.figures.computed, shared.series.computed) == (1, 1)
    writer.log_at(1e10, step=301, loss=0.05)
    writer.flush()
    at.run()
    assert_ok(at)
    assert (shared.figures.computed, shared.series.computed) == (2, 2)
    assert any(m.value == "301" for m in at.metric), [m.value for m in at.metric]


def test_findings_come_from_the_background_worker(log_root: Path) -> None:
    write_run(log_root, "exp-nan", steps=200, nan_from=150, close="failed")
    at = session("exp-nan")
    assert_ok(at)
    assert any("step 150" in e.value for e in at.error), "the first view waits for the run's first findings"
    shared = shared_of(log_root)
    assert shared.background.computed == 1
    at.run()
    assert shared.background.computed == 1, "no new records: not diagnosed again"


def test_a_long_first_read_shows_progress_and_the_sidebar(log_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first read of a big run (listed from the root's index by a restarted server) goes in the background:
    the page shows a progress bar (bytes, rows), the run picker stays usable, and the charts come once it is read."""
    write_run(log_root, "big", steps=400, close=None)
    RunStore(log_root).list_runs()  # an earlier server listed it: this one lists it from the root's index, unread
    release = threading.Event()
    real = store_module._read_in_steps

    def held(sources: list[Any]) -> None:
        for source in sources:  # the read has begun (no longer listed from the index) ...
            with source.lock:
                source._listed = None
        release.wait(60)  # ... and is held between two steps until the page has shown its progress
        real(sources)

    monkeypatch.setattr(store_module, "LOAD_STEP_BYTES", 1024)
    monkeypatch.setattr(store_module, "_read_in_steps", held)
    from pages import live_page

    monkeypatch.setattr(live_page, "QUICK_LOAD_S", 0.05)  # the held read is not quick: show the progress at once
    at = session("big")
    assert_ok(at)
    assert len(at.get("progress")) == 1
    text = at.get("progress")[0].proto.text
    assert text.startswith("Reading the run: 0.0 of") and "rows so far" in text, text
    assert at.sidebar.selectbox[0].value == "big", "the run picker is drawn while the run loads"
    assert not charts(at)
    at.run()  # a full rerun meanwhile (a widget click): the listing leaves the run to the background read
    assert_ok(at)
    assert len(at.get("progress")) == 1 and not charts(at)
    assert at.get("progress")[0].proto.text == text, "the rerun did not read the file itself"
    release.set()
    from pages import _shared
    from tests.browser.harness import poll

    store = _shared.get_store(str(log_root))
    poll(lambda: store.load_progress("big") is None, 60, what="the background read")
    at.run()
    assert_ok(at)
    assert not at.get("progress") and len(charts(at)) == 3


def test_a_quick_first_read_draws_the_charts_at_once(log_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first read that ends within a moment (a long run read from its cache file) is waited for: the first
    script run draws the charts, with no progress bar and no second run first."""
    write_run(log_root, "big", steps=400, close=None)
    RunStore(log_root).list_runs()  # listed by an earlier server: this one lists it from the root's index, unread
    started = []
    real = store_module._read_in_steps

    def counted(sources: list[Any]) -> None:
        started.append(len(sources))
        real(sources)

    monkeypatch.setattr(store_module, "LOAD_STEP_BYTES", 1024)
    monkeypatch.setattr(store_module, "_read_in_steps", counted)
    at = session("big")
    assert_ok(at)
    assert started == [1], "the first read went to the background"
    assert not at.get("progress") and len(charts(at)) == 3


def test_a_run_that_vanished_since_the_listing_has_no_progress(tmp_path: Path) -> None:
    """The page asks for the selected run's load progress right after listing it; a run deleted in between
    must not raise (the refresh then says it disappeared)."""
    from pages import live_page

    write_run(tmp_path, "a", steps=10)
    store = RunStore(tmp_path, rescan_interval_s=0)
    assert [r.id for r in store.list_runs()] == ["a"]
    shutil.rmtree(tmp_path / "a")
    assert live_page.load_progress(store, "a") is None


def test_a_long_run_draws_its_charts_before_its_first_findings(log_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long run's first diagnosis (about 0.6 s per million rows) does not hold its first charts back when a
    refresh is coming: the findings come with it. With the refresh off, the page waits for them as before."""
    import monitor_cb.diagnosis as diagnosis
    from pages import live_page

    write_run(log_root, "long", steps=300, close=None, nan_from=250)
    release = threading.Event()
    real = diagnosis.diagnose

    def slow(*args: Any, **kwargs: Any) -> Any:
        release.wait(180)
        return real(*args, **kwargs)

    from pages import _findings

    monkeypatch.setattr(_findings, "FIRST_WAIT_S", 180.0)  # a page that waited would time out (TIMEOUT)
    monkeypatch.setattr(live_page, "SHORT_RUN_ROWS", 100)  # 300 rows count as long here
    monkeypatch.setattr(diagnosis, "diagnose", slow)
    at = session("long")  # the default 2 s refresh
    assert_ok(at)
    assert len(charts(at)) == 3, "the charts are drawn while the diagnosis runs"
    assert not diagnosis_lines(at), "no findings yet"
    release.set()
    shared = shared_of(log_root)
    from tests.browser.harness import poll

    poll(lambda: shared.background.computed >= 1, 60, what="the first diagnosis")
    at.run()  # the next refresh shows them
    assert_ok(at)
    assert diagnosis_lines(at) == ["Diagnosis: 1 finding: 1 error"]


def diagnosis_lines(at: AppTest) -> list[str]:
    """The alert panel's caption line ("Diagnosis: 1 error ...")."""
    return [c.value for c in at.caption if c.value.startswith("Diagnosis:")]


def test_first_findings_wait_only_for_short_runs_or_without_a_refresh() -> None:
    from pages.live_page import SHORT_RUN_ROWS, first_findings_wait

    assert first_findings_wait(SHORT_RUN_ROWS, 2.0) is None, "short: the default wait"
    assert first_findings_wait(SHORT_RUN_ROWS + 1, 2.0) == 0.0, "long with a refresh coming: no wait"
    assert first_findings_wait(SHORT_RUN_ROWS + 1, None) is None, "refresh off or paused: wait"


def test_a_session_scans_the_run_for_its_x_axes_once(log_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The x-axis choices come from one scan of the frame per script run (it was one per choice offered: four
    passes over a 1M-row samples column for every new session)."""
    from monitor_cb.analysis import series

    write_run(log_root, "exp-a", steps=300, close=None)
    session("exp-a")  # the store read and the shared figures made: what follows is a reopen
    scans: list[int] = []
    real = series.available_x
    monkeypatch.setattr(series, "available_x", lambda frame: scans.append(len(frame)) or real(frame))
    again = session("exp-a")
    assert_ok(again)
    assert scans == [300], scans
    assert again.selectbox(key="x_axis").options, "the x-axis choices are still offered"
