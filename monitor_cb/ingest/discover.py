"""Find runs under a log root: directories holding ``*.jsonl`` metrics files, or TensorBoard
event files (directly or in ``rank_<id>`` subdirectories, as MindFormers writes them), or
MindFormers' own log (``info.log`` directly or in ``rank_<id>`` subdirectories, or msrun's
``worker_<id>.log`` files: one run per job when it has both, see
:mod:`monitor_cb.importers.mindformers_layout`), or MindSpore's summary files
(``events.out.events.summary.*``, SummaryCollector / SummaryRecord).

Hidden entries are skipped, and so is anything that resolves outside the root
(a symlink pointing elsewhere, a name with ``..``): the reader never leaves it.
Symlinked directories are not followed at all: inside the root they are aliases of
a run found under its real path, outside it they are off limits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from monitor_cb.importers.mindformers_layout import is_mindformers_log_dir, is_shadowed_msrun_dir
from monitor_cb.importers.mindformers_log import SOURCE_FORMAT as MINDFORMERS_LOG
from monitor_cb.importers.ms_summary import SOURCE_FORMAT as MS_SUMMARY
from monitor_cb.importers.ms_summary import is_ms_summary_dir
from monitor_cb.importers.tensorboard import is_tensorboard_run
from monitor_cb.ingest.safepath import is_within
from monitor_cb.record import METRICS_SUFFIX
from monitor_cb.rootfile import file_kind

DEFAULT_MAX_DEPTH = 3  # logs/<group>/<sub>/<run>


@dataclass(frozen=True)
class RunDir:
    """A run directory found under the root."""

    id: str  # path relative to the root, POSIX; "." when the root itself is the run
    path: Path
    files: tuple[Path, ...]  # its metrics files, sorted (none for a TensorBoard run)
    kind: str = "jsonl"  # or "tensorboard", "mindformers_log", "ms_summary"


def discover_runs(
    root: Path, max_depth: int = DEFAULT_MAX_DEPTH, skipped: dict[str, str] | None = None
) -> dict[str, RunDir]:
    """Every run under ``root`` (the root included), keyed by id.

    ``skipped``, when given, receives the metrics files left out and why (a FIFO, a device, a link out of
    the root), for the store's "skipped" notes.
    """
    runs: dict[str, RunDir] = {}
    if not root.is_dir():
        return runs
    seen: set[str] = set()
    stack: list[tuple[Path, tuple[str, ...]]] = [(root, ())]
    while stack:
        directory, parts = stack.pop()
        real = os.path.realpath(directory)
        if real in seen:  # symlink loops inside the root
            continue
        seen.add(real)
        files, subdirs = _scan(directory, root, skipped)
        run_id = "/".join(parts) or "."
        if files:
            runs[run_id] = RunDir(run_id, directory, tuple(sorted(files)))
        elif is_tensorboard_run(directory):
            runs[run_id] = RunDir(run_id, directory, (), kind="tensorboard")
            continue  # its subdirectories are ranks and add_scalars series, not runs
        elif is_ms_summary_dir(directory):  # MindSpore's SummaryCollector / SummaryRecord files
            runs[run_id] = RunDir(run_id, directory, (), kind=MS_SUMMARY)
            continue
        elif is_mindformers_log_dir(directory):  # output/log with rank_N/info.log, one rank_N, or msrun_log
            if not (parts and is_shadowed_msrun_dir(directory)):  # (msrun_log beside log/: that run's, not another)
                runs[run_id] = RunDir(run_id, directory, (), kind=MINDFORMERS_LOG)
            continue
        if len(parts) < max_depth:
            stack.extend((sub, (*parts, sub.name)) for sub in subdirs)
    return runs


def _scan(directory: Path, root: Path, skipped: dict[str, str] | None = None) -> tuple[list[Path], list[Path]]:
    files: list[Path] = []
    subdirs: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return files, subdirs
    for entry in entries:
        if entry.name.startswith("."):
            continue
        path = Path(entry.path)
        try:
            link = entry.is_symlink()
            if link and entry.is_dir():
                continue  # an alias of a folder found under its real path, or off limits
            if link and not is_within(path, root):
                if skipped is not None and entry.name.endswith(METRICS_SUFFIX):
                    target = os.path.realpath(path)
                    skipped[entry.path] = f"leads outside the log root (to {target}) through a symbolic link"
                continue
            if entry.is_dir():
                subdirs.append(path)
            elif entry.name.endswith(METRICS_SUFFIX):
                if entry.is_file():
                    files.append(path)
                elif skipped is not None:
                    skipped[entry.path] = f"is not a regular file ({_kind(path)})"
        except OSError:
            continue
    return files, subdirs


def _kind(path: Path) -> str:
    try:
        return file_kind(os.stat(path).st_mode)
    except OSError:
        return "a dangling link"
