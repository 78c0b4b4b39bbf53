"""Streamlit pieces for diagnosis findings: the alert panel, toasts, the sidebar badge, the thresholds form.

Each is one call from a page; the decisions live in ``monitor_cb.views.findings_view`` and
``monitor_cb.views.settings_form``.
Finding messages come from detectors that quote run content (metric names), so every text is shown
escaped, never as HTML.

```python
findings = _findings.run_findings(run, store.read(run.id), root)   # cached until new records / other settings
_findings.sidebar_badge(findings)                             # the sidebar (also from the refresh fragment)
_findings.alert_panel(findings)                               # under the KPI row
_findings.toast_new(run.id, findings)                         # a toast per finding not shown before
```
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from monitor_cb.analysis.roles import ROLE_LABELS, ROLES
from monitor_cb.diagnosis.findings import KINDS
from monitor_cb.diagnosis.settings import (
    HELP,
    LABELS,
    DiagnosisSettings,
    load_settings_checked,
    save_settings,
    settings_path,
)
from monitor_cb.ingest.runframe import RunFrame
from monitor_cb.views.escape import escape_code, escape_markdown
from monitor_cb.views.findings_view import (
    alert_rows,
    finding_key,
    findings_cache_key,
    new_findings,
    newest_first,
    run_badge,
    severity_counts,
    summary_line,
    toast_text,
    worst_severity,
)
from monitor_cb.views.settings_form import GENERAL, kind_title, roles_to_text, settings_from_form, settings_groups

SEEN_KEY = "alerts_seen"  # session state: run id -> finding keys already toasted
CACHE_KEY = "alerts_findings"  # session state: run id -> (cache key, findings)
ICONS = {"error": ":material/error:", "warning": ":material/warning:", "info": ":material/info:"}
BOXES = {"error": st.error, "warning": st.warning, "info": st.info}


# ----------------------------------------------------------------------------- findings
def current_settings(root: str | os.PathLike[str]) -> DiagnosisSettings:
    """The thresholds saved under ``root`` (defaults when none; problems are shown on the Settings page)."""
    return load_settings_checked(root)[0]


def run_findings(
    run: Any,
    data: RunFrame | None,
    root: str | os.PathLike[str],
    *,
    now: float | None = None,
    store: Any = None,
    shared: Any = None,
    first_wait_s: float | None = None,
    roles: Any = None,
) -> list[Any]:
    """``diagnose`` for one run, remembered until its data, status or settings change.

    Args:
        run: its ``RunInfo`` (``id``, ``status``, ``last_write``).
        data: ``store.read(run.id)``; None gives no findings. One rank of a multi-rank run
            (``store.read(run.id, rank=r)``, with ``store``): that rank is diagnosed, and the ranks
            side by side from the store's aggregates (:func:`monitor_cb.views.live.rank_findings`).
        root: the log root, whose saved thresholds apply.
        shared: the viewers' :class:`monitor_cb.views.live_refresh.LiveShared`: diagnosis then runs in
            its background worker, once for every viewer, and this returns the latest findings there are
            (of an earlier data version while the newest is diagnosed); only a run never diagnosed
            before waits for its first findings, at most ``first_wait_s`` (default :data:`FIRST_WAIT_S`).
            Without it, the findings are computed here and remembered per browser session.
        roles: roles set for this page (``?role.loss=...``: ``{role: names}``) over the root's.
    """
    from dataclasses import replace

    from monitor_cb.diagnosis import diagnose
    from monitor_cb.views.live import rank_findings, ranks_version

    if data is None or len(data) == 0:
        return []
    now = time.time() if now is None else now
    settings = current_settings(root)
    if roles:  # a page's roles are part of the settings: findings are remembered per roles too
        with contextlib.suppress(ValueError):  # a link's names past the caps: judged on the root's roles
            settings = replace(settings, roles={**settings.chosen_roles(), **roles})
    across = store is not None and data.rank is not None
    version = (data.key, ranks_version(store, run.id)) if across else data.key
    key = findings_cache_key(run.id, version, settings, status=run.status, now=now)

    def compute() -> Diagnosed:
        started = time.perf_counter()
        found = diagnose(data.frame, settings, status=run.status, now=now, last_write=run.last_write, logged=data.masks)
        if across:
            found = rank_findings(store, run.id, data.rank, found, settings)
        return Diagnosed(list(found), now, time.perf_counter() - started)

    if shared is not None:
        wait = FIRST_WAIT_S if first_wait_s is None else first_wait_s
        return _background_findings(shared.background, (str(root), run.id, data.rank), key, now, compute, wait)
    cache = st.session_state.setdefault(CACHE_KEY, {})
    hit = cache.get(run.id)
    if hit is not None and (hit[0] == key or _recent(hit[0], key, hit[1], now)):
        return hit[1].findings
    result = compute()
    cache[run.id] = (key, result)
    return result.findings


FIRST_WAIT_S = 10.0  # a run never diagnosed in this server waits this long for its first findings


@dataclass(frozen=True)
class Diagnosed:
    """Findings and when (``now``) and at what cost (seconds) they were computed."""

    findings: list[Any]
    at: float
    cost_s: float


def _recent(old_key: tuple[Any, ...], key: tuple[Any, ...], old: Diagnosed, now: float) -> bool:
    """Same settings and status, only new records: re-diagnose at most every 20x its own cost
    (a 1M-row run takes ~0.4 s), so a 1 s refresh is not spent on detectors."""
    return old_key[2:4] == key[2:4] and now - old.at < max(2.0, 20 * old.cost_s)


def _background_findings(
    background: Any, name: Any, key: tuple[Any, ...], now: float, compute: Any, first_wait_s: float
) -> list[Any]:
    done = background.result(name)
    if done is None or (done.key != key and not _recent(done.key, key, done.value, now)):
        background.submit(name, key, compute)
    if done is None:  # never diagnosed: the first findings are worth a short wait
        background.wait(name, first_wait_s)
        done = background.result(name)
    return list(done.value.findings) if done is not None else []


# ----------------------------------------------------------------------------- showing them
def alert_panel(findings: Sequence[Any], *, limit: int = 5, title: str | None = "Diagnosis") -> None:
    """Errors and warnings as boxes, newest first (at most ``limit``); every finding in a table below.

    Info findings (plateaus) are notes, not problems: they are counted in the caption and listed
    in the table, never boxed. Nothing at all is drawn when there are no findings, so a healthy
    run's page does not move.
    """
    if not findings:
        return
    ordered = newest_first(findings)
    if title:
        st.caption(f"{title}: {summary_line(ordered)}")
    boxed = [f for f in ordered if f.severity != "info"][:limit]
    for finding in boxed:
        BOXES.get(finding.severity, st.info)(box_text(finding), icon=ICONS.get(finding.severity))
    if len(boxed) < len(ordered):
        with st.expander(f"All {len(ordered)} findings" if boxed else f"{len(ordered)} note(s)"):
            # table cells are plain text, never Markdown or HTML
            st.dataframe(findings_table(ordered), hide_index=True, width="stretch")


def headline(findings: Sequence[Any]) -> None:
    """One line above the charts: the counts and the worst finding, short; the list is below the charts.

    Nothing for a healthy run, so its charts start right under the tiles.
    """
    if not findings:
        return
    ordered = newest_first(findings)
    worst = max(ordered, key=lambda f: f.level)
    counts = severity_counts(ordered)
    colour = {"error": "red", "warning": "orange"}.get(worst.severity, "gray")
    icon = ICONS.get(worst.severity, ICONS["info"])
    short = escape_markdown(one_line(worst, 110))
    st.caption(f":{colour}[{icon} **{run_badge(counts, with_info=True)}**] · {short} · details below the charts")


def one_line(finding: Any, max_chars: int = 150) -> str:
    """``nan · step 218 — loss became NaN at step 218`` (its first sentence, bounded; plain text)."""
    where = f"step {int(finding.step):,}"
    if finding.end_step is not None and finding.end_step != finding.step:
        where += f"–{int(finding.end_step):,}"
    if finding.rank is not None:
        where += f" · rank {finding.rank}"
    message = " ".join(str(finding.message).split())
    first = message.split(". ")[0].rstrip(".")
    text = f"{finding.kind} · {where} — {first}"
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def findings_list(findings: Sequence[Any], *, limit: int = 20, run_id: str | None = None) -> None:
    """Every finding as one line that opens to its whole message (advice and why), newest first, at most
    ``limit``; a table of all of them below when there are more. Nothing for a healthy run. With
    ``run_id``, a ``layer_origin`` finding links to its row on the Layers page."""
    if not findings:
        return
    ordered = newest_first(findings)
    st.caption(f"Diagnosis: {summary_line(ordered)}")
    for i, finding in enumerate(ordered[:limit]):
        with st.expander(escape_markdown(one_line(finding)), icon=ICONS.get(finding.severity)):
            BOXES.get(finding.severity, st.info)(box_text(finding))
            if run_id is not None and finding.kind == "layer_origin":
                layers_link(finding, run_id, key=f"layers_link_{i}")
    if len(ordered) > limit:
        with st.expander(f"All {len(ordered)} findings"):
            st.dataframe(findings_table(ordered), hide_index=True, width="stretch")


def layers_link(finding: Any, run_id: str, key: str) -> None:
    """A link to the Layers page opened on the finding's family and row (``?run=&family=&param=``); the
    parameter's name travels as a query value, never as Markdown or link text."""
    from monitor_cb.views.layers import layers_link as layers_query
    from pages.layers_page import layers_page

    page = st.Page(layers_page, title="Layers", url_path="layers")
    with st.container(key=key):
        st.page_link(
            page,
            label="Open this parameter on the Layers page",
            icon=":material/view_list:",
            query_params=layers_query(finding, run_id),
        )


def findings_table(ordered: Sequence[Any]) -> Any:
    """The table of findings as Arrow, made once for every viewer of the same findings (a refresh of
    thirty viewers no longer converts the same frame thirty times)."""
    return _arrow_table(tuple(tuple(row.items()) for row in alert_rows(ordered)))


@functools.lru_cache(maxsize=16)
def _arrow_table(rows: tuple[tuple[tuple[str, Any], ...], ...]) -> Any:
    import pyarrow as pa

    return pa.Table.from_pandas(pd.DataFrame([dict(row) for row in rows]), preserve_index=False)


def box_text(finding: Any) -> str:
    """``**nan** · step 41,200 · rank 3 — message``: our own bold label, the finding's text escaped."""
    where = f"step {int(finding.step):,}"
    if finding.end_step is not None and finding.end_step != finding.step:
        where += f"–{int(finding.end_step):,}"
    if finding.rank is not None:
        where += f" · rank {finding.rank}"
    return f"**{escape_markdown(finding.kind)}** · {where} — {escape_markdown(finding.message)}"


def toast_new(run_id: str, findings: Sequence[Any], *, max_toasts: int = 3, quiet_first: bool = False) -> list[Any]:
    """A toast for each finding of ``run_id`` not toasted before in this browser session; returns those.

    At most ``max_toasts`` toasts (the newest); one more says how many others there are.
    ``quiet_first``: the findings there are when the run is first shown in this session are on the
    page already; only findings that appear while it is watched are toasted (a visit does not replay
    old ones).
    """
    seen: dict[str, set[Any]] = st.session_state.setdefault(SEEN_KEY, {})
    first = run_id not in seen
    before = seen.setdefault(run_id, set())
    fresh = new_findings(before, findings)
    if not fresh:
        return []
    before.update(finding_key(f) for f in fresh)
    if quiet_first and first:
        return []
    if max_toasts == 1 and len(fresh) > 1:  # one toast that says how many
        text = f"{len(fresh)} new findings; the newest: {toast_text(fresh[0])}"
        st.toast(escape_markdown(text), icon=ICONS.get(fresh[0].severity))
        return fresh
    for finding in fresh[:max_toasts]:
        st.toast(escape_markdown(toast_text(finding)), icon=ICONS.get(finding.severity))
    if len(fresh) > max_toasts:
        st.toast(f"… and {len(fresh) - max_toasts} more finding(s)", icon=":material/more_horiz:")
    return fresh


def sidebar_badge(findings: Sequence[Any], where: Any = None) -> str:
    """A sidebar line such as "(error icon) 2 errors, 1 warning" for the selected run (nothing when clean).

    The icon is a Material symbol (a font that ships with Streamlit), not an emoji: many Linux
    machines have no emoji font. ``where``: a container (default the sidebar). Returns the label.
    """
    counts = severity_counts(findings)
    label = run_badge(counts)
    worst = worst_severity(counts)
    if label and worst:
        colour = "red" if worst == "error" else "orange"
        (where if where is not None else st.sidebar).caption(f":{colour}[{ICONS[worst]}] {label}")
    return label


# ----------------------------------------------------------------------------- thresholds form
def diagnosis_settings_form(
    root: str | os.PathLike[str], *, key: str = "diag", sidebar: bool = False, editable: bool = True
) -> DiagnosisSettings:
    """A form with every detector's switch and thresholds; Save writes ``<root>/.monitor/diagnosis.json``.

    Built from ``dataclasses.fields(DiagnosisSettings)`` (via ``settings_groups``) with ``HELP`` as
    the tooltips. Problems reading the saved file are shown as warnings. Returns the settings now saved.
    Not ``editable`` (a read-only dashboard): the same values, disabled, and no Save or Reset at all,
    so no message from a browser can reach the code that writes the file.
    """
    settings, problems = load_settings_checked(root)
    box = st.sidebar if sidebar else st.container()
    with box:
        for problem in problems:
            st.warning(escape_markdown(problem), icon=":material/warning:")
        frame = st.form(f"{key}_form", border=True) if editable else st.container(border=True, key=f"{key}_readonly")
        with frame:
            st.caption(
                f"Saved in `{escape_code(str(settings_path(root)))}`; they apply to every run under this "
                "log root, on the dashboard and in the watcher."
            )
            _kind_switches(settings, key, editable)
            for group in settings_groups():
                if not group.fields:
                    continue
                with st.expander(group.title, expanded=group.kind == GENERAL):
                    cols = st.columns(2 if not sidebar else 1)
                    for i, field in enumerate(group.fields):
                        with cols[i % len(cols)]:
                            _number_input(field, getattr(settings, field.name), key, editable)
            _role_inputs(settings, key, editable)
            if not editable:
                return settings
            save, reset = st.columns(2)
            save.form_submit_button("Save", type="primary", on_click=_on_save, args=(str(root), key))
            reset.form_submit_button("Reset to defaults", on_click=_on_reset, args=(str(root), key))
        result = st.session_state.pop(f"{key}_result", None)
        if result is not None:
            kind, text = result
            (st.success if kind == "success" else st.error)(text)
    return settings


def _role_inputs(settings: DiagnosisSettings, key: str, editable: bool = True) -> None:
    """One box per metric role: the metric names that play it in every run of the root (empty: by the names)."""
    chosen = settings.chosen_roles()
    with st.expander("Metric roles", expanded=bool(chosen)):
        st.caption(
            "Which metric is the training loss, the learning rate, ... is told from its name (each framework's "
            "own). A name here, one a line, decides instead for every run of this log root that has it; a link's "
            "`?role.loss=<metric>` decides for that link."
        )
        cols = st.columns(2)
        for i, role in enumerate(ROLES):
            cols[i % 2].text_area(
                ROLE_LABELS[role].capitalize(),
                value=roles_to_text(chosen.get(role, ())),
                key=f"{key}_role_{role}",
                height=68,
                disabled=not editable,
                placeholder="told from the names",
            )


def _kind_switches(settings: DiagnosisSettings, key: str, editable: bool = True) -> None:
    st.markdown("**Detectors**")
    cols = st.columns(3)
    for i, kind in enumerate(KINDS):
        cols[i % 3].toggle(
            kind_title(kind), value=settings.enabled(kind), key=f"{key}_on_{kind}", disabled=not editable
        )


def _number_input(field: Any, value: Any, key: str, editable: bool = True) -> None:
    label = LABELS.get(field.name, field.name)  # plain words; the setting's name stays in the key and the file
    if field.integer:
        st.number_input(
            label,
            min_value=1,
            value=int(value),
            step=1,
            key=f"{key}_{field.name}",
            help=_help(field.name),
            disabled=not editable,
        )
    else:
        st.number_input(
            label,
            min_value=0.0,
            value=float(value),
            step=field.step,
            format="%g",
            key=f"{key}_{field.name}",
            help=_help(field.name),
            disabled=not editable,
        )


def _help(name: str) -> str:
    """The knob's help text, with its name as saved in diagnosis.json (for people who edit the file)."""
    return f"{HELP.get(name, '')} (`{name}` in diagnosis.json)".strip()


def _widget_keys(key: str) -> list[str]:
    names = [f.name for g in settings_groups() for f in g.fields]
    return [f"{key}_{n}" for n in names] + [f"{key}_on_{k}" for k in KINDS] + [f"{key}_role_{r}" for r in ROLES]


def _on_save(root: str, key: str) -> None:
    state = st.session_state
    values = {f.name: state.get(f"{key}_{f.name}") for g in settings_groups() for f in g.fields}
    enabled = {kind: bool(state.get(f"{key}_on_{kind}", True)) for kind in KINDS}
    roles = {role: state.get(f"{key}_role_{role}") for role in ROLES}
    try:
        path = save_settings(root, settings_from_form(values, enabled, roles))
    except ValueError as exc:
        state[f"{key}_result"] = ("error", f"Not saved: {escape_markdown(str(exc))}")
        return
    except OSError as exc:
        state[f"{key}_result"] = ("error", f"Cannot write the settings: {escape_markdown(str(exc))}")
        return
    state[f"{key}_result"] = ("success", f"Saved to `{escape_code(str(path))}`.")


def _on_reset(root: str, key: str) -> None:
    try:
        path = save_settings(root, DiagnosisSettings())
    except OSError as exc:
        st.session_state[f"{key}_result"] = ("error", f"Cannot write the settings: {escape_markdown(str(exc))}")
        return
    for widget in _widget_keys(key):
        st.session_state.pop(widget, None)  # the widgets start again from the saved (default) values
    st.session_state[f"{key}_result"] = ("success", f"Defaults saved to `{escape_code(str(path))}`.")


__all__ = [
    "alert_panel",
    "box_text",
    "current_settings",
    "diagnosis_settings_form",
    "run_findings",
    "sidebar_badge",
    "toast_new",
]
