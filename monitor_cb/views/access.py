"""Who may change the Settings page: everyone (the default), nobody from the browser, or whoever has the admin token.

Why: the thresholds saved there (``LOGROOT/.monitor/diagnosis.json``) are what the watcher alerts on,
for every run under the root. On a dashboard many people open, any viewer could untick "NaN / Inf"
and silence that alert for everyone. ``monitor-cb dashboard --read-only-settings`` (or
``$MONITOR_READ_ONLY_SETTINGS=1``, or ``--read-only-settings`` after ``--`` on a ``streamlit run``
line) shows the settings without Save, Reset or the test-notification button, and offers no button that
writes into the root or starts a process (the demo training, the sample runs): a viewer writes nothing
and starts nothing. ``$MONITOR_SETTINGS_ADMIN_TOKEN`` makes the settings read-only until that token is
entered on the page.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

ENV_READ_ONLY = "MONITOR_READ_ONLY_SETTINGS"
ENV_ADMIN_TOKEN = "MONITOR_SETTINGS_ADMIN_TOKEN"
READ_ONLY_FLAG = "--read-only-settings"
_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class SettingsAccess:
    """How the Settings page may be used.

    Attributes:
        read_only: nobody may save from the browser (the server was started read-only).
        admin_token: when set, saving needs this token, entered on the page once per browser session.
    """

    read_only: bool = False
    admin_token: str | None = None

    @property
    def locked(self) -> bool:
        """Whether a viewer starts without the right to save."""
        return self.read_only or self.admin_token is not None

    @property
    def viewers_may_write(self) -> bool:
        """Whether the pages may offer buttons that write into the root or start a process (not read-only)."""
        return not self.read_only

    def unlocks(self, given: str | None) -> bool:
        """Whether ``given`` is the admin token (constant-time); never when the server is read-only."""
        if self.read_only or not self.admin_token or not given:
            return False
        return hmac.compare_digest(given.encode("utf-8", "replace"), self.admin_token.encode("utf-8", "replace"))


def settings_access(argv: Sequence[str], env: Mapping[str, str]) -> SettingsAccess:
    """From the script's arguments (after ``--``) and the environment."""
    read_only = READ_ONLY_FLAG in argv or str(env.get(ENV_READ_ONLY, "")).strip().lower() in _TRUE
    return SettingsAccess(read_only=read_only, admin_token=(env.get(ENV_ADMIN_TOKEN) or "").strip() or None)
