"""The Runs table as tall as its runs, up to 30 rows (issue 36, item 6: a fixed ten rows left half a 1080p
screen empty under 79 runs); a reason that only repeats the status is not shown."""

from monitor_cb.ingest.status import NO_STATUS
from monitor_cb.views.runs_view import said_reason, table_height


def test_height_follows_the_rows_up_to_thirty() -> None:
    assert table_height(0) == table_height(1) == 38 + 35 + 2
    assert table_height(6) == 38 + 35 * 6 + 2
    assert table_height(79) == table_height(30) == 38 + 35 * 30 + 2


def test_no_status_recorded_is_not_repeated_on_every_row() -> None:
    assert said_reason(NO_STATUS) == "" and said_reason(f"{NO_STATUS}; nothing written for 900 s") == ""
    assert said_reason("stopped: non-finite loss at step 218") == "stopped: non-finite loss at step 218"
    assert said_reason(None) == ""  # type: ignore[arg-type]
