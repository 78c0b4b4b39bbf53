"""Register ``LiveMonitor`` with MindFormers so YAML configs can build it.

Importing this module imports ``mindformers`` and registers
:class:`monitor_cb.callback.LiveMonitor` as a MindFormers ``CALLBACK``. After
that, a YAML entry::

    callbacks:
      - type: MFLossMonitor
      - type: LiveMonitor
        log_dir: logs/llama_sft
        log_interval: 10
        seq_length: 4096          # optional: for tokens/s
        config: {note: "lr sweep 3"}

is built by ``mindformers.core.callback.build_callback`` (the Trainer does this when
it builds its callbacks). A YAML-built callback receives only its own keys; batch
size and sequence length are read from the first batch, and total steps from
``Model``'s callback parameters. ``Trainer(..., callbacks=[LiveMonitor(...)])``
works without registration.

The registration must happen before the Trainer builds its callbacks. Either:

* import it in the training script: ``import monitor_cb.mindformers`` (before
  ``Trainer(...)`` / ``trainer.train()``), or
* use MindFormers' auto-registration, which imports ``<file>.<Class>`` from the
  directory named by ``REGISTER_PATH``: put a one-line file
  ``live_monitor_register.py`` containing ``from monitor_cb.mindformers import LiveMonitor``
  in a directory, ``export REGISTER_PATH=/that/dir`` (or pass
  ``run_mindformer.py --register_path /that/dir``), and add
  ``auto_register: live_monitor_register.LiveMonitor`` to the callback entry.

Importing ``monitor_cb`` alone never imports MindFormers (it takes seconds).
"""

from __future__ import annotations

from mindformers.tools.register import MindFormerModuleType, MindFormerRegister

from monitor_cb.callback import LiveMonitor

__all__ = ["LiveMonitor", "register"]


def register() -> type[LiveMonitor]:
    """Register ``LiveMonitor`` as a MindFormers callback (idempotent); returns the class."""
    return MindFormerRegister.register_cls(LiveMonitor, module_type=MindFormerModuleType.CALLBACK)


register()
