"""Register ``LiveMonitor`` with MindFormers so YAML configs can build it.

Importing this module imports ``mindformers`` and registers
:class:`monitor_cb.train.callback.LiveMonitor` as a MindFormers ``CALLBACK``. After
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

import sys
from typing import Any

from mindformers.tools.register import MindFormerModuleType, MindFormerRegister
from mindformers.trainer.base_trainer import BaseTrainer

from monitor_cb.train.callback import LiveMonitor

__all__ = ["LiveMonitor", "register", "trainer_config"]

_MAX_FRAMES = 40


def register() -> type[LiveMonitor]:
    """Register ``LiveMonitor`` as a MindFormers callback (idempotent); returns the class."""
    return MindFormerRegister.register_cls(LiveMonitor, module_type=MindFormerModuleType.CALLBACK)


def trainer_config() -> Any:
    """The config the running MindFormers Trainer trains from, or None outside a Trainer.

    A callback built from the YAML gets only its own keys, and ``Model.train`` does not pass the
    Trainer on. The Trainer's ``training_process(config, ...)`` is on the call stack while
    ``Model.train`` runs the callbacks' ``on_train_begin``; its ``config`` there is the merged one
    (YAML, ``TrainingArguments`` and defaults, with the lr schedule's steps filled in). Read only.
    ``Model.train`` called directly has no Trainer config (``build_context``'s config may describe
    another model), so None.
    """
    frame = sys._getframe(1)
    for _ in range(_MAX_FRAMES):
        if frame is None:
            break
        owner = frame.f_locals.get("self")
        if frame.f_code.co_name == "training_process" and isinstance(owner, BaseTrainer):
            config = frame.f_locals.get("config")
            if isinstance(config, dict):
                return config
        frame = frame.f_back
    return None


register()
