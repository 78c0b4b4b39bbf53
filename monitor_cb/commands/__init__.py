"""The command line's shared convention (:mod:`monitor_cb.commands.common`) and its commands.

Every command is a module with ``add_arguments(parser)`` and ``run(args) -> int``; the CLI
(:mod:`monitor_cb.cli`) imports a module only to build its parser and runs it only when chosen.
A run's log root is ``--logdir PATH`` (``--root`` is the same option) for every command; a command
line that cannot be carried out raises :class:`~monitor_cb.commands.common.UsageError`, which the
CLI prints as ``error: ...`` on stderr with exit status 2.
"""
