"""The tests' and benchmarks' harness, kept out of the wheel (pyproject.toml lists no ``monitor_cb.testing``).

* :mod:`~monitor_cb.testing.synthetic`, :mod:`~monitor_cb.testing.synthetic_ranks`: labelled single-rank and
  8-rank runs with known failures, for the detectors' tests and benchmarks.
* :mod:`~monitor_cb.testing.corpus`: the real runs of ``../shared/real_runs`` and their labels.
* :mod:`~monitor_cb.testing.inject`: faults injected into real runs.
* :mod:`~monitor_cb.testing.event_files`: a TensorBoard run of many small event files.
* :mod:`~monitor_cb.testing.colordiff`: CIEDE2000 colour distance, to check the compare palette.
"""
