"""Alert rows, counts, badges, toast bookkeeping and the findings cache key: plain functions."""

from __future__ import annotations

from monitor_cb.diagnosis import DiagnosisSettings, Finding
from monitor_cb.views.findings_view import (
    alert_rows,
    finding_key,
    findings_cache_key,
    new_findings,
    run_badge,
    severity_counts,
    summary_line,
    toast_text,
    worst_severity,
)

FINDINGS = [
    Finding("plateau", "info", 300, "loss flat", end_step=500),
    Finding("nan", "error", 412, "loss became NaN", rank=1),
    Finding("loss_spike", "warning", 412, "spike"),
    Finding("grad_explosion", "warning", 100, "grad norm 40x"),
]


def test_alert_rows_newest_first_most_severe_first_at_a_step() -> None:
    rows = alert_rows(FINDINGS)
    assert [(r["kind"], r["step"]) for r in rows] == [
        ("nan", 412),
        ("loss_spike", 412),
        ("plateau", 300),
        ("grad_explosion", 100),
    ]
    assert rows[0] == {
        "severity": "error",
        "kind": "nan",
        "step": 412,
        "end_step": None,
        "rank": 1,
        "message": "loss became NaN",
    }
    assert rows[2]["end_step"] == 500
    assert alert_rows([]) == []


def test_severity_counts_and_badge() -> None:
    counts = severity_counts(FINDINGS)
    assert counts == {"error": 1, "warning": 2, "info": 1}
    assert list(counts) == ["error", "warning", "info"]
    assert run_badge(counts) == "1 error, 2 warnings"
    assert run_badge(counts, with_info=True) == "1 error, 2 warnings, 1 note"
    assert run_badge({"error": 2, "warning": 1}) == "2 errors, 1 warning"
    assert run_badge(severity_counts([])) == ""
    assert run_badge({"info": 3}) == ""
    assert worst_severity(counts) == "error" and worst_severity({"warning": 1}) == "warning"
    assert worst_severity({"info": 1}) is None


def test_new_findings_remembers_kind_step_rank() -> None:
    first = new_findings(set(), FINDINGS)
    assert [f.kind for f in first] == ["nan", "loss_spike", "plateau", "grad_explosion"]
    seen = {finding_key(f) for f in first}
    assert new_findings(seen, FINDINGS) == []
    # The same kind at the same step on another rank, or a new step, is new; a changed message is not.
    later = [*FINDINGS, Finding("nan", "error", 412, "other words", rank=1), Finding("nan", "error", 412, "x", rank=2)]
    assert [(f.kind, f.rank) for f in new_findings(seen, later)] == [("nan", 2)]
    assert finding_key(FINDINGS[1]) == ("nan", 412, 1)


def test_findings_cache_key() -> None:
    s = DiagnosisSettings()
    key = findings_cache_key("a/b", 100, s)
    assert key == findings_cache_key("a/b", 100, DiagnosisSettings())
    hash(key)
    assert key != findings_cache_key("a/b", 101, s)
    assert key != findings_cache_key("a/c", 100, s)
    assert key != findings_cache_key("a/b", 100, DiagnosisSettings(spike_z=9.0))
    assert key != findings_cache_key("a/b", 100, DiagnosisSettings(disabled=("plateau",)))
    assert key != findings_cache_key("a/b", 100, s, status="stalled")
    # With the clock, the key moves every `every` seconds (stalled is judged on time).
    assert findings_cache_key("a", 1, s, now=60.0) == findings_cache_key("a", 1, s, now=89.0)
    assert findings_cache_key("a", 1, s, now=60.0) != findings_cache_key("a", 1, s, now=91.0)
    assert findings_cache_key("a", 1) == findings_cache_key("a", 1, None)


def test_toast_text_and_summary() -> None:
    assert toast_text(FINDINGS[1]) == "nan at step 412 (rank 1): loss became NaN"
    long = Finding("loss_spike", "warning", 41200, "word\n" * 100)
    text = toast_text(long, max_chars=60)
    assert len(text) == 60 and text.endswith("…") and "\n" not in text
    assert text.startswith("loss_spike at step 41,200: word word")
    assert summary_line([]) == "No problems found."
    assert summary_line(FINDINGS) == "4 findings: 1 error, 2 warnings, 1 note"
