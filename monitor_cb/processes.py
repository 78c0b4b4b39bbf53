"""Whether a process lives on this host, for both sides: the writer's claim on a run directory, and a
reader's "crashed" for a run whose writer is gone. Standard library only."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists here (someone else's, which we may not signal, counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's live process
    return True
