"""Path checks that keep every read inside the log root (symlinks and ``..`` included)."""

from __future__ import annotations

import os
from pathlib import Path


def is_within(path: Path | str, root: Path | str) -> bool:
    """True when ``path``, with every symlink resolved, lies inside ``root`` (resolved too)."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    try:
        return os.path.commonpath([real_root, real]) == real_root
    except ValueError:  # different drives, or a mix of absolute and relative
        return False
