"""Runs to look at without a training of your own: the demo model and sample runs.

* :mod:`~monitor_cb.demo.curves`: one recipe for realistic curves (warmup + cosine lr, power-law loss,
  grad-norm bumps, input hiccups), shared by the samples and the labelled generators of
  :mod:`monitor_cb.testing`.
* :mod:`~monitor_cb.demo.samples`: finished sample runs written instantly (the dashboard's embedded default).
* :mod:`~monitor_cb.demo.model`, :mod:`~monitor_cb.demo.train`: the small Transformer that
  ``python -m monitor_cb demo`` trains, and its training with ``LiveMonitor`` (MindSpore).
* :mod:`~monitor_cb.demo.launcher`: the demo training started and stopped in the background for the dashboard.
"""
