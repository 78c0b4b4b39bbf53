"""Where a MindFormers job's own logs are: one log file per rank, in either layout it writes.

* ``output/log/rank_N/info.log`` (MindFormers' file handler; rotated to ``info.log.1`` ... ``.5``);
* ``output/msrun_log/worker_N.log`` (``msrun`` sends each worker's stdout there; MindFormers 2.x
  writes only these; ``scheduler.log`` beside them is msrun's own and holds no rank).

A job under msrun with MindFormers 1.x has both, with the same step lines: it is one run, at
``output/log``, whose ranks read ``info.log`` and, for a rank that has none, ``worker_N.log``; the
``msrun_log`` folder beside it is then not a run of its own (:func:`is_shadowed_msrun_dir`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

LOG_NAME = "info.log"
MSRUN_DIR = "msrun_log"
MAX_ROTATED = 20  # info.log.1 ... (MindFormers keeps 5 by default)
_RANK_DIR = re.compile(r"^rank_(\d{1,6})$")
_WORKER = re.compile(r"^worker_(\d{1,6})\.log$")


def rank_of(directory: Path) -> int:
    """``rank_3`` -> 3; any other directory name -> 0."""
    match = _RANK_DIR.match(directory.name)
    return int(match.group(1)) if match else 0


def rank_logs(directory: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> dict[int, Path]:
    """Each rank's log file in a MindFormers log directory, by rank.

    ``rank_N/info.log`` (each rank), else ``info.log`` in the directory itself (one rank, from its
    name); ``worker_N.log`` files in it (an ``msrun_log`` folder); and, for a ``log`` folder, the
    ``worker_N.log`` of its sibling ``msrun_log`` for ranks with no ``info.log`` (only when that
    sibling is inside ``root``).
    """
    path = Path(directory)
    found = _rank_infos(path)
    for rank, worker in _workers(path).items():
        found.setdefault(rank, worker)
    sibling = path.parent / MSRUN_DIR
    if path.name == "log" and (root is None or _strictly_inside(path, root)):
        for rank, worker in _workers(sibling).items():
            found.setdefault(rank, worker)
    return dict(sorted(found.items()))


def rank_dirs(directory: str | os.PathLike[str]) -> dict[int, Path]:
    """The folder of each rank's log (see :func:`rank_logs`)."""
    return {rank: log.parent for rank, log in rank_logs(directory).items()}


def is_mindformers_log_dir(directory: str | os.PathLike[str]) -> bool:
    """Whether ``directory`` holds MindFormers' log: ``info.log`` in it or in ``rank_N/`` below it, or
    msrun's ``worker_N.log`` files."""
    return bool(_rank_infos(Path(directory)) or _workers(Path(directory)))


def is_shadowed_msrun_dir(directory: Path) -> bool:
    """An ``msrun_log`` folder whose job also has ``log/rank_N/info.log``: the run is that ``log`` folder."""
    return directory.name == MSRUN_DIR and bool(_rank_infos(directory.parent / "log"))


def rotated_logs(log: Path) -> list[Path]:
    """``info.log.N`` ... ``info.log.1`` that exist, oldest first (Python's RotatingFileHandler names).

    ``log`` is the log file, or (as before msrun logs) the rank folder holding ``info.log``.
    """
    log = log / LOG_NAME if log.is_dir() else log
    found = []
    for i in range(MAX_ROTATED, 0, -1):
        path = log.with_name(f"{log.name}.{i}")
        if os.path.lexists(path):  # (a link or a FIFO too: the reader refuses it by name)
            found.append(path)
    return found


def run_name(directory: Path) -> str:
    """``/jobs/llama_sft/output/log`` -> ``llama_sft``: the job's directory, not MindFormers' ``log``."""
    parts = directory.resolve().parts
    if len(parts) >= 3 and parts[-1] in ("log", MSRUN_DIR) and parts[-2] == "output":
        return parts[-3]
    return directory.name


def _rank_infos(path: Path) -> dict[int, Path]:
    found: dict[int, Path] = {}
    names = _entries(path)
    for name, is_dir, _ in names:
        match = _RANK_DIR.match(name)
        if match and is_dir and _is_file(path / name / LOG_NAME):
            found[int(match.group(1))] = path / name / LOG_NAME
    if not found and any(name == LOG_NAME and is_file for name, _, is_file in names):
        found[rank_of(path)] = path / LOG_NAME
    return found


def _workers(path: Path) -> dict[int, Path]:
    found: dict[int, Path] = {}
    for name, _, is_file in _entries(path):
        match = _WORKER.match(name)
        if match and is_file:
            found[int(match.group(1))] = path / name
    return found


def _entries(path: Path) -> list[tuple[str, bool, bool]]:
    """(name, is a real directory, is a regular file or a link to one) of each entry; none when unreadable."""
    try:
        with os.scandir(path) as entries:
            return [(e.name, e.is_dir(follow_symlinks=False), e.is_file()) for e in entries]
    except OSError:
        return []


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def _strictly_inside(path: Path, root: str | os.PathLike[str]) -> bool:
    """Whether ``path`` lies below ``root`` (so its parent, and a sibling, are inside it too)."""
    real, real_root = os.path.realpath(path), os.path.realpath(root)
    return real != real_root and os.path.commonpath([real, real_root]) == real_root
