"""Notification settings: one small TOML (or JSON) file plus command-line flags.

Secrets (webhook URLs, signing keys, SMTP passwords) are read from environment variables named in
the file (``url_env = "SLACK_WEBHOOK_URL"``) and held as :class:`~monitor_cb.masking.Secret`,
so no repr, log line or error message shows them. The reference is docs/NOTIFICATIONS.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from datetime import time as dtime
from pathlib import Path
from typing import Any

from monitor_cb.masking import Secret
from monitor_cb.notify.alert import SEVERITIES, Alert, severity_rank
from monitor_cb.notify.channels import (
    CHANNEL_TYPES,
    Channel,
    CommandChannel,
    DingTalkChannel,
    EmailChannel,
    FeishuChannel,
    SlackChannel,
    WebhookChannel,
    WeComChannel,
)
from monitor_cb.notify.transport import DEFAULT_TIMEOUT
from monitor_cb.notify.trust import (
    ENV_CONFIG,
    UntrustedSettingsError,
    ignored_note,
    ignored_root_file,
    read_private,
    user_config_file,
)

DEFAULT_RESPONSE_TIMEOUT = 30.0
DEFAULT_EXPIRE_AFTER = 24 * 3600.0
_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_GLOBAL_KEYS = {
    "min_severity",
    "timeout",
    "response_timeout",
    "expire_after",
    "retries",
    "backoff",
    "max_backoff",
    "group_window",
    "gather",
    "dashboard_url",
    "quiet_hours",
    "quiet_min_severity",
}
_ROUTE_KEYS = {"type", "name", "min_severity", "quiet_hours", "quiet_min_severity", "enabled"}


class ConfigError(ValueError):
    """The notification settings are wrong; the message names the file, channel and key."""


@dataclass(frozen=True)
class QuietHours:
    """A daily local-time window, e.g. 23:00-07:00 (may wrap midnight)."""

    start: dtime
    end: dtime

    @classmethod
    def parse(cls, text: str) -> QuietHours | None:
        """``"23:00-07:00"`` -> QuietHours; ``""`` or ``"off"`` -> None."""
        text = (text or "").strip()
        if text.lower() in ("", "off", "none"):
            return None
        try:
            start, end = (dtime.fromisoformat(part.strip()) for part in text.split("-"))
        except ValueError:
            raise ConfigError(f"quiet_hours must look like '23:00-07:00', got {text!r}") from None
        return cls(start, end)

    def active(self, t: float) -> bool:
        now = datetime.fromtimestamp(t).time()
        if self.start <= self.end:
            return self.start <= now < self.end
        return now >= self.start or now < self.end

    def __str__(self) -> str:
        return f"{self.start:%H:%M}-{self.end:%H:%M}"


@dataclass
class Route:
    """A channel and what it receives: a minimum severity, outside quiet hours unless severe enough."""

    channel: Channel
    min_severity: str = "info"
    quiet: QuietHours | None = None
    quiet_min_severity: str = "error"

    def wants(self, alert: Alert, now: float) -> bool:
        rank = severity_rank(alert.severity)
        if rank < severity_rank(self.min_severity):
            return False
        return not (self.quiet and self.quiet.active(now) and rank < severity_rank(self.quiet_min_severity))

    def describe(self) -> dict[str, Any]:
        return {
            **self.channel.describe(),
            "min_severity": self.min_severity,
            "quiet_hours": str(self.quiet) if self.quiet else None,
            "quiet_min_severity": self.quiet_min_severity,
        }


@dataclass
class NotifyConfig:
    """Everything the notifier needs.

    Attributes:
        routes: the channels and their filters.
        timeout: seconds to connect (and, for email and commands, the whole attempt).
        response_timeout: seconds an HTTP receiver may take to answer once the message is out; past
            it the outcome is unknown and the message is retried with the same id.
        expire_after: seconds an undelivered alert is retried (across passes and restarts of the
            watcher) before it is given up, logged and shown as expired.
        retries: further attempts after a retryable failure.
        backoff: seconds before the first retry, doubled each time up to ``max_backoff``.
        group_window: a channel sends at most one message per window; alerts that arrive
            meanwhile go out together as one digest.
        gather: seconds to wait after a first alert for others arriving with it.
        dashboard_url: base URL for links to runs (``http://host:8501``), or None.
    """

    routes: list[Route] = field(default_factory=list)
    timeout: float = DEFAULT_TIMEOUT
    response_timeout: float = DEFAULT_RESPONSE_TIMEOUT
    expire_after: float = DEFAULT_EXPIRE_AFTER
    retries: int = 3
    backoff: float = 1.0
    max_backoff: float = 60.0
    group_window: float = 60.0
    gather: float = 2.0
    dashboard_url: str | None = None

    def describe(self) -> list[dict[str, Any]]:
        """The channels as a settings page shows them, secrets masked."""
        return [route.describe() for route in self.routes]

    def link(self, run_id: str) -> str | None:
        """The dashboard URL of a run's live page, or None."""
        if not self.dashboard_url:
            return None
        from urllib.parse import quote

        return f"{self.dashboard_url.rstrip('/')}/?run={quote(run_id, safe='')}"


def find_config(root: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Path | None:
    """Where the user's own settings are: ``$MONITOR_NOTIFY_CONFIG``, else ``~/.config/monitor_cb/notify.toml``.

    Never a file in the log root (``root`` is accepted for the callers' convenience and not searched):
    a shared root is data, and channels run commands and send data elsewhere. A ``notify.toml`` left
    there is reported by :func:`ignored_root_settings`. The watcher and the dashboard both use this.
    None when there is none.
    """
    env = os.environ if env is None else env
    if env.get(ENV_CONFIG):
        return Path(env[ENV_CONFIG])
    return user_config_file(env)


def ignored_root_settings(root: str | os.PathLike[str] | None, env: Mapping[str, str] | None = None) -> str | None:
    """A note when ``LOGROOT/.monitor/notify.toml`` exists (it is ignored, and says where it belongs), else None."""
    path = ignored_root_file(root)
    return ignored_note(path, os.environ if env is None else env) if path is not None else None


def load_config(path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> NotifyConfig:
    """Read a TOML (``.toml``) or JSON (``.json``) settings file; None gives an empty configuration.

    The file must pass the ssh-style owner/mode check (:func:`~monitor_cb.notify.trust.read_private`).

    Raises:
        ConfigError: unreadable or untrusted file, unknown key, missing environment variable (named, not shown).
    """
    env = os.environ if env is None else env
    if path is None:
        return config_from_dict({}, env)
    path = Path(path)
    try:
        raw = read_private(path)
    except UntrustedSettingsError as exc:
        raise ConfigError(str(exc)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read notification settings {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw) if path.suffix.lower() == ".json" else _toml_loads(raw.decode())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {exc}") from None
    try:
        return config_from_dict(data, env)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _toml_loads(text: str) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise ConfigError("reading TOML needs Python 3.11+ or the 'tomli' package; or use a .json file") from None
    return tomllib.loads(text)


def config_from_dict(data: Mapping[str, Any], env: Mapping[str, str] | None = None) -> NotifyConfig:
    """Build a :class:`NotifyConfig` from parsed settings (``{"notify": {...}, "channels": [...]}``)."""
    env = os.environ if env is None else env
    if not isinstance(data, Mapping):
        raise ConfigError("the settings must be a table/object")
    unknown = set(data) - {"notify", "channels"}
    if unknown:
        raise ConfigError(f"unknown top-level key(s) {sorted(unknown)}; expected [notify] and [[channels]]")
    glob = dict(data.get("notify") or {})
    bad = set(glob) - _GLOBAL_KEYS
    if bad:
        raise ConfigError(f"unknown key(s) in [notify]: {sorted(bad)}; known: {sorted(_GLOBAL_KEYS)}")
    config = NotifyConfig(
        timeout=_positive(glob, "timeout", DEFAULT_TIMEOUT),
        response_timeout=_positive(glob, "response_timeout", DEFAULT_RESPONSE_TIMEOUT),
        expire_after=parse_duration(glob.get("expire_after", DEFAULT_EXPIRE_AFTER / 3600), "expire_after"),
        retries=int(_positive(glob, "retries", 3, allow_zero=True)),
        backoff=_positive(glob, "backoff", 1.0, allow_zero=True),
        max_backoff=_positive(glob, "max_backoff", 60.0),
        group_window=_positive(glob, "group_window", 60.0, allow_zero=True),
        gather=_positive(glob, "gather", 2.0, allow_zero=True),
        dashboard_url=glob.get("dashboard_url") or None,
    )
    defaults = {
        "min_severity": _severity(glob.get("min_severity", "info"), "min_severity"),
        "quiet": QuietHours.parse(glob.get("quiet_hours", "")),
        "quiet_min_severity": _severity(glob.get("quiet_min_severity", "error"), "quiet_min_severity"),
    }
    channels = data.get("channels") or []
    if not isinstance(channels, Sequence) or isinstance(channels, (str, bytes)):
        raise ConfigError("'channels' must be a list of tables ([[channels]])")
    names: set[str] = set()
    for index, spec in enumerate(channels):
        if not isinstance(spec, Mapping):
            raise ConfigError(f"channels[{index}] must be a table")
        if spec.get("enabled", True) is False:
            continue
        route = build_route(spec, env, index, defaults)
        if route.channel.name in names:
            raise ConfigError(f"two channels are named {route.channel.name!r}; give each a unique name")
        names.add(route.channel.name)
        config.routes.append(route)
    return config


def build_route(
    spec: Mapping[str, Any], env: Mapping[str, str], index: int = 0, defaults: Mapping[str, Any] | None = None
) -> Route:
    """One ``[[channels]]`` table -> a :class:`Route` (channel plus filters)."""
    defaults = defaults or {"min_severity": "info", "quiet": None, "quiet_min_severity": "error"}
    kind = str(spec.get("type", "")).lower()
    if kind not in CHANNEL_TYPES:
        raise ConfigError(f"channels[{index}]: type must be one of {sorted(CHANNEL_TYPES)}, got {kind!r}")
    name = str(spec.get("name") or f"{kind}-{index + 1}")
    where = f"channel {name!r}"
    options = {k: v for k, v in spec.items() if k not in _ROUTE_KEYS}
    try:
        channel = _build_channel(kind, name, options, env)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    quiet = QuietHours.parse(spec["quiet_hours"]) if "quiet_hours" in spec else defaults["quiet"]
    return Route(
        channel=channel,
        min_severity=_severity(spec.get("min_severity", defaults["min_severity"]), f"{where} min_severity"),
        quiet=quiet,
        quiet_min_severity=_severity(
            spec.get("quiet_min_severity", defaults["quiet_min_severity"]), f"{where} quiet_min_severity"
        ),
    )


def _build_channel(kind: str, name: str, options: dict[str, Any], env: Mapping[str, str]) -> Channel:
    def take(key: str, default: Any = None) -> Any:
        return options.pop(key, default)

    if kind in ("webhook", "slack", "feishu", "dingtalk", "wecom"):
        url = _secret(options, "url", env, required=True)
        assert url is not None
        if kind == "webhook":
            channel: Channel = WebhookChannel(name, url, secret=_secret(options, "secret", env))
        elif kind == "slack":
            channel = SlackChannel(name, url, blocks=bool(take("blocks", False)))
        elif kind == "feishu":
            channel = FeishuChannel(name, url, secret=_secret(options, "secret", env))
        elif kind == "dingtalk":
            channel = DingTalkChannel(name, url, secret=_secret(options, "secret", env))
        else:
            channel = WeComChannel(name, url, markdown=bool(take("markdown", False)))
    elif kind == "email":
        to = take("to")
        to = [to] if isinstance(to, str) else list(to or [])
        channel = EmailChannel(
            name,
            host=str(take("host", "localhost")),
            port=int(take("port", 25)),
            sender=str(take("from", "monitor-cb@localhost")),
            recipients=[str(t) for t in to],
            starttls=bool(take("starttls", False)),
            tls=bool(take("tls", False)),
            username=take("username"),
            password=_secret(options, "password", env),
            cafile=take("cafile"),
        )
    else:
        command = take("command")
        if isinstance(command, str):
            import shlex

            command = shlex.split(command)  # the user's own command line from the file, never run content
        channel = CommandChannel(name, command or [])
    if options:
        raise ConfigError(f"unknown key(s) {sorted(options)} for type {kind!r}")
    return channel


def _secret(options: dict[str, Any], key: str, env: Mapping[str, str], required: bool = False) -> Secret | None:
    """``<key>_env = "VAR"`` (preferred) or a literal ``<key> = "..."``; missing variables name themselves."""
    var = options.pop(f"{key}_env", None)
    literal = options.pop(key, None)
    if var:
        value = env.get(str(var))
        if not value:
            raise ConfigError(f"environment variable {var} (for {key}) is not set or empty")
        return Secret(value, source=f"${var}")
    if literal:
        return Secret(str(literal), source="config file")
    if required:
        raise ConfigError(f'give {key}_env = "ENV_VAR_NAME" (the variable holding the {key})')
    return None


def _severity(value: Any, what: str) -> str:
    text = str(value).strip().lower()
    if text not in SEVERITIES:
        raise ConfigError(f"{what} must be one of {SEVERITIES}, got {value!r}")
    return text


def _positive(data: Mapping[str, Any], key: str, default: float, allow_zero: bool = False) -> float:
    value = data.get(key, default)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be a number, got {value!r}") from None
    if number < 0 or (number == 0 and not allow_zero):
        raise ConfigError(f"{key} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return number


def parse_duration(value: Any, what: str = "duration") -> float:
    """Seconds from ``"24h"``, ``"30m"``, ``"90s"``, ``"2d"``, or a bare number of hours (``24``, ``0.5``)."""
    text = str(value).strip().lower()
    unit = _DURATION_UNITS.get(text[-1:]) if text else None
    number = text[:-1] if unit is not None else text
    try:
        seconds = float(number) * (unit if unit is not None else 3600.0)
    except ValueError:
        raise ConfigError(
            f"{what} must be a duration like '24h', '30m', '90s' or a number of hours, got {value!r}"
        ) from None
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigError(f"{what} must be > 0, got {value!r}")
    return seconds


def add_flag_channels(
    config: NotifyConfig,
    *,
    exec_command: str | None = None,
    webhook_url: str | None = None,
    min_severity: str | None = None,
) -> NotifyConfig:
    """Channels given on the command line (``--exec 'notify-send Training'``, ``--webhook URL``)."""
    import shlex

    if min_severity:
        severity = _severity(min_severity, "--min-severity")
        for route in config.routes:
            route.min_severity = severity
    base = {"min_severity": min_severity or "info"}
    if exec_command:
        config.routes.append(Route(CommandChannel("exec", shlex.split(exec_command)), **base))
    if webhook_url:
        config.routes.append(Route(WebhookChannel("webhook", Secret(webhook_url, source="--webhook")), **base))
    return config
