"""The server's first listing at start (``pages._shared.prewarm``): the first page gets that store, read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pages import _shared
from tests.app.conftest import DASHBOARD, write_run
from tests.app.helpers import assert_ok, charts, run_entry, values


@pytest.fixture
def fresh_store() -> Iterator[None]:
    """No store cached for any root before or after (the page's ``_store`` is process-wide)."""
    _shared._store.clear()
    _shared._PREWARMED.clear()
    yield
    _shared._store.clear()
    _shared._PREWARMED.clear()


def test_the_first_page_gets_the_listed_store_with_the_newest_run_read(log_root: Path, fresh_store: None) -> None:
    write_run(log_root, "older", steps=50)
    write_run(log_root, "newest", steps=120)
    _shared.prewarm(str(log_root))
    store = _shared._PREWARMED[str(log_root)]
    assert store.has_listed
    newest = store._runs["newest"]
    assert newest.sources and all(s.tail.unread == 0 for s in newest.sources.values())
    assert newest.read_at > 0  # read as the page reads it (its frame built), not only listed

    at = run_entry(DASHBOARD)  # no ?run=: the page opens the newest run, the one read at start
    assert_ok(at)
    loss = next(t for fig in charts(at) for t in fig["data"] if t.get("name") == "loss")
    assert max(values(loss["x"])) == 120
    assert str(log_root) not in _shared._PREWARMED  # handed over once, then the page's cache keeps it
    assert _shared._store(str(log_root)) is store


def test_an_empty_root_and_a_root_that_cannot_be_opened(tmp_path: Path, log_root: Path, fresh_store: None) -> None:
    _shared.prewarm(str(log_root))  # nothing to read: listed, nothing else
    assert _shared._PREWARMED[str(log_root)].has_listed
    with pytest.raises(ValueError):  # dashboard.py's thread swallows it; the page says it where the user looks
        _shared.prewarm("s3://")
    assert "s3://" not in _shared._PREWARMED
