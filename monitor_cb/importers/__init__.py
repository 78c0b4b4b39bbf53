"""Readers for logs written by other tools, producing records in our format (``docs/FORMAT.md``).

* :mod:`monitor_cb.importers.tags`: MindFormers' TensorBoard tag names -> our metric names (pure).
* :mod:`monitor_cb.importers.tensorboard`: incremental, full-resolution reader of TensorBoard event
  directories (needs the optional ``tensorboard`` package, imported only when a run is read).
* :mod:`monitor_cb.importers.mindformers_log`: MFLossMonitor's lines of MindFormers' own
  ``info.log`` (pure, polars); :mod:`monitor_cb.ingest.mindformers_source` tails them per rank.
* :mod:`monitor_cb.commands.import_tb`: ``python -m monitor_cb import-tb SRC DEST``.

Nothing here is imported by ``monitor_cb`` itself; see ``docs/TENSORBOARD.md``.
"""
