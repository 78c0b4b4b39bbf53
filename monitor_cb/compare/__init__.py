"""Comparing runs and replaying one: plain logic for the compare and replay pages (no Streamlit).

Modules:
    align: x alignment across runs (step, samples seen, wall time, time since start), a common
        downsampling grid and interval-aware smoothing, so runs logged at different intervals compare.
    rundata: one run as comparing needs it (frame, masks, metadata), the metrics runs share.
    session: the compare page's settings and what one refresh computes (figures from
        :mod:`monitor_cb.charts.overlay`, the summary, the report).
    summary: the NaN-aware summary table.
    configdiff: hyperparameters that differ between runs.
    colors, colordiff: run colours a person can tell apart (CIEDE2000), sticky per view.
    runstats, runs_table, runexpr: the runs table (cached per-run statistics, differing config keys,
        text and safe expression filters, sort, group-by).
    bands: a group of runs as a mean with a min-max band.
    export: CSV / Parquet bytes of the selected runs (every row, NaN kept).
    upload: an uploaded JSONL buffer checked and parsed in memory.
    replay: the replay cursor, the "jump to" list and the window around a notable step.
"""
