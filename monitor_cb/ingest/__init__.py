"""The reading side: tail metrics files, discover runs, build growing frames.

``RunStore(root)`` is the one object the dashboard keeps (one per server process);
see ``docs/ARCHITECTURE.md``. Imports neither MindSpore nor Streamlit.
"""

from __future__ import annotations

from monitor_cb.ingest.status import StatusPolicy
from monitor_cb.ingest.store import ENV_ROOT, RunInfo, RunStore, default_root

__all__ = ["ENV_ROOT", "RunInfo", "RunStore", "StatusPolicy", "default_root"]
