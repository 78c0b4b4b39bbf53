"""The reading side: tail metrics files, discover runs, build growing frames.

``RunStore(root)`` is the one object the dashboard keeps (one per server process);
see ``docs/ARCHITECTURE.md``. Imports neither MindSpore nor Streamlit. Names load
lazily so the CLI's command modules stay cheap to import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["RunFrame", "RunInfo", "RunStore", "StatusPolicy"]

_LAZY = {
    "RunFrame": "monitor_cb.ingest.runframe",
    "RunInfo": "monitor_cb.ingest.store",
    "RunStore": "monitor_cb.ingest.store",
    "StatusPolicy": "monitor_cb.ingest.status",
}

if TYPE_CHECKING:  # pragma: no cover
    from monitor_cb.ingest.runframe import RunFrame
    from monitor_cb.ingest.status import StatusPolicy
    from monitor_cb.ingest.store import RunInfo, RunStore


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'monitor_cb.ingest' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
