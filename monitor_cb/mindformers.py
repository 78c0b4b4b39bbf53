"""``import monitor_cb.mindformers`` registers ``LiveMonitor`` with MindFormers (YAML ``type: LiveMonitor``).

The name users put in their scripts and in ``auto_register: ...``; the code is
:mod:`monitor_cb.train.mindformers`.
"""

from monitor_cb.train.mindformers import LiveMonitor, register, trainer_config

__all__ = ["LiveMonitor", "register", "trainer_config"]
