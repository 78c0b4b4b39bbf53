"""``monitor-cb dashboard [--logdir PATH] [--port 8501] [--host 127.0.0.1]``, as ``tensorboard --logdir`` works.

Runs ``streamlit run`` on the dashboard script that ships inside the package (``monitor_cb/app/``:
the checkout's ``dashboard.py`` and ``pages/``, copied there when the wheel is built), or on the
checkout's own ``dashboard.py`` when run from a source tree. The checkout's ``.streamlit/config.toml``
is not there once installed, so its settings are given as flags (:data:`SERVER_OPTIONS`; a test
keeps the two equal): localhost only, loopback Host names only (``--allowed-hosts`` to add a name
the dashboard is opened by), headless, no usage statistics, XSRF protection, no file watcher, no
error details in the browser. ``--token`` and ``--read-only-settings`` reach the server through its
environment (:data:`ENV_TOKEN`, :data:`ENV_READ_ONLY`), never its command line, which other users
of the machine can read with ``ps``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from monitor_cb.commands.common import UsageError, add_endpoint_argument, add_logdir_argument, apply_endpoint
from monitor_cb.logroot import log_root

ENV_TOKEN = "MONITOR_DASHBOARD_TOKEN"  # read by dashboard.py (monitor_cb.views.tokenguard)
ENV_READ_ONLY = "MONITOR_READ_ONLY_SETTINGS"  # read by the Settings page

# The checkout's .streamlit/config.toml as `streamlit run` flags (section.key -> value; a list is
# given as the flag repeated).
SERVER_OPTIONS: dict[str, str | list[str]] = {
    "server.address": "127.0.0.1",
    "server.port": "8501",
    "server.enableXsrfProtection": "true",
    "server.enableCORS": "true",
    "server.fileWatcherType": "none",
    "server.runOnSave": "false",
    "server.headless": "true",
    "server.allowedHosts": ["localhost", "127.0.0.1", "::1"],
    "server.maxUploadSize": "400",
    "browser.gatherUsageStats": "false",
    "browser.serverAddress": "localhost",
    "client.showErrorDetails": "none",
    "client.toolbarMode": "viewer",
    "runner.fastReruns": "true",
    "runner.postScriptGC": "false",
    "theme.base": "light",
    "theme.primaryColor": "#1f77b4",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_logdir_argument(parser)
    add_endpoint_argument(parser)
    parser.add_argument(
        "--host",
        default=SERVER_OPTIONS["server.address"],
        help="address to listen on (default 127.0.0.1: this machine only; reach it through an SSH tunnel)",
    )
    parser.add_argument("--port", type=int, default=int(str(SERVER_OPTIONS["server.port"])), help="port (default 8501)")
    parser.add_argument(
        "--allowed-hosts",
        default=None,
        metavar="NAMES",
        help="comma-separated names the browser may open the dashboard by, besides localhost, 127.0.0.1 and ::1 "
        "(a reverse proxy's name, this machine's name with --host 0.0.0.0; '*' accepts any: then DNS "
        "rebinding is possible)",
    )
    parser.add_argument(
        "--token",
        nargs="?",
        const="auto",
        default=None,
        metavar="VALUE|auto",
        help="require this token (or password) for every page and the WebSocket; 'auto' (the default when "
        f"given without a value) makes a random one; the link to open is printed at start. Also ${ENV_TOKEN}. "
        "A value given here shows in 'ps' until the server starts: prefer auto or the variable",
    )
    parser.add_argument(
        "--read-only-settings",
        action="store_true",
        help="viewers can see the Settings page but not save thresholds or send test notifications "
        f"(also ${ENV_READ_ONLY}=1): nobody can switch alerts off from the browser",
    )


def run(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("streamlit") is None:
        raise UsageError("the dashboard needs Streamlit and plotly: pip install 'monitor-cb[dashboard]'")
    apply_endpoint(args)  # the server inherits it ($MONITOR_ENDPOINT_URL)
    root = log_root(args.logdir)  # a URL comes back without credentials: they never reach a command line
    host = args.host
    token = bool(args.token or os.environ.get(ENV_TOKEN))
    argv = streamlit_argv(
        app_script(), root if isinstance(root, str) else root.resolve(), host, args.port, args.allowed_hosts, token
    )
    if host not in ("127.0.0.1", "localhost", "::1") and not token:
        print(
            f"warning: listening on {host} without --token: anyone who can reach port {args.port} sees every run "
            "and can change the settings (see README: 'Who can open the dashboard')",
            file=sys.stderr,
        )
    sys.stdout.flush()
    os.execve(sys.executable, argv, server_env(os.environ, args.token, args.read_only_settings))
    # the server replaces this process: signals reach it directly
    return 0  # pragma: no cover - execv does not return


def server_env(env: Mapping[str, str], token: str | None, read_only_settings: bool) -> dict[str, str]:
    """The server's environment: ours, plus the token and the read-only switch when given."""
    out = dict(env)
    if token:
        out[ENV_TOKEN] = token  # "auto" is resolved by the server, which prints the link
    if read_only_settings:
        out[ENV_READ_ONLY] = "1"
    return out


def app_script() -> Path:
    """The dashboard script: inside the installed package, else the source checkout's ``dashboard.py``."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "app" / "dashboard.py", package.parent / "dashboard.py"):
        if candidate.is_file():
            return candidate
    raise UsageError(f"the dashboard app is missing from this installation (no {package / 'app' / 'dashboard.py'})")


def streamlit_argv(
    script: Path, root: Path | str, host: str, port: int, allowed_hosts: str | None = None, token: bool = False
) -> list[str]:
    """``python -m streamlit run SCRIPT --<option> <value>... -- --logdir ROOT``.

    With a token Streamlit's own "URL: http://localhost:8501" is not printed: it opens only the token
    form, and people click the first link they see; the server prints the one that works instead."""
    options = {**SERVER_OPTIONS, "server.address": host, "server.port": str(port)}
    if token:
        options["logger.hideWelcomeMessage"] = "true"
    if allowed_hosts:
        extra = [name.strip() for name in allowed_hosts.split(",") if name.strip()]
        options["server.allowedHosts"] = list(dict.fromkeys([*SERVER_OPTIONS["server.allowedHosts"], *extra]))
    flags = []
    for key, value in options.items():
        for one in value if isinstance(value, list) else [value]:
            flags += [f"--{key}", one]
    return [sys.executable, "-m", "streamlit", "run", str(script), *flags, "--", "--logdir", str(root)]
