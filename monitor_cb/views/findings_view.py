"""What the dashboard shows about a run's diagnosis findings, as plain data (no Streamlit).

```python
from monitor_cb.views.findings_view import alert_rows, findings_cache_key, new_findings, run_badge, severity_counts

rows = alert_rows(findings)                       # newest first, for the alert panel
fresh = new_findings(seen_keys, findings)         # for toasts: not shown before
label = run_badge(severity_counts(findings))      # "2 errors, 1 warning" for the run picker
```
"""

from __future__ import annotations

import json
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any

from monitor_cb.diagnosis.findings import SEVERITIES, Finding

FindingKey = tuple[str, int, int | None]
# Most severe first: the order of counts, badges and the panel's ties.
SEVERITY_ORDER: tuple[str, ...] = tuple(reversed(SEVERITIES))
_NOUNS = {"error": ("error", "errors"), "warning": ("warning", "warnings"), "info": ("note", "notes")}


def finding_key(finding: Finding) -> FindingKey:
    """``(kind, step, rank)``: the identity of a finding across refreshes (its message may change)."""
    return (finding.kind, int(finding.step), finding.rank)


def newest_first(findings: Iterable[Finding]) -> list[Finding]:
    """Latest step first; at the same step the most severe first, then by kind and rank."""
    return sorted(findings, key=lambda f: (-int(f.step), -f.level, f.kind, -1 if f.rank is None else f.rank))


def alert_rows(findings: Iterable[Finding]) -> list[dict[str, Any]]:
    """One plain dict per finding, newest first: ``severity``, ``kind``, ``step``, ``end_step``, ``rank``, ``message``.

    Values are plain Python (``rank`` and ``end_step`` may be None), ready for a table.
    """
    return [
        {
            "severity": f.severity,
            "kind": f.kind,
            "step": int(f.step),
            "end_step": None if f.end_step is None else int(f.end_step),
            "rank": f.rank,
            "message": f.message,
        }
        for f in newest_first(findings)
    ]


def charted(findings: Iterable[Finding], with_notes: bool) -> tuple[Finding, ...]:
    """The findings drawn on the charts: info notes (plateaus) only when asked, the rest always.

    Notes that many healthy runs get would cover every chart with faint bands; they stay in the list.
    """
    return tuple(f for f in findings if with_notes or f.severity != "info")


def severity_counts(findings: Iterable[Finding]) -> dict[str, int]:
    """``{"error": n, "warning": n, "info": n}`` (every severity present, most severe first)."""
    counts = dict.fromkeys(SEVERITY_ORDER, 0)
    for finding in findings:
        counts[finding.severity] = counts.get(finding.severity, 0) + 1
    return counts


def run_badge(counts: Mapping[str, int], *, with_info: bool = False) -> str:
    """A short plain-text label: ``"2 errors, 1 warning"``; ``""`` when there is nothing to report.

    Info findings (plateaus) are left out unless ``with_info``: they are notes, not problems.
    """
    parts = []
    for severity in SEVERITY_ORDER:
        n = int(counts.get(severity, 0) or 0)
        if n <= 0 or (severity == "info" and not with_info):
            continue
        singular, plural = _NOUNS[severity]
        parts.append(f"{n} {singular if n == 1 else plural}")
    return ", ".join(parts)


def worst_severity(counts: Mapping[str, int]) -> str | None:
    """``"error"`` with errors, ``"warning"`` with warnings, else None (info findings are notes)."""
    if counts.get("error", 0):
        return "error"
    if counts.get("warning", 0):
        return "warning"
    return None


def new_findings(previous_keys: Collection[FindingKey], findings: Iterable[Finding]) -> list[Finding]:
    """Findings whose :func:`finding_key` is not in ``previous_keys``, newest first (for toasts)."""
    seen = set(previous_keys)
    fresh = []
    for finding in newest_first(findings):
        key = finding_key(finding)
        if key not in seen:
            seen.add(key)
            fresh.append(finding)
    return fresh


def findings_cache_key(
    run_id: str,
    version: Hashable,
    settings: Any = None,
    *,
    status: str | None = None,
    now: float | None = None,
    every: float = 30.0,
) -> tuple[Any, ...]:
    """A hashable key that changes when the findings may change: new data (``RunFrame.key``), settings or status.

    ``stalled`` depends on the clock, not on records: give ``now`` (and the run's ``status``) and the
    key also changes every ``every`` seconds, so a silent run is re-judged without new records.
    """
    settings_part = None
    if settings is not None:
        data = settings.to_dict() if hasattr(settings, "to_dict") else settings
        settings_part = json.dumps(data, sort_keys=True, default=str)
    time_part = None if now is None else int(now // every)
    return (run_id, version, settings_part, status, time_part)


def toast_text(finding: Finding, max_chars: int = 160) -> str:
    """One line for a toast: ``"nan at step 41,200 (rank 3): loss became NaN ..."`` (plain text, bounded)."""
    where = f"step {int(finding.step):,}" + ("" if finding.rank is None else f" (rank {finding.rank})")
    text = f"{finding.kind} at {where}: {' '.join(str(finding.message).split())}"
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def summary_line(findings: Sequence[Finding]) -> str:
    """``"3 findings: 2 errors, 1 warning"`` or ``"No problems found."``."""
    if not findings:
        return "No problems found."
    badge = run_badge(severity_counts(findings), with_info=True)
    return f"{len(findings)} finding{'s' if len(findings) != 1 else ''}: {badge}"


__all__ = [
    "SEVERITY_ORDER",
    "FindingKey",
    "alert_rows",
    "finding_key",
    "findings_cache_key",
    "new_findings",
    "newest_first",
    "run_badge",
    "severity_counts",
    "summary_line",
    "toast_text",
    "worst_severity",
]
