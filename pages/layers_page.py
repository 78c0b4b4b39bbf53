"""The Layers page: a run's per-parameter families as one heatmap, its top movers, and the selected
parameter's curve under the loss and the global gradient norm.

Flow: the sidebar picks the run and the refresh -> a fragment re-reads the run (its lowest rank when
it has several) -> ``monitor_cb.views.layers`` folds the new rows into the family's bucket matrix
and builds the figures -> drawn here. ``?family=`` and ``?param=`` keep the view in the URL, so a
``layer_origin`` finding elsewhere links straight to its row.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from monitor_cb.views.escape import escape_code
from monitor_cb.views.layers import (
    QUERY_FAMILY,
    QUERY_PARAM,
    MatrixCache,
    distribution_view,
    family_choices,
    histogram_tags,
    layers_view,
    origin_findings,
    pick_family,
    run_families,
)
from monitor_cb.views.live import drawn_rank
from pages import _findings, _shared

K_FAMILY, K_PARAM, K_HIST, K_HIST_STEP = "ly_family", "ly_param", "ly_hist", "ly_hist_step"
QUERY_HIST, QUERY_VS, K_VS, NO_COMPARE = "hist", "vs", "ly_vs", ""


@st.cache_resource(show_spinner=False)
def _matrices(root: str) -> MatrixCache:
    """One cache of family matrices per log root and server: every viewer folds new rows once."""
    return MatrixCache()


def layers_page() -> None:
    """The page function given to ``st.Page``."""
    root = _shared.log_root()
    store = _shared.get_store(str(root))
    runs = _shared.list_runs(store)
    selection = _shared.sidebar(root, runs)
    st.title("Layers")
    if selection.run is None:
        st.info("No runs under the log root yet.")
        st.stop()
    st.fragment(run_every=selection.refresh_s)(_body)(store, selection.run, str(root))


def _body(store: Any, run: Any, root: str) -> None:
    rank = drawn_rank(store.ranks_of(run.id))
    data = store.read(run.id, rank=rank)
    families = run_families(list(data.frame.columns))
    histograms = _histograms(store, run.id, rank)
    if not families and not histograms:
        st.info(
            "This run logs no per-parameter family (series such as grad_norm/<param>, local_norm/<param> or "
            "adam_m_norm/<param>) and no histograms. Log them with grad_norm_model(..., param_norms=True), "
            "MindFormers' TrainingStateMonitor (monitor_config in the YAML), TensorBoard's add_histogram or "
            "MindSpore's SummaryCollector."
        )
        return
    if families:
        _family_section(run, data, families, rank, root, store)
    if histograms:
        _distributions(histograms)


def _histograms(store: Any, run_id: str, rank: int | None) -> dict[str, Any]:
    try:
        return dict(store.histograms(run_id, rank))
    except (OSError, ImportError) as exc:  # the tensorboard package missing, a root gone: the rest still shows
        st.caption(f"Histograms not read: {_shared.md(exc)}")
        return {}


def _distributions(histograms: dict[str, Any]) -> None:
    st.subheader("Distributions")
    tags = histogram_tags(histograms)
    wanted = st.query_params.get(QUERY_HIST)
    if st.session_state.get(K_HIST) not in tags:
        st.session_state[K_HIST] = wanted if wanted in tags else tags[0]
    tag = st.selectbox(f"Histogram ({len(tags)})", tags, key=K_HIST)
    _shared.sync_query(QUERY_HIST, tag)
    view = distribution_view(histograms, tag, st.session_state.get(K_HIST_STEP))
    if view is None:
        st.caption("No histogram recorded for this tag yet.")
        return
    left, right = st.columns(2)
    with left:
        st.plotly_chart(view.bands, width="stretch", config=_shared.PLOTLY_CONFIG, key="ly_bands")
    with right:
        if len(view.steps) > 1:
            if st.session_state.get(K_HIST_STEP) not in view.steps:
                st.session_state[K_HIST_STEP] = view.step
            step = st.select_slider("Histogram at step", view.steps, key=K_HIST_STEP)
            view = distribution_view(histograms, tag, step) or view
        st.plotly_chart(view.histogram, width="stretch", config=_shared.PLOTLY_CONFIG, key="ly_histogram")


def _family_section(run: Any, data: Any, families: list[Any], rank: int | None, root: str, store: Any) -> None:
    findings = _findings.run_findings(run, data, root, store=store, shared=_shared.live_shared(root))
    family = _family_picker(families, findings)
    member = st.query_params.get(QUERY_PARAM)
    if st.session_state.get(K_PARAM) in family.members:
        member = st.session_state[K_PARAM]
    view = layers_view(data, family, member, findings, _matrices(root))
    _shared.sync_query(QUERY_PARAM, view.member)
    st.caption(
        f"Run `{escape_code(run.name)}`{'' if rank is None else f', rank {rank}'}: colour is each parameter's "
        "value against its own recent baseline (the median of the buckets before), red above, blue below; "
        "each cell keeps its bucket's extreme, so a one-step spike stays visible."
    )
    for finding in origin_findings(findings, family.name):
        _findings.BOXES.get(finding.severity, st.info)(_findings.box_text(finding))
    left, right = st.columns([3, 2])
    with left:
        st.plotly_chart(view.heatmap, width="stretch", config=_shared.PLOTLY_CONFIG, key="ly_heatmap")
    with right:
        st.markdown("**Top movers**")
        rows = view.mover_rows()
        if rows:
            table = pd.DataFrame([{"change": r.change, "step": r.step, "parameter": r.parameter} for r in rows])
            st.dataframe(table, hide_index=True, width="stretch", height=min(36 * len(rows) + 40, 560))
        else:
            st.caption("Nothing has moved from its baseline yet.")
    st.session_state[K_PARAM] = view.member
    st.selectbox("Parameter", list(family.members), key=K_PARAM)
    if view.curve is not None:
        st.plotly_chart(view.curve, width="stretch", config=_shared.PLOTLY_CONFIG, key="ly_curve")
    _compare_section(store, run, family, view.member, root)


def _compare_section(store: Any, run: Any, family: Any, member: str | None, root: str) -> None:
    """Another run of the same model beside this one: its heatmap of the same family, same row outlined."""
    others = [r for r in _shared.list_runs(store) if r.id != run.id]
    if not others:
        return
    by_id = {r.id: r for r in others}
    choices = [NO_COMPARE, *by_id]
    if st.session_state.get(K_VS) not in choices:
        wanted = st.query_params.get(QUERY_VS)
        st.session_state[K_VS] = wanted if wanted in by_id else NO_COMPARE
    vs = st.selectbox(
        "Compare with another run of the same model",
        choices,
        key=K_VS,
        format_func=lambda rid: "none" if rid == NO_COMPARE else str(by_id[rid].name),
    )
    _shared.sync_query(QUERY_VS, None if vs == NO_COMPARE else vs)
    if vs == NO_COMPARE:
        return
    other = by_id[vs]
    data = store.read(other.id, rank=drawn_rank(store.ranks_of(other.id)))
    theirs = next((f for f in run_families(list(data.frame.columns)) if f.name == family.name), None)
    if theirs is None:
        st.info(f"The run {_shared.md(other.name)} logs no {_shared.md(family.name)} family.")
        return
    findings = _findings.run_findings(other, data, root, store=store, shared=_shared.live_shared(root))
    row = member if member in theirs.members else None
    view = layers_view(data, theirs, row, findings, _matrices(root))
    for finding in origin_findings(findings, family.name):
        _findings.BOXES.get(finding.severity, st.info)(_findings.box_text(finding))
    st.plotly_chart(view.heatmap, width="stretch", config=_shared.PLOTLY_CONFIG, key="ly_heatmap_vs")


def _family_picker(families: list[Any], findings: list[Any]) -> Any:
    choices = family_choices(families)
    wanted = st.session_state.get(K_FAMILY) or st.query_params.get(QUERY_FAMILY)
    family = pick_family(families, wanted, findings)
    if st.session_state.get(K_FAMILY) != family.name:
        st.session_state[K_FAMILY] = family.name
    st.selectbox("Family", list(choices), format_func=choices.get, key=K_FAMILY)
    _shared.sync_query(QUERY_FAMILY, family.name)
    return family
