"""A log root of named runs from the real_runs corpus (``../shared/real_runs``), copied into a test's tmp dir.

The corpus is read from ``../shared`` next to the repository at run time and never copied into the
repository; tests that use it skip cleanly when it is absent.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

REAL_RUNS = Path(
    os.environ.get("MONITOR_REAL_RUNS") or Path(__file__).resolve().parents[2] / ".." / "shared" / "real_runs"
)


def real_runs_root(root: Path, names: Sequence[str]) -> Path:
    """Copy the named runs' folders under ``root`` (skipping the test when the corpus is absent)."""
    if not (REAL_RUNS / "labels.json").is_file():
        pytest.skip(f"the real_runs corpus is not at {REAL_RUNS}")
    for name in names:
        shutil.copytree(REAL_RUNS / name, root / name)
    return root
