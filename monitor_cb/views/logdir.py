"""The dashboard's log root from its command line and environment, and page text without credentials."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from monitor_cb.logroot import log_root, logdir_argument


def resolve_logdir(argv: Sequence[str], env: Mapping[str, str], cwd: Path | None = None) -> Path:
    """The dashboard's log root (:mod:`monitor_cb.logroot`: ``--logdir PATH`` after ``--`` in ``streamlit
    run``, else ``$MONITOR_LOGDIR``, else ``./logs``), absolute and resolved; it need not exist yet.

    An object-store URL (``s3://bucket/prefix``) is returned as a string, without any credentials it carried.
    """
    path = log_root(logdir_argument(argv), env)
    if isinstance(path, str):
        return path  # type: ignore[return-value]
    if not path.is_absolute():
        path = (cwd or Path.cwd()) / path
    return path.resolve()


def apply_endpoint_arg(argv: Sequence[str], env: Any) -> None:
    """``--endpoint-url URL`` (after ``--`` in ``streamlit run``) becomes ``$MONITOR_ENDPOINT_URL`` for this process."""
    from monitor_cb.storage.urls import ENV_ENDPOINT

    for i, arg in enumerate(argv):
        if arg == "--endpoint-url" and i + 1 < len(argv):
            env[ENV_ENDPOINT] = argv[i + 1]
        elif arg.startswith("--endpoint-url="):
            env[ENV_ENDPOINT] = arg.split("=", 1)[1]


def redact(text: object) -> str:
    """Text for the page with credentials removed (URL user info, the SDK's secret values)."""
    from monitor_cb.storage.urls import redact_credentials as _redact

    return _redact(text)
