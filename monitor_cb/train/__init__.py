"""The training side: everything that runs inside the training job.

``LiveMonitor`` (``callback``) computes each step's metrics (``extract``, ``lr``, ``timing``, ``guard``,
``system``, ``telemetry``, ``model_info``, ``train_config``, ``run_config``) and hands them to
``MetricsWriter`` (``writer``: a bounded queue and a thread that appends, flushes and writes the
metadata; ``writer_claim``: which file and segment it takes; ``writer_queue``: the queue's memory
budget). ``cells`` and ``grad_norm`` build train cells that also return the gradient norm;
``mindformers`` registers ``LiveMonitor`` for MindFormers YAML configs. Only this package (and the
demo's model) imports MindSpore; the reading side never imports it (``tests/test_imports.py``).
"""
