"""The Settings page: diagnosis thresholds (saved per log root) and the notification setup.

Flow: ``log_root()`` -> ``notify_status(root)`` (plain logic: find, read, mask) -> show. The thresholds
form saves ``<root>/.monitor/diagnosis.json``, read by the dashboard and the watcher alike; the
notification settings file is only shown and tested here (it holds no secrets, only the names of
the environment variables that do), never written.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from monitor_cb.notify.config import ENV_CONFIG
from monitor_cb.views.access import READ_ONLY_FLAG, SettingsAccess
from monitor_cb.views.escape import escape_code, escape_markdown
from monitor_cb.views.settings_form import EXAMPLE_TOML, TRIAL_KINDS, NotifyStatus, notify_status, trial_config
from pages import _shared
from pages._findings import diagnosis_settings_form

TEST_MESSAGE = "test notification from the monitor_cb dashboard"
ADMIN_KEY = "settings_admin"  # session state: this browser session entered the admin token


def settings_page() -> None:
    """The page function given to ``st.Page``."""
    root = _shared.log_root()
    st.title("Settings")
    st.caption(f"Log root: `{escape_code(str(root))}`")
    editable = may_edit(_shared.settings_access())
    st.header("Diagnosis thresholds", divider="gray")
    st.caption("Which problems the live page and the watcher look for, and how sure they must be.")
    diagnosis_settings_form(root, editable=editable)
    st.header("Notifications", divider="gray")
    show_notifications(notify_status(root), can_send=editable)
    if editable:
        try_webhook()
    show_delivery(root)


def may_edit(access: SettingsAccess) -> bool:
    """Whether this session may save: on an open dashboard; with the admin token once entered; never read-only."""
    if not access.locked:
        return True
    if access.read_only:
        st.info(
            f"Read-only: this dashboard was started with `{READ_ONLY_FLAG}`, so the thresholds the watcher "
            "alerts on cannot be changed from the browser. Whoever runs it edits `diagnosis.json` or restarts it "
            "without the option.",
            icon=":material/lock:",
        )
        return False
    if st.session_state.get(ADMIN_KEY):
        return True
    given = st.text_input("Admin token to change the settings", type="password", key="settings_admin_token")
    if access.unlocks(given):
        st.session_state[ADMIN_KEY] = True
        st.session_state.pop("settings_admin_token", None)
        st.rerun()
    if given:
        st.error("That is not the admin token.", icon=":material/lock:")
    st.caption("The settings below are read-only until the admin token is entered.")
    return False


def show_notifications(status: NotifyStatus, can_send: bool = True) -> None:
    """Where the settings are, the channels (secrets masked), errors, and the test button."""
    if status.ignored:
        st.warning(escape_markdown(status.ignored), icon=":material/block:")
    if status.path is None:
        st.info(
            f"No notification settings. Create `{escape_code(str(status.suggested))}` (or point "
            f"`${ENV_CONFIG}` at a file) with, for example, the settings below; then "
            "`python -m monitor_cb watch` and this page both use it. It must be yours and not writable by "
            "group or others (`chmod 600`); a file in the log root is never used. See docs/NOTIFICATIONS.md.",
            icon=":material/notifications_off:",
        )
        st.code(EXAMPLE_TOML, language="toml", wrap_lines=True)  # wrapped: cut at the right edge at 1280 px
        return
    origin = f" (from `${ENV_CONFIG}`)" if status.from_env else ""
    st.caption(f"Settings file: `{escape_code(str(status.path))}`{origin}")
    if status.error is not None:
        st.error(escape_markdown(status.error), icon=":material/error:")
        return
    rows = status.channels
    if not rows:
        st.info("The settings file configures no enabled channel.", icon=":material/notifications_off:")
        return
    st.dataframe(rows, hide_index=True, width="stretch")
    if can_send and st.button("Send test notification", icon=":material/send:", key="notify_test"):
        send_test(status.config)


def try_webhook() -> None:
    """A webhook URL tried from the page, before (or besides) any settings file: one test message, nothing kept.

    Only where the settings may be changed (never read-only): it makes the server send a request to a URL a
    viewer types. The URL is the viewer's own, never read from the log root (docs/NOTIFICATIONS.md).
    """
    with st.expander("Try a webhook URL", icon=":material/send:"):
        st.caption(
            "Sends one test message to the URL typed here, now; it is not saved. Put the URL that works in the "
            "settings file (in an environment variable named by `url_env`) for the watcher to use."
        )
        kind = st.selectbox("Type", TRIAL_KINDS, key="notify_try_kind")
        url = st.text_input("Webhook URL", type="password", key="notify_try_url", placeholder="https://…")
        if st.button("Send test notification", icon=":material/send:", key="notify_try"):
            from monitor_cb.notify.config import ConfigError

            try:
                config = trial_config(kind, url)
            except ConfigError as exc:
                st.error(f"`{escape_code(str(exc))}`", icon=":material/error:")
                return
            send_test(config)


def send_test(config: Any) -> None:
    """One test message to every channel of ``config`` now (no retries, bounded by the timeout); one result
    line each."""
    from monitor_cb.notify.delivery import send_test_notification

    with st.spinner("Sending…"):
        results = send_test_notification(config, TEST_MESSAGE)
    for result in results:
        name = escape_markdown(result.channel)
        if result.ok:
            st.success(f"{name}: delivered", icon=":material/check_circle:")
        else:
            # delivery errors are already redacted; a code span keeps them plain text (no autolinked URL)
            st.error(f"{name}: `{escape_code(result.error or 'failed')}`", icon=":material/error:")


def show_delivery(root: object) -> None:
    """What the watcher has not delivered yet, per channel, and its last error; read from its state."""
    from monitor_cb.notify.outbox import delivery_status

    status = delivery_status(root)
    st.subheader("Delivery", divider="gray")
    where = f"`{escape_code(status.path)}`"
    if not status.found:
        st.caption(f"No watcher state at {where} yet: `python -m monitor_cb watch` (run as this user) writes it.")
        return
    st.caption(f"From the watcher's state {where} (this user's; a watcher run with `--state` keeps its own).")
    if status.error is not None:
        st.warning(f"The watcher's state cannot be read: `{escape_code(status.error)}`", icon=":material/warning:")
        return
    if not status.channels:
        st.caption("Nothing has been sent yet.")
        return
    st.dataframe(status.channels, hide_index=True, width="stretch", key="delivery_channels")
    if status.expired:
        st.caption(f"{len(status.expired)} alert(s) given up after the expiry without being delivered:")
        st.dataframe(status.expired, hide_index=True, width="stretch", key="delivery_expired")
