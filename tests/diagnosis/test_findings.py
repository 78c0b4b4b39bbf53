import json
import math

import pytest

from monitor_cb.diagnosis.findings import (
    Finding,
    fmt_num,
    fmt_pct,
    fmt_ratio,
    fmt_seconds,
    fmt_step,
    severity_rank,
    sort_findings,
    worst_severity,
)


def test_severities_are_ordered():
    assert severity_rank("info") < severity_rank("warning") < severity_rank("error")
    assert Finding("nan", "error", 1, "m").level == 2


def test_unknown_severity_is_refused():
    with pytest.raises(ValueError, match="severity"):
        Finding("nan", "fatal", 1, "m")


def test_sort_by_step_then_most_severe():
    a = Finding("plateau", "info", 5, "a")
    b = Finding("nan", "error", 5, "b")
    c = Finding("loss_spike", "warning", 2, "c")
    assert sort_findings([a, b, c]) == [c, b, a]
    assert worst_severity([a, c]) == "warning"
    assert worst_severity([]) is None


def test_to_dict_is_strict_json():
    f = Finding("nan", "error", 3, "m", details={"value": math.inf, "n": 2, "xs": [math.nan, 1.0]})
    text = json.dumps(f.to_dict(), allow_nan=False)
    assert json.loads(text)["details"] == {"value": None, "n": 2, "xs": [None, 1.0]}


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (41200, "41,200"),
        (0.0003, "3.0e-04"),
        (1234.5, "1,234"),
        (2.345, "2.35"),
        (math.nan, "NaN"),
        (-math.inf, "-Inf"),
    ],
)
def test_fmt_num(value, text):
    assert (fmt_step(value) if value == 41200 else fmt_num(value)) == text


def test_fmt_helpers():
    assert fmt_ratio(38.2) == "38×"
    assert fmt_ratio(2.46) == "2.5×"
    assert fmt_pct(0.853) == "85%"
    assert fmt_seconds(0.0093) == "9.3 ms"
    assert fmt_seconds(1.52) == "1.52 s"


def test_explain_puts_what_advice_and_why_in_that_order():
    from monitor_cb.diagnosis.findings import explain

    text = explain("loss jumped to 7.2 at step 2,439.", "Lower the lr", "23 sigmas (threshold 8)")
    assert text == "loss jumped to 7.2 at step 2,439. Lower the lr. Why: 23 sigmas (threshold 8)."
    assert explain("a", "", "") == "a."
    f = Finding("loss_spike", "warning", 5, text, why="23 sigmas (threshold 8)")
    assert f.to_dict()["why"] == "23 sigmas (threshold 8)"
    assert f == Finding("loss_spike", "warning", 5, text)  # the why does not change a finding's identity
