"""Comparing runs: the data the compare and runs pages work on (no Streamlit, no page state).

The compare page's session (what one refresh computes) and the replay cursor are page logic:
:mod:`monitor_cb.views.compare_session` and :mod:`monitor_cb.views.replay`.

Modules:
    align: x alignment across runs (step, samples seen, wall time, time since start), a common
        downsampling grid and interval-aware smoothing, so runs logged at different intervals compare.
    rundata: one run as comparing needs it (frame, masks, metadata), the metrics runs share.
    summary: the NaN-aware summary table.
    configdiff: hyperparameters that differ between runs.
    colors, colordiff: run colours a person can tell apart (CIEDE2000), sticky per view.
    runstats, runs_table, runexpr: the runs table (cached per-run statistics, differing config keys,
        text and safe expression filters, sort, group-by).
    bands: a group of runs as a mean with a min-max band.
    export: CSV / Parquet bytes of the selected runs (every row, NaN kept).
    upload: an uploaded JSONL buffer checked and parsed in memory.
"""
