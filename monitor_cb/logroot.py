"""Where the runs are: the log root, decided in one place for the dashboard, every command and the store.

The log root is ``--logdir PATH`` when given, else ``$MONITOR_LOGDIR``, else ``$MONITOR_CB_LOGDIR``
(an older name, still honoured), else ``./logs``. A log root on object storage is a URL
(``s3://bucket/prefix``), kept as a string without the credentials it may carry. Standard library
only: the training process (``notify.training``) asks it too.

```python
root = log_root(args.logdir)                       # a command's --logdir, or the environment
root = log_root(logdir_argument(sys.argv[1:]))     # the dashboard: ``streamlit run dashboard.py -- --logdir PATH``
```
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from monitor_cb.storage.urls import clean_url, is_url, local_path

ENV_LOGDIR = "MONITOR_LOGDIR"
ENV_LOGDIR_ALT = "MONITOR_CB_LOGDIR"  # honoured when $MONITOR_LOGDIR is unset
DEFAULT_LOGDIR = "logs"
LOGDIR_HELP = f"log root holding the runs (default: ${ENV_LOGDIR}, else ./{DEFAULT_LOGDIR})"


def env_logdir(env: Mapping[str, str] | None = None) -> str | None:
    """The log root the environment names (``$MONITOR_LOGDIR``, else ``$MONITOR_CB_LOGDIR``), None when neither."""
    env = os.environ if env is None else env
    return env.get(ENV_LOGDIR) or env.get(ENV_LOGDIR_ALT) or None


def log_root(value: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Path | str:
    """The log root: ``value`` (a ``--logdir``) when given, else the environment's, else ``./logs``.

    A path is returned as given (relative paths stay relative; it need not exist), or its folder when it
    is a regular file (a run's ``metrics.jsonl`` or ``info.log`` pasted as the root: its run is shown); a URL
    as a string without credentials (``file://`` URLs become paths).
    """
    raw = os.fspath(value) if value is not None and os.fspath(value) != "" else (env_logdir(env) or DEFAULT_LOGDIR)
    if is_url(raw):
        return clean_url(raw)
    path = Path(local_path(raw)).expanduser()
    return path.parent if path.is_file() else path


def logdir_argument(argv: Sequence[str]) -> str | None:
    """The value of ``--logdir PATH`` / ``--logdir=PATH`` in ``argv`` (the last one wins), None when absent."""
    value: str | None = None
    for i, arg in enumerate(argv):
        if arg == "--logdir" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--logdir="):
            value = arg.split("=", 1)[1]
    return value or None


__all__ = ["DEFAULT_LOGDIR", "ENV_LOGDIR", "ENV_LOGDIR_ALT", "LOGDIR_HELP", "env_logdir", "log_root", "logdir_argument"]
