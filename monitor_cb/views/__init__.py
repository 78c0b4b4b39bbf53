"""The pages' plain logic, without Streamlit: every decision a page shows, as functions with unit tests.

``dashboard.py`` and ``pages/`` only read widgets and draw; what they show is decided here, because
Streamlit's AppTest cannot drive a ``run_every`` refresh or a drag in a chart.

* Live page: :mod:`~.logdir` (the log root from the command line), :mod:`~.runlist` (run labels, the
  filter, the picked run, refresh choices), :mod:`~.kpis` (the tiles), :mod:`~.panels` (which charts),
  :mod:`~.thresholds`, :mod:`~.zoom` (zoom and legend events), :mod:`~.live` (figures, other ranks).
* Findings: :mod:`~.findings_view` (alert rows, badges, toasts); settings page: :mod:`~.settings_form`.
* Compare, runs and replay pages: :mod:`~.compare_session`, :mod:`~.runfilter`, :mod:`~.runs_view` (the runs
  table as text, one render of the runs page), :mod:`~.summary_cells` (the compare summary as text),
  :mod:`~.replay`; the offline report: :mod:`~.report`.
* :mod:`~.escape` (user text in Markdown), :mod:`~.hostguard` (the server's Host check).
"""
