"""``python -m monitor_cb COMMAND`` (or ``monitor-cb COMMAND``): the command-line entry point.

Each command lives in its own module exposing ``add_arguments(parser)`` and ``run(args) -> int``
(the convention of :mod:`monitor_cb.commands`); building the parser imports only their light
top levels, so ``summary`` never imports MindSpore. A :class:`~monitor_cb.commands.common.UsageError`
(or an unreadable path) ends as ``error: ...`` on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "monitor_cb.commands.demo",
        "train the small Transformer on random data with LiveMonitor (real MindSpore)",
    ),
    "summary": ("monitor_cb.commands.summary", "print a run's status, steps and last values"),
    "export": ("monitor_cb.commands.export", "write a run's merged metrics as CSV or Parquet"),
    "watch": ("monitor_cb.commands.watch", "watch every run under a log root and send alerts (no browser)"),
    "import-tb": ("monitor_cb.commands.import_tb", "convert TensorBoard event files (MindFormers) into our format"),
    "diagnose": ("monitor_cb.commands.diagnose", "find training failures in a run; exit 1 on an error finding"),
    "sync": ("monitor_cb.commands.sync", "ship a local run to object storage (S3, OBS, MinIO) as it grows"),
    "dashboard": ("monitor_cb.commands.dashboard", "open the dashboard on a log root (like tensorboard --logdir)"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m monitor_cb", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(command)
    return parser


def main(argv: list[str] | None = None) -> int:
    from monitor_cb.commands.common import EXIT_USAGE, UsageError

    args = build_parser().parse_args(argv)
    try:
        return int(importlib.import_module(args._module).run(args) or 0)
    except (UsageError, OSError) as exc:
        from monitor_cb.storage.urls import redact_credentials

        print(f"error: {redact_credentials(exc)}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
