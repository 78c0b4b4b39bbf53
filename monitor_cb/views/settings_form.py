"""What the Settings page shows, as plain data (no Streamlit): threshold groups and the notification setup.

* :func:`settings_groups`: the fields of :class:`~monitor_cb.diagnosis.DiagnosisSettings` grouped by
  detector, for a form with one enable switch and a few number inputs per detector.
* :func:`notify_status`: where the notification settings are looked up, what they configure (secrets
  masked) or why they cannot be read.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from monitor_cb.diagnosis.findings import KINDS
from monitor_cb.diagnosis.settings import DiagnosisSettings

# Field-name prefix -> the detector kind it tunes. Fields without one are general.
_PREFIXES: tuple[tuple[str, str], ...] = (
    ("grad_", "grad_explosion"),
    ("spike_", "loss_spike"),
    ("nan_", "nan"),
    ("diverge_", "divergence"),
    ("lr_", "lr_anomaly"),
    ("drop_", "throughput_drop"),
    ("overfit_", "overfitting"),
    ("sawtooth_", "sawtooth"),
    ("stall_", "stalled"),
    ("plateau_", "plateau"),
    ("stuck_", "plateau"),
    ("straggler_", "straggler"),
    ("divergence_", "rank_divergence"),
    ("rank_", "ranks"),
    ("layer_", "layer_origin"),  # shared by straggler and rank_divergence
)
KIND_TITLES: dict[str, str] = {
    "nan": "NaN / Inf",
    "grad_explosion": "Gradient explosion",
    "loss_spike": "Loss spike",
    "divergence": "Divergence (loss trend rising, or running away)",
    "lr_anomaly": "Learning-rate anomaly",
    "throughput_drop": "Throughput drop",
    "overfitting": "Overfitting",
    "sawtooth": "Step-time sawtooth",
    "stalled": "Stalled run",
    "plateau": "Loss plateau / not learning",
    "straggler": "Straggler rank",
    "rank_divergence": "Rank divergence",
    "ranks": "Ranks side by side (straggler, divergence)",
    "layer_origin": "Which layer (per-parameter families)",
}
GENERAL = "general"


@dataclass(frozen=True)
class NumberField:
    """One numeric knob: its name, whether it is a whole number, its default and a sensible input step."""

    name: str
    integer: bool
    default: float
    step: float


@dataclass(frozen=True)
class SettingsGroup:
    """The knobs of one detector (``kind``), or the general ones (``kind == "general"``)."""

    kind: str
    title: str
    fields: tuple[NumberField, ...]


def settings_groups() -> list[SettingsGroup]:
    """General knobs first, then one group per detector kind in :data:`KINDS` order (``nan`` has none).

    Knobs shared by several detectors (``rank_*``) form their own group before the first of them;
    a knob of a detector this page does not know yet lands in the general group.
    """
    defaults = DiagnosisSettings()
    order = [GENERAL, *KINDS]
    if "straggler" in order:
        order.insert(order.index("straggler"), "ranks")
    by_kind: dict[str, list[NumberField]] = {k: [] for k in order}
    for f in fields(DiagnosisSettings):
        if f.name in ("disabled", "roles"):  # not numbers: the page has its own controls for them
            continue
        default = getattr(defaults, f.name)
        integer = f.type == "int"
        number = NumberField(f.name, integer, default, 1.0 if integer else nice_step(default))
        group = kind_of_field(f.name)
        by_kind[group if group in by_kind else GENERAL].append(number)
    return [SettingsGroup(k, kind_title(k), tuple(v)) for k, v in by_kind.items()]


def kind_title(kind: str) -> str:
    """A heading for a detector kind (``"loss_spike"`` -> ``"Loss spike"``), also for kinds added later."""
    if kind == GENERAL:
        return "General"
    return KIND_TITLES.get(kind) or kind.replace("_", " ").capitalize()


def kind_of_field(name: str) -> str:
    """The detector a settings field belongs to (``"spike_z"`` -> ``"loss_spike"``), or ``"general"``."""
    for prefix, kind in _PREFIXES:
        if name.startswith(prefix):
            return kind
    return GENERAL


def nice_step(value: float) -> float:
    """An input step about a tenth of ``value``, a power of ten (``0.3`` -> ``0.01``... ``20`` -> ``1``)."""
    if not value or not math.isfinite(value):
        return 0.1
    return 10.0 ** (math.floor(math.log10(abs(value))) - 1)


def settings_from_form(
    values: Mapping[str, Any], enabled: Mapping[str, bool], roles: Mapping[str, str] | None = None
) -> DiagnosisSettings:
    """Settings from the form's number inputs, enable switches and role boxes (``roles``: role -> its text).

    Raises:
        ValueError: a value the settings reject; the message names the field.
    """
    data = {name: value for name, value in values.items() if value is not None}
    data["disabled"] = [kind for kind in KINDS if not enabled.get(kind, True)]
    data["roles"] = roles_from_texts(roles or {})
    return DiagnosisSettings.from_dict(data)


def roles_from_texts(texts: Mapping[str, str | None]) -> dict[str, list[str]]:
    """Roles set by hand from the form's boxes: one metric name per line, blank lines and surrounding blanks
    dropped; an empty box leaves the role to the names."""
    out = {}
    for role, text in texts.items():
        names = [line.strip() for line in str(text or "").splitlines() if line.strip()]
        if names:
            out[role] = names
    return out


def roles_to_text(names: tuple[str, ...]) -> str:
    """A role's box: its metric names, one a line."""
    return "\n".join(names)


# ----------------------------------------------------------------------------- notifications
EXAMPLE_TOML = """\
# Notification settings for the watcher and the dashboard. Secrets stay in environment variables.
[notify]
min_severity = "warning"

[[channels]]
type = "webhook"                 # or slack, feishu, dingtalk, wecom, email, exec
name = "team"
url_env = "MONITOR_WEBHOOK_URL"  # export MONITOR_WEBHOOK_URL='https://...'
"""


@dataclass(frozen=True)
class NotifyStatus:
    """Where the notification settings come from and what they say.

    Attributes:
        path: the settings file found (``$MONITOR_NOTIFY_CONFIG`` or ``~/.config/monitor_cb/notify.toml``), or None.
        suggested: where to create one when there is none (the user's config folder, never the log root).
        from_env: whether ``path`` came from ``$MONITOR_NOTIFY_CONFIG``.
        config: the parsed :class:`~monitor_cb.notify.config.NotifyConfig`, or None (no file, or an error).
        error: why the file could not be used (secrets never in it), or None.
        ignored: a note that ``LOGROOT/.monitor/notify.toml`` exists and is not used, or None.
    """

    path: Path | None
    suggested: Path
    from_env: bool
    config: Any | None
    error: str | None
    ignored: str | None = None

    @property
    def channels(self) -> list[dict[str, str]]:
        """The configured channels as table rows of strings, secrets masked."""
        return channel_rows(self.config.describe()) if self.config is not None else []


def notify_status(root: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> NotifyStatus:
    """Look up and read the notification settings the way the watcher does; never raises.

    Only the user's own configuration counts (:mod:`monitor_cb.notify.trust`): a file in the log root
    is reported in ``ignored`` and never read, so "Send test notification" cannot run what it says.
    """
    from monitor_cb.notify.config import ENV_CONFIG, ConfigError, find_config, ignored_root_settings, load_config
    from monitor_cb.notify.trust import suggested_user_file

    env = os.environ if env is None else env
    suggested = suggested_user_file(env)
    from_env = bool(env.get(ENV_CONFIG))
    ignored = ignored_root_settings(root, env)
    path = find_config(root, env)
    if path is None:
        return NotifyStatus(None, suggested, from_env, None, None, ignored)
    try:
        config = load_config(path, env)
    except ConfigError as exc:
        return NotifyStatus(path, suggested, from_env, None, str(exc), ignored)
    return NotifyStatus(path, suggested, from_env, config, None, ignored)


TRIAL_KINDS = ("webhook", "slack", "feishu", "dingtalk", "wecom")  # the channels a URL alone configures


def trial_config(kind: str, url: str) -> Any:
    """A one-channel :class:`~monitor_cb.notify.config.NotifyConfig` for a URL typed on the Settings page, to
    try it before writing ``notify.toml``. The URL is the viewer's own input (never read from the log root);
    a bad one raises :class:`~monitor_cb.notify.config.ConfigError` with what is wrong."""
    from monitor_cb.notify.config import ConfigError, NotifyConfig, build_route

    if kind not in TRIAL_KINDS:
        raise ConfigError(f"type must be one of {', '.join(TRIAL_KINDS)}, got {kind!r}")
    url = url.strip()
    if not url:
        raise ConfigError("enter the webhook URL to try")
    route = build_route({"type": kind, "name": f"{kind} URL typed here", "url": url}, env={})
    return NotifyConfig(routes=[route])


def channel_rows(described: list[Mapping[str, Any]]) -> list[dict[str, str]]:
    """``NotifyConfig.describe()`` rows with one set of columns and string cells (None -> ``""``)."""
    columns: list[str] = []
    for row in described:
        columns += [c for c in row if c not in columns]
    return [{c: _cell(row.get(c)) for c in columns} for row in described]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


__all__ = [
    "EXAMPLE_TOML",
    "KIND_TITLES",
    "TRIAL_KINDS",
    "NotifyStatus",
    "NumberField",
    "SettingsGroup",
    "channel_rows",
    "kind_of_field",
    "kind_title",
    "nice_step",
    "notify_status",
    "roles_from_texts",
    "roles_to_text",
    "settings_from_form",
    "settings_groups",
    "trial_config",
]
